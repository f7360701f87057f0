// Command everything_client is an MCP client in Go on the mcpwire engine. It starts a server
// over stdio (or, with -url, reaches one over Streamable HTTP) and runs one session:
// initialize, tools/list, tools/call echo, ping,
// resources/list, then a graceful shutdown. It probes with server/discover first and falls
// back to initialize (-legacy: initialize only); in 2026-07-28 there is no ping to send. It prints one line per step and ends with
// "GO_CLIENT_OK <version>" (exit 0), or "GO_CLIENT_FAIL <step>: <reason>" (exit 1).
//
//	everything_client [-echo-arg message] [-echo-expect 'Echo: hello from go'] -- node .../server-everything/dist/index.js stdio
//	everything_client -url http://127.0.0.1:3001/mcp
//
// Any error (an error answer, a refused command, a failed HTTP exchange) ends the session at
// once with the real reason. So do -timeout and SIGINT/SIGTERM ("GO_CLIENT_FAIL timeout" and
// "GO_CLIENT_FAIL interrupted"): the server started over stdio is stopped first (its stdin
// closed, then killed after 2 s), as on every way out. A server that exits with an error
// fails the session too.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	mcpwire "github.com/mcpwire/mcpwire/bindings/go"
)

func main() {
	echoTool := flag.String("echo-tool", "echo", "the echo tool's name")
	echoArg := flag.String("echo-arg", "message", "the echo tool's argument")
	echoText := flag.String("echo-text", "hello from go", "the text to echo")
	echoExpect := flag.String("echo-expect", "Echo: hello from go", "the text the echo tool must answer")
	timeout := flag.Duration("timeout", 60*time.Second, "give up after this long")
	legacy := flag.Bool("legacy", false, "speak only the initialize handshake (no server/discover probe)")
	url := flag.String("url", "", "reach a Streamable HTTP server at this URL instead of starting one")
	flag.Parse()
	if (flag.NArg() == 0) == (*url == "") {
		fmt.Fprintln(os.Stderr, "usage: everything_client [flags] (-url URL | -- server command...)")
		os.Exit(2)
	}
	clientEra := mcpwire.ClientEraAuto
	if *legacy {
		clientEra = mcpwire.ClientEraLegacy
	}
	cfg := &mcpwire.Config{
		Role:    mcpwire.Client,
		Name:    "mcpwire-go-client",
		Version: mcpwire.Version(),
		// Offer only what every server speaks through initialize.
		Capabilities: json.RawMessage(`{}`),
		ClientEra:    clientEra,
	}
	if *timeout <= 0 {
		fmt.Fprintln(os.Stderr, "everything_client: -timeout must be positive")
		os.Exit(2)
	}
	// The session ends at the timeout or on SIGINT/SIGTERM, through the same way out as any
	// other end: Serve and Run shut the connection down, and the server is stopped.
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	s := &session{step: "connect", tool: *echoTool, arg: *echoArg, text: *echoText, expect: *echoExpect,
		timeout: *timeout}
	if *url != "" {
		runHTTP(ctx, cfg, *url, s)
		return
	}

	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fail("spawn", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fail("spawn", err)
	}
	if err := cmd.Start(); err != nil {
		fail("spawn", err)
	}
	// On every way out: close the server's stdin, give it ~2 s, then kill it. It reports how
	// the server ended when it exited by itself (nil when it was killed).
	stopServer := func() *os.ProcessState {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
			return cmd.ProcessState
		case <-time.After(2 * time.Second):
			cmd.Process.Kill()
			<-done
			return nil
		}
	}
	conn, err := mcpwire.NewConn(cfg, time.Now())
	if err != nil {
		stopServer()
		fail("config", err)
	}
	defer conn.Close()

	err = mcpwire.Serve(ctx, conn, stdout, stdin, mcpwire.HandlerFunc(s.handle))
	// A server that exited with an error says more than the end of its output that came with
	// it (a usage error, a crash).
	if state := stopServer(); state != nil && !state.Success() && (s.err == nil || s.outputEnded) && err == nil {
		if s.err != nil {
			s.err = fmt.Errorf("the server exited with %v (during %s)", state, s.step)
		} else {
			s.err = fmt.Errorf("the server exited with %v", state)
		}
		s.step = "server exit"
	}
	finish(ctx, s, err)
}

// runHTTP runs the session over Streamable HTTP; a handshake-era session ends with DELETE.
func runHTTP(ctx context.Context, cfg *mcpwire.Config, url string, s *session) {
	client, err := mcpwire.NewHTTPClient(cfg, url, nil)
	if err != nil {
		fail("config", err)
	}
	defer client.Close()
	s.failureText = client.FailureText
	s.transportError = client.TransportError
	s.endSession = func() {
		if client.EndSession() {
			fmt.Println("GO_CLIENT session: ended with DELETE")
		}
	}
	err = client.Run(ctx, mcpwire.HandlerFunc(s.handle))
	// Close waits for what Run left on its way (cancellations); finish may exit at once.
	text, cause := client.FailureText(), client.TransportError()
	s.failureText = func() string { return text }
	s.transportError = func() string { return cause }
	client.Close()
	finish(ctx, s, err)
}

// finish reports the session's outcome.
func finish(ctx context.Context, s *session, err error) {
	// The timeout or the signal began a shutdown, so the step the answer of the moment sent
	// next found the connection closing (ErrClosed): the cause is ctx, not that.
	if !s.done && (s.err == nil || errors.Is(s.err, mcpwire.ErrClosed)) {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			fail("timeout", fmt.Errorf("no result after %v (during %s)", s.timeout, s.step))
		case ctx.Err() != nil:
			fail("interrupted", fmt.Errorf("stopped by a signal (during %s)", s.step))
		}
	}
	if err == nil && s.err == nil && !s.done {
		err = errors.New("the connection closed before the session finished")
	}
	if s.err != nil {
		fail(s.step, s.err)
	}
	if err != nil {
		fail(s.step, err)
	}
	fmt.Printf("GO_CLIENT_OK %s\n", s.version)
}

// session is the client's script, advanced by events: each answer sends the next request.
type session struct {
	conn                    *mcpwire.Conn // the connection, as the current event lends it
	tool, arg, text, expect string
	endSession              func()        // HTTP: end the session before the last shutdown
	failureText             func() string // HTTP: the body of the last error page
	transportError          func() string // HTTP: why the last exchange failed below HTTP
	timeout                 time.Duration

	step    string
	pending mcpwire.RequestID
	version string
	done    bool
	err     error
	// outputEnded: err is the end of the server's output (its exit status, if it failed,
	// says more).
	outputEnded bool
}

func (s *session) handle(c *mcpwire.Conn, now time.Time, ev mcpwire.Event) {
	s.conn = c
	if s.err != nil || s.done {
		// A request of the server's while the connection closes is refused at once: the
		// close waits for our answers to the server's requests too.
		if req, ok := ev.(*mcpwire.RequestEvent); ok {
			_ = c.RespondError(req.ID, mcpwire.CodeInternalError, "the client is closing", nil)
		}
		return
	}
	// The first error ends the session at once: the connection closes now, and main reports
	// the error instead of waiting for its timeout.
	defer func() {
		if s.err != nil {
			_ = s.conn.Shutdown(now, 0)
			if _, closed := ev.(*mcpwire.ClosedEvent); !closed {
				s.end() // (after the last command on the connection)
			}
		}
	}()
	switch ev := ev.(type) {
	case *mcpwire.ReadyEvent:
		s.version = ev.Version
		var info struct{ Name, Version string }
		json.Unmarshal(s.conn.PeerInfo(), &info)
		fmt.Printf("GO_CLIENT connect: protocolVersion=%s server=%s %s\n", ev.Version, info.Name, info.Version)
		s.send(now, "tools/list", "tools/list", nil)
	case *mcpwire.RequestEvent:
		// We declared no client capabilities, so the engine already refused what needs
		// one; anything else (a method we do not implement) gets "method not found".
		s.conn.RespondError(ev.ID, mcpwire.CodeMethodNotFound, "Method not found", nil)
	case *mcpwire.ResponseEvent:
		if ev.Request != s.pending {
			return
		}
		s.onResult(now, ev.Result)
	case *mcpwire.ErrorEvent:
		if ev.Request == s.pending {
			s.err = fmt.Errorf("error %d: %s", ev.Code, ev.Message)
		}
	case *mcpwire.FailedEvent:
		if ev.Request == s.pending {
			s.err = fmt.Errorf("HTTP exchange failed: %s%s", ev.Reason, s.said(ev.Status != 0))
		}
	case *mcpwire.TimedOutEvent:
		if ev.Request == s.pending {
			s.err = errors.New("timed out")
		}
	case *mcpwire.InvalidResponseEvent:
		if ev.Request == s.pending {
			s.err = errors.New("the server's answer is not a valid result")
		}
	case *mcpwire.AbandonedEvent:
		// The connection is ending with the answer still out: the ClosedEvent that follows
		// says why (or, for our own shutdown, finish reports the timeout or the signal).
	case *mcpwire.InputRequiredEvent:
		if ev.Request == s.pending {
			s.err = errors.New("the server asks for input, which this client does not give")
		}
	case *mcpwire.ViolationEvent:
		// The server broke the protocol (output that is not JSON-RPC, say): the engine has
		// dealt with it, and this client, a checker, stops at once and says so.
		s.err = fmt.Errorf("the server broke the protocol: %s (%s)", ev.Violation, ev.DecodeReason)
	case *mcpwire.ClosedEvent:
		// A local close without an error is the shutdown at the timeout or a signal, which
		// finish reports as such.
		if !s.done && s.err == nil && ev.Reason == mcpwire.CloseLocal {
			s.end() // (the session is not left on the server until its idle timeout)
		}
		if !s.done && s.err == nil && ev.Reason != mcpwire.CloseLocal {
			s.outputEnded = ev.Reason == mcpwire.CloseEOF
			s.err = fmt.Errorf("connection closed: %s", closedReason(ev))
			if ev.Reason == mcpwire.CloseTransportFailed {
				// (An HTTP status says so in the reason's words; none is a failure below HTTP.)
				s.err = fmt.Errorf("%w%s", s.err, s.said(strings.HasPrefix(ev.Version, "HTTP status")))
			}
		}
	}
}

func (s *session) send(now time.Time, step, method string, params json.RawMessage) {
	id, err := s.conn.Request(now, method, params, nil)
	if err != nil && errors.Is(err, mcpwire.ErrClosed) {
		// The connection is closing (our timeout or a signal, which finish reports): the
		// step under way keeps its name.
		s.err = err
		return
	}
	s.step = step
	if err != nil {
		s.err = err
		return
	}
	s.pending = id
}

func (s *session) onResult(now time.Time, result json.RawMessage) {
	switch s.step {
	case "tools/list":
		var list struct {
			Tools []struct{ Name string } `json:"tools"`
		}
		if err := json.Unmarshal(result, &list); err != nil {
			s.err = err
			return
		}
		found := false
		for _, t := range list.Tools {
			found = found || t.Name == s.tool
		}
		if !found {
			s.err = fmt.Errorf("no tool %q among %d", s.tool, len(list.Tools))
			return
		}
		fmt.Printf("GO_CLIENT tools/list: %d tools\n", len(list.Tools))
		args, _ := json.Marshal(map[string]interface{}{"name": s.tool, "arguments": map[string]string{s.arg: s.text}})
		s.send(now, "tools/call", "tools/call", args)
	case "tools/call":
		var call struct {
			Content []struct{ Type, Text string } `json:"content"`
			IsError bool                          `json:"isError"`
		}
		if err := json.Unmarshal(result, &call); err != nil {
			s.err = err
			return
		}
		if call.IsError || len(call.Content) == 0 || call.Content[0].Text != s.expect {
			s.err = fmt.Errorf("echo answered %s, want %q", result, s.expect)
			return
		}
		fmt.Printf("GO_CLIENT tools/call: %s(%s=%q) -> %q\n", s.tool, s.arg, s.text, call.Content[0].Text)
		if s.conn.Era() == mcpwire.EraModern {
			fmt.Println("GO_CLIENT ping: skipped (no ping in 2026-07-28)")
			s.send(now, "resources/list", "resources/list", nil)
			return
		}
		s.send(now, "ping", "ping", nil)
	case "ping":
		fmt.Println("GO_CLIENT ping: ok")
		s.send(now, "resources/list", "resources/list", nil)
	case "resources/list":
		var list struct {
			Resources []struct{ URI string } `json:"resources"`
		}
		if err := json.Unmarshal(result, &list); err != nil {
			s.err = err
			return
		}
		fmt.Printf("GO_CLIENT resources/list: %d resources\n", len(list.Resources))
		s.step = "shutdown"
		if err := s.conn.Shutdown(now, time.Second); err != nil {
			s.err = err
			return
		}
		s.done = true
		s.end() // (after the last command on the connection: it ends the view it was lent)
	}
}

// end ends the HTTP session with DELETE, once (a handshake-era one: nothing over stdio or in
// the stateless era), so that the server does not keep it until its idle timeout.
func (s *session) end() {
	if s.endSession != nil {
		s.endSession()
		s.endSession = nil
	}
}

// said is, for a failure's message, what the HTTP error page said (quoted) when the failure
// was an HTTP status, or else why the exchange failed below HTTP: only the one that belongs
// to this failure (either may be left from an earlier exchange). "" over stdio, or when it
// says nothing.
func (s *session) said(status bool) string {
	said := ""
	if status && s.failureText != nil {
		text := strings.Join(strings.Fields(s.failureText()), " ")
		if r := []rune(text); len(r) > 160 {
			text = string(r[:160]) + "…"
		}
		if text != "" {
			said = fmt.Sprintf("; the body said %q", text)
		}
	}
	if !status && s.transportError != nil {
		if cause := s.transportError(); cause != "" {
			said += "; " + cause
		}
	}
	return said
}

// closedReason says why the connection closed, with what the event carries.
func closedReason(ev *mcpwire.ClosedEvent) string {
	switch ev.Reason {
	case mcpwire.CloseTransportFailed:
		if ev.Version != "" {
			return ev.Version // "HTTP status 500 without an answer", "the connection failed"
		}
	case mcpwire.CloseEOF:
		return "the server closed its output"
	case mcpwire.CloseInitializeRejected:
		if ev.Version != "" {
			return fmt.Sprintf("the server refused the handshake (error %d): %q", ev.Code, ev.Version)
		}
		return fmt.Sprintf("the server refused the handshake (error %d)", ev.Code)
	case mcpwire.CloseUnsupportedVersion:
		return fmt.Sprintf("the server chose protocol version %s, which was not offered", ev.Version)
	}
	return ev.Reason.String()
}

func fail(step string, err error) {
	fmt.Printf("GO_CLIENT_FAIL %s: %s\n", step, strings.TrimSpace(err.Error()))
	os.Exit(1)
}
