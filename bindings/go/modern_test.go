package mcpwire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// modernPair is a pair on the default configs (both eras), which settle on 2026-07-28.
func modernPair(t *testing.T) *pair {
	t.Helper()
	c := clientConfig()
	c.Versions = nil
	c.Capabilities = json.RawMessage(`{"elicitation":{},"roots":{}}`)
	s := serverConfig()
	s.Versions = nil
	p := newPair(t, c, s)
	p.drive()
	for _, side := range []*[]Event{&p.clientEvents, &p.serverEvents} {
		evs := *side
		if len(evs) != 1 {
			t.Fatalf("events %s", dump(evs))
		}
		if r, ok := evs[0].(*ReadyEvent); !ok || r.Version != "2026-07-28" {
			t.Fatalf("events %s", dump(evs))
		}
		*side = nil
	}
	return p
}

func TestModernEra(t *testing.T) {
	p := modernPair(t)
	if p.client.Era() != EraModern || p.server.Era() != EraModern || EraModern.String() != "modern" {
		t.Fatalf("eras %v %v", p.client.Era(), p.server.Era())
	}
	// Requests carry the protocol metadata in _meta; ping does not exist in this era.
	if _, err := p.client.Request(p.now, "ping", nil, nil); !errors.Is(err, ErrNotInVersion) {
		t.Fatalf("ping: %v", err)
	}
	id, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"x"}}`), nil)
	mustOK(t, err)
	p.drive()
	req := p.takeServer().(*RequestEvent)
	if !strings.Contains(string(req.Params), `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`) {
		t.Fatalf("params %s", req.Params)
	}
	// A notification must be tied to a request in this era; a log message is.
	if err := p.server.Notify("notifications/message", json.RawMessage(`{"level":"info","data":"x"}`)); !errors.Is(err, ErrRequestScoped) {
		t.Fatalf("notify: %v", err)
	}
	sent, err := p.server.Log(req.ID, LogInfo, "test", json.RawMessage(`"working"`))
	mustOK(t, err)
	if sent {
		t.Fatal("a log went out about a request that asked for no level")
	}
	mustOK(t, p.server.Respond(req.ID, json.RawMessage(`{"content":[{"type":"text","text":"x"}]}`)))
	p.drive()
	var resp *ResponseEvent
	for _, ev := range p.clientEvents {
		if r, ok := ev.(*ResponseEvent); ok {
			resp = r
		}
	}
	if resp == nil || resp.Request != id {
		t.Fatalf("events %s", dump(p.clientEvents))
	}
	for _, ev := range p.clientEvents {
		if n, ok := ev.(*NotificationEvent); ok && n.Method == "notifications/message" {
			t.Fatalf("the log reached the client: %s", dump(p.clientEvents))
		}
	}
	// A request that asks for debug gets an info message, and its client sees it.
	p.clientEvents = nil
	_, err = p.client.Request(p.now, "tools/call", json.RawMessage(
		`{"name":"echo","arguments":{"text":"y"},"_meta":{"io.modelcontextprotocol/logLevel":"debug"}}`), nil)
	mustOK(t, err)
	p.drive()
	req = p.takeServer().(*RequestEvent)
	sent, err = p.server.Log(req.ID, LogInfo, "test", json.RawMessage(`"working"`))
	mustOK(t, err)
	if !sent {
		t.Fatal("no log about a request that asked for debug")
	}
	mustOK(t, p.server.Respond(req.ID, json.RawMessage(`{"content":[]}`)))
	p.drive()
	logged := false
	for _, ev := range p.clientEvents {
		if n, ok := ev.(*NotificationEvent); ok && n.Method == "notifications/message" {
			logged = strings.Contains(string(n.Params), `"working"`)
		}
	}
	if !logged {
		t.Fatalf("the log did not reach the client: %s", dump(p.clientEvents))
	}
}

func TestInputRequiredAndRetry(t *testing.T) {
	p := modernPair(t)
	id, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"login"}`), nil)
	mustOK(t, err)
	p.drive()
	req := p.takeServer().(*RequestEvent)
	asks := json.RawMessage(`{"login":{"method":"elicitation/create","params":{"message":"who?","requestedSchema":{"type":"object","properties":{}}}}}`)
	if err := p.server.RespondInputRequired(req.ID, nil, ""); !errors.Is(err, ErrInvalidParams) {
		t.Fatalf("nothing asked: %v", err)
	}
	mustOK(t, p.server.RespondInputRequired(req.ID, asks, `st"ate`))
	p.drive()
	ir := p.takeClient().(*InputRequiredEvent)
	if ir.Request != id || string(ir.InputRequests) != string(asks) || !ir.HasRequestState || ir.RequestState != `st"ate` {
		t.Fatalf("%+v", ir)
	}
	retry, err := p.client.Retry(p.now, id, json.RawMessage(`{"login":{"action":"accept","content":{"name":"octocat"}}}`))
	mustOK(t, err)
	if retry == id {
		t.Fatal("a retry is a new request")
	}
	p.drive()
	again := p.takeServer().(*RequestEvent)
	for _, want := range []string{`"inputResponses":{"login"`, `"requestState":"st\"ate"`, `"name":"login"`} {
		if !strings.Contains(string(again.Params), want) {
			t.Fatalf("retry params lack %s: %s", want, again.Params)
		}
	}
	// In this era the server asks through input requests only.
	if _, err := p.server.RequestRelated(p.now, again.ID, "roots/list", nil, nil); !errors.Is(err, ErrWrongDirection) {
		t.Fatalf("related request: %v", err)
	}
	mustOK(t, p.server.Respond(again.ID, json.RawMessage(`{"content":[]}`)))
	p.drive()
	if r := p.takeClient().(*ResponseEvent); r.Request != retry {
		t.Fatalf("%+v", r)
	}
}

func TestInvalidResponseAndEraViolations(t *testing.T) {
	// A client pinned to 2026-07-28 gets an answer with an unknown resultType.
	cfg := clientConfig()
	cfg.Versions = []string{"2026-07-28"}
	cfg.ClientEra = ClientEraModern
	p := newPair(t, cfg, func() *Config { s := serverConfig(); s.Versions = nil; return s }())
	p.drive()
	p.clientEvents, p.serverEvents = nil, nil
	id, err := p.client.Request(p.now, "tools/list", nil, nil)
	mustOK(t, err)
	out, _ := p.client.AppendOutput(nil)
	if !strings.Contains(string(out), `"method":"tools/list"`) {
		t.Fatalf("%s", out)
	}
	mustOK(t, p.client.Feed(p.now, []byte(`{"jsonrpc":"2.0","id":`+strings.TrimSpace(string(mustJSON(t, id)))+`,"result":{"resultType":"bogus"}}`+"\n")))
	evs := p.client.AppendEvents(nil)
	if len(evs) != 1 {
		t.Fatalf("%s", dump(evs))
	}
	if r, ok := evs[0].(*InvalidResponseEvent); !ok || r.Request != id {
		t.Fatalf("%s", dump(evs))
	}
	// A legacy-only client offers no modern era.
	legacy := clientConfig()
	legacy.ClientEra = ClientEraLegacy
	c, err := NewConn(legacy, epoch)
	mustOK(t, err)
	defer c.Close()
	out, _ = c.AppendOutput(nil)
	if !strings.Contains(string(out), `"method":"initialize"`) || c.Era() == EraModern {
		t.Fatalf("%s", out)
	}
	if ViolationWrongEra.String() != "wrong-era" || ErrNotEligible.Code != 316 {
		t.Fatal("names")
	}
}

func mustJSON(t *testing.T, v interface{}) []byte {
	b, err := json.Marshal(v)
	mustOK(t, err)
	return b
}

// TestRequestRelated: in the handshake era a request on behalf of one of the peer's is a
// plain request.
func TestRequestRelated(t *testing.T) {
	p := handshakePair(t)
	_, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"needs-roots"}`), nil)
	mustOK(t, err)
	p.drive()
	parent := p.takeServer().(*RequestEvent)
	related, err := p.server.RequestRelated(p.now, parent.ID, "roots/list", nil, &RequestOptions{Progress: true})
	mustOK(t, err)
	sent, err := p.server.Log(parent.ID, LogWarning, "", json.RawMessage(`{"note":"asking for roots"}`))
	mustOK(t, err)
	if !sent {
		t.Fatal("a log message with logging declared was not sent")
	}
	p.drive()
	rootsReq := p.takeClient().(*RequestEvent)
	if rootsReq.Method != "roots/list" {
		t.Fatalf("%+v", rootsReq)
	}
	if n := p.takeClient().(*NotificationEvent); n.Method != "notifications/message" || !strings.Contains(string(n.Params), `"level":"warning"`) {
		t.Fatalf("%+v", n)
	}
	mustOK(t, p.client.Respond(rootsReq.ID, json.RawMessage(`{"roots":[]}`)))
	p.drive()
	if r := p.takeServer().(*ResponseEvent); r.Request != related || string(r.Result) != `{"roots":[]}` {
		t.Fatalf("%+v", r)
	}
}
