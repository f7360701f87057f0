// Command loadgen is the neutral client side of the end-to-end bench (.ci/bench-e2e). It is
// built on Go's standard library only, not on mcpwire, so every server meets the same client.
//
//	loadgen stdio [-c 32] [-d 5s] [-warmup 1s] -- CMD ARGS...
//	    Starts CMD, opens a 2025-11-25 session on its stdin/stdout, then keeps -c (at most
//	    256) tools/call requests in flight for -d (after -warmup), alternating `echo {text}`
//	    and `add {a, b}`, and checks every answer (see stdio.go). Prints one line:
//	    RESULT requests= duration_us= p50_us= p99_us= bad= cpu_ms= rss_kb= idle_rss_kb=
//	    where cpu_ms is the server's user + system time during the measured window and the
//	    RSS figures are the server's VmRSS after the handshake and after the load.
//	loadgen floor
//	    The stdio floor: answers every request line on stdin with a fixed result (its id
//	    copied), with no MCP at all. `loadgen stdio -- loadgen floor` shows what the driver
//	    itself can reach.
//	loadgen probe -url URL -mode stateless|session
//	    Checks that an HTTP server answers echo and add correctly: one stateless 2026-07-28
//	    POST each, or a 2025-11-25 session (initialize, initialized, the two calls). In session
//	    mode it prints the session id, for wrk to carry.
//	loadgen sessions -url URL -n N
//	    Opens N 2025-11-25 sessions (initialize + initialized each) and leaves them idle.
//	loadgen listen -url URL -n N
//	    Opens N 2026-07-28 `subscriptions/listen` streams, each its own connection, waits for
//	    each stream's first event, prints "READY N", and holds them open (reading whatever
//	    comes) until SIGTERM or SIGINT. Then it prints "OPEN M" (how many were still open)
//	    and exits.
//
// Answers over HTTP may be application/json or text/event-stream; both are read.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "stdio":
		err = runStdio(os.Args[2:])
	case "floor":
		err = floor(os.Stdin, os.Stdout)
	case "probe":
		err = runProbe(os.Args[2:])
	case "sessions":
		err = runSessions(os.Args[2:])
	case "listen":
		err = runListen(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: loadgen stdio [-c N] [-d DUR] [-warmup DUR] -- CMD ARGS... | floor |"+
		" probe -url URL -mode stateless|session | sessions -url URL -n N | listen -url URL -n N")
	os.Exit(2)
}

// ---- The requests and their answers ----------------------------------------------------

const (
	echoText = "hello, world"
	// The answers must carry these texts: echo returns its text, add(2, 3) returns "5".
	echoWant = `"text":"hello, world"`
	addWant  = `"text":"5"`
)

const initializeParams = `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"loadgen","version":"1"}}`

// call returns the params of request number n: even numbers call echo, odd ones add.
func call(n int64) (name, params, want string) {
	if n%2 == 0 {
		return "echo", `{"name":"echo","arguments":{"text":"` + echoText + `"}}`, echoWant
	}
	return "add", `{"name":"add","arguments":{"a":2,"b":3}}`, addWant
}

func requestLine(id int64, method, params string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"method":"` + method +
		`","params":` + params + "}\n")
}

// idOf reads the numeric id of a JSON-RPC response line without decoding the whole line
// (a full decode per answer would make the driver the bottleneck). It returns false for a
// line with no numeric id, or with a method (a request or notification from the server).
func idOf(line []byte) (int64, bool) {
	if bytes.Contains(line, methodKey) {
		return 0, false
	}
	return numericID(line)
}

// numericID reads the value of the first "id" member of a line when it is a number.
func numericID(line []byte) (int64, bool) {
	i := bytes.Index(line, []byte(`"id"`))
	if i < 0 {
		return 0, false
	}
	rest := bytes.TrimLeft(line[i+4:], " \t")
	if len(rest) == 0 || rest[0] != ':' {
		return 0, false
	}
	rest = bytes.TrimLeft(rest[1:], " \t")
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	id, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	return id, err == nil
}

// answerOK says whether a response line is a result (not an error, not isError) that
// carries want.
func answerOK(line []byte, want string) bool {
	return answerCarries(line, []byte(want))
}

var (
	methodKey = []byte(`"method"`)
	resultKey = []byte(`"result"`)
	isError   = []byte(`"isError":true`)
)

// answerCarries is answerOK without a conversion, for the load's hot path.
func answerCarries(line, want []byte) bool {
	return bytes.Contains(line, resultKey) && !bytes.Contains(line, isError) && bytes.Contains(line, want)
}

// cpuMS is the process's user + system time so far, in milliseconds, from /proc/PID/stat
// (its threads included; children are not).
func cpuMS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after it follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return (utime + stime) * 1000 / ticks
}

// selfCPUMS is this process's own user + system time so far (every thread), in
// milliseconds.
func selfCPUMS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return (ru.Utime.Nano() + ru.Stime.Nano()) / 1e6
}

func rssKB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// ---- The stdio floor --------------------------------------------------------------------

// floor answers each line that has a numeric id with a fixed result carrying that id. The
// result holds both texts the driver looks for, so the driver's checks pass; it stands for
// a server that does no MCP work at all.
func floor(in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 1<<16)
	w := bufio.NewWriterSize(out, 1<<16)
	defer w.Flush()
	for {
		line, err := r.ReadSlice('\n')
		if id, ok := numericID(line); ok {
			w.WriteString(`{"jsonrpc":"2.0","id":`)
			w.WriteString(strconv.FormatInt(id, 10))
			w.WriteString(`,"result":{"protocolVersion":"2025-11-25","content":[{"type":"text","text":"hello, world"},{"type":"text","text":"5"}]}}` + "\n")
		}
		if r.Buffered() == 0 {
			if ferr := w.Flush(); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// ---- HTTP ------------------------------------------------------------------------------

var client = &http.Client{Timeout: 10 * time.Second}

// post sends one JSON-RPC message and returns the status, the session id and the body's
// JSON-RPC messages (read from JSON or from an event stream).
func post(url string, body string, headers map[string]string) (int, string, [][]byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	var msgs [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// Read events until the one that answers (a stream may stay open after it).
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<22)
		var data []byte
		for sc.Scan() {
			line := sc.Bytes()
			if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(rest, []byte(" "))...)
				continue
			}
			if len(line) == 0 && len(data) > 0 {
				msgs = append(msgs, data)
				if bytes.Contains(data, []byte(`"result"`)) || bytes.Contains(data, []byte(`"error"`)) {
					break
				}
				data = nil
			}
		}
	} else {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, "", nil, err
		}
		if len(bytes.TrimSpace(b)) > 0 {
			msgs = append(msgs, b)
		}
	}
	return resp.StatusCode, sid, msgs, nil
}

func checkCall(url string, headers func(name string) map[string]string, body func(n int64) string) error {
	for n := int64(2); n <= 3; n++ {
		name, _, want := call(n)
		status, _, msgs, err := post(url, body(n), headers(name))
		if err != nil {
			return fmt.Errorf("tools/call %s: %w", name, err)
		}
		if status != http.StatusOK || len(msgs) == 0 || !answerOK(msgs[len(msgs)-1], want) {
			return fmt.Errorf("tools/call %s: status %d, answer %q", name, status, msgs)
		}
	}
	return nil
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientCapabilities":{},` +
	`"io.modelcontextprotocol/clientInfo":{"name":"loadgen","version":"1"}}`

func runProbe(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	url := fs.String("url", "", "the server's MCP endpoint")
	mode := fs.String("mode", "session", "stateless or session")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *mode {
	case "stateless":
		return checkCall(*url, func(name string) map[string]string {
			return map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
		}, func(n int64) string {
			_, params, _ := call(n)
			return `{"jsonrpc":"2.0","id":` + strconv.FormatInt(n, 10) + `,"method":"tools/call","params":` +
				params[:len(params)-1] + `,` + modernMeta + `}}`
		})
	case "session":
		sid, err := openSession(*url)
		if err != nil {
			return err
		}
		err = checkCall(*url, func(string) map[string]string {
			return map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid}
		}, func(n int64) string {
			_, params, _ := call(n)
			return string(bytes.TrimSpace(requestLine(n, "tools/call", params)))
		})
		if err != nil {
			return err
		}
		fmt.Println(sid)
		return nil
	}
	return fmt.Errorf("unknown mode %q", *mode)
}

// openSession runs a 2025-11-25 handshake and returns the session id.
func openSession(url string) (string, error) {
	status, sid, msgs, err := post(url, string(bytes.TrimSpace(requestLine(0, "initialize", initializeParams))), nil)
	if err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	if status != http.StatusOK || sid == "" || len(msgs) == 0 {
		return "", fmt.Errorf("initialize: status %d, session %q, answer %q", status, sid, msgs)
	}
	var init struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msgs[len(msgs)-1], &init); err != nil || init.Result.ProtocolVersion == "" {
		return "", fmt.Errorf("initialize: answer %q", msgs)
	}
	status, _, _, err = post(url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		map[string]string{"MCP-Protocol-Version": init.Result.ProtocolVersion, "Mcp-Session-Id": sid})
	if err != nil || status != http.StatusAccepted {
		return "", fmt.Errorf("notifications/initialized: status %d, %v", status, err)
	}
	return sid, nil
}

func runSessions(args []string) error {
	fs := flag.NewFlagSet("sessions", flag.ExitOnError)
	url := fs.String("url", "", "the server's MCP endpoint")
	n := fs.Int("n", 1000, "sessions to open")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Four at a time: enough to be quick, few enough not to look like a flood.
	var wg sync.WaitGroup
	var failed atomic.Int64
	var first atomic.Value
	work := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if _, err := openSession(*url); err != nil {
					if failed.Add(1) == 1 {
						first.Store(err)
					}
				}
			}
		}()
	}
	for range *n {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d sessions failed to open; first: %v", f, *n, first.Load())
	}
	return nil
}

// streamClient has no overall timeout: a listen stream lasts as long as the holder wants.
var streamClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1}}

const listenBody = `{"jsonrpc":"2.0","id":"listen","method":"subscriptions/listen",` +
	`"params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`

// openListen opens one listen stream and returns its body once the first event came.
func openListen(url string) (io.ReadCloser, *bufio.Reader, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(listenBody))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := streamClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, nil, fmt.Errorf("status %d, %s: %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	r := bufio.NewReader(resp.Body)
	seen := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			resp.Body.Close()
			return nil, nil, fmt.Errorf("the stream ended before its first event: %w", err)
		}
		if strings.TrimSpace(line) == "" {
			if seen {
				return resp.Body, r, nil
			}
			continue
		}
		seen = true
	}
}

func runListen(args []string) error {
	fs := flag.NewFlagSet("listen", flag.ExitOnError)
	url := fs.String("url", "", "the server's MCP endpoint")
	n := fs.Int("n", 1000, "listen streams to open")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var open atomic.Int64
	var mu sync.Mutex
	var bodies []io.ReadCloser
	// Eight at a time, as a crowd of clients would arrive.
	var wg sync.WaitGroup
	var failed atomic.Int64
	var first atomic.Value
	work := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				body, r, err := openListen(*url)
				if err != nil {
					if failed.Add(1) == 1 {
						first.Store(err)
					}
					continue
				}
				mu.Lock()
				bodies = append(bodies, body)
				mu.Unlock()
				open.Add(1)
				go func() { // whatever the server sends later is read; the end is counted
					_, _ = io.Copy(io.Discard, r)
					open.Add(-1)
				}()
			}
		}()
	}
	for range *n {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d listen streams failed to open; first: %v", f, *n, first.Load())
	}
	fmt.Printf("READY %d\n", open.Load())
	<-stop
	fmt.Printf("OPEN %d\n", open.Load())
	for _, b := range bodies {
		b.Close()
	}
	return nil
}
