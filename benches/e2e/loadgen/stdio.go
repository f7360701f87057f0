package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// The stdio driver is one goroutine doing blocking reads and writes on the raw pipe
// descriptors: each read takes every answer that has arrived, each answer is checked and
// replaced by a new request, and the new requests leave in one write. Nothing is allocated
// per request, so the driver costs a few hundred nanoseconds of CPU per request and the
// server, not the driver, sets the pace (`loadgen stdio -- loadgen floor` shows the driver's
// own ceiling). An earlier driver moved every line through goroutines and channels and
// built each request with string concatenation; it topped out near 350 k req/s on this
// VM, below what the faster servers can answer.

// maxInflight bounds -c so that the requests and answers in flight always fit in the two
// pipes' buffers (64 KiB each on Linux): then a write to the server never waits on the
// server writing to us, and one goroutine cannot deadlock.
const maxInflight = 256

// ringSize is the number of send-time slots, indexed by id; far more than maxInflight, so
// an answer that lags behind later ones still finds its slot.
const ringSize = 1 << 16

// Latencies go into a histogram of 100 ns buckets up to about 105 ms; longer ones are kept
// exactly.
const (
	bucketNS = 100
	buckets  = 1 << 20
)

type histogram struct {
	counts []uint32
	over   []int64
	n      int64
}

func newHistogram() *histogram { return &histogram{counts: make([]uint32, buckets)} }

func (h *histogram) add(ns int64) {
	h.n++
	if b := ns / bucketNS; b < buckets {
		if b < 0 {
			b = 0
		}
		h.counts[b]++
		return
	}
	h.over = append(h.over, ns)
}

// quantile returns the q-quantile in nanoseconds (the upper edge of its bucket).
func (h *histogram) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n-1)) + 1 // 1-based rank of the sample
	var seen int64
	for b, c := range h.counts {
		seen += int64(c)
		if seen >= rank {
			return int64(b+1) * bucketNS
		}
	}
	over := slices.Clone(h.over)
	slices.Sort(over)
	return over[rank-seen-1]
}

// pipeReader reads lines from a blocking descriptor into one growing buffer.
type pipeReader struct {
	fd         int
	buf        []byte
	start, end int
}

// line returns the next complete line in the buffer (with its '\n'), without reading. The
// slice is valid until the next fill.
func (r *pipeReader) line() ([]byte, bool) {
	i := bytes.IndexByte(r.buf[r.start:r.end], '\n')
	if i < 0 {
		return nil, false
	}
	l := r.buf[r.start : r.start+i+1]
	r.start += i + 1
	return l, true
}

// fill waits for more bytes. It returns io.EOF when the server closed its output.
func (r *pipeReader) fill() error {
	if r.start > 0 {
		r.end = copy(r.buf, r.buf[r.start:r.end])
		r.start = 0
	}
	if r.end == len(r.buf) {
		if len(r.buf) >= 64<<20 {
			return errors.New("a line of the server's output is longer than 64 MiB")
		}
		r.buf = append(r.buf, make([]byte, len(r.buf))...)
	}
	for {
		n, err := syscall.Read(r.fd, r.buf[r.end:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.EOF
		}
		r.end += n
		return nil
	}
}

// next returns the next complete line, reading as needed.
func (r *pipeReader) next() ([]byte, error) {
	for {
		if l, ok := r.line(); ok {
			return l, nil
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

// writeAll writes b to a blocking descriptor, through partial writes.
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// The load's requests: a fixed head, the id, then one of two fixed tails (even ids call
// echo, odd ones add, as `call` says).
var (
	requestHead  = []byte(`{"jsonrpc":"2.0","id":`)
	requestTails = func() [2][]byte {
		var t [2][]byte
		for n := range int64(2) {
			_, params, _ := call(n)
			t[n] = []byte(`,"method":"tools/call","params":` + params + "}\n")
		}
		return t
	}()
	wants = [2][]byte{[]byte(echoWant), []byte(addWant)}
)

func appendRequest(out []byte, id int64) []byte {
	out = append(out, requestHead...)
	out = strconv.AppendInt(out, id, 10)
	return append(out, requestTails[id&1]...)
}

// stdioLoad is one run of the stdio driver: the server's command line and the load.
type stdioLoad struct {
	cmd         []string
	inflight    int           // requests kept in flight, 1 to maxInflight
	dur, warmup time.Duration // the measured window, and the load before it
	// startWait bounds the handshake and the first two calls; patience is how long after
	// the warm-up and the window a load waits for an answer before it calls the server
	// stalled and kills it.
	startWait, patience time.Duration
	// ring is the number of send-time slots, a power of two above maxInflight (0:
	// ringSize); the tests make it small, so that a slot is reused within a short load.
	ring int
}

// stdioResult is what one load measured: the fields of the RESULT line.
type stdioResult struct {
	requests      int64         // answered in the window
	sent          int64         // load requests sent, warm-up and window
	elapsed       time.Duration // the window, from its first read to its last
	p50, p99      time.Duration
	bad           int64 // wrong answers, answers to ids not in flight, answers without an id
	lost          int64 // requests never answered
	cpuMS         int64 // the server's user + system time in the window
	rssKB, idleKB int64 // the server's VmRSS after the load, and after the handshake
	driverCPUMS   int64 // the driver's own CPU time in the window
}

func runStdio(args []string) error {
	fs := flag.NewFlagSet("stdio", flag.ExitOnError)
	inflight := fs.Int("c", 32, "requests kept in flight (at most 256)")
	dur := fs.Duration("d", 5*time.Second, "measured load time")
	warmup := fs.Duration("warmup", time.Second, "load time before measuring")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cmdline := fs.Args()
	if len(cmdline) == 0 || *inflight < 1 {
		usage()
	}
	// One goroutine does the work: with one P the runtime hands nothing off around the
	// blocking reads and writes (with two, the driver ran at about half the rate against
	// the floor server).
	runtime.GOMAXPROCS(1)
	res, err := driveStdio(stdioLoad{cmd: cmdline, inflight: *inflight, dur: *dur, warmup: *warmup,
		startWait: 30 * time.Second, patience: 10 * time.Second})
	if err != nil {
		return err
	}
	// driver_cpu_ms: this process's own CPU time over the window. Near the window's length,
	// the driver had a core to itself and no time to spare: the driver, not the server, may
	// have set the pace.
	fmt.Printf("RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d bad=%d cpu_ms=%d rss_kb=%d idle_rss_kb=%d driver_cpu_ms=%d\n",
		res.requests, res.elapsed.Microseconds(), res.p50.Microseconds(), res.p99.Microseconds(),
		res.bad+res.lost, res.cpuMS, res.rssKB, res.idleKB, res.driverCPUMS)
	return nil
}

// driveStdio starts the server, opens a session, checks one call of each tool, runs the
// load and returns what it measured. An error means no figure can be trusted: the server
// failed the handshake or a first call, closed its output, stalled, or answered nothing in
// the window. Wrong and lost answers are counted in the result instead.
func driveStdio(l stdioLoad) (stdioResult, error) {
	var res stdioResult
	if l.inflight < 1 || l.inflight > maxInflight {
		return res, fmt.Errorf("-c %d: from 1 to %d requests in flight (they must fit in the pipes)", l.inflight, maxInflight)
	}
	if l.ring != 0 && (l.ring <= maxInflight || l.ring&(l.ring-1) != 0) {
		return res, fmt.Errorf("a ring of %d slots: a power of two above %d", l.ring, maxInflight)
	}
	cmd := exec.Command(l.cmd[0], l.cmd[1:]...)
	cmd.Stderr = os.Stderr
	inR, inW, err := os.Pipe()
	if err != nil {
		return res, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return res, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	if err := cmd.Start(); err != nil {
		return res, err
	}
	inR.Close()
	outW.Close()
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Fd puts both ends in blocking mode: the driver's one goroutine blocks in read and
	// write like a C client would, without the runtime's poller in between.
	wfd, rfd := int(inW.Fd()), int(outR.Fd())
	r := &pipeReader{fd: rfd, buf: make([]byte, 1<<18)}
	// A server that stops answering is killed, which ends the blocked read with EOF.
	var killed atomic.Bool
	watchdog := time.AfterFunc(l.startWait, func() {
		killed.Store(true)
		_ = cmd.Process.Kill()
	})
	defer func() {
		// Close stdin and read the server's output to its end; give it 2 s to leave by
		// itself, then kill it.
		watchdog.Stop()
		_ = inW.Close()
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		select {
		case <-exited:
		case <-time.After(2 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = outR.Close()
	}()

	// The handshake, then one call of each tool, checked, before any load.
	if err := writeAll(wfd, requestLine(0, "initialize", initializeParams)); err != nil {
		return res, err
	}
	if err := awaitAnswer(r, 0, `"protocolVersion"`); err != nil {
		return res, fmt.Errorf("initialize: %w", err)
	}
	if err := writeAll(wfd, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")); err != nil {
		return res, err
	}
	for n := int64(1); n <= 2; n++ {
		name, params, want := call(n)
		if err := writeAll(wfd, requestLine(n, "tools/call", params)); err != nil {
			return res, err
		}
		if err := awaitAnswer(r, n, want); err != nil {
			return res, fmt.Errorf("tools/call %s: %w", name, err)
		}
	}
	idleRSS := rssKB(pid)

	// The load.
	base := time.Now()
	clock := func() int64 { return int64(time.Since(base)) }
	measureFrom := int64(l.warmup)
	end := measureFrom + int64(l.dur)
	watchdog.Reset(l.warmup + l.dur + l.patience)
	// Per id in flight, by id modulo the ring's size: its send time + 1 (0 when none) and
	// the id.
	ring := l.ring
	if ring == 0 {
		ring = ringSize
	}
	slot := int64(ring - 1)
	sent := make([]int64, ring)
	owner := make([]int64, ring)
	hist := newHistogram()
	// inflight: requests sent and not answered. lost: requests whose slot a later one took
	// before their answer came. idless: answers without an id of ours, each one request that
	// stays in flight for good.
	var bad, measured, lost, idless, inflightNow int64
	cpuStart, driverStart := int64(-1), int64(0)
	nextID := int64(3)
	out := make([]byte, 0, maxInflight*128)
	send := func(count int) error {
		out = out[:0]
		first := nextID
		for range count {
			out = appendRequest(out, nextID)
			nextID++
		}
		now := clock() + 1
		for id := first; id < nextID; id++ {
			i := id & slot
			if sent[i] != 0 {
				// The request a ring's size of ids before this one was never answered: one request
				// fewer has been in flight since, which -c would not show. An answer without
				// an id stood for one such request, and was counted bad already.
				inflightNow--
				if idless > 0 {
					idless--
				} else {
					lost++
				}
			}
			sent[i], owner[i] = now, id
			inflightNow++
		}
		if err := writeAll(wfd, out); err != nil {
			if errors.Is(err, syscall.EPIPE) {
				return errors.New("the server closed its input under load")
			}
			return err
		}
		return nil
	}
	complain := func(what string, line []byte) {
		bad++
		if bad <= 3 {
			fmt.Fprintf(os.Stderr, "loadgen: %s: %s", what, line)
		}
	}
	measuring, counting := false, false
	var measuredFrom int64
	// take reads the answers the last fill brought, checks each (in the warm-up too: a
	// wrong answer is wrong whenever it comes) and returns how many requests they answered.
	take := func(now int64) int {
		answered := 0
		for {
			line, ok := r.line()
			if !ok {
				return answered
			}
			id, ok := idOf(line)
			if !ok {
				if !bytes.Contains(line, methodKey) {
					// An answer without an id of ours (an error with "id":null, say).
					idless++
					complain("an answer without a numeric id", line)
				}
				continue // else a notification or request from the server
			}
			i := id & slot
			if id < 3 || id >= nextID || sent[i] == 0 || owner[i] != id {
				// An id we did not send, one answered twice, or one already counted lost.
				complain("an answer to an unknown id", line)
				continue
			}
			at := sent[i] - 1
			sent[i] = 0
			inflightNow--
			answered++
			if counting {
				measured++
				hist.add(now - at)
			}
			if !answerCarries(line, wants[id&1]) {
				complain("a wrong answer", line)
			}
		}
	}
	fill := func() error {
		err := r.fill()
		if err == io.EOF && killed.Load() {
			return fmt.Errorf("no answer within the warm-up, the window and %v more, with %d requests in flight: they were lost, or the server stalled",
				l.patience, inflightNow)
		}
		if err == io.EOF {
			return errors.New("the server closed its output under load")
		}
		return err
	}
	if err := send(l.inflight); err != nil {
		return res, fmt.Errorf("writing to the server: %w", err)
	}
	for {
		if err := fill(); err != nil {
			return res, fmt.Errorf("reading from the server: %w", err)
		}
		now := clock()
		if !measuring && now >= measureFrom {
			measuring, counting = true, true
			measuredFrom = now
			cpuStart = cpuMS(pid)
			driverStart = selfCPUMS()
		}
		answered := take(now)
		if now >= end && measuring {
			break
		}
		if answered > 0 {
			if err := send(answered); err != nil {
				return res, fmt.Errorf("writing to the server: %w", err)
			}
		}
	}
	now := clock()
	elapsed := now - measuredFrom
	cpu := cpuMS(pid) - cpuStart
	driver := selfCPUMS() - driverStart
	rss := rssKB(pid)
	if measured == 0 {
		return res, errors.New("no answer in the measured window")
	}
	p50, p99 := hist.quantile(0.5), hist.quantile(0.99)
	// The requests still in flight get their answers, checked, before anything is called
	// lost: half the window (at least half a second, hundreds of times any server's p99
	// here), after which the watchdog ends the server and the read.
	counting = false
	killed.Store(false)
	watchdog.Reset(max(l.dur/2, 500*time.Millisecond))
	for inflightNow > idless {
		if r.fill() != nil {
			break
		}
		take(clock())
	}
	if missing := inflightNow - idless; missing > 0 {
		lost += missing
	}
	if lost > 0 {
		fmt.Fprintf(os.Stderr, "loadgen: %d requests never answered\n", lost)
	}
	return stdioResult{requests: measured, sent: nextID - 3, elapsed: time.Duration(elapsed), p50: time.Duration(p50),
		p99: time.Duration(p99), bad: bad, lost: lost, cpuMS: cpu, rssKB: rss, idleKB: idleRSS,
		driverCPUMS: driver}, nil
}

// awaitAnswer reads lines until the answer to id arrives, and checks it carries want. The
// caller's watchdog ends a wait that lasts too long.
func awaitAnswer(r *pipeReader, id int64, want string) error {
	for {
		line, err := r.next()
		if err != nil {
			if err == io.EOF {
				return errors.New("the server closed its output")
			}
			return err
		}
		got, ok := idOf(line)
		if !ok || got != id {
			continue
		}
		if !answerOK(line, want) {
			return fmt.Errorf("wrong answer: %s", bytes.TrimSpace(line))
		}
		return nil
	}
}
