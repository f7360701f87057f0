package mcpwire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// reviewApp checks access to what each subscriptions/listen asks for: the caller may follow
// file:///mine only, and a listen whose id is "deny" is refused outright.
type reviewApp struct {
	mu     sync.Mutex
	asked  []ListenItem
	key    ConnKey
	grants []error
}

func (a *reviewApp) HandleMCP(c *Conn, key ConnKey, ev Event) {
	req, ok := ev.(*RequestEvent)
	if !ok || req.Method != "subscriptions/listen" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, _ := req.ID.Text(); s == "deny" {
		a.grants = append(a.grants, c.RespondError(req.ID, -32602, "not yours", nil))
		return
	}
	items, err := c.ListenItems(req.ID)
	if err != nil {
		a.grants = append(a.grants, err)
		return
	}
	a.asked, a.key = items, key
	a.grants = append(a.grants, c.GrantListen(req.ID, func(it ListenItem) bool {
		return it.Kind == ListenResource && it.Text == "file:///mine"
	}))
}

func listenPost(t *testing.T, ctx context.Context, url, id string) *http.Response {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":"` + id + `","method":"subscriptions/listen","params":{"notifications":` +
		`{"toolsListChanged":true,"resourceSubscriptions":["file:///mine","file:///theirs"]},` + modernMeta + `}}`
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// nextData reads SSE events from r until one with data, and decodes it.
func nextData(t *testing.T, r *bufio.Reader) map[string]any {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok && data != "" {
			var msg map[string]any
			if err := json.Unmarshal([]byte(data), &msg); err != nil {
				t.Fatalf("%q: %v", data, err)
			}
			return msg
		}
	}
}

// With Config.ReviewListens the HTTP handler hands a listen to the application, which grants
// only what the caller may follow: the acknowledgement and the notifications on the stream
// hold nothing else, and a refused listen gets a plain JSON error.
func TestHTTPReviewedListenHearsOnlyWhatTheApplicationGrants(t *testing.T) {
	app := &reviewApp{}
	cfg := &Config{Role: Server, Name: "go-review", Version: "1.0", ReviewListens: true,
		Capabilities: json.RawMessage(`{"tools":{"listChanged":true},"resources":{"subscribe":true}}`)}
	srv, err := NewHTTPServer(cfg, nil, app)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer func() {
		ts.Close()
		srv.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	resp := listenPost(t, ctx, ts.URL, "L1")
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("%d %s", resp.StatusCode, ct)
	}
	r := bufio.NewReader(resp.Body)
	ack := nextData(t, r)
	if ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v", ack)
	}
	granted := ack["params"].(map[string]any)["notifications"]
	want := map[string]any{"resourceSubscriptions": []any{"file:///mine"}}
	if !reflect.DeepEqual(granted, want) {
		t.Fatalf("granted %v, want %v", granted, want)
	}
	app.mu.Lock()
	asked, key, grants := app.asked, app.key, app.grants
	app.mu.Unlock()
	wantAsked := []ListenItem{{ListenToolsListChanged, ""}, {ListenResource, "file:///mine"},
		{ListenResource, "file:///theirs"}}
	if !reflect.DeepEqual(asked, wantAsked) || len(grants) != 1 || grants[0] != nil {
		t.Fatalf("asked %v, grants %v", asked, grants)
	}
	// Only the granted resource's update reaches the stream.
	err = srv.With(key, func(c *Conn) error {
		for _, uri := range []string{"file:///theirs", "file:///mine"} {
			if err := c.Notify("notifications/resources/updated", json.RawMessage(`{"uri":"`+uri+`"}`)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	update := nextData(t, r)
	if uri := update["params"].(map[string]any)["uri"]; uri != "file:///mine" {
		t.Fatalf("the stream heard %v", update)
	}
	// Granted once only.
	err = srv.With(key, func(c *Conn) error { return c.GrantListen(StringID("L1"), func(ListenItem) bool { return true }) })
	if !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("second grant: %v", err)
	}

	denied := listenPost(t, ctx, ts.URL, "deny")
	defer denied.Body.Close()
	var msg struct {
		Error struct{ Message string }
	}
	if err := json.NewDecoder(denied.Body).Decode(&msg); err != nil || msg.Error.Message != "not yours" {
		t.Fatalf("refused listen: %d %v %+v", denied.StatusCode, err, msg)
	}
}

// keep runs without the connection's lock, so the client may cancel the listen meanwhile, and
// send another under the same id: that one is refused (the id of a cancelled request is not
// taken again, or the grant meant for the old listen would apply to it), and the grant of the
// cancelled listen sends nothing.
func TestGrantListenOfAListenCancelledWhileKeepRanSendsNothing(t *testing.T) {
	conn, err := NewConn(&Config{Role: Server, Name: "s", Version: "1", ReviewListens: true,
		Capabilities: json.RawMessage(`{"resources":{"subscribe":true}}`)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	listen := func(uri string) string {
		return `{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{` + meta +
			`,"notifications":{"resourceSubscriptions":["` + uri + `"]}}}` + "\n"
	}
	feed := func(s string) {
		if err := conn.Feed(time.Now(), []byte(s)); err != nil {
			t.Fatal(err)
		}
		for {
			if _, ok := conn.NextEvent(); !ok {
				return
			}
		}
	}
	feed(listen("file:///a"))
	err = conn.GrantListen(IntID(5), func(ListenItem) bool {
		feed(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,` + meta + `}}` + "\n")
		feed(listen("file:///b"))
		return true
	})
	if err != nil {
		t.Fatalf("grant of the cancelled listen: %v", err)
	}
	out, err := conn.AppendOutput(nil)
	if err != nil || strings.Contains(string(out), "acknowledged") {
		t.Fatalf("acknowledged: %s %v", out, err)
	}
	if !strings.Contains(string(out), `"id":5,"error":{"code":-32600`) {
		t.Fatalf("the second listen under id 5 was not refused: %s", out)
	}
	if items, err := conn.ListenItems(IntID(5)); err == nil {
		t.Fatalf("a listen is left under id 5: %v", items)
	}
}

// A listen and its cancellation read in one go: by the time the handler grants it, it is gone
// from the engine. Granting a cancelled listen succeeds and sends nothing, as documented; an
// id that never was a listen is ErrUnknownRequest.
func TestGrantListenOfACancelledListenSucceedsQuietly(t *testing.T) {
	conn, err := NewConn(&Config{Role: Server, Name: "s", Version: "1", ReviewListens: true,
		Capabilities: json.RawMessage(`{"tools":{"listChanged":true}}`)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	input := `{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{` + meta +
		`,"notifications":{"toolsListChanged":true}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,` + meta + `}}` + "\n"
	if err := conn.Feed(time.Now(), []byte(input)); err != nil {
		t.Fatal(err)
	}
	var listen *RequestEvent
	for {
		ev, ok := conn.NextEvent()
		if !ok {
			break
		}
		if r, ok := ev.(*RequestEvent); ok {
			listen = r
		}
	}
	if listen == nil {
		t.Fatal("the listen did not come to the application")
	}
	if err := conn.GrantListen(listen.ID, func(ListenItem) bool { return true }); err != nil {
		t.Fatalf("granting a cancelled listen: %v", err)
	}
	if out, err := conn.AppendOutput(nil); err != nil || len(out) != 0 {
		t.Fatalf("wrote %q %v", out, err)
	}
	if err := conn.GrantListen(IntID(6), func(ListenItem) bool { return true }); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("granting an unknown id: %v", err)
	}
}
