package mcpwire

import (
	"encoding/json"
	"testing"
	"time"
)

// epoch is the simulated clock's origin; tests move time by hand.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// handshakeEra is every protocol version of the initialize handshake: most tests pin it,
// since a Config speaks both eras by default.
var handshakeEra = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

func clientConfig() *Config {
	return &Config{Role: Client, Name: "go-test-client", Version: "1.0.0", Versions: handshakeEra,
		Capabilities: json.RawMessage(`{"roots":{"listChanged":true}}`)}
}

func serverConfig() *Config {
	return &Config{Role: Server, Name: "go-test-server", Version: "2.0.0", Versions: handshakeEra,
		Capabilities: json.RawMessage(`{"tools":{"listChanged":true},"resources":{},"prompts":{},"logging":{}}`),
		Instructions: "be nice"}
}

// pair is a client and a server Conn wired together in memory, on a simulated clock.
type pair struct {
	t              testing.TB
	now            time.Time
	client, server *Conn
	clientEvents   []Event
	serverEvents   []Event
	// wire records every byte each side sent.
	clientSent, serverSent []byte
}

func newPair(t testing.TB, clientCfg, serverCfg *Config) *pair {
	t.Helper()
	p := &pair{t: t, now: epoch}
	var err error
	if p.client, err = NewConn(clientCfg, p.now); err != nil {
		t.Fatalf("client: %v", err)
	}
	if p.server, err = NewConn(serverCfg, p.now); err != nil {
		t.Fatalf("server: %v", err)
	}
	t.Cleanup(func() {
		p.client.Close()
		p.server.Close()
	})
	return p
}

// handshakePair is a pair past the handshake, with its Ready events cleared.
func handshakePair(t testing.TB) *pair {
	t.Helper()
	p := newPair(t, clientConfig(), serverConfig())
	p.drive()
	if _, ok := p.takeClient().(*ReadyEvent); !ok {
		t.Fatalf("client not ready")
	}
	if _, ok := p.takeServer().(*ReadyEvent); !ok {
		t.Fatalf("server not ready")
	}
	p.expectQuiet()
	return p
}

// step moves pending bytes once each way and collects events; it reports whether anything
// moved.
func (p *pair) step() bool {
	p.t.Helper()
	moved := false
	p.clientEvents = p.client.AppendEvents(p.clientEvents)
	p.serverEvents = p.server.AppendEvents(p.serverEvents)
	out, err := p.client.AppendOutput(nil)
	if err != nil {
		p.t.Fatalf("client output: %v", err)
	}
	if len(out) > 0 {
		moved = true
		p.clientSent = append(p.clientSent, out...)
		if err := p.server.Feed(p.now, out); err != nil {
			p.t.Fatalf("server feed: %v", err)
		}
	}
	out, err = p.server.AppendOutput(nil)
	if err != nil {
		p.t.Fatalf("server output: %v", err)
	}
	if len(out) > 0 {
		moved = true
		p.serverSent = append(p.serverSent, out...)
		if err := p.client.Feed(p.now, out); err != nil {
			p.t.Fatalf("client feed: %v", err)
		}
	}
	p.clientEvents = p.client.AppendEvents(p.clientEvents)
	p.serverEvents = p.server.AppendEvents(p.serverEvents)
	return moved
}

// drive steps until nothing moves.
func (p *pair) drive() {
	for i := 0; p.step(); i++ {
		if i > 1000 {
			p.t.Fatalf("pair does not settle")
		}
	}
}

// advance moves the clock by d, fires due timers on both sides, and drives.
func (p *pair) advance(d time.Duration) {
	p.now = p.now.Add(d)
	if err := p.client.HandleTimeout(p.now); err != nil && err != ErrFreed {
		p.t.Fatalf("client timeout: %v", err)
	}
	if err := p.server.HandleTimeout(p.now); err != nil && err != ErrFreed {
		p.t.Fatalf("server timeout: %v", err)
	}
	p.drive()
}

func take(t testing.TB, side string, events *[]Event) Event {
	t.Helper()
	if len(*events) == 0 {
		t.Fatalf("%s: expected an event, got none", side)
	}
	ev := (*events)[0]
	*events = (*events)[1:]
	return ev
}

func (p *pair) takeClient() Event { p.t.Helper(); return take(p.t, "client", &p.clientEvents) }
func (p *pair) takeServer() Event { p.t.Helper(); return take(p.t, "server", &p.serverEvents) }

func (p *pair) expectQuiet() {
	p.t.Helper()
	if len(p.clientEvents) > 0 || len(p.serverEvents) > 0 {
		p.t.Fatalf("unexpected events: client %s, server %s", dump(p.clientEvents), dump(p.serverEvents))
	}
}

func dump(events []Event) string {
	out := ""
	for i, ev := range events {
		one, _ := json.Marshal(ev)
		if i > 0 {
			out += ", "
		}
		out += typeName(ev) + string(one)
	}
	return "[" + out + "]"
}

func typeName(ev Event) string {
	switch ev.(type) {
	case *ReadyEvent:
		return "Ready"
	case *ClosedEvent:
		return "Closed"
	case *RequestEvent:
		return "Request"
	case *NotificationEvent:
		return "Notification"
	case *PeerCancelledEvent:
		return "PeerCancelled"
	case *ResponseEvent:
		return "Response"
	case *ErrorEvent:
		return "Error"
	case *ProgressEvent:
		return "Progress"
	case *TimedOutEvent:
		return "TimedOut"
	case *AbandonedEvent:
		return "Abandoned"
	case *ViolationEvent:
		return "Violation"
	default:
		return "Unknown"
	}
}

func mustOK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
