package mcpwire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingLegacyServer is a handshake-era server (session "s1") whose tools never answer: it
// counts the notifications it gets by method.
func countingLegacyServer(t *testing.T, counts map[string]*atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &m) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if m.ID == nil {
			if n, ok := counts[m.Method]; ok {
				n.Add(1)
			}
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if m.Method == "initialize" {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "s1")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"1"}}}`)
			return
		}
		<-r.Context().Done() // the tool runs until the client goes away
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The cancellations that a Shutdown (or Run's ctx) sends for requests in flight, and the
// notifications given just before it, reach the server: Run cut every exchange but the
// DELETE the moment the connection closed, within a millisecond of starting them. Run's ctx
// gives the requests Config.ShutdownGrace (a fixed two seconds before: with the grace of
// twice that here, Run returned two seconds early); Conn.Shutdown gives them its own grace.
func TestHTTPClientShutdownDeliversItsLastMessages(t *testing.T) {
	const grace = 4 * time.Second
	for _, how := range []string{"ctx", "shutdown"} {
		t.Run(how, func(t *testing.T) {
			cancelled, listChanged := &atomic.Int32{}, &atomic.Int32{}
			srv := countingLegacyServer(t, map[string]*atomic.Int32{
				"notifications/cancelled":          cancelled,
				"notifications/roots/list_changed": listChanged,
			})
			cfg := &Config{Role: Client, Name: "t", Version: "1", ClientEra: ClientEraLegacy,
				Capabilities:  json.RawMessage(`{"roots":{"listChanged":true}}`),
				ShutdownGrace: grace}
			client, err := NewHTTPClient(cfg, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			var abandoned int
			var stopped atomic.Pointer[time.Time]
			err = client.Run(runCtx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
				switch ev.(type) {
				case *ReadyEvent:
					for range 2 {
						if _, err := c.Request(now, "tools/call", json.RawMessage(`{"name":"long"}`), nil); err != nil {
							t.Error(err)
						}
					}
					go func() {
						time.Sleep(200 * time.Millisecond)
						if err := c.Notify("notifications/roots/list_changed", nil); err != nil {
							t.Error(err)
						}
						now := time.Now()
						stopped.Store(&now)
						if how == "ctx" {
							stop()
						} else {
							c.Shutdown(time.Now(), 100*time.Millisecond)
						}
					}()
				case *AbandonedEvent:
					abandoned++
				}
			}))
			if how == "ctx" && err != context.Canceled {
				t.Fatalf("Run: %v", err)
			} else if how == "shutdown" && err != nil {
				t.Fatalf("Run: %v", err)
			}
			if abandoned != 2 {
				t.Errorf("%d requests abandoned, want 2", abandoned)
			}
			began := stopped.Load()
			if began == nil {
				t.Fatal("Run returned before the close began")
			}
			d := time.Since(*began)
			if how == "ctx" && (d < grace || d > grace+3*time.Second) {
				t.Errorf("Run returned %v after ctx's cancellation, with a grace of %v", d, grace)
			} else if how == "shutdown" && d > 1800*time.Millisecond {
				t.Errorf("Run returned %v after a Shutdown with a grace of 100 ms", d)
			}
			// (They may still be on their way as Run returns: it does not wait for them.)
			for wait := time.Now().Add(3 * time.Second); time.Now().Before(wait); {
				if cancelled.Load() == 2 && listChanged.Load() == 1 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if n := cancelled.Load(); n != 2 {
				t.Errorf("the server got %d of the 2 cancellations", n)
			}
			if n := listChanged.Load(); n != 1 {
				t.Errorf("the server got %d of the 1 notification given before the close", n)
			}
		})
	}
}

// Run's ctx cancelled while the application's own Shutdown (an hour of grace) waits for a
// request the server never answers: Run still ends within Config.ShutdownGrace. The engine
// kept the first close's deadline, and Run waited out the hour.
func TestHTTPClientCancelledDuringALongShutdownEndsWithinTheGrace(t *testing.T) {
	srv := countingLegacyServer(t, map[string]*atomic.Int32{})
	cfg := &Config{Role: Client, Name: "t", Version: "1", ClientEra: ClientEraLegacy,
		ShutdownGrace: 100 * time.Millisecond}
	client, err := NewHTTPClient(cfg, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelledAt atomic.Pointer[time.Time]
	done := make(chan error, 1)
	go func() {
		done <- client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
			if _, ok := ev.(*ReadyEvent); ok {
				if _, err := c.Request(now, "tools/call", json.RawMessage(`{"name":"long"}`), nil); err != nil {
					t.Error(err)
				}
				if err := c.Shutdown(now, time.Hour); err != nil {
					t.Error(err)
				}
				go func() {
					time.Sleep(200 * time.Millisecond)
					at := time.Now()
					cancelledAt.Store(&at)
					cancel()
				}()
			}
		}))
	}()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Fatalf("Run: %v", err)
		}
		if at := cancelledAt.Load(); at == nil || time.Since(*at) > 3*time.Second {
			t.Fatalf("Run returned %v after its ctx was cancelled", time.Since(*at))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run kept waiting for the application's hour of grace")
	}
}

// A panic in the handler ends Run with requests in flight: a later Run tells the application
// what became of them at once, instead of never (their exchanges were cut, and the engine
// still waited on them).
func TestHTTPClientRunAfterAPanicFailsTheRequestsItCut(t *testing.T) {
	start := time.Now()
	outcome := slowOutcomeAfterAPanic(t, 800*time.Millisecond, 0)
	if _, ok := outcome.(*FailedEvent); !ok || time.Since(start) > 3*time.Second {
		t.Fatalf("the slow request's outcome: %#v after %v", outcome, time.Since(start))
	}
}

// A panic in the handler ends Run after another answer came in full: the next Run delivers
// that answer. Run had cut its exchange and failed the request (FailedEvent) with the answer
// in hand (found by a review of the Go client).
func TestHTTPClientRunAfterAPanicDeliversTheAnswersAlreadyReceived(t *testing.T) {
	outcome := slowOutcomeAfterAPanic(t, 100*time.Millisecond, 600*time.Millisecond)
	if _, ok := outcome.(*ResponseEvent); !ok {
		t.Fatalf("the slow request's outcome: %#v", outcome)
	}
}

// slowOutcomeAfterAPanic makes two requests, one answered at once and one after slowDelay,
// has the handler panic on the fast answer after hold, and returns what a second Run then
// hands out for the slow one (a ResponseEvent or a FailedEvent), within two seconds.
func slowOutcomeAfterAPanic(t *testing.T, slowDelay, hold time.Duration) Event {
	t.Helper()
	var slowID atomic.Int64
	slowID.Store(-1)
	srv := scriptedLegacyServer(func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		if string(id) == strconv.FormatInt(slowID.Load(), 10) {
			time.Sleep(slowDelay)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"tools":[]}}`)
	})
	t.Cleanup(srv.Close)
	client := legacyHTTPClient(t, srv.URL)
	var slow, fast RequestID
	func() {
		defer func() {
			if recover() == nil {
				t.Error("no panic came out of Run")
			}
		}()
		client.Run(context.Background(), HandlerFunc(func(c *Conn, now time.Time, ev Event) {
			switch e := ev.(type) {
			case *ReadyEvent:
				slow, _ = c.Request(now, "tools/list", nil, nil)
				slowID.Store(int64(slow))
				fast, _ = c.Request(now, "tools/list", nil, nil)
			case *ResponseEvent:
				if e.Request == fast {
					time.Sleep(hold) // the slow answer may come meanwhile
					panic("a bug in the application")
				}
			}
		}))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var outcome Event
	err := client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch e := ev.(type) {
		case *ResponseEvent:
			if e.Request == slow {
				outcome = ev
				c.Shutdown(now, 0)
			}
		case *FailedEvent:
			if e.Request == slow {
				outcome = ev
				c.Shutdown(now, 0)
			}
		}
	}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return outcome
}

// EndSession after Run returned on the close: the next Run sends the DELETE (it returned
// true, and nothing could send it).
func TestHTTPClientEndSessionAfterTheCloseIsSentByTheNextRun(t *testing.T) {
	srv, _, ts := newTestServer(t, []string{"2025-11-25"})
	client := legacyHTTPClient(t, ts.URL)
	err := client.Run(context.Background(), HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		if _, ok := ev.(*ReadyEvent); ok {
			c.Shutdown(now, 0)
		}
	}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n, _ := srv.Sessions(); n != 1 {
		t.Fatalf("%d sessions at the server, want 1", n)
	}
	if !client.EndSession() {
		t.Fatal("EndSession: nothing queued")
	}
	if err := client.Run(context.Background(), HandlerFunc(func(*Conn, time.Time, Event) {})); err != ErrClosed {
		t.Fatalf("Run after the close: %v, want ErrClosed", err)
	}
	if n, _ := srv.Sessions(); n != 0 {
		t.Fatalf("%d sessions at the server after the DELETE, want 0", n)
	}
}

type ctxKey struct{}

type ctxRoundTripper struct{ with, without atomic.Int32 }

func (p *ctxRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Context().Value(ctxKey{}) != nil {
		p.with.Add(1)
	} else {
		p.without.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// The values of Run's ctx (a token, a trace) reach the transport with every request.
func TestHTTPClientRequestsCarryTheValuesOfRunsContext(t *testing.T) {
	_, _, ts := newTestServer(t, []string{"2025-11-25"})
	rt := &ctxRoundTripper{}
	cfg := &Config{Role: Client, Name: "t", Version: "1", ClientEra: ClientEraLegacy}
	client, err := NewHTTPClient(cfg, ts.URL, &HTTPClientOptions{Client: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.WithValue(context.Background(), ctxKey{}, "token")
	err = client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev.(type) {
		case *ReadyEvent:
			c.Request(now, "tools/list", nil, nil)
		case *ResponseEvent:
			c.Shutdown(now, 0)
		}
	}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rt.with.Load() < 3 || rt.without.Load() != 0 {
		t.Fatalf("requests with Run's values: %d, without: %d", rt.with.Load(), rt.without.Load())
	}
}

// Without a Client of its own, an HTTPClient keeps the connections of a burst of concurrent
// requests for the next burst: with http.DefaultTransport's 2 idle connections per host, each
// burst of 16 opened about 14 new ones (44 for 3 bursts). A connection goes back to the pool
// a little after its answer was read, so a burst may open a few new ones while the last few
// are on their way back: twice a burst's connections are allowed in all, well under 44.
func TestHTTPClientReusesConnectionsAcrossBursts(t *testing.T) {
	ts := httptest.NewUnstartedServer(scriptedLegacyHandler(func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		time.Sleep(50 * time.Millisecond) // the burst is in flight at once
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"content":[]}}`)
	}))
	var opened atomic.Int32
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	ts.Start()
	defer ts.Close()
	client := legacyHTTPClient(t, ts.URL)
	const burst, bursts = 16, 3
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	answered, round := 0, 0
	send := func(c *Conn, now time.Time) {
		for range burst {
			if _, err := c.Request(now, "tools/call", json.RawMessage(`{"name":"echo"}`), nil); err != nil {
				t.Error(err)
			}
		}
	}
	err := client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev.(type) {
		case *ReadyEvent:
			send(c, now)
		case *ResponseEvent, *ErrorEvent:
			if answered++; answered%burst == 0 {
				if round++; round == bursts {
					c.Shutdown(now, 0)
				} else {
					send(c, now)
				}
			}
		}
	}))
	if err != nil || round != bursts {
		t.Fatalf("Run: %v after %d bursts", err, round)
	}
	if n := opened.Load(); n > 2*burst {
		t.Fatalf("%d connections opened for %d bursts of %d requests", n, bursts, burst)
	}
}

// Without a Client of its own, an HTTPClient closes a connection idle for 4 s, before common
// servers (Node's and uvicorn's close theirs after 5 s) do: a POST sent on a connection just
// as the server closes it fails, and net/http does not send a POST again. The pool kept idle
// connections 90 s.
func TestHTTPClientClosesIdleConnectionsBeforeCommonServersDo(t *testing.T) {
	ts := httptest.NewUnstartedServer(scriptedLegacyHandler(func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"content":[]}}`)
	}))
	var closed atomic.Int32
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	ts.Start()
	defer ts.Close()
	client := legacyHTTPClient(t, ts.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var closedBefore atomic.Int32 // -1 until the second request
	closedBefore.Store(-1)
	err := client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev.(type) {
		case *ReadyEvent:
			if _, err := c.Request(now, "tools/call", json.RawMessage(`{"name":"echo"}`), nil); err != nil {
				t.Error(err)
			}
		case *ResponseEvent:
			if closedBefore.Load() >= 0 {
				c.Shutdown(now, 0)
				return
			}
			time.AfterFunc(idleConnTimeout+time.Second, func() {
				closedBefore.Store(closed.Load())
				if _, err := c.Request(time.Now(), "tools/call", json.RawMessage(`{"name":"echo"}`), nil); err != nil {
					t.Error(err)
				}
			})
		}
	}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := closedBefore.Load(); n < 1 {
		t.Fatalf("no connection closed after %v idle (%d)", idleConnTimeout+time.Second, n)
	}
}

// Close ends Run while it waits for the DELETE of a session at the close, at once rather than
// after the two seconds that wait may take. (Close comes once the DELETE reached the server,
// so Run is waiting for it, and the whole two seconds are still ahead of that wait.)
func TestHTTPClientCloseEndsTheWaitForTheDelete(t *testing.T) {
	deleting := make(chan struct{}, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			select {
			case deleting <- struct{}{}:
			default:
			}
			<-r.Context().Done() // never answers the DELETE
			return
		}
		scriptedLegacyHandler(func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{}}`)
		}).ServeHTTP(w, r)
	}))
	defer ts.Close()
	client := legacyHTTPClient(t, ts.URL)
	var closedAt time.Time
	err := client.Run(context.Background(), HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev.(type) {
		case *ReadyEvent:
			c.Shutdown(now, 0)
		case *ClosedEvent:
			if !client.EndSession() {
				t.Error("EndSession: nothing queued")
			}
			go func() {
				select {
				case <-deleting:
				case <-time.After(10 * time.Second): // (no DELETE: Run fails the test)
				}
				closedAt = time.Now()
				client.Close()
			}()
		}
	}))
	if err != ErrFreed {
		t.Fatalf("Run: %v, want ErrFreed", err)
	}
	if waited := time.Since(closedAt); closedAt.IsZero() || waited > 1500*time.Millisecond {
		t.Fatalf("Run returned %v after Close", waited)
	}
}

type countingRoundTripper struct{ n atomic.Int32 }

func (c *countingRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return (&http.Transport{}).RoundTrip(r)
}

// A program that replaced http.DefaultTransport with a RoundTripper of its own (an
// instrumenting wrapper, a test double) gets a client that uses it: creating one panicked.
func TestHTTPClientUsesAReplacedDefaultTransport(t *testing.T) {
	_, _, ts := newTestServer(t, []string{"2025-11-25"})
	rt := &countingRoundTripper{}
	saved := http.DefaultTransport
	http.DefaultTransport = rt
	defer func() { http.DefaultTransport = saved }()
	client := legacyHTTPClient(t, ts.URL)
	err := client.Run(context.Background(), HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		if _, ok := ev.(*ReadyEvent); ok {
			c.Shutdown(now, 0)
		}
	}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rt.n.Load() == 0 {
		t.Fatal("the replaced DefaultTransport made no request")
	}
}

// A session that expires (404) while the application closes the connection is not replaced:
// Run polled once more after the ClosedEvent, the engine started a new session, and its
// initialize reached the server, leaving a session there that no one would end.
func TestHTTPClientClosingAfterAnExpiredSessionStartsNoNewOne(t *testing.T) {
	var initializes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &m)
		switch {
		case m.Method == "initialize":
			n := initializes.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "s"+strconv.Itoa(int(n)))
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"1"}}}`)
		case m.ID == nil && r.Method == http.MethodPost:
			w.WriteHeader(http.StatusAccepted)
		default:
			w.WriteHeader(http.StatusNotFound) // every session has expired
		}
	}))
	defer srv.Close()
	client := legacyHTTPClient(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev.(type) {
		case *ReadyEvent:
			c.Request(now, "tools/list", nil, nil)
		case *FailedEvent:
			c.Shutdown(now, time.Second)
		}
	}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // anything detached at the close has arrived
	if n := initializes.Load(); n != 1 {
		t.Fatalf("%d initialize requests reached the server, want 1", n)
	}
}

// shutdownThenEndSession runs a legacy client against slowCancelServer: a tools/call that
// never ends, a Shutdown 100 ms later, EndSession on the ClosedEvent, then closed (nil:
// nothing more). It returns when the cancellation was answered and when the DELETE came
// (UnixNano; 0: not yet), and Run's error.
func shutdownThenEndSession(t *testing.T, closed func(client *HTTPClient)) (answered, deleted *atomic.Int64, err error) {
	t.Helper()
	answered, deleted = new(atomic.Int64), new(atomic.Int64)
	srv := slowCancelServer(t, func() { answered.Store(time.Now().UnixNano()) },
		func() { deleted.Store(time.Now().UnixNano()) })
	client := legacyHTTPClient(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev.(type) {
		case *ReadyEvent:
			if _, err := c.Request(now, "tools/call", json.RawMessage(`{"name":"long"}`), nil); err != nil {
				t.Error(err)
			}
			go func() {
				time.Sleep(100 * time.Millisecond)
				c.Shutdown(time.Now(), 0)
			}()
		case *ClosedEvent:
			if !client.EndSession() {
				t.Error("EndSession: nothing queued")
			}
			if closed != nil {
				closed(client)
			}
		}
	}))
	return answered, deleted, err
}

// The DELETE of EndSession goes out only once the cancellations that the close sent have
// been answered: sent beside them, it reached the server first, which then refused each
// cancellation with 404 (here, the server answers cancellations slowly).
func TestHTTPClientEndSessionWaitsForTheCloseCancellations(t *testing.T) {
	cancelAnswered, deleteCame, err := shutdownThenEndSession(t, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	answered, deleted := cancelAnswered.Load(), deleteCame.Load()
	if answered == 0 || deleted == 0 {
		t.Fatalf("cancellation answered: %v, DELETE came: %v", answered != 0, deleted != 0)
	}
	if deleted < answered {
		t.Errorf("the DELETE came %v before the cancellation was answered", time.Duration(answered-deleted))
	}
}

// Close from another goroutine while Run waits, after the close, for the cancellations'
// response heads (the engine holds the DELETE behind them): the wait goes on, within its two
// seconds, so the cancellation and the DELETE still reach the server before Run returns
// (Close cut the wait, and both were lost).
func TestHTTPClientCloseDuringTheWaitAfterTheCloseSendsWhatIsDue(t *testing.T) {
	cancelAnswered, deleteCame, err := shutdownThenEndSession(t, func(client *HTTPClient) {
		go func() {
			time.Sleep(50 * time.Millisecond) // (the cancellation is on its way)
			client.Close()
		}()
	})
	if err != ErrFreed {
		t.Fatalf("Run: %v, want ErrFreed", err)
	}
	// The DELETE goes on alone once sent (for up to two seconds).
	for end := time.Now().Add(2 * time.Second); deleteCame.Load() == 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if cancelAnswered.Load() == 0 || deleteCame.Load() == 0 {
		t.Fatalf("cancellation answered: %v, DELETE came: %v", cancelAnswered.Load() != 0, deleteCame.Load() != 0)
	}
}

// Close while Run runs, with a request in flight: it is cancelled at the server before Run
// returns, whether a Shutdown came first with no grace (the cancellation waited for a timer
// at "now", which Close, ending Run at once, never fired), came first with a grace still
// running, as after Run's context ends (Run returned with the request cut and never
// cancelled, and the server went on working on it), or did not come at all (the same). All
// three found by reviews.
func TestHTTPClientCloseDuringRunSendsTheCancellation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration // before Close; -1: no Shutdown
	}{{"shutdown with no grace", 0}, {"shutdown with a grace", 5 * time.Second}, {"no shutdown", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			var cancelled atomic.Int32
			inner := slowCancelServer(t, func() { cancelled.Add(1) }, func() {})
			// The call's arrival at the server: a request never sent is withdrawn, and its
			// cancellation with it, so the shutdown waits for it.
			arrived := make(chan struct{}, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if bytes.Contains(body, []byte(`"tools/call"`)) {
					arrived <- struct{}{}
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				inner.Config.Handler.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			client, err := NewHTTPClient(&Config{Role: Client, Name: "t", Version: "1", ClientEra: ClientEraLegacy}, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var asked atomic.Bool
			start := time.Now()
			err = client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
				switch ev.(type) {
				case *ReadyEvent:
					if _, err := c.Request(now, "tools/call", json.RawMessage(`{"name":"long"}`), nil); err != nil {
						t.Error(err)
					}
					asked.Store(true)
					go func() {
						<-arrived
						if tc.grace >= 0 {
							if err := client.Conn().Shutdown(time.Now(), tc.grace); err != nil {
								t.Error(err)
							}
						}
						client.Close()
					}()
				}
			}))
			if !errors.Is(err, ErrFreed) && err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !asked.Load() || cancelled.Load() != 1 {
				t.Fatalf("the server had answered %d cancellations when Run returned, want 1", cancelled.Load())
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("Run returned after %v: Close waited for the grace", d)
			}
		})
	}
}

// Close, after Run returned, waits for the cancellations a Shutdown sent (without
// EndSession) to reach the server: a program that exits right after Close lost them, since
// Run does not wait for them (here, the server answers cancellations slowly).
func TestHTTPClientCloseWaitsForTheShutdownsCancellations(t *testing.T) {
	var answered atomic.Int32
	srv := slowCancelServer(t, func() { answered.Add(1) }, func() {})
	client, err := NewHTTPClient(&Config{Role: Client, Name: "t", Version: "1", ClientEra: ClientEraLegacy}, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		if _, ok := ev.(*ReadyEvent); ok {
			if _, err := c.Request(now, "tools/call", json.RawMessage(`{"name":"long"}`), nil); err != nil {
				t.Error(err)
			}
			go func() {
				time.Sleep(100 * time.Millisecond)
				c.Shutdown(time.Now(), 0)
			}()
		}
	}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	start := time.Now()
	client.Close()
	if n := answered.Load(); n != 1 {
		t.Fatalf("the server had answered %d cancellations when Close returned (after %v), want 1", n, time.Since(start))
	}
}

// A Close given while Run runs (from the handler, on the ClosedEvent or right after a
// notification) sends what the engine still held and waits for its response heads before
// Run returns: Run returned at once and freed the client with the close's cancellation and
// the notification never sent (found by a review).
func TestHTTPClientCloseDuringRunDeliversWhatWasGiven(t *testing.T) {
	for _, when := range []string{"on the close", "after a notification"} {
		t.Run(when, func(t *testing.T) {
			var cancelled, notified atomic.Int32
			srv := slowCancelServer(t, func() { cancelled.Add(1) }, func() {})
			if when == "after a notification" {
				// The notification, too, is answered only after 300 ms.
				inner := srv.Config.Handler
				srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					body, _ := io.ReadAll(r.Body)
					if bytes.Contains(body, []byte(`"notifications/roots/list_changed"`)) {
						time.Sleep(300 * time.Millisecond)
						notified.Add(1)
						w.WriteHeader(http.StatusAccepted)
						return
					}
					r.Body = io.NopCloser(bytes.NewReader(body))
					inner.ServeHTTP(w, r)
				}))
				t.Cleanup(srv.Close)
			}
			client, err := NewHTTPClient(&Config{Role: Client, Name: "t", Version: "1", ClientEra: ClientEraLegacy,
				Capabilities: json.RawMessage(`{"roots":{"listChanged":true}}`)}, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
				switch ev.(type) {
				case *ReadyEvent:
					if when == "after a notification" {
						if err := c.Notify("notifications/roots/list_changed", nil); err != nil {
							t.Error(err)
						}
						client.Close()
						return
					}
					if _, err := c.Request(now, "tools/call", json.RawMessage(`{"name":"long"}`), nil); err != nil {
						t.Error(err)
					}
					go func() {
						time.Sleep(100 * time.Millisecond)
						c.Shutdown(time.Now(), 0)
					}()
				case *ClosedEvent:
					client.Close()
				}
			}))
			if !errors.Is(err, ErrFreed) {
				t.Fatalf("Run: %v", err)
			}
			if when == "on the close" && cancelled.Load() != 1 {
				t.Errorf("the server had answered %d cancellations when Run returned, want 1", cancelled.Load())
			}
			if when == "after a notification" && notified.Load() != 1 {
				t.Errorf("the server had %d notifications when Run returned, want 1", notified.Load())
			}
		})
	}
}

// slowCancelServer is a handshake-era server (session "s1") whose tools never answer and
// which answers a cancellation only after 300 ms: it calls cancelled as it answers one, and
// deleted when a DELETE comes.
func slowCancelServer(t *testing.T, cancelled, deleted func()) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			deleted()
			w.WriteHeader(http.StatusOK)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal(body, &m)
		switch {
		case r.Method != http.MethodPost:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case m.Method == "notifications/cancelled":
			time.Sleep(300 * time.Millisecond)
			cancelled()
			w.WriteHeader(http.StatusAccepted)
		case m.Method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "s1")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"1"}}}`)
		case m.ID == nil:
			w.WriteHeader(http.StatusAccepted)
		default:
			<-r.Context().Done() // the tool runs until the client goes away
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A request given on another goroutine after EndSession fails at once, and the handler
// hears it then: the engine failed it while Run took the actions, and Run went on waiting
// with the event undelivered, until something unrelated woke it.
func TestHTTPClientARequestAfterEndSessionFailsAtOnce(t *testing.T) {
	ts := httptest.NewServer(scriptedLegacyHandler(func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{}}`)
	}))
	defer ts.Close()
	client := legacyHTTPClient(t, ts.URL)
	defer client.Close()
	failed := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev.(type) {
		case *ReadyEvent:
			if !client.EndSession() {
				t.Error("EndSession: nothing queued")
			}
			go func() {
				time.Sleep(300 * time.Millisecond) // Run waits by then
				if _, err := client.Conn().Request(time.Now(), "tools/list", nil, nil); err != nil {
					t.Errorf("request: %v", err)
				}
			}()
		case *FailedEvent:
			failed <- struct{}{}
		}
	}))
	select {
	case <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("the request's failure was not handed out")
	}
}

// A cancellation the server refuses for now (503 with Retry-After) goes again once that time
// has passed, and the session's DELETE after it, before Run returns: Run's wait after the
// close cut the refused POST and never fired the engine's timers, so both were dropped
// without a word (found by a review of the client hosts).
func TestHTTPClientACancellationRefusedForNowGoesAgainBeforeTheDelete(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, s)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			note("DELETE")
			w.WriteHeader(http.StatusOK)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal(body, &m)
		switch {
		case r.Method != http.MethodPost:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case m.Method == "notifications/cancelled":
			mu.Lock()
			first := !slices.Contains(seen, "cancelled 503")
			mu.Unlock()
			if first {
				note("cancelled 503")
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			note("cancelled 202")
			w.WriteHeader(http.StatusAccepted)
		case m.Method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "s1")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"1"}}}`)
		case m.ID == nil:
			w.WriteHeader(http.StatusAccepted)
		default:
			<-r.Context().Done() // the tool runs until the client goes away
		}
	}))
	defer srv.Close()
	client := legacyHTTPClient(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch ev.(type) {
		case *ReadyEvent:
			if _, err := c.Request(now, "tools/call", json.RawMessage(`{"name":"long"}`), nil); err != nil {
				t.Error(err)
			}
			go func() {
				time.Sleep(100 * time.Millisecond)
				c.Shutdown(time.Now(), 0)
			}()
		case *ClosedEvent:
			if !client.EndSession() {
				t.Error("EndSession: nothing queued")
			}
		}
	}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"cancelled 503", "cancelled 202", "DELETE"}; !slices.Equal(seen, want) {
		t.Fatalf("the server saw %q when Run returned, want %q", seen, want)
	}
}

// A client dropped without Close is freed by its finalizer, also after its Conn was lent
// (Run always lends it): the Conn reached back to the client, and that cycle kept the
// finalizer from ever running, which leaked the engine's client for good. A Conn kept after
// the client went returns ErrFreed.
func TestHTTPClientDroppedWithItsConnLentIsFreed(t *testing.T) {
	view := func() *Conn {
		client, err := NewHTTPClient(&Config{Role: Client, Name: "t", Version: "1"}, "http://127.0.0.1:1/mcp", nil)
		if err != nil {
			t.Fatal(err)
		}
		return client.Conn()
	}()
	for i := 0; i < 50; i++ {
		runtime.GC()
		if err := view.Notify("notifications/roots/list_changed", nil); errors.Is(err, ErrFreed) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the dropped client was never freed")
}

// An answer that came in time while the handler was busy is handed out, not timed out: Run
// fired the deadline after taking the answer's head alone, before its body and end (each
// exchange could hand over one report at a time, and only while Run waited), or chose the
// timer over the report at random (found by a review of the clients).
func TestHTTPClientAnAnswerTakenLateIsNotTimedOut(t *testing.T) {
	var slowID atomic.Int64
	slowID.Store(-1)
	srv := scriptedLegacyServer(func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		if string(id) == strconv.FormatInt(slowID.Load(), 10) {
			time.Sleep(100 * time.Millisecond)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"tools":[]}}`)
	})
	defer srv.Close()
	for round := 0; round < 5; round++ {
		client := legacyHTTPClient(t, srv.URL)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var fast, slow RequestID
		var outcome Event
		err := client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
			switch e := ev.(type) {
			case *ReadyEvent:
				fast, _ = c.Request(now, "tools/list", nil, nil)
				slow, _ = c.Request(now, "tools/list", nil, &RequestOptions{Timeout: 300 * time.Millisecond})
				slowID.Store(int64(slow))
			case *ResponseEvent:
				if e.Request == fast {
					// Busy past the slow request's deadline; its answer comes meanwhile.
					time.Sleep(600 * time.Millisecond)
				} else if e.Request == slow {
					outcome = ev
					c.Shutdown(now, 0)
				}
			case *TimedOutEvent:
				if e.Request == slow {
					outcome = ev
					c.Shutdown(now, 0)
				}
			}
		}))
		cancel()
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if _, ok := outcome.(*ResponseEvent); !ok {
			t.Fatalf("round %d: the slow request's outcome: %#v", round, outcome)
		}
	}
}

// EndSession while initialize has no answer yet: the DELETE goes out with the session id
// that answer brings. It returned false and nothing waited for the answer, so the session
// the server then made was never deleted (found by a review of the clients).
func TestHTTPClientEndSessionDuringInitializeDeletesTheSessionItMakes(t *testing.T) {
	initializing := make(chan struct{})
	var once sync.Once
	deleted := make(chan string, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			deleted <- r.Header.Get("Mcp-Session-Id")
			return
		}
		if r.Method == http.MethodPost {
			once.Do(func() { close(initializing) })
			time.Sleep(300 * time.Millisecond) // a slow handshake
		}
		scriptedLegacyHandler(func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
			w.WriteHeader(http.StatusAccepted)
		}).ServeHTTP(w, r)
	}))
	defer ts.Close()
	client := legacyHTTPClient(t, ts.URL)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- client.Run(ctx, HandlerFunc(func(*Conn, time.Time, Event) {})) }()
	<-initializing
	if !client.EndSession() {
		t.Error("EndSession: no DELETE owed while initialize is out")
	}
	cancel()
	if err := <-ran; err != context.Canceled {
		t.Fatalf("Run: %v", err)
	}
	select {
	case sid := <-deleted:
		if sid != "s1" {
			t.Fatalf("the DELETE's session id: %q", sid)
		}
	default:
		t.Fatal("no DELETE reached the server before Run returned")
	}
}

// A response of 40,000 notifications in one burst, to a handler that takes its time with each
// while a timer is due (another request's timeout): every one reaches the handler, and the
// timer fires within the burst. Run fed each 32 KiB body read whole, and the waiting reads all
// at once when a timer fired, past the engine's bounded event queue, which dropped 17,806 of
// them (found by a review of the Go client).
func TestHTTPClientABurstOfNotificationsWaitsForTheHandler(t *testing.T) {
	const n = 40000
	var pingID atomic.Int64
	pingID.Store(-1)
	srv := scriptedLegacyServer(func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		if string(id) == strconv.FormatInt(pingID.Load(), 10) {
			<-r.Context().Done() // never answered: its timeout is the timer
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		line := `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}` + "\n\n"
		io.WriteString(w, strings.Repeat(line, n))
		io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+string(id)+`,"result":{"content":[]}}`+"\n\n")
	})
	defer srv.Close()
	client := legacyHTTPClient(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var call, ping RequestID
	seen, seenAtTimeout, pingTimedOut, answered := 0, 0, false, false
	var stats Stats
	err := client.Run(ctx, HandlerFunc(func(c *Conn, now time.Time, ev Event) {
		switch e := ev.(type) {
		case *ReadyEvent:
			call, _ = c.Request(now, "tools/call", json.RawMessage(`{"name":"chatty"}`), nil)
		case *NotificationEvent:
			seen++
			if seen == 1 {
				// The burst has begun: a request whose timeout falls within it.
				ping, _ = c.Request(now, "ping", nil, &RequestOptions{Timeout: 100 * time.Millisecond})
				pingID.Store(int64(ping))
			}
			if seen%50 == 0 {
				time.Sleep(time.Millisecond) // a handler that writes the lines somewhere
			}
		case *TimedOutEvent:
			if e.Request == ping && !pingTimedOut {
				pingTimedOut, seenAtTimeout = true, seen
			}
		case *ResponseEvent:
			if e.Request == call {
				answered = true
				st, _ := c.Status()
				stats = st.Stats
				c.Shutdown(now, 0)
			}
		}
	}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !answered || !pingTimedOut {
		t.Fatalf("answered %v, ping timed out %v", answered, pingTimedOut)
	}
	if seen != n || stats.DroppedEvents != 0 {
		t.Fatalf("the handler saw %d of %d notifications; %d dropped", seen, n, stats.DroppedEvents)
	}
	if seenAtTimeout > n/2 {
		t.Fatalf("the ping timed out after %d of %d notifications", seenAtTimeout, n)
	}
}
