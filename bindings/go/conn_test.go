package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

func TestVersion(t *testing.T) {
	if Version() != HeaderVersion {
		t.Fatalf("library %q, header %q", Version(), HeaderVersion)
	}
}

func TestHandshake(t *testing.T) {
	p := newPair(t, clientConfig(), serverConfig())
	if st := p.client.State(); st != StateInitializing {
		t.Fatalf("client state %v", st)
	}
	if p.client.ProtocolVersion() != "" || p.client.PeerInfo() != nil || p.client.PeerCapabilities() != nil {
		t.Fatalf("peer data before the handshake")
	}
	p.drive()
	for side, events := range map[string][]Event{"client": p.clientEvents, "server": p.serverEvents} {
		if len(events) != 1 {
			t.Fatalf("%s events %s", side, dump(events))
		}
		ready, ok := events[0].(*ReadyEvent)
		if !ok || ready.Version != "2025-11-25" {
			t.Fatalf("%s: %s", side, dump(events))
		}
	}
	if v := p.client.ProtocolVersion(); v != "2025-11-25" {
		t.Fatalf("version %q", v)
	}
	var info struct{ Name, Version string }
	mustOK(t, json.Unmarshal(p.client.PeerInfo(), &info))
	if info.Name != "go-test-server" || info.Version != "2.0.0" {
		t.Fatalf("server info %+v", info)
	}
	mustOK(t, json.Unmarshal(p.server.PeerInfo(), &info))
	if info.Name != "go-test-client" {
		t.Fatalf("client info %+v", info)
	}
	if got := string(p.server.PeerCapabilities()); got != `{"roots":{"listChanged":true}}` {
		t.Fatalf("client capabilities %s", got)
	}
	if !strings.Contains(string(p.client.PeerCapabilities()), `"tools":{"listChanged":true}`) {
		t.Fatalf("server capabilities %s", p.client.PeerCapabilities())
	}
	if text, ok := p.client.PeerInstructions(); !ok || text != "be nice" {
		t.Fatalf("instructions %q %v", text, ok)
	}
	if _, ok := p.server.PeerInstructions(); ok {
		t.Fatalf("a client sends no instructions")
	}
	st, err := p.client.Status()
	mustOK(t, err)
	if st.State != StateOperating || st.Role != Client || st.OursInFlight != 0 || st.PeersInFlight != 0 {
		t.Fatalf("client status %+v", st)
	}
	if st, _ := p.server.Status(); st.Role != Server {
		t.Fatalf("server role %v", st.Role)
	}
	if StateOperating.String() != "operating" || Client.String() != "client" || Role(9).String() != "role(9)" {
		t.Fatalf("names")
	}
}

func TestVersionsAndInfo(t *testing.T) {
	ccfg := clientConfig()
	ccfg.Versions = []string{"2025-03-26", "2024-11-05"}
	ccfg.Info = json.RawMessage(`{"name":"custom","version":"9","title":"Custom Client"}`)
	scfg := serverConfig()
	scfg.Versions = []string{"2024-11-05", "2025-03-26", "2025-06-18"}
	p := newPair(t, ccfg, scfg)
	p.drive()
	if r := p.takeClient().(*ReadyEvent); r.Version != "2025-03-26" {
		t.Fatalf("negotiated %q", r.Version)
	}
	if !strings.Contains(string(p.server.PeerInfo()), `"title":"Custom Client"`) {
		t.Fatalf("info %s", p.server.PeerInfo())
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want error
	}{
		{"no versions", Config{Role: Client, Name: "c", Versions: []string{}}, ErrConfigRefused},
		{"unknown version", Config{Role: Client, Name: "c", Versions: []string{"1999-01-01"}}, ErrUnknownVersion},
		{"bad capabilities", Config{Role: Server, Name: "s", Capabilities: json.RawMessage(`{"tools":`)}, ErrInvalidJSON},
		{"capabilities not an object", Config{Role: Server, Name: "s", Capabilities: json.RawMessage(`[1]`)}, ErrJSONWrongType},
		{"bad role", Config{Role: 7, Name: "x"}, ErrInvalidArgument},
		{"bad name", Config{Role: Client, Name: "\xff"}, ErrInvalidUTF8},
		{"bad info", Config{Role: Client, Name: "c", Info: json.RawMessage(`nope`)}, ErrInvalidJSON},
		{"info without a version", Config{Role: Client, Name: "c", Info: json.RawMessage(`{"name":"c","title":"T"}`)}, ErrJSONWrongType},
	}
	for _, tc := range cases {
		c, err := NewConn(&tc.cfg, epoch)
		if err == nil {
			c.Close()
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		var re *ResultError
		if !errors.As(err, &re) || re.Op == "" {
			t.Errorf("%s: %#v", tc.name, err)
		}
	}
}

func TestRequestResponse(t *testing.T) {
	p := handshakePair(t)
	id, err := p.client.Request(p.now, "tools/list", json.RawMessage(`{"cursor":"c1"}`), nil)
	mustOK(t, err)
	if st, _ := p.client.Status(); st.OursInFlight != 1 {
		t.Fatalf("in flight %d", st.OursInFlight)
	}
	p.drive()
	req := p.takeServer().(*RequestEvent)
	if req.Method != "tools/list" || string(req.Params) != `{"cursor":"c1"}` || !req.ID.IsInt() {
		t.Fatalf("request %+v", req)
	}
	if n, _ := req.ID.Int(); n != int64(id) {
		t.Fatalf("wire id %v, request id %d", req.ID, id)
	}
	if st, _ := p.server.Status(); st.PeersInFlight != 1 {
		t.Fatalf("server in flight %d", st.PeersInFlight)
	}
	result := json.RawMessage(`{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`)
	mustOK(t, p.server.Respond(req.ID, result))
	p.drive()
	resp := p.takeClient().(*ResponseEvent)
	if resp.Request != id || string(resp.Result) != string(result) {
		t.Fatalf("response %+v", resp)
	}
	p.expectQuiet()
	// The request is over: answering it again is refused.
	if err := p.server.Respond(req.ID, result); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("second answer: %v", err)
	}
	// No params at all.
	id2, err := p.client.Request(p.now, "ping", nil, nil)
	mustOK(t, err)
	if id2 == id {
		t.Fatalf("ids repeat")
	}
	p.drive()
	if resp := p.takeClient().(*ResponseEvent); resp.Request != id2 || string(resp.Result) != `{}` {
		t.Fatalf("ping answer %+v", resp)
	}
}

func TestRespondError(t *testing.T) {
	p := handshakePair(t)
	id, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"x"}`), nil)
	mustOK(t, err)
	id2, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"y"}`), nil)
	mustOK(t, err)
	p.drive()
	r1 := p.takeServer().(*RequestEvent)
	r2 := p.takeServer().(*RequestEvent)
	mustOK(t, p.server.RespondError(r1.ID, CodeInvalidParamsRPC, "bad \"x\"", json.RawMessage(`{"field":"name"}`)))
	mustOK(t, p.server.RespondError(r2.ID, CodeMethodNotFound, "", nil))
	p.drive()
	e1 := p.takeClient().(*ErrorEvent)
	if e1.Request != id || e1.Code != -32602 || e1.Message != `bad "x"` || string(e1.Data) != `{"field":"name"}` {
		t.Fatalf("error %+v", e1)
	}
	e2 := p.takeClient().(*ErrorEvent)
	if e2.Request != id2 || e2.Code != -32601 || e2.Message != "" || e2.Data != nil {
		t.Fatalf("error %+v", e2)
	}
	if err := p.server.RespondError(IntID(999), -32603, "x", nil); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("unknown id: %v", err)
	}
	if err := p.server.RespondError(r1.ID, -32603, "x", json.RawMessage(`{`)); !errors.Is(err, ErrInvalidJSON) {
		t.Fatalf("bad data: %v", err)
	}
}

func TestNotify(t *testing.T) {
	p := handshakePair(t)
	mustOK(t, p.server.Notify("notifications/tools/list_changed", nil))
	mustOK(t, p.server.Notify("notifications/message", json.RawMessage(`{"level":"info","data":"héllo"}`)))
	mustOK(t, p.client.Notify("notifications/roots/list_changed", nil))
	p.drive()
	n1 := p.takeClient().(*NotificationEvent)
	if n1.Method != "notifications/tools/list_changed" || n1.Params != nil {
		t.Fatalf("%+v", n1)
	}
	n2 := p.takeClient().(*NotificationEvent)
	if n2.Method != "notifications/message" || string(n2.Params) != `{"level":"info","data":"héllo"}` {
		t.Fatalf("%+v", n2)
	}
	if n3 := p.takeServer().(*NotificationEvent); n3.Method != "notifications/roots/list_changed" {
		t.Fatalf("%+v", n3)
	}
	p.expectQuiet()
	// Refusals leave the connection unchanged.
	if err := p.server.Notify("notifications/resources/list_changed", nil); !errors.Is(err, ErrNotNegotiated) {
		t.Fatalf("undeclared capability: %v", err)
	}
	if err := p.client.Notify("notifications/cancelled", json.RawMessage(`{"requestId":1}`)); !errors.Is(err, ErrEngineOwned) {
		t.Fatalf("engine-owned: %v", err)
	}
	if err := p.client.Notify("notifications/x", json.RawMessage(`[1]`)); err == nil {
		t.Fatalf("params not an object accepted")
	}
	if err := p.client.Notify("notifications/x", json.RawMessage(`{"a":`)); !errors.Is(err, ErrInvalidJSON) {
		t.Fatalf("bad params: %v", err)
	}
	var re *ResultError
	err := p.server.Notify("notifications/resources/list_changed", nil)
	if !errors.As(err, &re) || !re.Code.IsRefused() || re.Code.IsArgument() || re.Code.IsFatal() {
		t.Fatalf("%#v", err)
	}
}

func TestProgress(t *testing.T) {
	p := handshakePair(t)
	id, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"count"}`), &RequestOptions{Progress: true})
	mustOK(t, err)
	plain, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"plain"}`), nil)
	mustOK(t, err)
	p.drive()
	req := p.takeServer().(*RequestEvent)
	if !strings.Contains(string(req.Params), `"progressToken"`) {
		t.Fatalf("no token in %s", req.Params)
	}
	reqPlain := p.takeServer().(*RequestEvent)
	mustOK(t, p.server.Progress(req.ID, ProgressUpdate{Progress: 1, Total: 3, HasTotal: true, Message: "one"}))
	mustOK(t, p.server.Progress(req.ID, ProgressUpdate{Progress: 2.5}))
	if err := p.server.Progress(req.ID, ProgressUpdate{Progress: 2}); !errors.Is(err, ErrNonIncreasingProgress) {
		t.Fatalf("non-increasing: %v", err)
	}
	if err := p.server.Progress(reqPlain.ID, ProgressUpdate{Progress: 1}); !errors.Is(err, ErrNoProgressToken) {
		t.Fatalf("no token: %v", err)
	}
	p.drive()
	e1 := p.takeClient().(*ProgressEvent)
	if e1.Request != id || e1.Progress != 1 || !e1.HasTotal || e1.Total != 3 || !e1.HasMessage || e1.Message != "one" {
		t.Fatalf("%+v", e1)
	}
	e2 := p.takeClient().(*ProgressEvent)
	if e2.Progress != 2.5 || e2.HasTotal || e2.HasMessage {
		t.Fatalf("%+v", e2)
	}
	mustOK(t, p.server.Respond(req.ID, json.RawMessage(`{"content":[]}`)))
	mustOK(t, p.server.Respond(reqPlain.ID, json.RawMessage(`{"content":[]}`)))
	p.drive()
	if r := p.takeClient().(*ResponseEvent); r.Request != id {
		t.Fatalf("%+v", r)
	}
	if r := p.takeClient().(*ResponseEvent); r.Request != plain {
		t.Fatalf("%+v", r)
	}
}

func TestCancel(t *testing.T) {
	p := handshakePair(t)
	id, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"slow"}`), nil)
	mustOK(t, err)
	p.drive()
	req := p.takeServer().(*RequestEvent)
	mustOK(t, p.client.Cancel(p.now, id, "user gave up"))
	if err := p.client.Cancel(p.now, id, ""); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("second cancel: %v", err)
	}
	p.drive()
	c := p.takeServer().(*PeerCancelledEvent)
	if c.ID != req.ID || !c.HasReason || c.Reason != "user gave up" {
		t.Fatalf("%+v", c)
	}
	before := len(p.serverSent)
	mustOK(t, p.server.Respond(req.ID, json.RawMessage(`{}`)))
	p.drive()
	if len(p.serverSent) != before {
		t.Fatalf("an answer to a cancelled request was sent: %s", p.serverSent[before:])
	}
	st, _ := p.server.Status()
	if st.Stats.SuppressedResponses != 1 {
		t.Fatalf("stats %+v", st.Stats)
	}
	p.expectQuiet()
	// Without a reason.
	id2, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"slow"}`), nil)
	mustOK(t, err)
	p.drive()
	p.takeServer()
	mustOK(t, p.client.Cancel(p.now, id2, ""))
	p.drive()
	if c := p.takeServer().(*PeerCancelledEvent); c.HasReason {
		t.Fatalf("%+v", c)
	}
}

// A negative Timeout (a deadline already passed) is due at once: it became 0 for the
// engine, the default of 5 s here (and none at all for a listen).
func TestANegativeTimeoutIsDueAtOnce(t *testing.T) {
	cfg := clientConfig()
	cfg.RequestTimeout = 5 * time.Second
	p := newPair(t, cfg, serverConfig())
	p.drive()
	p.clientEvents, p.serverEvents = nil, nil
	id, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"late"}`), &RequestOptions{Timeout: -time.Second})
	mustOK(t, err)
	p.drive()
	p.takeServer()
	deadline, ok := p.client.NextDeadline()
	if !ok || !deadline.Equal(p.now.Add(time.Millisecond)) {
		t.Fatalf("deadline %v %v", deadline.Sub(p.now), ok)
	}
	p.advance(time.Millisecond)
	if to, ok := p.takeClient().(*TimedOutEvent); !ok || to.Request != id {
		t.Fatalf("%+v", to)
	}
}

// Once closed, Err says so: NextEvent reports nothing, as for an empty queue, and a drain
// loop could not tell.
func TestErrAfterCloseIsErrFreed(t *testing.T) {
	c, err := NewConn(clientConfig(), epoch)
	mustOK(t, err)
	mustOK(t, c.Err())
	c.Close()
	if _, ok := c.NextEvent(); ok {
		t.Fatal("an event after Close")
	}
	if err := c.Err(); !errors.Is(err, ErrFreed) {
		t.Fatalf("Err after Close: %v", err)
	}
	tasks, err := NewTasks(nil, epoch, wallMs)
	mustOK(t, err)
	mustOK(t, tasks.Err())
	tasks.Close()
	if err := tasks.Err(); !errors.Is(err, ErrFreed) {
		t.Fatalf("Tasks.Err after Close: %v", err)
	}
}

func TestTimeout(t *testing.T) {
	cfg := clientConfig()
	cfg.RequestTimeout = 5 * time.Second
	p := newPair(t, cfg, serverConfig())
	p.drive()
	p.clientEvents, p.serverEvents = nil, nil
	if d, ok := p.client.NextDeadline(); ok {
		t.Logf("deadline with nothing in flight: %v", d.Sub(epoch))
	}
	id, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"slow"}`), &RequestOptions{Timeout: 1500 * time.Millisecond})
	mustOK(t, err)
	id2, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"slow2"}`), nil)
	mustOK(t, err)
	p.drive()
	p.takeServer()
	p.takeServer()
	deadline, ok := p.client.NextDeadline()
	if !ok || !deadline.Equal(epoch.Add(1500*time.Millisecond)) {
		t.Fatalf("deadline %v %v", deadline, ok)
	}
	p.advance(time.Second) // early: nothing happens
	p.expectQuiet()
	p.advance(500 * time.Millisecond)
	if to := p.takeClient().(*TimedOutEvent); to.Request != id {
		t.Fatalf("%+v", to)
	}
	if c := p.takeServer().(*PeerCancelledEvent); c.ID.String() != fmt.Sprint(int64(id)) {
		t.Fatalf("%+v", c)
	}
	deadline, _ = p.client.NextDeadline()
	if !deadline.Equal(epoch.Add(5 * time.Second)) {
		t.Fatalf("second deadline %v", deadline)
	}
	p.advance(deadline.Sub(p.now))
	if to := p.takeClient().(*TimedOutEvent); to.Request != id2 {
		t.Fatalf("%+v", to)
	}
}

func TestShutdown(t *testing.T) {
	p := handshakePair(t)
	id, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"slow"}`), nil)
	mustOK(t, err)
	p.drive()
	req := p.takeServer().(*RequestEvent)
	mustOK(t, p.client.Shutdown(p.now, 2*time.Second))
	if st := p.client.State(); st != StateClosing {
		t.Fatalf("state %v", st)
	}
	if _, err := p.client.Request(p.now, "ping", nil, nil); !errors.Is(err, ErrClosing) {
		t.Fatalf("request while closing: %v", err)
	}
	// An answer within the grace period still arrives, and ends the close.
	mustOK(t, p.server.Respond(req.ID, json.RawMessage(`{"content":[]}`)))
	p.drive()
	if r := p.takeClient().(*ResponseEvent); r.Request != id {
		t.Fatalf("%+v", r)
	}
	if c := p.takeClient().(*ClosedEvent); c.Reason != CloseLocal {
		t.Fatalf("%+v", c)
	}
	if err := p.client.Notify("notifications/roots/list_changed", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	mustOK(t, p.client.Shutdown(p.now, 0)) // closing a closed connection does nothing
}

func TestShutdownGraceRunsOut(t *testing.T) {
	p := handshakePair(t)
	id, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"slow"}`), nil)
	mustOK(t, err)
	p.drive()
	p.takeServer()
	mustOK(t, p.client.Shutdown(p.now, 2*time.Second))
	p.drive()
	p.expectQuiet()
	deadline, ok := p.client.NextDeadline()
	if !ok || deadline.After(epoch.Add(2*time.Second)) {
		t.Fatalf("deadline %v %v", deadline, ok)
	}
	p.advance(2 * time.Second)
	var kinds []string
	for _, ev := range p.clientEvents {
		kinds = append(kinds, typeName(ev))
		if a, ok := ev.(*AbandonedEvent); ok && a.Request != id {
			t.Fatalf("%+v", a)
		}
	}
	if strings.Join(kinds, ",") != "Abandoned,Closed" {
		t.Fatalf("events %s", dump(p.clientEvents))
	}
	if c := p.clientEvents[1].(*ClosedEvent); c.Reason != CloseLocal {
		t.Fatalf("%+v", c)
	}
}

// A Shutdown waits for the answers to the peer's requests too; RefusePeerRequests answers
// them with -32603 and its message, and the close then ends at once.
func TestRefusePeerRequestsLetsAShutdownEnd(t *testing.T) {
	p := handshakePair(t)
	id, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"slow"}`), nil)
	mustOK(t, err)
	p.drive()
	p.takeServer()
	mustOK(t, p.server.Shutdown(p.now, 2*time.Second))
	if s := p.server.State(); s != StateClosing {
		t.Fatalf("the call is awaited: %v", s)
	}
	n, err := p.server.RefusePeerRequests("stopping")
	mustOK(t, err)
	if n != 1 {
		t.Fatalf("refused %d", n)
	}
	if s := p.server.State(); s != StateClosed {
		t.Fatalf("after the refusal: %v", s)
	}
	p.drive()
	e, ok := p.takeClient().(*ErrorEvent)
	if !ok || e.Request != id || e.Code != CodeInternalError || e.Message != "stopping" {
		t.Fatalf("%+v", e)
	}
	if _, err := p.server.RefusePeerRequests("again"); !errors.Is(err, ErrClosed) {
		t.Fatalf("on a closed connection: %v", err)
	}
}

func TestFeedEOF(t *testing.T) {
	p := handshakePair(t)
	id, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"slow"}`), nil)
	mustOK(t, err)
	mustOK(t, p.client.FeedEOF(p.now))
	evs := p.client.AppendEvents(nil)
	if len(evs) != 2 {
		t.Fatalf("%s", dump(evs))
	}
	if a := evs[0].(*AbandonedEvent); a.Request != id {
		t.Fatalf("%+v", a)
	}
	if c := evs[1].(*ClosedEvent); c.Reason != CloseEOF || c.Reason.String() != "eof" {
		t.Fatalf("%+v", c)
	}
	if _, err := p.client.Request(p.now, "ping", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("%v", err)
	}
	if st := p.client.State(); st != StateClosed {
		t.Fatalf("state %v", st)
	}
	// A last unterminated line is processed before the end.
	s := p.server
	mustOK(t, s.Feed(p.now, []byte(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)))
	if _, ok := s.NextEvent(); ok {
		t.Fatalf("an incomplete line made an event")
	}
	mustOK(t, s.FeedEOF(p.now))
	evs = s.AppendEvents(nil)
	if len(evs) != 1 || evs[0].(*NotificationEvent).Method != "notifications/roots/list_changed" {
		t.Fatalf("%s", dump(evs))
	}
	// Its events come out first (a request on it could be answered); the end is then due at
	// once, and closes at the next HandleTimeout.
	if at, ok := s.NextDeadline(); !ok || at.After(p.now) {
		t.Fatalf("deadline %v %v", at, ok)
	}
	mustOK(t, s.HandleTimeout(p.now))
	evs = s.AppendEvents(nil)
	if len(evs) != 1 || evs[0].(*ClosedEvent).Reason != CloseEOF {
		t.Fatalf("%s", dump(evs))
	}
}

// serverAfterHandshake is a server Conn fed a client's handshake by hand, with its output
// and events drained.
func serverAfterHandshake(t testing.TB, cfg *Config) *Conn {
	t.Helper()
	s, err := NewConn(cfg, epoch)
	mustOK(t, err)
	t.Cleanup(func() { s.Close() })
	mustOK(t, s.Feed(epoch, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")))
	if _, err := s.AppendOutput(nil); err != nil {
		t.Fatal(err)
	}
	evs := s.AppendEvents(nil)
	if len(evs) != 1 {
		t.Fatalf("handshake events %s", dump(evs))
	}
	return s
}

func TestStringIDs(t *testing.T) {
	s := serverAfterHandshake(t, serverConfig())
	mustOK(t, s.Feed(epoch, []byte(
		`{"jsonrpc":"2.0","id":"a\"b\u00e9","method":"tools/list"}`+"\n"+
			`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`+"\n"+
			`{"jsonrpc":"2.0","id":"7","method":"tools/list"}`+"\n")))
	evs := s.AppendEvents(nil)
	if len(evs) != 3 {
		t.Fatalf("%s", dump(evs))
	}
	ids := map[ID]bool{}
	for _, ev := range evs {
		ids[ev.(*RequestEvent).ID] = true
	}
	if !ids[RawStringID(`a\"b\u00e9`)] || !ids[IntID(7)] || !ids[StringID("7")] || len(ids) != 3 {
		t.Fatalf("ids %v", ids)
	}
	first := evs[0].(*RequestEvent).ID
	if raw, ok := first.Raw(); !ok || raw != `a\"b\u00e9` {
		t.Fatalf("raw %q", raw)
	}
	if text, ok := first.Text(); !ok || text != `a"bé` {
		t.Fatalf("text %q", text)
	}
	if _, ok := first.Int(); ok || !first.IsString() || first.IsInt() || first.IsZero() {
		t.Fatalf("kind")
	}
	if first.String() != `"a\"b\u00e9"` || IntID(7).String() != "7" || (ID{}).String() != "<none>" {
		t.Fatalf("String")
	}
	if StringID("x\"y\n\x01") != RawStringID(`x\"y\n\u0001`) {
		t.Fatalf("escape %q", StringID("x\"y\n\x01").wire)
	}
	// Answers echo each id exactly as it came.
	mustOK(t, s.Respond(first, json.RawMessage(`{"tools":[]}`)))
	mustOK(t, s.Respond(StringID("7"), json.RawMessage(`{"tools":[]}`)))
	mustOK(t, s.RespondError(IntID(7), CodeInternalError, "boom", nil))
	out, err := s.AppendOutput(nil)
	mustOK(t, err)
	want := `{"jsonrpc":"2.0","id":"a\"b\u00e9","result":{"tools":[]}}` + "\n" +
		`{"jsonrpc":"2.0","id":"7","result":{"tools":[]}}` + "\n" +
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"boom"}}` + "\n"
	if string(out) != want {
		t.Fatalf("output\n%s\nwant\n%s", out, want)
	}
	if err := s.Respond(RawStringID(`bad"quote`), json.RawMessage(`{}`)); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("bad id: %v", err)
	}
	if b, _ := json.Marshal([]ID{IntID(1), StringID("x"), {}}); string(b) != `[1,"x",null]` {
		t.Fatalf("json %s", b)
	}
}

func TestViolations(t *testing.T) {
	s := serverAfterHandshake(t, serverConfig())
	mustOK(t, s.Feed(epoch, []byte("{not json\n"+
		`{"jsonrpc":"1.0","id":3,"method":"x"}`+"\n"+
		`{"jsonrpc":"2.0","id":99,"result":{}}`+"\n"+
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a"}}`+"\n"+
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"b"}}`+"\n"+
		`{"jsonrpc":"2.0","id":6,"method":"sampling/createMessage","params":{}}`+"\n")))
	evs := s.AppendEvents(nil)
	if len(evs) != 6 {
		t.Fatalf("%s", dump(evs))
	}
	v := evs[0].(*ViolationEvent)
	if v.Violation != ViolationParse || v.DecodeReason == DecodeNone || v.DecodeReason >= 100 || v.Violation.String() != "parse" {
		t.Fatalf("%+v", v)
	}
	v = evs[1].(*ViolationEvent)
	if v.Violation != ViolationInvalidMessage || v.DecodeReason != DecodeWrongVersion {
		t.Fatalf("%+v", v)
	}
	v = evs[2].(*ViolationEvent)
	if v.Violation != ViolationUnknownResponse || v.ID != IntID(99) {
		t.Fatalf("%+v", v)
	}
	if r := evs[3].(*RequestEvent); r.ID != IntID(5) {
		t.Fatalf("%+v", r)
	}
	v = evs[4].(*ViolationEvent)
	if v.Violation != ViolationDuplicateRequestID || v.ID != IntID(5) || v.Method != "tools/call" {
		t.Fatalf("%+v", v)
	}
	v = evs[5].(*ViolationEvent)
	if v.Violation != ViolationMethodNotAvailable || v.Method != "sampling/createMessage" {
		t.Fatalf("%+v", v)
	}
	out, err := s.AppendOutput(nil)
	mustOK(t, err)
	for _, want := range []string{`"code":-32700`, `"id":3,"error":{"code":-32600`, `"id":5,"error":{"code":-32600`, `"id":6,"error":{"code":-32601`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if Violation(77).String() != "violation(77)" || DecodeWrongVersion.String() != "wrong-version" ||
		DecodeReason(42).String() != "decode-reason(42)" {
		t.Fatalf("names: %s, %s, %s", Violation(77), DecodeWrongVersion, DecodeReason(42))
	}
}

func TestBeforeInitialization(t *testing.T) {
	c, err := NewConn(clientConfig(), epoch)
	mustOK(t, err)
	defer c.Close()
	if _, err := c.Request(epoch, "tools/list", nil, nil); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("%v", err)
	}
	if err := c.Cancel(epoch, 1, ""); !errors.Is(err, ErrCannotCancelInitialize) {
		t.Fatalf("cancel initialize: %v", err)
	}
	s, err := NewConn(serverConfig(), epoch)
	mustOK(t, err)
	defer s.Close()
	mustOK(t, s.Feed(epoch, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n")))
	evs := s.AppendEvents(nil)
	if len(evs) != 1 || evs[0].(*ViolationEvent).Violation != ViolationBeforeInitialization {
		t.Fatalf("%s", dump(evs))
	}
}

func TestInitializeRejected(t *testing.T) {
	c, err := NewConn(clientConfig(), epoch)
	mustOK(t, err)
	defer c.Close()
	out, _ := c.AppendOutput(nil)
	if !bytes.Contains(out, []byte(`"method":"initialize"`)) {
		t.Fatalf("%s", out)
	}
	mustOK(t, c.Feed(epoch, []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no \"roots\" \u00e9"}}`+"\n")))
	evs := c.AppendEvents(nil)
	cl := evs[len(evs)-1].(*ClosedEvent)
	if cl.Reason != CloseInitializeRejected || cl.Code != -32602 || cl.Version != `no "roots" é` {
		t.Fatalf("%s", dump(evs))
	}
}

func TestUnsupportedVersion(t *testing.T) {
	c, err := NewConn(clientConfig(), epoch)
	mustOK(t, err)
	defer c.Close()
	c.AppendOutput(nil)
	mustOK(t, c.Feed(epoch, []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1999-01-01","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`+"\n")))
	evs := c.AppendEvents(nil)
	cl := evs[len(evs)-1].(*ClosedEvent)
	if cl.Reason != CloseUnsupportedVersion || cl.Version != "1999-01-01" || cl.Reason.String() != "unsupported-version" {
		t.Fatalf("%s", dump(evs))
	}
}

func TestInitializeTimedOut(t *testing.T) {
	cfg := clientConfig()
	cfg.RequestTimeout = time.Second
	c, err := NewConn(cfg, epoch)
	mustOK(t, err)
	defer c.Close()
	deadline, ok := c.NextDeadline()
	if !ok {
		t.Fatalf("no initialize deadline")
	}
	mustOK(t, c.HandleTimeout(deadline))
	evs := c.AppendEvents(nil)
	if len(evs) == 0 || evs[len(evs)-1].(*ClosedEvent).Reason != CloseInitializeTimedOut {
		t.Fatalf("%s", dump(evs))
	}
}

func TestManualPings(t *testing.T) {
	cfg := serverConfig()
	cfg.ManualPings = true
	s := serverAfterHandshake(t, cfg)
	mustOK(t, s.Feed(epoch, []byte(`{"jsonrpc":"2.0","id":"p","method":"ping"}`+"\n")))
	evs := s.AppendEvents(nil)
	if len(evs) != 1 || evs[0].(*RequestEvent).Method != "ping" {
		t.Fatalf("%s", dump(evs))
	}
	s2 := serverAfterHandshake(t, serverConfig())
	mustOK(t, s2.Feed(epoch, []byte(`{"jsonrpc":"2.0","id":"p","method":"ping"}`+"\n")))
	if evs := s2.AppendEvents(nil); len(evs) != 0 {
		t.Fatalf("%s", dump(evs))
	}
	out, _ := s2.AppendOutput(nil)
	if string(out) != `{"jsonrpc":"2.0","id":"p","result":{}}`+"\n" {
		t.Fatalf("%s", out)
	}
}

func TestLimits(t *testing.T) {
	cfg := clientConfig()
	cfg.Limits = Limits{MaxOutboundInFlight: 2}
	p := newPair(t, cfg, serverConfig())
	p.drive()
	for i := 0; i < 2; i++ {
		_, err := p.client.Request(p.now, "tools/list", nil, nil)
		mustOK(t, err)
	}
	if _, err := p.client.Request(p.now, "tools/list", nil, nil); !errors.Is(err, ErrTooManyInFlight) {
		t.Fatalf("%v", err)
	}
	scfg := serverConfig()
	scfg.Limits = Limits{MaxFrame: 300, MaxBufferedOutput: 100}
	s := serverAfterHandshake(t, scfg)
	mustOK(t, s.Feed(epoch, []byte(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{"pad":"`+strings.Repeat("x", 300)+`"}}`+"\n")))
	evs := s.AppendEvents(nil)
	if len(evs) != 1 || evs[0].(*ViolationEvent).Violation != ViolationFrameTooLong {
		t.Fatalf("%s", dump(evs))
	}
	big := json.RawMessage(`{"level":"info","data":"` + strings.Repeat("y", 200) + `"}`)
	// The cap refuses a command once the buffered output has reached it.
	err := s.Notify("notifications/message", big)
	for i := 0; i < 3 && err == nil; i++ {
		err = s.Notify("notifications/message", big)
	}
	if !errors.Is(err, ErrOutputFull) {
		t.Fatalf("output full: %v", err)
	}
	s.AppendOutput(nil)
	mustOK(t, s.Notify("notifications/message", big))
}

func TestPolicies(t *testing.T) {
	cfg := clientConfig()
	cfg.DeliverNonIncreasingProgress = true
	cfg.ResetTimeoutOnProgress = true
	cfg.RequestTimeout = time.Second
	cfg.MaxTotalTimeout = 3 * time.Second
	p := newPair(t, cfg, serverConfig())
	p.drive()
	p.clientEvents, p.serverEvents = nil, nil
	id, err := p.client.Request(p.now, "tools/call", json.RawMessage(`{"name":"long"}`), &RequestOptions{Progress: true})
	mustOK(t, err)
	p.drive()
	req := p.takeServer().(*RequestEvent)
	// The server side refuses non-increasing progress; feed one by hand to the client.
	mustOK(t, p.server.Progress(req.ID, ProgressUpdate{Progress: 5}))
	p.advance(900 * time.Millisecond)
	p.takeClient()
	token := string(req.Params[strings.Index(string(req.Params), `"progressToken":`)+len(`"progressToken":`):])
	token = token[:strings.IndexAny(token, ",}")]
	mustOK(t, p.client.Feed(p.now, []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`+token+`,"progress":4}}`+"\n")))
	if ev, ok := p.client.NextEvent(); !ok || ev.(*ProgressEvent).Progress != 4 {
		t.Fatalf("non-increasing progress not delivered")
	}
	// Progress at 0.9 s restarted the 1 s timeout: nothing at 1.5 s, a timeout by 1.9 s.
	p.advance(600 * time.Millisecond)
	p.expectQuiet()
	p.advance(400 * time.Millisecond)
	if to := p.takeClient().(*TimedOutEvent); to.Request != id {
		t.Fatalf("%+v", to)
	}
	// Lax lifecycle: a request before the handshake finishes is refused only under strict.
	lax := clientConfig()
	lax.LaxLifecycle = true
	c, err := NewConn(lax, epoch)
	mustOK(t, err)
	defer c.Close()
	if _, err := c.Request(epoch, "tools/list", nil, &RequestOptions{ResetOnProgress: ResetOff}); errors.Is(err, ErrNotInitialized) {
		t.Fatalf("lax lifecycle still strict: %v", err)
	}
}

func TestCloseIdempotent(t *testing.T) {
	c, err := NewConn(clientConfig(), epoch)
	mustOK(t, err)
	mustOK(t, c.Close())
	mustOK(t, c.Close())
	checks := []error{
		c.Feed(epoch, []byte("x")), c.FeedEOF(epoch), c.HandleTimeout(epoch),
		c.Notify("x", nil), c.Respond(IntID(1), nil), c.RespondError(IntID(1), 1, "", nil),
		c.Progress(IntID(1), ProgressUpdate{}), c.Cancel(epoch, 1, ""), c.Shutdown(epoch, 0),
	}
	_, err = c.Request(epoch, "x", nil, nil)
	checks = append(checks, err)
	_, err = c.WriteTo(io.Discard)
	checks = append(checks, err)
	_, err = c.AppendOutput(nil)
	checks = append(checks, err)
	_, err = c.Status()
	checks = append(checks, err)
	for i, err := range checks {
		if err != ErrFreed {
			t.Errorf("call %d after Close: %v", i, err)
		}
	}
	if _, ok := c.NextEvent(); ok {
		t.Fatal("event after Close")
	}
	if _, ok := c.NextDeadline(); ok || c.State() != StateClosed || c.ProtocolVersion() != "" || c.PeerInfo() != nil ||
		c.PeerCapabilities() != nil || c.PendingOutput() != 0 || c.Err() != ErrFreed {
		t.Fatal("getters after Close")
	}
	if _, ok := c.PeerInstructions(); ok {
		t.Fatal("instructions after Close")
	}
}

func TestFinalizer(t *testing.T) {
	// Conns dropped without Close are freed by their finalizer (run under -race and ASan-free
	// builds this at least exercises the path without crashing).
	for i := 0; i < 100; i++ {
		c, err := NewConn(clientConfig(), epoch)
		mustOK(t, err)
		c.AppendOutput(nil)
	}
	runtime.GC()
	runtime.GC()
}

// chunkWriter takes at most max bytes per Write and fails after failAfter bytes in all.
type chunkWriter struct {
	buf       bytes.Buffer
	max       int
	failAfter int
	calls     int
}

var errBlocked = errors.New("would block")

func (w *chunkWriter) Write(p []byte) (int, error) {
	w.calls++
	n := len(p)
	if n > w.max {
		n = w.max
	}
	if w.failAfter >= 0 {
		room := w.failAfter - w.buf.Len()
		if room <= 0 {
			return 0, errBlocked
		}
		if n > room {
			w.buf.Write(p[:room])
			return room, errBlocked
		}
	}
	w.buf.Write(p[:n])
	return n, nil
}

func TestWriteToPartial(t *testing.T) {
	mk := func() *Conn {
		s := serverAfterHandshake(t, serverConfig())
		for i := 0; i < 20; i++ {
			mustOK(t, s.Notify("notifications/message", json.RawMessage(fmt.Sprintf(`{"level":"info","data":"line %d é"}`, i))))
		}
		return s
	}
	want, err := mk().AppendOutput(nil)
	mustOK(t, err)

	s := mk()
	w := &chunkWriter{max: 3, failAfter: -1}
	n, err := s.WriteTo(w)
	mustOK(t, err)
	if n != int64(len(want)) || !bytes.Equal(w.buf.Bytes(), want) || w.calls < len(want)/3 {
		t.Fatalf("short writes: n=%d calls=%d\n%s", n, w.calls, w.buf.Bytes())
	}
	if s.PendingOutput() != 0 {
		t.Fatal("output left")
	}

	// A writer that blocks part-way: what it took is consumed, the rest resumes later.
	s = mk()
	w = &chunkWriter{max: 1000, failAfter: 101}
	n, err = s.WriteTo(w)
	if err != errBlocked || n != 101 {
		t.Fatalf("n=%d err=%v", n, err)
	}
	if s.PendingOutput() == 0 {
		t.Fatal("nothing left after a blocked write")
	}
	w.failAfter = -1
	n2, err := s.WriteTo(w)
	mustOK(t, err)
	if n+n2 != int64(len(want)) || !bytes.Equal(w.buf.Bytes(), want) {
		t.Fatalf("resumed output differs")
	}
	// A writer that takes nothing and says nothing is a short write.
	s = mk()
	if _, err := s.WriteTo(zeroWriter{}); err != io.ErrShortWrite {
		t.Fatalf("%v", err)
	}
	// A writer that lies about n.
	if _, err := s.WriteTo(liarWriter{}); err != io.ErrShortWrite {
		t.Fatalf("%v", err)
	}
	var buf bytes.Buffer
	n, err = s.WriteTo(&buf)
	if err != nil || !bytes.Equal(buf.Bytes(), want) || n != int64(len(want)) {
		t.Fatalf("after bad writers: %v", err)
	}
}

type zeroWriter struct{}

func (zeroWriter) Write(p []byte) (int, error) { return 0, nil }

type liarWriter struct{}

func (liarWriter) Write(p []byte) (int, error) { return len(p) + 1, nil }

// TestBatching crosses every batch boundary: many events, and events larger than the arena.
func TestBatching(t *testing.T) {
	cfg := serverConfig()
	cfg.Limits.MaxInboundInFlight = 2000
	s := serverAfterHandshake(t, cfg)
	var in bytes.Buffer
	const n = 1000
	for i := 0; i < n; i++ {
		pad := ""
		if i%97 == 0 {
			pad = strings.Repeat("é", 50_000+i) // 100 KB of params: past the 64 KiB arena
		}
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"n%d","pad":"%s"}}`+"\n", i, i, pad)
	}
	mustOK(t, s.Feed(epoch, in.Bytes()))
	got := 0
	var all []*RequestEvent
	for ev, ok := s.NextEvent(); ok; ev, ok = s.NextEvent() {
		r := ev.(*RequestEvent)
		all = append(all, r)
		if r.ID != IntID(int64(got)) {
			t.Fatalf("event %d has id %v", got, r.ID)
		}
		var params struct{ Name, Pad string }
		mustOK(t, json.Unmarshal(r.Params, &params))
		if params.Name != fmt.Sprintf("n%d", got) || (got%97 == 0) != (len(params.Pad) > 0) {
			t.Fatalf("event %d params %.80s", got, r.Params)
		}
		// Answer each at once, as a server does: events already copied out survive it.
		mustOK(t, s.Respond(r.ID, json.RawMessage(`{"content":[]}`)))
		got++
	}
	if got != n || s.Err() != nil {
		t.Fatalf("%d events, err %v", got, s.Err())
	}
	// Events stay valid however long they are kept (they own their data).
	mustOK(t, s.Feed(epoch, []byte(`{"jsonrpc":"2.0","id":"keep","method":"tools/list"}`+"\n")))
	kept := s.AppendEvents(nil)
	for i := 0; i < 10; i++ {
		mustOK(t, s.Feed(epoch, []byte(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`+"\n")))
		s.AppendEvents(nil)
		s.AppendOutput(nil)
	}
	runtime.GC()
	if r := kept[0].(*RequestEvent); r.Method != "tools/list" || r.ID != StringID("keep") {
		t.Fatalf("%+v", r)
	}
	// The request events of a batch share an allocation: each is still its own, unchanged.
	for i, r := range all {
		if r.ID != IntID(int64(i)) || r.Method != "tools/call" || !bytes.Contains(r.Params, []byte(fmt.Sprintf(`"n%d"`, i))) {
			t.Fatalf("kept event %d is now %v %s %.40s", i, r.ID, r.Method, r.Params)
		}
	}
}

// TestWholeVsByteByByte: the same stream fed whole and a byte at a time gives the same
// events and the same output.
func TestWholeVsByteByByte(t *testing.T) {
	stream := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"é","arguments":{"text":"a\nb"}}}` + "\n" +
		`garbage` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"r"}}` + "\r\n" +
		`{"jsonrpc":"2.0","id":"s","method":"ping"}` + "\n" +
		`[]` + "\n" + `{"jsonrpc":"2.0","id":2,"result":{}}` + "\n" + `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	run := func(chunk int) (string, string) {
		s := serverAfterHandshake(t, serverConfig())
		var events []Event
		var out []byte
		for i := 0; i < len(stream); i += chunk {
			end := i + chunk
			if end > len(stream) {
				end = len(stream)
			}
			mustOK(t, s.Feed(epoch, stream[i:end]))
			events = s.AppendEvents(events)
			out, _ = s.AppendOutput(out)
		}
		mustOK(t, s.FeedEOF(epoch))
		events = s.AppendEvents(events)
		mustOK(t, s.HandleTimeout(epoch)) // the end of input, after the last line's events
		events = s.AppendEvents(events)
		out, _ = s.AppendOutput(out)
		return dump(events), string(out)
	}
	wholeEvents, wholeOut := run(len(stream))
	for _, chunk := range []int{1, 2, 7} {
		ev, out := run(chunk)
		if ev != wholeEvents || out != wholeOut {
			t.Fatalf("chunk %d differs:\n%s\n%s\nvs\n%s\n%s", chunk, ev, out, wholeEvents, wholeOut)
		}
	}
	if !strings.Contains(wholeEvents, "PeerCancelled") || !strings.Contains(wholeEvents, "Closed") {
		t.Fatalf("%s", wholeEvents)
	}
}

func TestErrorValues(t *testing.T) {
	err := error(&ResultError{Op: "request", Code: CodeClosed})
	if !errors.Is(err, ErrClosed) || errors.Is(err, ErrClosing) {
		t.Fatal("Is")
	}
	wrapped := fmt.Errorf("sending: %w", err)
	var re *ResultError
	if !errors.As(wrapped, &re) || re.Code != CodeClosed || !errors.Is(wrapped, ErrClosed) {
		t.Fatal("As through a wrap")
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "mcpwire: request: ") || !strings.HasSuffix(msg, "(300)") {
		t.Fatalf("message %q", msg)
	}
	if ErrPoisoned.Error() == "" || !CodePanic.IsFatal() || !CodeInvalidJSON.IsArgument() {
		t.Fatal("ranges")
	}
	if ResultCode(12345).Message() != "unknown result code" {
		t.Fatalf("%q", ResultCode(12345).Message())
	}
}

// TestConcurrentConns runs independent pairs on many goroutines (meaningful under -race).
func TestConcurrentConns(t *testing.T) {
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			p := handshakePair(t)
			for i := 0; i < 50; i++ {
				id, err := p.client.Request(p.now, "tools/call", json.RawMessage(fmt.Sprintf(`{"name":"g%d","i":%d}`, g, i)), nil)
				if err != nil {
					t.Error(err)
					return
				}
				p.drive()
				req := p.takeServer().(*RequestEvent)
				if err := p.server.Respond(req.ID, req.Params); err != nil {
					t.Error(err)
					return
				}
				p.drive()
				if r := p.takeClient().(*ResponseEvent); r.Request != id || string(r.Result) != string(req.Params) {
					t.Errorf("%+v", r)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

// A Conn may move between goroutines (not be used by two at once).
func TestConnMovesBetweenGoroutines(t *testing.T) {
	p := handshakePair(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := p.client.Request(p.now, "ping", nil, nil)
		if err != nil {
			t.Error(err)
		}
	}()
	<-done
	p.drive()
	if _, ok := p.takeClient().(*ResponseEvent); !ok {
		t.Fatal("no pong")
	}
}

// TestStaleDeadline: after the handshake the client still reports the initialize request's
// deadline (the engine keeps that timer); firing it must do nothing.
func TestStaleDeadline(t *testing.T) {
	p := handshakePair(t)
	if _, ok := p.server.NextDeadline(); ok {
		t.Fatal("server deadline with nothing in flight")
	}
	if d, ok := p.client.NextDeadline(); ok {
		p.advance(d.Sub(p.now))
		p.expectQuiet()
		if st := p.client.State(); st != StateOperating {
			t.Fatalf("state %v", st)
		}
	}
}

func TestInvalidInitializeResult(t *testing.T) {
	c, err := NewConn(clientConfig(), epoch)
	mustOK(t, err)
	defer c.Close()
	c.AppendOutput(nil)
	mustOK(t, c.Feed(epoch, []byte(`{"jsonrpc":"2.0","id":1,"result":{"capabilities":{}}}`+"\n")))
	evs := c.AppendEvents(nil)
	if len(evs) == 0 || evs[len(evs)-1].(*ClosedEvent).Reason != CloseInvalidInitializeResult {
		t.Fatalf("%s", dump(evs))
	}
	if _, ok := IntID(3).Text(); ok {
		t.Fatal("an integer id has no text")
	}
	if Server.String() != "server" || CloseReason(55).String() != "close-reason(55)" || StateClosing.String() != "closing" {
		t.Fatal("names")
	}
}

// A deadline the engine saturated (a server's enormous retry) stays in the far future: as a
// Duration it would wrap negative, and a timer armed from it would fire at once, for ever.
func TestDeadlinesPastTheLargestDurationStayInTheFuture(t *testing.T) {
	origin := time.Now()
	for _, ns := range []uint64{1 << 63, 1<<63 + 5, math.MaxUint64} {
		if at := deadlineAt(origin, ns); !at.After(origin.Add(100 * 365 * 24 * time.Hour)) {
			t.Errorf("deadline %d ns after origin became %v", ns, at.Sub(origin))
		}
	}
	if at := deadlineAt(origin, 1500); at.Sub(origin) != 1500*time.Nanosecond {
		t.Errorf("an ordinary deadline moved: %v", at.Sub(origin))
	}
}

// A Conn's arena grown for an event larger than arenaKept goes back to its first size once
// the event is copied out (it kept up to MaxFrame bytes for the Conn's life).
func TestLargeEventsDoNotKeepTheirArena(t *testing.T) {
	p := handshakePair(t)
	params := `{"name":"x","arguments":{"pad":"` + strings.Repeat("p", 2<<20) + `"}}`
	if _, err := p.client.Request(p.now, "tools/call", json.RawMessage(params), nil); err != nil {
		t.Fatal(err)
	}
	p.drive()
	req, ok := p.takeServer().(*RequestEvent)
	if !ok || string(req.Params) != params {
		t.Fatalf("server got %T with %d bytes of params", req, len(req.Params))
	}
	if n := len(p.server.arena); n != batchArena {
		t.Errorf("the server's Conn keeps an arena of %d bytes", n)
	}
}

// The library's views are copied whole: a text or JSON value past 2 GiB (possible with a
// raised MaxFrame) went through cgo's copies with a C.int length, which wraps, and panicked.
func TestViewsPast2GiBAreCopiedWhole(t *testing.T) {
	if raceEnabled {
		t.Skip("4 GiB of copies; the plain run checks it")
	}
	n := uint(math.MaxInt32) + 2
	src := make([]byte, n)
	src[0], src[n-1] = '{', '}'
	b := goBytes(unsafe.Pointer(&src[0]), n)
	if uint(len(b)) != n || b[0] != '{' || b[n-1] != '}' {
		t.Fatalf("goBytes: %d bytes of %d", len(b), n)
	}
	b = nil
	runtime.GC()
	s := goText(unsafe.Pointer(&src[0]), n)
	if uint(len(s)) != n || s[0] != '{' || s[n-1] != '}' {
		t.Fatalf("goText: %d bytes of %d", len(s), n)
	}
	if goBytes(nil, 0) != nil || goBytes(unsafe.Pointer(&src[0]), 0) == nil || goText(nil, 0) != "" {
		t.Fatal("empty views")
	}
}

// A cancel spelling the request's string id with other escapes ("a" for "\u0061") names the
// request as the request did, so a map keyed by the ID a RequestEvent carried finds the work
// to stop (IDs compare by wire form).
func TestPeerCancelledNamesTheRequestAsItWasSpelled(t *testing.T) {
	p := newPair(t, clientConfig(), serverConfig())
	p.drive()
	p.clientEvents, p.serverEvents = nil, nil
	mustOK(t, p.server.Feed(p.now, []byte(`{"jsonrpc":"2.0","id":"\u0061","method":"tools/call","params":{"name":"slow"}}`+"\n")))
	p.serverEvents = p.server.AppendEvents(p.serverEvents)
	running := map[ID]bool{p.takeServer().(*RequestEvent).ID: true}
	mustOK(t, p.server.Feed(p.now, []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}`+"\n")))
	p.serverEvents = p.server.AppendEvents(p.serverEvents)
	c := p.takeServer().(*PeerCancelledEvent)
	if !running[c.ID] {
		t.Fatalf("cancelled %v, running %v", c.ID, running)
	}
}
