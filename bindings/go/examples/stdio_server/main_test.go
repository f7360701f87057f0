package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	mcpwire "github.com/mcpwire/mcpwire/bindings/go"
)

// The test binary doubles as the server: run with this variable set, it is main().
const serverEnv = "MCPWIRE_GO_EXAMPLE_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestOverStdio runs the server as a child process and a Go client Conn against it: every
// method it serves, and an echo whose text (escapes, surrogate pairs, control characters)
// must come back byte for byte as it was sent.
func TestOverStdio(t *testing.T) {
	t.Run("handshake era", func(t *testing.T) { runSession(t, mcpwire.ClientEraLegacy, "2025-11-25") })
	t.Run("2026-07-28", func(t *testing.T) { runSession(t, mcpwire.ClientEraAuto, "2026-07-28") })
}

func runSession(t *testing.T, era mcpwire.ClientEra, wantVersion string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	conn, err := mcpwire.NewConn(&mcpwire.Config{Role: mcpwire.Client, Name: "t", Version: "1", ClientEra: era}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const text = `"a\"b\\c\u00e9\ud83d\ude80\u0001 tab\t end"`
	steps := []struct {
		method, params, want string
	}{
		{"tools/list", ``, `"name":"echo"`},
		// The tools that report progress later too: they answer from a timer's goroutine
		// (Serve could not take commands from another goroutine, and they were left out).
		{"tools/list", ``, `"required":["a","b"]}},{"name":"count"`},
		{"tools/call", `{"name":"count","arguments":{}}`, `"text":"counted to 3"}],"isError":false`},
		{"tools/call", `{"name":"echo","arguments":{"text":` + text + `}}`, `"text":` + text + `}],"isError":false`},
		{"tools/call", `{"name":"echo","arguments":{}}`, `"isError":true`},
		{"tools/call", `{"name":"add","arguments":{"a":2,"b":3}}`, `"text":"5"}],"isError":false`},
		{"tools/call", `{"name":"add","arguments":{"a":0.5,"b":-2}}`, `"text":"-1.5"}],"isError":false`},
		{"tools/call", `{"name":"add","arguments":{"a":"2","b":3}}`, `"isError":true`},
		{"tools/call", `{"name":"add","arguments":{"a":1e400,"b":3}}`, `"isError":true`},
		{"tools/call", `{"name":"add","arguments":{"a":1}}`, `"isError":true`},
		{"tools/call", `{"name":"\u0065cho","arguments":{"text":"x"}}`, `"text":"x"}],"isError":false`},
		{"resources/list", ``, `"uri":"mem://greeting"`},
		{"resources/read", `{"uri":"mem://greeting"}`, `Hello from mcpwire, in Go`},
		{"resources/templates/list", ``, `"resourceTemplates":[]`},
		{"prompts/list", ``, `"name":"greet"`},
		{"prompts/get", `{"name":"greet"}`, `Say hello to mcpwire.`},
	}
	if era == mcpwire.ClientEraLegacy {
		steps = append(steps, struct{ method, params, want string }{"ping", ``, `{}`})
	}
	// A resource that does not exist is an error with the era's code: -32602 from
	// 2026-07-28 (the app answers -32002, which the engine refused there: the request was
	// never answered).
	notFound := "error -32002"
	if wantVersion == "2026-07-28" {
		notFound = "error -32602"
	}
	steps = append(steps, struct{ method, params, want string }{"resources/read", `{"uri":"mem://nope"}`, notFound})
	// So is an unknown tool or prompt: -32602 in both eras (an unknown tool was a result).
	steps = append(steps,
		struct{ method, params, want string }{"tools/call", `{"name":"nope","arguments":{}}`, "error -32602"},
		struct{ method, params, want string }{"prompts/get", `{"name":"nope"}`, "error -32602"},
		// Every list is one page: a cursor is one it never gave.
		struct{ method, params, want string }{"tools/list", `{"cursor":"x"}`, "error -32602"},
		struct{ method, params, want string }{"resources/list", `{"cursor":"x"}`, "error -32602"},
		struct{ method, params, want string }{"resources/templates/list", `{"cursor":"x"}`, "error -32602"},
		struct{ method, params, want string }{"prompts/list", `{"cursor":"x"}`, "error -32602"})
	next := 0
	var pending mcpwire.RequestID
	send := func(now time.Time) {
		if next == len(steps) {
			if err := conn.Shutdown(now, time.Second); err != nil {
				t.Error(err)
			}
			stdin.Close()
			return
		}
		var params json.RawMessage
		if steps[next].params != "" {
			params = json.RawMessage(steps[next].params)
		}
		id, err := conn.Request(now, steps[next].method, params, nil)
		if err != nil {
			t.Fatal(err)
		}
		pending = id
	}
	failed := []string{}
	err = mcpwire.Serve(context.Background(), conn, stdout, stdin, mcpwire.HandlerFunc(func(c *mcpwire.Conn, now time.Time, ev mcpwire.Event) {
		switch ev := ev.(type) {
		case *mcpwire.ReadyEvent:
			if ev.Version != wantVersion {
				failed = append(failed, "version "+ev.Version)
			}
			if i, _ := conn.PeerInstructions(); i != "Try the echo tool." {
				failed = append(failed, "instructions "+i)
			}
			send(now)
		case *mcpwire.ResponseEvent:
			if ev.Request != pending {
				return
			}
			if !bytes.Contains(ev.Result, []byte(steps[next].want)) {
				failed = append(failed, steps[next].method+": "+string(ev.Result))
			}
			next++
			send(now)
		case *mcpwire.ErrorEvent:
			if ev.Request != pending {
				return
			}
			if got := fmt.Sprintf("error %d", ev.Code); got != steps[next].want {
				failed = append(failed, steps[next].method+": "+got+" "+ev.Message)
			}
			next++
			send(now)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if next != len(steps) || len(failed) > 0 {
		t.Fatalf("%d of %d steps; failures %q", next, len(steps), failed)
	}
	cmd.Wait()
}

// serverProcess is the server as a child process (this test binary, run as main()), with
// pipes to its stdin and from its stdout, and stderr going to stderr (nil: the parent's).
// It is started, and killed when the test ends.
func serverProcess(t *testing.T, stderr io.Writer) (*exec.Cmd, io.WriteCloser, io.ReadCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	if stderr == nil {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, stdin, stdout
}

// A client that sends thousands of requests and never reads the answers, then SIGTERM: the
// server cannot close gracefully (its Write is blocked), and must still exit soon, not wait
// for SIGKILL.
func TestSIGTERMEndsTheServerWhileItsOutputIsBlocked(t *testing.T) {
	var stderr bytes.Buffer
	cmd, stdin, stdout := serverProcess(t, &stderr) // stdout never read
	defer stdout.Close()
	var in bytes.Buffer
	in.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	for i := 1; i < 20000; i++ {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`+"\n", i)
	}
	go func() { _, _ = stdin.Write(in.Bytes()) }() // stalls once the server stops reading
	waitFull(t, stdout)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
		if !bytes.Contains(stderr.Bytes(), []byte("not reading")) {
			t.Fatalf("exited without saying why: %q", stderr.String())
		}
	case <-time.After(8 * time.Second):
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		t.Fatalf("still running 8 s after SIGTERM; state %s", b)
	}
}

// waitFull waits until the pipe the server writes its output to is full, but for at most a
// page (10 s at most), or a second where that cannot be told.
func waitFull(t *testing.T, stdout io.Reader) {
	t.Helper()
	f, ok := stdout.(*os.File)
	if ok {
		_, _, ok = unread(f)
	}
	if !ok {
		time.Sleep(time.Second)
		return
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, size, _ := unread(f); n >= size-4096 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the server's output pipe is not full after 10 s")
		}
	}
}

// A client that stops reading for a while, with count calls running (progress every 50 ms)
// and an answer near the output bound waiting: every count call is still answered once it
// reads again. The count tool dropped a call whose progress found the output full, and the
// client waited for good (found by an audit of the stdio hosts).
func TestASlowReaderLosesNoCountAnswer(t *testing.T) {
	cmd, stdin, stdout := serverProcess(t, nil)
	const calls = 100
	var in bytes.Buffer
	in.WriteString(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	for i := 0; i < calls; i++ {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"progressToken":%d},"name":"count","arguments":{}}}`+"\n", i, i)
	}
	// An echo whose answer alone nearly fills the 16 MiB output bound.
	in.WriteString(`{"jsonrpc":"2.0","id":"echo","method":"tools/call","params":{"name":"echo","arguments":{"text":"`)
	in.Write(bytes.Repeat([]byte("y"), 16<<20-40000))
	in.WriteString(`"}}}` + "\n")
	go func() { _, _ = stdin.Write(in.Bytes()) }()
	time.Sleep(2 * time.Second) // not reading: the count steps meet a full output
	answered := map[string]bool{}
	dec := json.NewDecoder(stdout)
	deadline := time.AfterFunc(20*time.Second, func() { _ = cmd.Process.Kill() })
	defer deadline.Stop()
	for len(answered) < calls+2 {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%d of %d answers, then %v", len(answered), calls+2, err)
		}
		if m.ID != nil && (m.Result != nil || m.Error != nil) {
			if m.Error != nil {
				t.Fatalf("an error answer to %s: %s", m.ID, m.Error)
			}
			answered[string(m.ID)] = true
		}
	}
	stdin.Close()
	_ = cmd.Wait()
}

// A client that closes its end of the server's stdout: the server's write fails with EPIPE
// and it ends on its own, rather than being killed by SIGPIPE on its first answer (Go's
// default for a broken stdout).
func TestAClosedStdoutEndsTheServerWithoutSIGPIPE(t *testing.T) {
	cmd, stdin, stdout := serverProcess(t, io.Discard)
	stdout.Close()
	_, _ = stdin.Write([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"))
	time.Sleep(200 * time.Millisecond)
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("still running after its input ended")
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("killed by %v", ws.Signal())
	}
}
