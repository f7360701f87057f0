package mcpwire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log destination the test may read while the server may write to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An HTTPApp that panics on tools/call "boom" and answers every other call.
type panickyApp struct{}

func (panickyApp) HandleMCP(c *Conn, _ ConnKey, ev Event) {
	req, ok := ev.(*RequestEvent)
	if !ok || req.Method != "tools/call" {
		if ok {
			_ = c.Respond(req.ID, json.RawMessage(`{}`))
		}
		return
	}
	m, _ := Members(req.Params, "name")
	if string(m[0]) == `"boom"` {
		var nilMap map[string]int
		nilMap["x"] = 1 // a bug in the app: assignment to a nil map
	}
	_ = c.Respond(req.ID, json.RawMessage(`{"content":[{"type":"text","text":"fine"}]}`))
}

// A panic in the app is the app's bug, but it must not take the server down with it: the
// request that hit it gets a JSON-RPC internal error, the panic and its stack go to the
// log, and the next requests are served (the engine's lock is not left held).
func TestHTTPAppPanicAnswersInternalErrorAndServesOn(t *testing.T) {
	var logged lockedBuffer
	cfg := &Config{Role: Server, Name: "panicky", Version: "1.0",
		Capabilities: json.RawMessage(`{"tools":{}}`)}
	srv, err := NewHTTPServer(cfg, &HTTPOptions{ErrorLog: log.New(&logged, "", 0)}, panickyApp{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer func() { ts.Close(); srv.Close() }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, tool := range []string{"boom", "fine", "boom", "fine"} {
		resp := modernPost(t, ctx, ts.URL, tool, i+1)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: %v (the server hung?)", tool, err)
		}
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(body), &msg); err != nil {
			t.Fatalf("%s: status %d, body %q: %v", tool, resp.StatusCode, body, err)
		}
		if msg.ID != i+1 {
			t.Fatalf("%s: answer for id %d, want %d", tool, msg.ID, i+1)
		}
		switch tool {
		case "boom":
			if msg.Error == nil || msg.Error.Code != CodeInternalError {
				t.Fatalf("boom: %s, want an internal error", body)
			}
		default:
			if msg.Error != nil || !strings.Contains(string(msg.Result), "fine") {
				t.Fatalf("fine: %s", body)
			}
		}
	}
	out := logged.String()
	if strings.Count(out, "assignment to entry in nil map") != 2 || !strings.Contains(out, "panic_test.go") {
		t.Fatalf("the log should name both panics and their stack:\n%s", out)
	}
}

// A panic in the function given to With goes on to With's caller, as any panic does, but
// with the server unlocked and the lent view cut off: the held request can still be
// answered through With, and the view the function kept refuses calls.
func TestHTTPWithPanicLeavesTheServerUsable(t *testing.T) {
	srv, app, ts := newTestServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := modernPost(t, ctx, ts.URL, "slow", 9)
	defer resp.Body.Close()
	waitFor(t, "the held call", func() bool { h, _ := app.snapshot(); return len(h) == 1 })
	held, _ := app.snapshot()

	var kept *Conn
	func() {
		defer func() {
			if v := recover(); v != "in f" {
				t.Fatalf("recovered %v, want the panic of f", v)
			}
		}()
		_ = srv.With(held[0].key, func(c *Conn) error {
			kept = c
			panic("in f")
		})
	}()
	srv.mu.Lock() // would block forever if the panic had left it held
	err := kept.Respond(held[0].id, json.RawMessage(`{}`))
	srv.mu.Unlock()
	if !errors.Is(err, ErrFreed) {
		t.Fatalf("the view kept by the panicking f answered: %v", err)
	}
	if err := srv.With(held[0].key, func(c *Conn) error {
		return c.Respond(held[0].id, json.RawMessage(`{"content":[]}`))
	}); err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(body), `"id":9`) || !strings.Contains(string(body), `"content":[]`) {
		t.Fatalf("the held call's answer: %q, %v", body, err)
	}
}
