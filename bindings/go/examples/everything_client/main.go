// Command everything_client is an MCP client in Go on the mcpwire engine. It starts a server
// over stdio and runs one session: initialize, tools/list, tools/call echo, ping,
// resources/list, then a graceful shutdown. It probes with server/discover first and falls
// back to initialize (-legacy: initialize only); in 2026-07-28 there is no ping to send. It prints one line per step and ends with
// "GO_CLIENT_OK <version>" (exit 0), or "GO_CLIENT_FAIL <step>: <reason>" (exit 1).
//
//	everything_client [-echo-arg message] [-echo-expect 'Echo: hello from go'] -- node .../server-everything/dist/index.js stdio
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	mcpwire "github.com/mcpwire/mcpwire-go"
	"github.com/mcpwire/mcpwire-go/examples/internal/pump"
)

func main() {
	echoTool := flag.String("echo-tool", "echo", "the echo tool's name")
	echoArg := flag.String("echo-arg", "message", "the echo tool's argument")
	echoText := flag.String("echo-text", "hello from go", "the text to echo")
	echoExpect := flag.String("echo-expect", "Echo: hello from go", "the text the echo tool must answer")
	timeout := flag.Duration("timeout", 60*time.Second, "give up after this long")
	legacy := flag.Bool("legacy", false, "speak only the initialize handshake (no server/discover probe)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: everything_client [flags] -- server command...")
		os.Exit(2)
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
	// On any exit path: close the server's stdin, give it ~2 s, then kill it.
	stopServer := func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	time.AfterFunc(*timeout, func() {
		fmt.Printf("GO_CLIENT_FAIL timeout: no result after %v\n", *timeout)
		cmd.Process.Kill()
		os.Exit(1)
	})

	clientEra := mcpwire.ClientEraAuto
	if *legacy {
		clientEra = mcpwire.ClientEraLegacy
	}
	conn, err := mcpwire.NewConn(&mcpwire.Config{
		Role:    mcpwire.Client,
		Name:    "mcpwire-go-client",
		Version: mcpwire.Version(),
		// Offer only what every server speaks through initialize.
		Capabilities: json.RawMessage(`{}`),
		ClientEra:    clientEra,
	}, time.Now())
	if err != nil {
		fail("config", err)
	}
	defer conn.Close()

	s := &session{conn: conn, tool: *echoTool, arg: *echoArg, text: *echoText, expect: *echoExpect}
	err = pump.Run(conn, stdout, stdin, s.handle)
	stopServer()
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
	conn                    *mcpwire.Conn
	tool, arg, text, expect string

	step    string
	pending mcpwire.RequestID
	version string
	done    bool
	err     error
}

func (s *session) handle(now time.Time, ev mcpwire.Event) {
	if s.err != nil || s.done {
		return
	}
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
	case *mcpwire.TimedOutEvent:
		if ev.Request == s.pending {
			s.err = errors.New("timed out")
		}
	case *mcpwire.ClosedEvent:
		if !s.done {
			s.err = fmt.Errorf("connection closed (%v)", ev.Reason)
		}
	}
}

func (s *session) send(now time.Time, step, method string, params json.RawMessage) {
	s.step = step
	id, err := s.conn.Request(now, method, params, nil)
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
	}
}

func fail(step string, err error) {
	fmt.Printf("GO_CLIENT_FAIL %s: %s\n", step, strings.TrimSpace(err.Error()))
	os.Exit(1)
}
