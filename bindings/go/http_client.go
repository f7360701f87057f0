package mcpwire

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// HTTPClientOptions adjusts an HTTPClient; nil or the zero value means the defaults.
type HTTPClientOptions struct {
	// Client makes the HTTP requests; nil: a client with no overall timeout (SSE streams
	// last as long as their requests) on a transport shared by such clients: a clone of
	// http.DefaultTransport keeping up to 64 idle connections per host, not 2 (each request
	// in flight is a POST of its own; with 2, a burst opened new connections at every turn),
	// each for 4 s at most (common servers close an idle one after 5 s, and a POST that meets
	// that close fails), or DefaultTransport itself (as it is when the client is made) when it is not an
	// *http.Transport. A given Client's Transport decides TLS, proxies and pooling. A
	// redirect fails its request unless the Client's CheckRedirect says otherwise (the
	// session id and the message would follow it to wherever it points).
	Client *http.Client
	// InitialDelay and MaxDelay bound the backoff before resuming a broken SSE stream with
	// Last-Event-ID (the server's retry is a floor); 0 (or negative): 500 ms and 30 s.
	InitialDelay, MaxDelay time.Duration
	// MaxAttempts is how many resumptions a stream gets before its requests fail; 0: 5;
	// negative: no limit (2^32 - 1, the most the engine counts, as is a larger value). The
	// session's GET stream, which carries no request, is then still opened again once per
	// MaxDelay while the session lasts.
	MaxAttempts int
	// OpenGetStream opens the session's standalone GET stream (handshake era), for server
	// messages that belong to no request.
	OpenGetStream bool
}

// backoff is what the engine gets of InitialDelay, MaxDelay (milliseconds) and MaxAttempts:
// 0 for a default delay, negative ones included (they were converted as they were, a delay
// of -1 s to 584 million years), and attempts at most what the engine counts, which is also
// what a negative MaxAttempts (no limit) gets.
func (o *HTTPClientOptions) backoff() (initial, most uint64, attempts uint32) {
	// Rounded up, as every other duration of the package: a positive delay under a
	// millisecond rounded down to 0, which is the engine's default (500 ms, 30 s).
	millis := millisCeil
	attempts = math.MaxUint32
	if o.MaxAttempts >= 0 {
		attempts = uint32(min(uint64(o.MaxAttempts), math.MaxUint32))
	}
	return millis(o.InitialDelay), millis(o.MaxDelay), attempts
}

// HTTPClient is an MCP client over Streamable HTTP: the engine decides which requests to make
// (the era's headers, session ids, resumption) and net/http makes them. Create it with
// NewHTTPClient and drive it with Run, which hands every event to a Handler whose *Conn
// takes the commands (Request, Notify, Respond, Shutdown, ...). It is safe for concurrent
// use: the *Conn from Conn takes commands on any goroutine while Run runs (a request when the
// user asks for one, say), and Run wakes to send them.
type HTTPClient struct {
	// core holds the engine's handle and the lock that orders every call into it: Run's,
	// and its Conn's on other goroutines. The fields from core.ptr to view are used with
	// core.engine held. (The lent Conn reaches the core only, never the client: a cycle
	// through the client would keep its finalizer from ever running.)
	core    *clientCore
	pending *C.mcpwgo_http_pending
	url     string
	http    *http.Client
	origin  time.Time
	grace   time.Duration // Config.ShutdownGrace
	lastNs  uint64
	record  []C.mcpwgo_record
	arena   []byte
	// peeked: an event Run took to see whether taking the actions made one (Run's only).
	peeked Event
	// piece is how much of a body Run feeds at a time (the engine's input piece), handing
	// out the events it made before the next: a chunk of thousands of notifications would
	// overflow the engine's event queue, which drops them (Stats.DroppedEvents).
	piece int
	// held is the rest of a body report not fed yet, while the events its first pieces
	// made wait for the handler (Run's only). Reports behind it wait too.
	held *exchangeResult
	// timerDue: the engine's deadline passed while a body was held; its timers fire once
	// that body went in, and the reports that were waiting behind it then (beforeTimer of
	// them, at most beforeTimerBytes of body) after it, a piece at a time (Run's only): an
	// answer already received is not timed out for the handler's pace, and a stream whose
	// reports keep coming cannot hold the timers off.
	timerDue    bool
	beforeTimer int
	beforeBytes int
	// view is the one Conn lent for the client's connection (the C view is one handle too),
	// cut off when the client is freed, so that a kept one returns ErrFreed.
	view *Conn
	// closedSeen: Run handed out the ClosedEvent; the connection has nothing more to do.
	closedSeen bool
	// unheard are the running POSTs without a response head yet (or with a refusal for
	// now, refusedPost, until they end), and the DELETEs that have not ended, by method
	// (Run's goroutine only): what they carry may not have reached the server (a
	// cancellation, a last notification or answer, the session's end), so after the close
	// they are waited for, and the rest are cut.
	unheard map[uint64]string
	// deleteDue: EndSession queued a DELETE that has not been started yet. The engine holds
	// it back until the POSTs sent before it have their response heads, so that it cannot
	// overtake a cancellation; settle waits for those heads meanwhile.
	deleteDue bool
	// transportErr is why the last exchange failed below HTTP (see TransportError).
	transportErr string
	// inflight counts the exchanges' goroutines, which outlive Run for up to two seconds
	// (see settle): Close waits for them.
	inflight sync.WaitGroup

	// mu guards the fields below, which let Close end a Run in progress (from its handler
	// or from another goroutine) without freeing the client under it.
	mu         sync.Mutex
	running    bool
	closeAsked bool
	closing    chan struct{}
}

// clientCore is the part of an HTTPClient its lent Conn shares.
type clientCore struct {
	engine sync.Mutex
	ptr    *C.mcpw_http_client
}

// freedCore stands for the engine of an HTTPClient that has none (a zero value, not made by
// NewHTTPClient): every call finds it freed.
var freedCore clientCore

// cr is the client's core, or freedCore for a zero HTTPClient.
func (c *HTTPClient) cr() *clientCore {
	if c.core == nil {
		return &freedCore
	}
	return c.core
}

// idleConnTimeout is how long the shared transport keeps an idle connection: less than the
// 5 s after which common MCP servers close one.
const idleConnTimeout = 4 * time.Second

// shared is the transport of HTTPClients given no Client: a clone of http.DefaultTransport
// with a larger idle pool per host, made again when DefaultTransport is replaced by another
// *http.Transport.
var shared struct {
	sync.Mutex
	base, clone *http.Transport
}

// sharedTransport is shared's transport, or http.DefaultTransport itself when it was
// replaced by a RoundTripper of another kind (a wrapper that instruments it, a test double):
// its pool is its own business.
func sharedTransport() http.RoundTripper {
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	shared.Lock()
	defer shared.Unlock()
	if shared.base != base {
		shared.base, shared.clone = base, base.Clone()
		shared.clone.MaxIdleConnsPerHost = 64
		// Closed by us before the server closes it: Node's and uvicorn's servers (the
		// TypeScript and Python SDKs) close an idle connection after 5 s, and a POST sent on
		// one just as the server closes it fails (net/http does not send a POST again).
		shared.clone.IdleConnTimeout = idleConnTimeout
	}
	return shared.clone
}

// NewHTTPClient creates a client for the MCP endpoint url (cfg's Role must be Client; its
// ClientEra decides between the 2026-07-28 probe and initialize). Close it when done.
func NewHTTPClient(cfg *Config, endpoint string, opts *HTTPClientOptions) (*HTTPClient, error) {
	if opts == nil {
		opts = &HTTPClientOptions{}
	}
	if u, err := url.Parse(endpoint); err != nil {
		return nil, fmt.Errorf("mcpwire: the endpoint URL: %w", err)
	} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("mcpwire: the endpoint URL %q is not an absolute http or https URL", endpoint)
	}
	config, err := cfg.build()
	if err != nil {
		return nil, err
	}
	defer C.mcpw_config_free(config)
	initial, most, attempts := opts.backoff()
	made := C.mcpwgo_http_client_create(config, 0, C.uint64_t(initial), C.uint64_t(most),
		C.uint32_t(attempts), boolInt(opts.OpenGetStream))
	if err := check("new http client", made.rc); err != nil {
		return nil, err
	}
	// Redirects are not followed unless the given Client says how: following one would
	// carry the session id and the message to wherever the server points (another host,
	// say), and a 404 there would end the session. A redirect fails its request instead.
	var hc *http.Client
	if opts.Client != nil {
		copied := *opts.Client
		hc = &copied
	} else {
		hc = &http.Client{Transport: sharedTransport()}
	}
	if hc.CheckRedirect == nil {
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	var piece C.size_t
	if C.mcpw_conn_input_piece(C.mcpwgo_http_client_view(made.client).conn, &piece) != C.MCPW_OK || piece == 0 {
		piece = defaultInputPiece // (cannot fail on a new client)
	}
	now := time.Now()
	c := &HTTPClient{
		core:    &clientCore{ptr: made.client},
		piece:   int(piece),
		pending: (*C.mcpwgo_http_pending)(C.calloc(1, C.size_t(unsafe.Sizeof(C.mcpwgo_http_pending{})))),
		url:     endpoint,
		http:    hc,
		origin:  now,
		grace:   cfg.shutdownGrace(),
		record:  make([]C.mcpwgo_record, 1),
		arena:   make([]byte, eventArena),
	}
	runtime.SetFinalizer(c, (*HTTPClient).release)
	return c, nil
}

// Close frees the client. While Run runs (Close from its handler, or from another
// goroutine), the connection closes at once (a Shutdown's grace, or Run's own after its
// context ended, ends there): each request still unanswered is cancelled. Run sends what
// the engine then holds (those cancellations, an answer or notification just given), waits
// up to two seconds for it to reach the server, then returns ErrFreed and frees the client
// on its way out. Otherwise Close itself waits, up to two seconds, for the POSTs still on
// their way when Run returned (the cancellations of a Shutdown, a last notification or
// answer) to reach the server. Either way a program that
// exits once both have returned loses nothing it sent, with one exception: a Close given
// while Run is settling after the connection closed (waiting for the session's DELETE, or
// for POSTs the server refused for now) ends that wait, and what Run had already let go on
// alone (the DELETE, POSTs without a response head) gets up to two seconds; a program that
// exits at once may cut it before it reached the server. To be sure, let Run return by
// itself after the close (and EndSession) before calling Close. Calling it again does
// nothing.
func (c *HTTPClient) Close() error {
	if c.release() {
		done := make(chan struct{})
		go func() {
			c.inflight.Wait()
			close(done)
		}()
		// (Each ends within two seconds of Run's return; the bound is a second guard.)
		limit := time.NewTimer(3 * time.Second)
		defer limit.Stop()
		select {
		case <-done:
		case <-limit.C:
		}
	}
	return nil
}

// release is Close without the wait (the finalizer's): it reports whether Run was not
// running, so that the exchanges that outlived it may be waited for.
func (c *HTTPClient) release() (idle bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cr().ptr == nil {
		return false
	}
	if c.running {
		// Run frees the client on its way out (it may be this goroutine's caller).
		if !c.closeAsked {
			c.closeAsked = true
			close(c.closing)
		}
		return false
	}
	c.freeLocked()
	return true
}

func (c *HTTPClient) freeLocked() {
	c.cr().engine.Lock()
	defer c.cr().engine.Unlock()
	C.mcpw_http_client_free(c.cr().ptr)
	C.free(unsafe.Pointer(c.pending))
	c.cr().ptr, c.pending = nil, nil
	if c.view != nil {
		c.view.cut.Store(true) // a kept view returns ErrFreed
	}
	runtime.SetFinalizer(c, nil)
}

// closeRequested reports whether Close was called while Run runs.
func (c *HTTPClient) closeRequested() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeAsked
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func (c *HTTPClient) ns(now time.Time) C.uint64_t {
	if d := now.Sub(c.origin); d > 0 && uint64(d) > c.lastNs {
		c.lastNs = uint64(d)
	}
	return C.uint64_t(c.lastNs)
}

// Conn is the client's connection, for commands from any goroutine: before Run, from Run's
// handler, or from elsewhere while Run runs (Run then wakes to send what they queued). It is
// the same *Conn every time, usable until the client is closed (then ErrFreed). Requests
// are refused with ErrNotInitialized until the handshake is done (the ReadyEvent).
func (c *HTTPClient) Conn() *Conn {
	c.cr().engine.Lock()
	defer c.cr().engine.Unlock()
	return c.viewLocked()
}

func (c *HTTPClient) viewLocked() *Conn {
	if c.view == nil {
		core := c.cr()
		c.view = &Conn{view: true, origin: c.origin, outer: &core.engine, grace: c.grace}
		// Every call lends the engine's view again, under the lock: the view a call on the
		// client ended is never used.
		c.view.relend = func() *C.mcpw_conn {
			if core.ptr == nil {
				return nil
			}
			return C.mcpwgo_http_client_view(core.ptr).conn
		}
	}
	return c.view
}

// SessionID is the handshake-era session id, once the server gave one (an id that is not all
// visible ASCII is never taken).
func (c *HTTPClient) SessionID() string {
	return c.text(func(p *C.mcpw_http_client, s *C.mcpw_str) C.mcpw_result {
		return C.mcpw_result(C.mcpw_http_client_session_id(p, s))
	})
}

// text copies out a string the engine lends through get ("" when it has none).
func (c *HTTPClient) text(get func(*C.mcpw_http_client, *C.mcpw_str) C.mcpw_result) string {
	c.cr().engine.Lock()
	defer c.cr().engine.Unlock()
	if c.cr().ptr == nil {
		return ""
	}
	var s C.mcpw_str
	if get(c.cr().ptr, &s) != C.MCPW_OK || s.ptr == nil {
		return ""
	}
	return goText(unsafe.Pointer(s.ptr), uint(s.len))
}

// FailureText is the start of the last error response whose body held no JSON-RPC answer
// (an HTML page from a proxy, a framework's text): up to 512 bytes, trimmed; "" when none
// came. A request such a response failed reports only its HTTP status (FailedEvent,
// ClosedEvent with CloseTransportFailed); show this next to it when telling a person why,
// quoted (it is the server's text).
func (c *HTTPClient) FailureText() string {
	return c.text(func(p *C.mcpw_http_client, s *C.mcpw_str) C.mcpw_result {
		return C.mcpw_result(C.mcpw_http_client_failure_text(p, s))
	})
}

// TransportError is why the last HTTP exchange failed below HTTP (no connection, a reset, a
// body cut short), in net/http's words; "" until one failed. Such a failure reaches the
// events only as a FailedEvent or a ClosedEvent with CloseTransportFailed that say "the
// connection failed": show this next to it when telling a person why.
func (c *HTTPClient) TransportError() string {
	c.cr().engine.Lock()
	defer c.cr().engine.Unlock()
	return c.transportErr
}

// exchangeResult is what an HTTP exchange's goroutine reports back to Run.
type exchangeResult struct {
	id      uint64
	status  int
	headers http.Header
	head    bool
	body    []byte
	end     bool
	err     error
}

// Run drives the client until its connection closes (after a ClosedEvent; nil), ctx is
// cancelled (a graceful Shutdown with Config.ShutdownGrace, then ctx.Err()) or the client is
// closed (Close, from h or another goroutine: ErrFreed, and the client is freed as Run
// returns). h sees every event and may issue commands on the *Conn it is given (the client's
// Conn, which other goroutines may use too: Run wakes for their commands). A handshake-era
// session is not ended by Run: call EndSession once the connection closed, on the
// ClosedEvent (an EndSession before it ends the session under the requests still running,
// and a Shutdown's cancellations no longer go out). Run on a connection that already closed
// only sends what is left to send (the DELETE of an EndSession called after the close), then
// returns ErrClosed; one Run at a time. When Run returns early (after a panic in h, say),
// what the exchanges had already received goes to the engine, whose events wait for the
// next Run, and the exchanges still open are reported to it as broken, so a later Run
// resumes or fails their requests instead of waiting for answers that cannot come.
//
// A server's messages reach h at h's pace: Run feeds a response body a piece at a time
// (Conn.InputPiece), the next once the events of the last were handed out, and takes no
// more of what the exchanges read meanwhile (they wait once 64 reports, heads, body reads of
// up to 32 KiB and ends, wait for Run). So a burst of thousands of notifications in one
// response slows the server's stream instead of being dropped from the engine's bounded
// event queue.
func (c *HTTPClient) Run(ctx context.Context, h Handler) error {
	if h == nil {
		return errNilHandler
	}
	c.mu.Lock()
	if c.cr().ptr == nil {
		c.mu.Unlock()
		return ErrFreed
	}
	if c.running {
		c.mu.Unlock()
		return errors.New("mcpwire: HTTPClient.Run is already running")
	}
	c.running, c.closing = true, make(chan struct{})
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.running = false
		if c.closeAsked {
			c.freeLocked()
		}
	}()
	// Buffered: the exchanges go on reading while the handler runs, so that an answer that
	// came in time is all here (head, body, end) when the timers are looked at.
	results := make(chan exchangeResult, reportsInFlight)
	// Closed as Run returns: the exchanges that outlive it (see settle) report nothing more.
	gone := make(chan struct{})
	defer close(gone)
	running := map[uint64]context.CancelFunc{}
	defer func() {
		// What the exchanges reported already goes in first, whole (the events wait for
		// the next Run): an answer received in full is delivered, not failed.
		if c.cr().ptr != nil {
			c.feedHeld(running)
			c.takeWaiting(running, results, false)
		}
		c.timerDue = false // (the next Run looks at the deadline afresh)
		c.cr().engine.Lock()
		defer c.cr().engine.Unlock()
		for id, cancel := range running {
			cancel()
			if c.cr().ptr != nil {
				C.mcpw_http_client_handle_error(c.cr().ptr, c.ns(time.Now()), C.uint64_t(id), C.uint32_t(rand.Uint32()))
			}
		}
		clear(c.unheard)
	}()
	if c.closedSeen {
		if _, err := c.startExchanges(ctx, running, results, gone); err != nil {
			return err
		}
		if freed, err := c.settle(ctx, running, results, gone); err != nil {
			return err
		} else if freed {
			return ErrFreed
		}
		return ErrClosed
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	done := ctx.Done()
	shutdown := false
	// The connection, lent to the handler and to other goroutines: a command given on one
	// of those wakes the wait below.
	view := c.Conn()
	wake, alone := view.serveWake()
	if !alone {
		// (One Run at a time is checked above: this is a Serve given the client's Conn, which
		// fails at its first write, since a view has no transport.) Without the channel,
		// commands from other goroutines would never wake Run, and serveDone would take the
		// channel from that Serve.
		return errServing
	}
	defer view.serveDone()
	for {
		// A command given after mark, which the turn below may have missed, is looked at
		// before waiting.
		mark := view.changeMark()
		// Events, with the connection lent to the handler (the engine is not locked while
		// it runs: its commands lock it).
		closed := false
		for {
			ev, ok := c.peeked, c.peeked != nil
			c.peeked = nil
			if !ok {
				c.cr().engine.Lock()
				var err error
				ev, ok, err = c.nextEvent()
				c.cr().engine.Unlock()
				if err != nil {
					return err
				}
			}
			if !ok {
				break
			}
			if _, isClosed := ev.(*ClosedEvent); isClosed {
				closed, c.closedSeen = true, true
			}
			h.HandleEvent(view, time.Now(), ev)
			if c.closeRequested() {
				return c.closeNow(ctx, view, running, results, gone)
			}
		}
		// Actions: start and abort HTTP exchanges.
		failed, err := c.startExchanges(ctx, running, results, gone)
		if err != nil {
			return err
		}
		if closed {
			if freed, err := c.settle(ctx, running, results, gone); err != nil {
				return err
			} else if freed {
				return ErrFreed
			}
			if shutdown {
				return ctx.Err()
			}
			return nil
		}
		if failed {
			continue
		}
		if c.held != nil {
			// The events of the last piece were handed out: the next piece (none for an
			// exchange aborted meanwhile).
			r := *c.held
			c.held = nil
			if _, live := running[r.id]; live {
				c.feedBody(r)
			}
			if c.held == nil && c.timerDue {
				c.takeBeforeTimer(running, results)
			}
			continue
		}
		// Taking the actions can end requests (one given after EndSession fails at once,
		// a close may then finish): their events are handed out before waiting.
		c.cr().engine.Lock()
		ev, ok, err := c.nextEvent()
		c.cr().engine.Unlock()
		if err != nil {
			return err
		}
		if ok {
			c.peeked = ev
			continue
		}
		if !view.beginWait(mark) {
			continue
		}
		var timeout <-chan time.Time
		timer.Stop()
		c.cr().engine.Lock()
		d := C.mcpwgo_http_client_deadline(c.cr().ptr)
		c.cr().engine.Unlock()
		if d.rc == C.MCPW_OK && d.has != 0 {
			timer.Reset(time.Until(deadlineAt(c.origin, uint64(d.at_ns))))
			timeout = timer.C
		}
		select {
		case r := <-results:
			c.take(running, r, true)
		case <-wake:
		case <-timeout:
			// What the exchanges already reported goes in first: an answer that is here is
			// not timed out because the loop came late to it. (At most a channel's worth,
			// so reports that keep coming cannot hold the timers off; and none past a body
			// held back, whose pieces go in first: see timerDue.)
			c.takeWaiting(running, results, true)
			if c.held != nil {
				c.timerDue, c.beforeTimer, c.beforeBytes = true, len(results), beforeTimerBytes
			} else {
				c.fireTimers()
			}
		case <-c.closing:
			return c.closeNow(ctx, view, running, results, gone)
		case <-done:
			done = nil
			shutdown = true
			if err := view.Shutdown(time.Now(), c.grace); errors.Is(err, ErrClosed) {
				// Closed already, and its events were handed out above: nothing will come.
				if freed, err := c.settle(ctx, running, results, gone); err != nil {
					return err
				} else if freed {
					return ErrFreed
				}
				return ctx.Err()
			} else if err != nil {
				return err
			}
		}
	}
}

// startExchanges takes the engine's actions: it starts and aborts HTTP exchanges. failed: an
// exchange failed at once (its events are to be handed out).
func (c *HTTPClient) startExchanges(ctx context.Context, running map[uint64]context.CancelFunc,
	results chan exchangeResult, gone <-chan struct{}) (failed bool, err error) {
	c.cr().engine.Lock()
	defer c.cr().engine.Unlock()
	for {
		got := C.mcpwgo_http_client_poll_action(c.cr().ptr)
		if err := check("poll action", got.rc); err != nil {
			return failed, err
		}
		a := got.action
		if a.kind == C.MCPW_HTTP_ACTION_NONE {
			return failed, nil
		}
		id := uint64(a.exchange)
		if a.kind == C.MCPW_HTTP_ACTION_ABORT {
			if cancel, ok := running[id]; ok {
				cancel()
				delete(running, id)
				delete(c.unheard, id)
			}
			continue
		}
		req, err := c.request(ctx, &a)
		if err != nil {
			c.transportErr = err.Error()
			// The exchange fails at once; its events are handed out next.
			C.mcpw_http_client_handle_error(c.cr().ptr, c.ns(time.Now()), a.exchange, C.uint32_t(rand.Uint32()))
			failed = true
			continue
		}
		// Run's values (a token, a trace) reach the transport, but not its cancellation: the
		// exchanges outlive it (a Shutdown's cancellations go out after it).
		ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		running[id] = cancel
		if req.Method == http.MethodDelete {
			c.deleteDue = false
		}
		if req.Method != http.MethodGet {
			if c.unheard == nil {
				c.unheard = map[uint64]string{}
			}
			c.unheard[id] = req.Method
		}
		c.inflight.Add(1)
		go func() {
			defer c.inflight.Done()
			c.exchange(ectx, id, req.WithContext(ectx), results, gone)
		}()
	}
}

// settle, after the close, lets what may not have reached the server yet get there: the
// DELETE that ends a session is waited for until its end, for up to two seconds. A POST
// without its response head yet (a cancellation, a last notification or answer) goes on
// alone until its head comes, for up to two seconds, Run not waiting: cut at once, its
// request could be lost (a connection closed with unread data is reset). While the engine
// holds a DELETE back for such POSTs, Run waits for their heads instead, then sends it.
// Every other exchange (a GET stream, a request whose answer has begun) is cut at once.
// A Close meanwhile ends the wait only once what is still to go out has gone (a close's
// cancellations, the DELETE behind them, a POST refused for now: what Close promises to
// send); the DELETE then goes on alone for up to two seconds. freed is then true. err: the
// engine failed (a panic poisoned it).
func (c *HTTPClient) settle(ctx context.Context, running map[uint64]context.CancelFunc,
	results chan exchangeResult, gone <-chan struct{}) (freed bool, err error) {
	// (The connection closed: nothing waits for the handler any more.)
	c.feedHeld(running)
	limit := time.NewTimer(2 * time.Second)
	defer limit.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	closing := c.closing
	for {
		// (A DELETE the engine let go meanwhile is sent now; an error means the engine is
		// poisoned: Run returns it, rather than the close's nil, and the exchanges still
		// running are cut.)
		if _, err := c.startExchanges(ctx, running, results, gone); err != nil {
			return freed, err
		}
		deleteDue := c.deleteStillDue()
		for id, cancel := range running {
			switch c.unheard[id] {
			case http.MethodDelete, refusedPost:
			case http.MethodPost:
				if !deleteDue {
					time.AfterFunc(2*time.Second, cancel)
					delete(running, id)
					delete(c.unheard, id)
					// The engine hears no more of it: it must not hold back a DELETE that
					// a later EndSession queues, for a head it will never be told of.
					c.cr().engine.Lock()
					if c.cr().ptr != nil {
						C.mcpw_http_client_handle_error(c.cr().ptr, c.ns(time.Now()), C.uint64_t(id), C.uint32_t(rand.Uint32()))
					}
					c.cr().engine.Unlock()
				}
			default:
				cancel()
				delete(running, id)
			}
		}
		// (A POST the server refused for now waits in the engine to go again, and the
		// DELETE behind it: the engine's timer sends them.)
		if len(running) == 0 && !deleteDue && !c.engineUnheard() {
			return freed, nil
		}
		if freed && !deleteDue && !c.engineUnheard() && onlyDeletes(running, c.unheard) {
			// Closed, and all that is left is the DELETE: not waited for, but not cut
			// either (it may not have reached the server yet). It goes on alone for up to
			// two seconds, as a POST let go does.
			for id, cancel := range running {
				time.AfterFunc(2*time.Second, cancel)
				delete(running, id)
				delete(c.unheard, id)
			}
			return true, nil
		}
		select {
		case r := <-results:
			c.take(running, r, false)
		case <-c.armEngineTimer(timer):
			c.takeWaiting(running, results, false)
			c.fireTimers()
		case <-limit.C:
			return freed, nil
		case <-closing:
			// (Within the same two seconds: Close bounds the wait no further.)
			freed = true
			closing = nil
		}
	}
}

// onlyDeletes says whether every exchange still running is a DELETE already sent.
func onlyDeletes(running map[uint64]context.CancelFunc, unheard map[uint64]string) bool {
	for id := range running {
		if unheard[id] != http.MethodDelete {
			return false
		}
	}
	return true
}

// deleteStillDue says, for settle and closeNow, whether a DELETE that EndSession queued is
// still to go out: the engine drops one it held back when the session turns out to be gone
// (a 404 to the POSTs it waited for), and then never sends it.
func (c *HTTPClient) deleteStillDue() bool {
	c.cr().engine.Lock()
	defer c.cr().engine.Unlock()
	var ending C.bool
	if c.deleteDue && (c.cr().ptr == nil ||
		C.mcpw_http_client_is_ending_session(c.cr().ptr, &ending) != C.MCPW_OK || !bool(ending)) {
		c.deleteDue = false
	}
	return c.deleteDue
}

// engineUnheard says, for settle and closeNow, whether the engine has a notification or
// answer that has not reached the server: sent without a response head, refused for now and
// waiting to go again, or held while messages wait for the GET stream's head.
func (c *HTTPClient) engineUnheard() bool {
	c.cr().engine.Lock()
	defer c.cr().engine.Unlock()
	var unheard C.bool
	return c.cr().ptr != nil && C.mcpw_http_client_has_unheard(c.cr().ptr, &unheard) == C.MCPW_OK && bool(unheard)
}

// armEngineTimer sets t to the engine's next deadline and returns its channel; nil (a case
// that never fires) without one.
func (c *HTTPClient) armEngineTimer(t *time.Timer) <-chan time.Time {
	t.Stop()
	c.cr().engine.Lock()
	if c.cr().ptr == nil {
		c.cr().engine.Unlock()
		return nil
	}
	d := C.mcpwgo_http_client_deadline(c.cr().ptr)
	c.cr().engine.Unlock()
	if d.rc != C.MCPW_OK || d.has == 0 {
		return nil
	}
	t.Reset(time.Until(deadlineAt(c.origin, uint64(d.at_ns))))
	return t.C
}

// fireTimers hands the engine the time, for the deadline armEngineTimer set.
func (c *HTTPClient) fireTimers() {
	c.cr().engine.Lock()
	defer c.cr().engine.Unlock()
	if c.cr().ptr != nil {
		C.mcpw_http_client_handle_timeout(c.cr().ptr, c.ns(time.Now()))
	}
}

// closeNow ends Run for a Close given while it ran (from its handler, say on the
// ClosedEvent, or from another goroutine), which frees the client as Run returns. The
// connection closes now, with no grace (ending at once a shutdown's grace still running):
// the server is sent a cancellation for each request still unanswered, which would otherwise
// be cut without a word while the server went on working on it. What the engine holds (those
// cancellations, an answer or a notification just given) goes out first, and Run waits, up
// to two seconds, for the response heads of those POSTs and for a DELETE to end, as Close
// does when Run is not running: a program that exits once Run returned loses nothing it sent
// (but a DELETE Run was still waiting for when Close came: see Close). Every other exchange
// is cut then. It returns ErrFreed.
func (c *HTTPClient) closeNow(ctx context.Context, view *Conn, running map[uint64]context.CancelFunc,
	results chan exchangeResult, gone <-chan struct{}) error {
	// (ErrClosed when it closed already: nothing to cancel then.)
	_ = view.Shutdown(time.Now(), 0)
	c.feedHeld(running)
	limit := time.NewTimer(2 * time.Second)
	defer limit.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if _, err := c.startExchanges(ctx, running, results, gone); err != nil {
			return ErrFreed
		}
		// The engine knows which messages have not reached the server (a request's POST
		// has its answer to wait for, not a head).
		deleting := false
		for id := range running {
			deleting = deleting || c.unheard[id] == http.MethodDelete
		}
		if !c.engineUnheard() && !deleting && !c.deleteStillDue() {
			return ErrFreed // (Run's return cuts the rest)
		}
		select {
		case r := <-results:
			c.take(running, r, false)
		case <-c.armEngineTimer(timer):
			c.takeWaiting(running, results, false)
			c.fireTimers()
		case <-limit.C:
			return ErrFreed
		}
	}
}

// take feeds what an exchange reported to the engine, and forgets an exchange that ended
// (and a POST's unheard mark once its head came). A report of an aborted exchange is dropped.
// pieces: a body goes in a piece at a time, the rest held (see HTTPClient.held).
func (c *HTTPClient) take(running map[uint64]context.CancelFunc, r exchangeResult, pieces bool) {
	if _, live := running[r.id]; !live {
		return
	}
	if pieces && r.body != nil {
		c.feedBody(r)
		return
	}
	c.feed(r)
	if r.end || r.err != nil {
		delete(running, r.id)
		delete(c.unheard, r.id)
	} else if r.head && c.unheard[r.id] == http.MethodPost {
		if r.status == http.StatusTooManyRequests || r.status == http.StatusServiceUnavailable {
			// Refused for now: its end tells the engine whether to send it again (after its
			// Retry-After), so settle lets it end instead of cutting it.
			c.unheard[r.id] = refusedPost
		} else {
			delete(c.unheard, r.id)
		}
	}
}

// reportsInFlight is how many exchange reports (heads, body pieces, ends) may wait for Run.
const reportsInFlight = 64

// takeWaiting takes the reports already waiting in results, at most its capacity, and
// none past a body held back (pieces).
func (c *HTTPClient) takeWaiting(running map[uint64]context.CancelFunc, results chan exchangeResult, pieces bool) {
	for range cap(results) {
		if c.held != nil {
			return
		}
		select {
		case r := <-results:
			c.take(running, r, pieces)
		default:
			return
		}
	}
}

// beforeTimerBytes bounds the body Run takes in, at the handler's pace, between an engine
// deadline and its timers (see HTTPClient.timerDue).
const beforeTimerBytes = 256 << 10

// takeBeforeTimer, for Run, takes the reports that were waiting when the engine's deadline
// passed behind a held body (within beforeTimerBytes of body; a piece at a time: it returns
// when a body is held, for its events to be handed out), then fires the engine's timers.
func (c *HTTPClient) takeBeforeTimer(running map[uint64]context.CancelFunc, results chan exchangeResult) {
	for c.beforeTimer > 0 && c.beforeBytes > 0 && c.held == nil {
		select {
		case r := <-results:
			c.beforeTimer--
			c.beforeBytes -= len(r.body)
			c.take(running, r, true)
		default:
			c.beforeTimer = 0
		}
	}
	if c.held != nil {
		return
	}
	c.timerDue = false
	c.fireTimers()
}

// feedBody feeds the first piece of a body report and holds the rest (HTTPClient.held).
func (c *HTTPClient) feedBody(r exchangeResult) {
	n := min(c.piece, len(r.body))
	c.feed(exchangeResult{id: r.id, body: r.body[:n]})
	if n < len(r.body) {
		r.body = r.body[n:]
		c.held = &r
	}
}

// feedHeld feeds the body held back whole, where no handler is to wait for (after the
// close, as Run returns); dropped when its exchange was aborted meanwhile.
func (c *HTTPClient) feedHeld(running map[uint64]context.CancelFunc) {
	if r := c.held; r != nil {
		c.held = nil
		c.take(running, *r, false)
	}
}

// refusedPost marks, in HTTPClient.unheard, a POST whose head was a refusal for now (429 or
// 503): what it carries has not reached the server.
const refusedPost = "POST refused"

// EndSession queues a DELETE that ends the handshake-era session at the server (drained by
// Run: call it from the handler, or call Run again after it); false without a session. The
// DELETE goes out once the cancellations and notifications sent before it have reached the
// server, so that it cannot overtake them. Called while initialize has no answer yet, it
// returns true and the DELETE goes out once that answer brings the session id. Called before
// any initialize went out (the auto era's server/discover probe under way, or Run not yet
// begun), it returns false and no session starts: the initialize made later fails unsent and
// the connection closes (CloseTransportFailed), unless the server answers the probe in the
// 2026-07-28 era, which has no sessions.
func (c *HTTPClient) EndSession() bool {
	c.cr().engine.Lock()
	if c.cr().ptr == nil {
		c.cr().engine.Unlock()
		return false
	}
	var queued, ending C.bool
	C.mcpw_http_client_end_session(c.cr().ptr, &queued)
	// (Owed to the session an unanswered initialize is about to make: not queued yet.)
	C.mcpw_http_client_is_ending_session(c.cr().ptr, &ending)
	due := bool(queued) || bool(ending)
	if due {
		c.deleteDue = true
	}
	// A command like the Conn's: Run, waiting on another goroutine, wakes to send it.
	c.viewLocked().unlockChanged()
	return due
}

func (c *HTTPClient) nextEvent() (Event, bool, error) {
	for {
		p := C.mcpwgo_http_client_poll_event(c.cr().ptr, c.pending, &c.record[0],
			(*C.uint8_t)(unsafe.Pointer(&c.arena[0])), C.size_t(len(c.arena)))
		if err := check("poll event", p.rc); err != nil {
			return nil, false, err
		}
		if p.empty != 0 {
			return nil, false, nil
		}
		if p.need > 0 {
			c.arena = make([]byte, int(p.need))
			continue
		}
		t := recordText{arena: c.arena[:int(p.used)]}
		ev := t.event(&c.record[0])
		c.arena = trimArena(c.arena, eventArena)
		return ev, true, nil
	}
}

// request builds the HTTP request of a SEND action (copying its views).
func (c *HTTPClient) request(ctx context.Context, a *C.mcpw_http_action) (*http.Request, error) {
	method := goText(unsafe.Pointer(a.method.ptr), uint(a.method.len))
	var body io.Reader
	if a.body_len > 0 {
		body = bytes.NewReader(goBytes(unsafe.Pointer(a.body), uint(a.body_len)))
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url, body)
	if err != nil {
		return nil, err
	}
	if a.headers_len > 0 {
		for _, h := range unsafe.Slice(a.headers, int(a.headers_len)) {
			req.Header.Add(goText(unsafe.Pointer(h.name.ptr), uint(h.name.len)), goText(unsafe.Pointer(h.value.ptr), uint(h.value.len)))
		}
	}
	return req, nil
}

// exchange makes one HTTP request and reports its head, body pieces and end to Run. A send
// blocks while reportsInFlight reports wait for Run (backpressure), or until the exchange is
// aborted.
func (c *HTTPClient) exchange(ctx context.Context, id uint64, req *http.Request, out chan<- exchangeResult,
	gone <-chan struct{}) {
	report := func(r exchangeResult) bool {
		r.id = id
		select {
		case out <- r:
			return true
		case <-ctx.Done():
			return false
		case <-gone:
			return false
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		report(exchangeResult{err: err})
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 {
		// A final 1xx is no answer: reported as the status it is (the engine fails the
		// exchange with it, and does not ask again for a GET stream so refused, as it would
		// after a broken connection), and the body is not read. After 101 Switching
		// Protocols net/http hands over the raw connection as the body, no longer tied to
		// the request's context: a server that keeps it open would hold this goroutine, and
		// Close, for good.
		report(exchangeResult{head: true, status: resp.StatusCode})
		return
	}
	// Cutting the exchange closes the body, whatever the transport does with the context.
	defer context.AfterFunc(ctx, func() { _ = resp.Body.Close() })()
	if !report(exchangeResult{head: true, status: resp.StatusCode, headers: resp.Header}) {
		return
	}
	buf := make([]byte, 32*1024)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 && !report(exchangeResult{body: append([]byte(nil), buf[:n]...)}) {
			return
		}
		if err == io.EOF {
			report(exchangeResult{end: true})
			return
		}
		if err != nil {
			report(exchangeResult{err: err})
			return
		}
	}
}

// engineReads says whether the engine reads the response header name (net/http's canonical
// form): Content-Type, Retry-After and Mcp-Session-Id, each by its first value.
func engineReads(name string) bool {
	return name == "Content-Type" || name == "Retry-After" || name == "Mcp-Session-Id"
}

// feed hands one exchange report to the engine. The calls' results are not checked: with a
// live client they fail only once a panic in the engine poisoned it, and then Run's next poll
// returns that error.
func (c *HTTPClient) feed(r exchangeResult) {
	c.cr().engine.Lock()
	defer c.cr().engine.Unlock()
	now := c.ns(time.Now())
	ex := C.uint64_t(r.id)
	switch {
	case r.err != nil:
		// (Canceled: an exchange the client cut itself, which the engine no longer awaits.)
		if !errors.Is(r.err, context.Canceled) {
			c.transportErr = r.err.Error()
		}
		C.mcpw_http_client_handle_error(c.cr().ptr, now, ex, C.uint32_t(rand.Uint32()))
	case r.head:
		var joined []byte
		lens := make([]C.size_t, 0, 8)
		count := 0
		for name, values := range r.headers {
			// Only the first value of the headers the engine reads: a head of millions of
			// lines (net/http allows 10 MiB) is not copied three times over on its way.
			if !engineReads(name) || len(values) == 0 {
				continue
			}
			joined = append(joined, name...)
			joined = append(joined, values[0]...)
			lens = append(lens, C.size_t(len(name)), C.size_t(len(values[0])))
			count++
		}
		lens = append(lens, 0, 0) // never empty: its address is passed
		C.mcpwgo_http_client_response(c.cr().ptr, now, ex, C.uint16_t(r.status), cBytes(joined), &lens[0], C.size_t(count))
		runtime.KeepAlive(joined)
		runtime.KeepAlive(lens)
	case r.end:
		C.mcpw_http_client_handle_end(c.cr().ptr, now, ex, C.uint32_t(rand.Uint32()))
	default:
		C.mcpw_http_client_handle_body(c.cr().ptr, now, ex, (*C.uint8_t)(bytesPtr(r.body)), C.size_t(len(r.body)))
		runtime.KeepAlive(r.body)
	}
}
