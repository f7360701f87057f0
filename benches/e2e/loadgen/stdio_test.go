package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The stdio driver is checked against servers that break it on purpose: this test binary,
// started again with LOADGEN_FAKE_SERVER set, serves stdio as the mode says. The figures the
// bench publishes are only as good as these checks: a lost, wrong, duplicated or id-less
// answer must be counted, and a server that dies or stalls must fail the load.

const fakeServerEnv = "LOADGEN_FAKE_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeServerEnv); mode != "" {
		var err error
		if mode == "floor" {
			err = floor(os.Stdin, os.Stdout)
		} else {
			err = fakeServer(mode, os.Stdin, os.Stdout)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The request whose answer each broken mode spoils: an echo call (even id) well into the
// load, and an add call (odd) for a wrong sum.
const spoiled = 50

// fakeServer answers like the floor, except as mode says:
//
//	badhandshake  initialize gets an error
//	drop          request 50 is never answered
//	dropsome      requests whose id is a multiple of 5,000 are never answered
//	wrong         add request 51 gets the sum 6
//	iserror       request 50 gets a tool error that carries the right text
//	idless        request 50 gets an error with "id":null
//	twice         request 50 is answered twice
//	requests      every answer follows a ping request of the server's own, with a numeric id
//	close         the server exits after answering request 50
//	stall         the server stops answering after request 50 and keeps reading
func fakeServer(mode string, in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 1<<16)
	w := bufio.NewWriterSize(out, 1<<16)
	defer w.Flush()
	stalled := false
	for {
		line, err := r.ReadSlice('\n')
		if id, ok := numericID(line); ok && !stalled {
			right := `{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) +
				`,"result":{"protocolVersion":"2025-11-25","content":[{"type":"text","text":"hello, world"},{"type":"text","text":"5"}]}}` + "\n"
			switch {
			case mode == "badhandshake" && id == 0:
				w.WriteString(`{"jsonrpc":"2.0","id":0,"error":{"code":-32602,"message":"no"}}` + "\n")
			case mode == "drop" && id == spoiled:
			case mode == "dropsome" && id > 0 && id%5000 == 0:
			case mode == "wrong" && id == spoiled+1:
				w.WriteString(`{"jsonrpc":"2.0","id":51,"result":{"content":[{"type":"text","text":"6"}]}}` + "\n")
			case mode == "iserror" && id == spoiled:
				w.WriteString(`{"jsonrpc":"2.0","id":50,"result":{"content":[{"type":"text","text":"hello, world"}],"isError":true}}` + "\n")
			case mode == "idless" && id == spoiled:
				w.WriteString(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no"}}` + "\n")
			case mode == "twice" && id == spoiled:
				w.WriteString(right + right)
			case mode == "requests":
				w.WriteString(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"method":"ping"}` + "\n" + right)
			default:
				w.WriteString(right)
			}
			if id == spoiled && mode == "close" {
				return w.Flush()
			}
			stalled = id == spoiled && mode == "stall"
		}
		if r.Buffered() == 0 {
			if ferr := w.Flush(); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil && err != bufio.ErrBufferFull {
			return err
		}
	}
}

// drive runs a short load, 32 requests in flight, against this binary serving stdio in mode.
func drive(t *testing.T, mode string) (stdioResult, error) {
	t.Helper()
	return driveWith(t, mode, 32)
}

func driveWith(t *testing.T, mode string, inflight int) (stdioResult, error) {
	t.Helper()
	return driveRing(t, mode, inflight, 0)
}

// driveRing is driveWith with a ring of that many slots (0: the driver's own).
func driveRing(t *testing.T, mode string, inflight, ring int) (stdioResult, error) {
	t.Helper()
	t.Setenv(fakeServerEnv, mode)
	return driveStdio(stdioLoad{cmd: []string{os.Args[0]}, inflight: inflight, dur: 300 * time.Millisecond,
		warmup: 50 * time.Millisecond, startWait: 10 * time.Second, patience: 300 * time.Millisecond, ring: ring})
}

func TestStdioAgainstTheFloorCountsEveryAnswerAndNoFault(t *testing.T) {
	for _, mode := range []string{"floor", "requests"} {
		res, err := drive(t, mode)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if res.bad != 0 || res.lost != 0 {
			t.Errorf("%s: bad %d, lost %d; want none", mode, res.bad, res.lost)
		}
		if res.requests < 100 {
			t.Errorf("%s: %d requests answered in the window", mode, res.requests)
		}
		if res.elapsed < 250*time.Millisecond || res.elapsed > 5*time.Second {
			t.Errorf("%s: window %v, want about 300 ms", mode, res.elapsed)
		}
		if res.p50 <= 0 || res.p50 > res.p99 {
			t.Errorf("%s: p50 %v, p99 %v", mode, res.p50, res.p99)
		}
		if res.idleKB <= 0 || res.rssKB <= 0 {
			t.Errorf("%s: RSS %d KiB idle, %d KiB loaded", mode, res.idleKB, res.rssKB)
		}
	}
}

func TestStdioCountsEveryKindOfBadAnswer(t *testing.T) {
	for _, c := range []struct {
		mode      string
		bad, lost int64
	}{
		{"drop", 0, 1},
		{"wrong", 1, 0},
		{"iserror", 1, 0},
		// The request an id-less answer stood for stays in flight: counted once, as bad,
		// also once a later request takes its slot (it was counted lost as well).
		{"idless", 1, 0},
		{"twice", 1, 0},
	} {
		// The driver's own ring, and one small enough that request 50's slot is taken
		// again within the load.
		for _, ring := range []int{0, 512} {
			res, err := driveRing(t, c.mode, 32, ring)
			if err != nil {
				t.Fatalf("%s, ring %d: %v", c.mode, ring, err)
			}
			if res.bad != c.bad || res.lost != c.lost {
				t.Errorf("%s, ring %d: bad %d, lost %d; want bad %d, lost %d", c.mode, ring, res.bad, res.lost, c.bad, c.lost)
			}
			if res.requests < 100 || (ring > 0 && res.sent < spoiled+int64(ring)) {
				t.Errorf("%s, ring %d: %d requests answered in the window, %d sent", c.mode, ring, res.requests, res.sent)
			}
		}
	}
}

// A request goes lost one of two ways: a later request takes its slot in the ring, or the
// window ends before its answer. Dropping every 5,000th id, each must count exactly once:
// with the driver's own ring (65,536 slots) the last drop always goes the second way (it is
// fewer than 65,536 ids from the end); with 8,192 slots the first drops go the first way.
// (128 in flight, so that the drops never starve the load.)
func TestStdioCountsEveryLostRequestOnce(t *testing.T) {
	for _, ring := range []int{0, 8192} {
		res, err := driveRing(t, "dropsome", 128, ring)
		if err != nil {
			t.Fatal(err)
		}
		// The load's ids run from 3 to sent + 2.
		if want := (res.sent + 2) / 5000; res.lost != want || res.bad != 0 {
			t.Errorf("ring %d, %d requests sent: lost %d, bad %d; want lost %d, bad 0", ring, res.sent, res.lost, res.bad, want)
		}
		if res.sent < 5000+int64(ring) {
			t.Errorf("ring %d: only %d requests sent", ring, res.sent)
		}
	}
}

func TestStdioRefusesARingThatCannotHoldTheLoad(t *testing.T) {
	for _, ring := range []int{maxInflight, 1000} {
		_, err := driveStdio(stdioLoad{cmd: []string{"true"}, inflight: 1, dur: time.Millisecond, ring: ring})
		if err == nil || !strings.Contains(err.Error(), "power of two") {
			t.Errorf("ring %d: error %v", ring, err)
		}
	}
}

func TestStdioFailsALoadTheServerCannotFinish(t *testing.T) {
	for _, c := range []struct{ mode, want string }{
		{"badhandshake", "initialize: wrong answer"},
		// (Its input or its output: the driver may be writing when the server exits.)
		{"close", "under load"},
		{"stall", "the server stalled"},
	} {
		start := time.Now()
		_, err := drive(t, c.mode)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.mode, err, c.want)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: the load took %v to fail", c.mode, took)
		}
	}
}

func TestStdioRefusesMoreInFlightThanThePipesHold(t *testing.T) {
	for _, n := range []int{0, maxInflight + 1} {
		_, err := driveStdio(stdioLoad{cmd: []string{"true"}, inflight: n, dur: time.Millisecond})
		if err == nil || !strings.Contains(err.Error(), "requests in flight") {
			t.Errorf("-c %d: error %v", n, err)
		}
	}
}

func TestNumericIDReadsOnlyANumberAfterTheIDKey(t *testing.T) {
	for _, c := range []struct {
		line string
		id   int64
		ok   bool
	}{
		{`{"jsonrpc":"2.0","id":42,"result":{}}`, 42, true},
		{`{"id" : 7}`, 7, true},
		{`{"jsonrpc":"2.0","id":"42","result":{}}`, 0, false},
		{`{"jsonrpc":"2.0","id":null,"error":{}}`, 0, false},
		{`{"jsonrpc":"2.0","result":{}}`, 0, false},
		{`{"id":-1}`, 0, false},
	} {
		id, ok := numericID([]byte(c.line))
		if id != c.id || ok != c.ok {
			t.Errorf("numericID(%s) = %d, %v; want %d, %v", c.line, id, ok, c.id, c.ok)
		}
	}
	// idOf leaves out the server's own requests, whatever their id.
	if _, ok := idOf([]byte(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)); ok {
		t.Error("idOf took a server request for an answer")
	}
}

func TestHistogramQuantiles(t *testing.T) {
	h := newHistogram()
	for i := int64(1); i <= 98; i++ {
		h.add(i * 1000) // 1 to 98 µs
	}
	h.add(200 * int64(time.Millisecond)) // past the buckets: kept exactly
	h.add(300 * int64(time.Millisecond))
	if got := h.quantile(0.5); got != 50_100 {
		t.Errorf("p50 = %d ns, want 50,100 (the upper edge of 50 µs's bucket)", got)
	}
	if got := h.quantile(0.99); got != 200*int64(time.Millisecond) {
		t.Errorf("p99 = %d ns, want 200 ms", got)
	}
	if got := h.quantile(1); got != 300*int64(time.Millisecond) {
		t.Errorf("p100 = %d ns, want 300 ms", got)
	}
	if got := newHistogram().quantile(0.99); got != 0 {
		t.Errorf("an empty histogram's p99 = %d", got)
	}
}
