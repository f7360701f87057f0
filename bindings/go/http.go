package mcpwire

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"math/bits"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
	"weak"
)

// ConnKey names one connection of an HTTPServer: a handshake-era session, or one stateless
// 2026-07-28 request. Keep it to answer later with HTTPServer.With.
type ConnKey uint64

// HTTPApp is the MCP application behind an HTTPServer. HandleMCP sees every event of every
// connection; answer requests through c (Respond, RespondError, Progress, Log, ...), now or
// later through HTTPServer.With. It runs with the server locked: do not block in it (start a
// goroutine for slow work), do not call the server's methods from it (they would wait for
// the lock it holds, for good: call them from another goroutine), and do not keep c
// after it returns (a kept one returns ErrFreed). A panic in it is recovered as net/http
// recovers a handler's: logged with its stack (HTTPOptions.ErrorLog), the request answered
// with an internal error if it was not answered yet, and the server serves on.
type HTTPApp interface {
	HandleMCP(c *Conn, key ConnKey, ev Event)
}

// HTTPAppFunc adapts a function to HTTPApp.
type HTTPAppFunc func(c *Conn, key ConnKey, ev Event)

// HandleMCP calls f.
func (f HTTPAppFunc) HandleMCP(c *Conn, key ConnKey, ev Event) { f(c, key, ev) }

// HTTPOptions adjusts an HTTPServer; nil or the zero value means the defaults, and so does
// a zero (or negative) field, except KeepAlive, where negative means never, and MinBodyRate,
// where negative means no minimum. The engine counts SessionIdleTimeout, Retry and KeepAlive
// in whole milliseconds, rounded up.
type HTTPOptions struct {
	// SessionIdleTimeout expires a session without requests or open streams; 0: 10 minutes.
	SessionIdleTimeout time.Duration
	// MaxSessions bounds live sessions (the least recently used idle one is evicted beyond);
	// 0: 1024.
	MaxSessions int
	// MaxBody is the largest POST body accepted (413 beyond); 0: 4 MiB. Past math.MaxInt/4
	// (math.MaxInt for none, say) it is math.MaxInt/4.
	MaxBody int
	// MaxBodyTotal bounds the memory that the request bodies being read take together,
	// beyond the 64 KiB buffer each request may reuse: a body that would go past it gets 503
	// with Retry-After: 1 (the rest read and dropped, as for a 413), where otherwise as many
	// clients as the server has connections could each hold MaxBody at once. At least
	// MaxBody (a little more, so that one body fits alone); 0: 64 MiB.
	MaxBodyTotal int
	// BodyTimeout bounds how long a client may take to send a request's body once its
	// headers are in (408 beyond), even one that keeps up MinBodyRate, whatever your
	// http.Server sets; 0: 30 s. Raise it for large bodies over slow links. Neither it nor
	// http.Server.ReadTimeout cuts the SSE stream that follows: the read
	// deadline is lifted once the body is read. Set ReadHeaderTimeout and IdleTimeout on your
	// http.Server too; not WriteTimeout, which would cut streams.
	BodyTimeout time.Duration
	// MinBodyRate is the average rate, in bytes per second, at which a request's body must
	// keep arriving once BodyRateGrace has passed, counted from when the server starts
	// reading it (408 below it); 0: 240, as ASP.NET Core's Kestrel; negative: no minimum.
	// Without it a client that trickles its body holds its request, a goroutine and its
	// connection for the whole BodyTimeout, and as many such clients as a connection cap
	// lock everyone else out; with it, for little more than the grace. Lower it (or turn it
	// off) only for clients on links slower than that.
	MinBodyRate int
	// BodyRateGrace is how long a body may arrive more slowly than MinBodyRate at first (a
	// slow start, a client that makes its body as it sends it); 0: 5 s. Raise it for such
	// clients; BodyTimeout bounds the body all the same.
	BodyRateGrace time.Duration
	// SendTimeout bounds how long a write of an answer or of an SSE stream may make no
	// progress (the client stopped reading): past it the connection is closed (over HTTP/2,
	// only that stream is reset), and what it
	// held is freed (a stream's client resumes with Last-Event-ID). Answers and streams
	// are written at most 256 KiB at a time, and each write gets the whole timeout, so a
	// long answer or stream whose client reads that much per SendTimeout is never cut. It
	// applies to streams and to every answer (small ones too: many pipelined ones fill the
	// socket's buffers); 0: 30 s.
	SendTimeout time.Duration
	// EventsPerSession bounds the events kept for Last-Event-ID resumption, and the
	// messages waiting for a session's GET stream while none is open; 0: 256.
	EventsPerSession int
	// EventBytesPerSession bounds the bytes of those events, and of those waiting messages:
	// the oldest go, the newest always stays. Lower it to bound memory per session; 0: 4 MiB.
	EventBytesPerSession int
	// Retry is the reconnection delay sent to 2025-11-25 clients; 0: 1 s.
	Retry time.Duration
	// KeepAlive is how often an SSE stream with nothing to send gets a comment line, so
	// that proxies and idle timeouts do not cut a quiet stream (a GET or listen stream);
	// 0: 15 s; negative: never. The comments also find a client that went away: without
	// them, an HTTP/1 client that sent a byte more after its request (a pipelined one) and
	// then left is not noticed (net/http stops watching the connection at that byte), and
	// its quiet stream, session and goroutine stay until it is closed.
	KeepAlive time.Duration
	// AllowedHosts are host names (with or without a port) accepted in Host and Origin
	// besides loopback; any other gets 403 (DNS rebinding protection).
	AllowedHosts []string
	// Tools declares the server's tools (a tools/list result or its tools array), so that
	// 2026-07-28 tools/call requests are checked against their x-mcp-header annotations.
	// NewHTTPServer returns ErrConfigRefused when a tool's annotations are invalid (clients
	// drop such a tool: fix its schema).
	Tools json.RawMessage
	// ErrorLog receives a panic of the app, with its stack, and the warning that a
	// middleware's http.ResponseWriter cannot flush SSE streams; nil: the log package's
	// standard logger, as net/http does for a handler's panic.
	ErrorLog *log.Logger
}

// HTTPServer serves MCP over Streamable HTTP as an http.Handler: handshake-era sessions
// (Mcp-Session-Id, SSE streams, Last-Event-ID resumption, DELETE) and stateless 2026-07-28
// requests on one endpoint. Mount it at your MCP path (http.Handle("/mcp", srv)). It is safe
// for concurrent use; the engine behind it runs under one lock. A middleware that wraps the
// http.ResponseWriter should give its wrapper an Unwrap method (http.ResponseController
// follows it): without Unwrap or Flush, SSE events wait in net/http's buffer and GET streams
// get 405; without Unwrap, no deadline can be set, so BodyTimeout, MinBodyRate and
// SendTimeout cannot cut off slow clients. ErrorLog says so once for each.
type HTTPServer struct {
	mu       sync.Mutex
	ptr      *C.mcpw_http_server
	pending  *C.mcpwgo_http_pending // C memory: an event polled but not yet copied out
	origin   time.Time
	lastNs   uint64
	app      HTTPApp
	maxBody  int
	maxTotal int64         // HTTPOptions.MaxBodyTotal
	bodies   atomic.Int64  // the bytes taken by the bodies being read (maxTotal at most)
	bodyTime time.Duration // HTTPOptions.BodyTimeout
	minRate  int           // HTTPOptions.MinBodyRate (bytes per second; 0: no minimum)
	grace    time.Duration // HTTPOptions.BodyRateGrace
	sendTime time.Duration // HTTPOptions.SendTimeout
	errorLog *log.Logger   // HTTPOptions.ErrorLog
	broken   error         // why the engine fails every call (a panic inside it), once known
	// allow is what a 405 says the endpoint takes besides GET: sessions take DELETE too.
	allow     string
	record    []C.mcpwgo_record
	arena     []byte
	lentConns []*Conn // views lent since the last change; cut off at the next
	// The SSE responses waiting for their stream to change, by stream: a channel each,
	// closed when the engine names the stream (mcpw_http_server_poll_woken), so a request
	// wakes the streams it gave bytes to, not every open one.
	parked map[uint64]chan struct{}
	// The deadline (engine nanoseconds) the timers goroutine sleeps until (MaxUint64: none),
	// and how to wake it: only a change that brings a deadline before it does, so requests
	// do not wake it one by one.
	armed  uint64
	rearm  chan struct{}
	done   chan struct{}
	closed bool
	// cleanup frees the engine of a server dropped without Close (stopped by Close).
	cleanup runtime.Cleanup
	// Set once a response could not be flushed (and it was logged): logged once per server.
	noFlush atomic.Bool
	// noDeadline is set once a deadline could not be set (see deadlineSet).
	noDeadline atomic.Bool
}

// NewHTTPServer creates a server for cfg (its Role must be Server; its Versions decide the
// eras served) that hands events to app. Close it when done.
func NewHTTPServer(cfg *Config, opts *HTTPOptions, app HTTPApp) (*HTTPServer, error) {
	if app == nil {
		return nil, errors.New("mcpwire: NewHTTPServer needs an HTTPApp")
	}
	if opts == nil {
		opts = &HTTPOptions{}
	}
	config, err := cfg.build()
	if err != nil {
		return nil, err
	}
	defer C.mcpw_config_free(config)
	var hosts []byte
	lens := make([]C.size_t, 0, len(opts.AllowedHosts)+1)
	for _, h := range opts.AllowedHosts {
		hosts = append(hosts, h...)
		lens = append(lens, C.size_t(len(h)))
	}
	lens = append(lens, 0) // never empty: its address is passed
	// A negative number or duration means the default, as zero does.
	size := func(n int) C.size_t { return C.size_t(max(n, 0)) }
	// Rounded up to whole milliseconds: a positive duration under one is not the default.
	ms := func(d time.Duration) C.uint64_t {
		if d <= 0 {
			return 0
		}
		return C.uint64_t((d-1)/time.Millisecond + 1)
	}
	keepalive := ms(opts.KeepAlive)
	if opts.KeepAlive < 0 {
		keepalive = C.uint64_t(math.MaxUint64)
	}
	made := C.mcpwgo_http_server_new(config, ms(opts.SessionIdleTimeout),
		size(opts.MaxSessions), size(opts.MaxBody), size(opts.EventsPerSession),
		size(opts.EventBytesPerSession), ms(opts.Retry), keepalive, cBytes(hosts), &lens[0],
		C.size_t(len(opts.AllowedHosts)), cBytes(opts.Tools), C.size_t(len(opts.Tools)))
	runtime.KeepAlive(hosts)
	runtime.KeepAlive(lens)
	if err := check("new http server", made.rc); err != nil {
		return nil, toolsRefused("new http server", err, opts.Tools)
	}
	maxBody := opts.MaxBody
	if maxBody <= 0 {
		maxBody = 4 << 20
	}
	// "No limit" (math.MaxInt, say) is a quarter of it, which no body reaches: the bounds
	// worked out from MaxBody (the buffer's growth, MaxBodyTotal, the discard limit) wrapped
	// past it, and a body's buffer grew 512 bytes at a time.
	maxBody = min(maxBody, math.MaxInt/4)
	maxTotal := opts.MaxBodyTotal
	if maxTotal <= 0 {
		maxTotal = 64 << 20
	}
	// (One body's buffer may reach MaxBody+1 and one read's room more: it must fit alone.)
	maxTotal = max(maxTotal, maxBody+1+bytes.MinRead)
	bodyTime := opts.BodyTimeout
	if bodyTime <= 0 {
		bodyTime = 30 * time.Second
	}
	minRate := opts.MinBodyRate
	if minRate == 0 {
		minRate = 240
	} else if minRate < 0 {
		minRate = 0 // none
	}
	grace := opts.BodyRateGrace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	sendTime := opts.SendTimeout
	if sendTime <= 0 {
		sendTime = 30 * time.Second
	}
	// Versions are dates: those of the handshake era (sessions, which DELETE ends) all come
	// before the stateless era's first.
	allow := "POST"
	if cfg.Versions == nil || slices.ContainsFunc(cfg.Versions, func(v string) bool { return v < "2026-07-28" }) {
		allow = "POST, DELETE"
	}
	s := &HTTPServer{
		allow:    allow,
		bodyTime: bodyTime,
		minRate:  minRate,
		grace:    grace,
		sendTime: sendTime,
		ptr:      made.server,
		pending:  (*C.mcpwgo_http_pending)(C.calloc(1, C.size_t(unsafe.Sizeof(C.mcpwgo_http_pending{})))),
		origin:   time.Now(),
		app:      app,
		maxBody:  maxBody,
		maxTotal: int64(maxTotal),
		errorLog: opts.ErrorLog,
		record:   make([]C.mcpwgo_record, 1),
		arena:    make([]byte, eventArena),
		parked:   make(map[uint64]chan struct{}),
		rearm:    make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	// The timers goroutine holds the server weakly between deadlines, so that one dropped
	// without Close is still collected, and its engine freed. (A cleanup, not a finalizer:
	// a finalizer never runs on a cycle, and an app that calls With refers to its server.)
	s.cleanup = runtime.AddCleanup(s, freeDropped, dropped{made.server, s.pending, s.done})
	go runTimers(weak.Make(s), s.done, s.rearm)
	return s, nil
}

// Close frees the engine: open SSE responses end (at once, or, for one whose write is
// blocked on a client that does not read, when HTTPOptions.SendTimeout cuts it) and later
// requests get 503. For a
// graceful end, call EndListenStreams and let http.Server.Shutdown finish the answers in
// flight first. A handshake-era call that waits for the client's answer to a request of ours
// (elicitation, sampling) cannot finish then: that answer would come on a new POST, which
// Shutdown no longer takes; answer such calls yourself (with an error) before it. Calling it
// again does nothing. A server dropped without Close is freed when the garbage collector
// finds it unreachable, but its memory and sessions are held until then: close it.
func (s *HTTPServer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.done == nil { // (a zero HTTPServer has nothing to free)
		s.closed = true
		return nil
	}
	s.closed = true
	close(s.done)
	s.cleanup.Stop()
	for _, c := range s.lentConns { // (before the free: a kept view's call ends first)
		c.endLending()
	}
	s.lentConns = s.lentConns[:0]
	C.mcpw_http_server_free(s.ptr)
	C.free(unsafe.Pointer(s.pending))
	s.ptr, s.pending = nil, nil
	s.notifyLocked()
	return nil
}

// dropped is what the cleanup of a server dropped without Close frees.
type dropped struct {
	ptr     *C.mcpw_http_server
	pending *C.mcpwgo_http_pending
	done    chan struct{}
}

// freeDropped frees the engine of a server that became unreachable without Close (nothing
// can use it any more) and ends its timers goroutine.
func freeDropped(d dropped) {
	close(d.done)
	C.mcpw_http_server_free(d.ptr)
	C.free(unsafe.Pointer(d.pending))
}

// ns is the engine's clock: nanoseconds since NewHTTPServer, never going backwards.
func (s *HTTPServer) ns() C.uint64_t {
	if d := time.Since(s.origin); d > 0 && uint64(d) > s.lastNs {
		s.lastNs = uint64(d)
	}
	return C.uint64_t(s.lastNs)
}

// notifyLocked ends the views lent so far (a kept one then returns ErrFreed instead of
// reaching freed or other memory), wakes the waiting streams that changed, and the timers
// goroutine when a deadline came earlier (s.mu held).
func (s *HTTPServer) notifyLocked() {
	s.wakeLocked()
	s.rearmLocked()
}

// wakeLocked is notifyLocked without the timers' check.
func (s *HTTPServer) wakeLocked() {
	for _, c := range s.lentConns {
		c.endLending()
	}
	s.lentConns = s.lentConns[:0]
	if len(s.parked) > 0 {
		s.wakeStreamsLocked()
	}
}

// wakeStreamsLocked closes the channels of the waiting streams the engine names as changed
// (all of them once the engine is freed or failed for good: they end), and drains the
// engine's list. With no stream waiting the list may be left alone: a stream drains it
// before it waits (s.mu held).
func (s *HTTPServer) wakeStreamsLocked() {
	if s.ptr == nil || s.broken != nil {
		for id, ch := range s.parked {
			close(ch)
			delete(s.parked, id)
		}
		return
	}
	var ids [32]C.uint64_t
	for {
		n := int(C.mcpwgo_http_take_woken(s.ptr, &ids[0], C.size_t(len(ids))))
		for _, id := range ids[:n] {
			if ch, ok := s.parked[uint64(id)]; ok {
				close(ch)
				delete(s.parked, uint64(id))
			}
		}
		if n < len(ids) {
			return
		}
	}
}

// rearmLocked wakes the timers goroutine when the engine's next deadline now comes before
// the one it sleeps until (s.mu held).
func (s *HTTPServer) rearmLocked() {
	if s.ptr == nil {
		return
	}
	s.rearmTo(C.mcpwgo_http_poll_timeout(s.ptr))
}

// rearmTo is rearmLocked with the engine's next deadline d already read.
func (s *HTTPServer) rearmTo(d C.mcpwgo_deadline) {
	if d.rc == C.MCPW_OK && d.has != 0 && uint64(d.at_ns) < s.armed {
		s.armed = uint64(d.at_ns)
		select {
		case s.rearm <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// dispatchLocked hands every pending event to the app (s.mu held).
func (s *HTTPServer) dispatchLocked() {
	for s.ptr != nil && s.take(C.mcpwgo_http_poll_event(s.ptr, s.pending, &s.record[0], s.arenaPtr(), s.arenaCap())) {
	}
}

// take hands the event p polled to the app, and reports whether there was one: false when p
// is empty or failed. When the arena was too small it grows it and reports true (the event
// waits in s.pending for the next poll).
func (s *HTTPServer) take(p C.mcpwgo_http_polled) bool {
	if p.rc != C.MCPW_OK {
		// (A panic inside the engine: Err and the log name it, not only the poisoning that
		// every later call reports.)
		s.noteLocked(check("poll event", p.rc))
		return false
	}
	if p.empty != 0 {
		return false
	}
	if p.need > 0 {
		s.arena = make([]byte, int(p.need))
		return true
	}
	t := recordText{arena: s.arena[:int(p.used)]}
	c := s.lent(p.conn)
	defer c.endLending() // (under a runtime.Goexit in the app too)
	s.handleEvent(c, ConnKey(p.key), t.event(&s.record[0]))
	s.arena = trimArena(s.arena, eventArena)
	return true
}

func (s *HTTPServer) arenaPtr() *C.uint8_t { return (*C.uint8_t)(unsafe.Pointer(&s.arena[0])) }
func (s *HTTPServer) arenaCap() C.size_t   { return C.size_t(len(s.arena)) }

// handleEvent hands ev to the app (s.mu held). A panic in the app stops here, as net/http
// stops a handler's: it goes to the error log with its stack, a request the app left
// unanswered gets an internal error, and the server goes on (the lock is not left held, and
// the other sessions and requests are served). A runtime.Goexit in the app (t.FailNow in a
// test, say) ends the goroutine as it would in net/http, after the same answer; the callers
// release the lock on their way out.
func (s *HTTPServer) handleEvent(c *Conn, key ConnKey, ev Event) {
	returned := false
	defer func() {
		if returned {
			return
		}
		v := recover()                 // nil under runtime.Goexit
		if v != http.ErrAbortHandler { // net/http's way to end a handler without a log
			stack := make([]byte, 64<<10)
			stack = stack[:runtime.Stack(stack, false)]
			what := fmt.Sprintf("panic: %v", v)
			if v == nil {
				what = "runtime.Goexit"
			}
			s.logf("mcpwire: %s in the HTTP app on %s\n%s", what, eventName(ev), stack)
		}
		if req, ok := ev.(*RequestEvent); ok {
			// ErrUnknownRequest when the app answered before it stopped.
			_ = c.RespondError(req.ID, CodeInternalError, "Internal error", nil)
		}
	}()
	s.app.HandleMCP(c, key, ev)
	returned = true
}

// eventName names ev for the error log: its Go type, and a request's method.
func eventName(ev Event) string {
	if req, ok := ev.(*RequestEvent); ok {
		return "request " + req.Method
	}
	return fmt.Sprintf("%T", ev)
}

// lent wraps a connection view the engine lent: a Conn of its own for each callback, cut
// off (endLending) as soon as the callback returns, so one kept by mistake refuses calls
// (ErrFreed) instead of reaching the engine while the server uses it, or another session.
func (s *HTTPServer) lent(ptr *C.mcpw_conn) *Conn {
	c := &Conn{ptr: ptr, view: true, origin: s.origin}
	s.lentConns = append(s.lentConns, c)
	return c
}

// With lends the view of connection key to f, with the server locked: answer a request
// later, report progress, log, or send a request of your own on that session. It returns
// ErrUnknownConnection when the session ended or the stateless request is over, else what f
// returns. Do not keep c after f returns (a kept one returns ErrFreed), and do not call the
// server's methods from f (it runs with the server locked, as HandleMCP: they would wait
// for good). A panic in f goes on to the caller, with the server unlocked and c cut off.
func (s *HTTPServer) With(key ConnKey, f func(c *Conn) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr == nil {
		return ErrFreed
	}
	got := C.mcpwgo_http_server_conn(s.ptr, C.uint64_t(key))
	if err := check("http conn", got.rc); err != nil {
		return err
	}
	defer s.notifyLocked() // also when f panics: its view is cut off before the lock goes
	c := s.lent(got.conn)
	err := f(c)
	c.endLending()
	s.dispatchLocked()
	// What f sent goes onto its streams now (or waits for the session's GET stream, within
	// the backlog's bounds), not whenever the next call into the server moves it.
	s.wakeStreamsLocked()
	return err
}

// CloseStreamForPolling (2025-11-25 sessions, SEP-1699) ends the SSE stream carrying the
// peer's request id on connection key before its answer: the client comes back with
// Last-Event-ID and gets the answer then. It reports whether a stream was closed.
func (s *HTTPServer) CloseStreamForPolling(key ConnKey, id ID) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr == nil {
		return false, ErrFreed
	}
	out := C.mcpwgo_http_close_for_polling(s.ptr, C.uint64_t(key), C.uint32_t(id.kind),
		C.int64_t(id.num), cString(id.wire), C.size_t(len(id.wire)))
	runtime.KeepAlive(id.wire)
	s.notifyLocked()
	return out.closed != 0, check("close stream for polling", out.rc)
}

// EndListenStreams ends every stream that only waits for server messages, gracefully (before
// http.Server.Shutdown, which waits for them): 2026-07-28 subscriptions/listen streams get
// their result, handshake-era sessions' GET streams finish. It reports how many there were.
func (s *HTTPServer) EndListenStreams() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr == nil {
		return 0, ErrFreed
	}
	var n C.size_t
	rc := C.mcpw_http_server_end_listen_streams(s.ptr, &n)
	s.notifyLocked()
	return int(n), check("end listen streams", rc)
}

// AbandonStreams answers every request still awaited on an open stream with an error
// (-32603) on that stream, which then finishes: call it when http.Server.Shutdown's context
// has run out, before Close, so that clients learn at once that no answer will come (a
// stateless request's client cannot resume it, and would wait for its own timeout); give the
// handlers a moment to write those answers (a second, short Shutdown), then Close. It
// returns how many requests it answered.
func (s *HTTPServer) AbandonStreams() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr == nil {
		return 0, ErrFreed
	}
	var n C.size_t
	rc := C.mcpw_http_server_abandon_streams(s.ptr, &n)
	s.notifyLocked()
	return int(n), check("abandon streams", rc)
}

// DeclareTools declares the server's tools anew while it runs (a tools/list result or its
// tools array), as HTTPOptions.Tools does at its start: call it when they change, before
// sending notifications/tools/list_changed, so that 2026-07-28 tools/call requests are
// checked against the x-mcp-header annotations of the tools as they now are. The tools
// declared before are replaced. It fails with ErrConfigRefused when a tool's annotations are
// invalid (clients drop such a tool: fix its schema; the others are declared all the same),
// and with ErrInvalidJSON or ErrJSONWrongType for what is not a tools list (nothing changes).
func (s *HTTPServer) DeclareTools(tools json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr == nil {
		return ErrFreed
	}
	rc := C.mcpw_http_server_declare_tools(s.ptr, cBytes(tools), C.size_t(len(tools)))
	runtime.KeepAlive(tools)
	return toolsRefused("declare tools", check("declare tools", rc), tools)
}

// ToolRefusal is one tool an HTTP server refuses to declare, and why.
type ToolRefusal struct {
	// Name is the tool's name.
	Name string `json:"name"`
	// Reason says in English what is wrong with its x-mcp-header annotations.
	Reason string `json:"reason"`
}

// ToolsRefusedError is the error of NewHTTPServer and DeclareTools when tools are refused:
// errors.Is(err, ErrConfigRefused) holds, and Refused says which tools and why. Use
// errors.As to log them or to tell the user what to fix in the tools' schemas.
type ToolsRefusedError struct {
	// Op is the Go call that failed.
	Op string
	// Refused lists each refused tool, in the order declared.
	Refused []ToolRefusal
}

// Error names the call and each refused tool with its reason.
func (e *ToolsRefusedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mcpwire: %s: %s:", e.Op, CodeConfigRefused.Message())
	for i, r := range e.Refused {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " tool %q: %s", r.Name, r.Reason)
	}
	return b.String()
}

// Unwrap gives the *ResultError with CodeConfigRefused.
func (e *ToolsRefusedError) Unwrap() error {
	return &ResultError{Op: e.Op, Code: CodeConfigRefused}
}

// ToolRefusals says which tools of tools (a tools/list result or its tools array, as JSON) an
// HTTPServer would refuse, and why; none when it would take them all. Use it to check tools
// before declaring them (NewHTTPServer and DeclareTools already return the same list in a
// *ToolsRefusedError). ErrInvalidJSON or ErrJSONWrongType for what is no tools list.
func ToolRefusals(tools json.RawMessage) ([]ToolRefusal, error) {
	var n C.size_t
	rc := C.mcpw_tools_refusals(cBytes(tools), C.size_t(len(tools)), nil, 0, &n)
	if err := check("tool refusals", rc); err != nil {
		runtime.KeepAlive(tools)
		return nil, err
	}
	text := make([]byte, int(n))
	rc = C.mcpw_tools_refusals(cBytes(tools), C.size_t(len(tools)), cBytes(text), n, &n)
	runtime.KeepAlive(tools)
	if err := check("tool refusals", rc); err != nil {
		return nil, err
	}
	var refused []ToolRefusal
	if err := json.Unmarshal(text[:int(n)], &refused); err != nil {
		return nil, fmt.Errorf("mcpwire: tool refusals: %w", err)
	}
	if len(refused) == 0 {
		return nil, nil
	}
	return refused, nil
}

// toolsRefused turns a CodeConfigRefused error caused by tools into a *ToolsRefusedError;
// other errors (and a refusal with another cause, such as a client's config) pass unchanged.
func toolsRefused(op string, err error, tools json.RawMessage) error {
	if !errors.Is(err, ErrConfigRefused) || len(tools) == 0 {
		return err
	}
	refused, listErr := ToolRefusals(tools)
	if listErr != nil || len(refused) == 0 {
		return err
	}
	return &ToolsRefusedError{Op: op, Refused: refused}
}

// Sessions reports how many sessions are alive and how many SSE streams are open: 0 and 0
// once the server is closed or its engine failed (see Err).
func (s *HTTPServer) Sessions() (sessions, streams int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr == nil {
		return 0, 0
	}
	var a, b C.size_t
	if err := check("counts", C.mcpw_http_server_counts(s.ptr, &a, &b)); err != nil {
		s.noteLocked(err)
		return 0, 0
	}
	return int(a), int(b)
}

// runTimers fires the engine's deadlines (request timeouts, session expiry) until the
// server is closed or collected. It holds the server only while it reads the next deadline
// or fires one, never while it sleeps.
func runTimers(ws weak.Pointer[HTTPServer], done, rearm <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait, ok := nextWait(ws)
		if !ok {
			return
		}
		timer.Reset(max(wait, 0))
		select {
		case <-done:
			return
		case <-rearm: // a change brought a deadline before this one
			timer.Stop() // (Go 1.23+ timers: nothing stale is left to drain)
		case <-timer.C:
			s := ws.Value()
			if s == nil {
				return
			}
			s.fireTimers()
		}
	}
}

// nextWait is how long the timers goroutine sleeps until the server's next deadline (an hour
// when it has none), and false once the server is freed or collected.
func nextWait(ws weak.Pointer[HTTPServer]) (time.Duration, bool) {
	s := ws.Value()
	if s == nil {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr == nil {
		return 0, false
	}
	d := C.mcpwgo_http_poll_timeout(s.ptr)
	s.armed = math.MaxUint64
	if d.rc == C.MCPW_OK && d.has != 0 {
		s.armed = uint64(d.at_ns)
		return time.Until(deadlineAt(s.origin, uint64(d.at_ns))), true
	}
	return time.Hour, true
}

// fireTimers runs the engine's due deadlines and hands their events out. When the app calls
// runtime.Goexit in one of them, the lock is released and another goroutine takes over the
// timers as this one ends (a Goexit cannot be stopped, only outlived).
func (s *HTTPServer) fireTimers() {
	finished := false
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		if !finished {
			go runTimers(weak.Make(s), s.done, s.rearm)
		}
	}()
	if s.ptr != nil {
		s.noteLocked(check("handle timeout", C.mcpw_http_server_handle_timeout(s.ptr, s.ns())))
		s.dispatchLocked()
		s.notifyLocked()
	}
	finished = true
}

// answer is a response copied out of the engine into a request's pooled buffers.
type answer struct {
	status  int
	headers [][2]string
	body    []byte
	stream  uint64
	hasBody bool
}

// copyAnswer copies r out of the engine: the headers into bufs.headers (the usual names and
// values interned, not allocated) and the body into bufs.answer.
func copyAnswer(r *C.mcpw_http_response, bufs *requestBuffers) answer {
	a := answer{status: int(r.status)}
	headers := bufs.headers[:0]
	if r.headers_len > 0 {
		for _, h := range unsafe.Slice(r.headers, int(r.headers_len)) {
			headers = append(headers, [2]string{headerText(h.name), headerText(h.value)})
		}
	}
	a.headers, bufs.headers = headers, headers
	if r.has_stream {
		a.stream = uint64(r.stream)
	} else {
		a.hasBody = true
		if r.body_len > 0 {
			bufs.answer = append(bufs.answer[:0], unsafe.Slice((*byte)(unsafe.Pointer(r.body)), int(r.body_len))...)
			a.body = bufs.answer
		}
	}
	return a
}

// headerText copies a header name or value out of the engine, or returns the constant
// equal to it for the ones most answers carry.
func headerText(s C.mcpw_str) string {
	b := unsafe.Slice((*byte)(unsafe.Pointer(s.ptr)), int(s.len))
	switch string(b) {
	case "Content-Type":
		return "Content-Type"
	case "application/json":
		return "application/json"
	case "text/event-stream":
		return "text/event-stream"
	case "Cache-Control":
		return "Cache-Control"
	case "no-cache":
		return "no-cache"
	case "Mcp-Session-Id":
		return "Mcp-Session-Id"
	}
	return string(b)
}

// refuse answers status with text, within SendTimeout: net/http lifts the connection's write
// deadline after every request, so a pipelining client that never reads would otherwise hold
// the flush of even a small error answer (and its goroutine and connection) for good.
func (s *HTTPServer) refuse(w http.ResponseWriter, text string, status int) {
	s.deadlineSet(http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.sendTime)))
	http.Error(w, text, status)
}

// failedLocked answers 500 for an engine call that failed. An engine that panicked is
// poisoned and fails every call from then on: the first time, that goes to ErrorLog, and Err
// reports it, so the operator learns why every request now gets 500.
func (s *HTTPServer) failedLocked(w http.ResponseWriter, err error) {
	s.noteLocked(err)
	s.refuse(w, err.Error(), http.StatusInternalServerError)
}

// noteLocked records a failure of the engine that no request is there to answer (a timer, a
// stream's bookkeeping): one that leaves it failed for good sets Err and is logged once, as
// failedLocked does. nil does nothing.
func (s *HTTPServer) noteLocked(err error) {
	var code *ResultError
	if errors.As(err, &code) && code.Code.IsFatal() && s.broken == nil {
		s.broken = err
		s.logf("mcpwire: the HTTP engine failed for good (%v): every request now gets 500; "+
			"close this server and make a new one", err)
		// The streams waiting end now: none would ever be woken again.
		s.wakeStreamsLocked()
	}
}

// Err reports why the engine stopped working, nil while it works: a panic inside it
// (CodePanic, then CodePoisoned) leaves it answering 500 to every request. Use it in a health
// check, to replace the server when it is no longer nil.
func (s *HTTPServer) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken
}

// logf writes to HTTPOptions.ErrorLog, or to the log package's standard logger.
func (s *HTTPServer) logf(format string, args ...any) {
	if s.errorLog != nil {
		s.errorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// canFlush reports whether w can send what was written before the handler returns: it, or
// a writer it wraps (Unwrap, which http.ResponseController follows too), has Flush.
func canFlush(w http.ResponseWriter) bool {
	for range 64 { // (a wrapper that unwraps to itself must not loop for good)
		switch t := w.(type) {
		case http.Flusher, interface{ FlushError() error }:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
	return false
}

// deadlineSet takes the result of a ResponseController deadline call. One the writer does
// not support (a middleware's wrapper with Flush but no Unwrap, which http.ResponseController
// cannot see through) is logged once per server: BodyTimeout, MinBodyRate and SendTimeout
// then do nothing, and slow or stalled clients are never cut off.
func (s *HTTPServer) deadlineSet(err error) {
	if err != nil && errors.Is(err, http.ErrNotSupported) && !s.noDeadline.Swap(true) {
		s.logf("mcpwire: the http.ResponseWriter takes no deadlines (a middleware's wrapper " +
			"without Unwrap?): BodyTimeout, MinBodyRate and SendTimeout cannot cut off slow " +
			"or stalled clients")
	}
}

// cannotFlush logs, once per server, that a response could not be flushed: a middleware
// wraps the http.ResponseWriter without Flush or Unwrap.
func (s *HTTPServer) cannotFlush() {
	if s.noFlush.Swap(true) {
		return
	}
	s.logf("mcpwire: the http.ResponseWriter cannot flush (a middleware's wrapper without Flush " +
		"or Unwrap?): SSE events wait until its buffer fills or the stream ends, and GET streams get 405")
}

// discardLimit is the most of a body over MaxBody read and dropped before the 413: four
// times MaxBody, at least 16 MiB (as the tokio host and the C example do).
func (s *HTTPServer) discardLimit() int {
	return max(4*s.maxBody, 16<<20) // (MaxBody is at most a quarter of math.MaxInt)
}

// expectsContinue reports a request whose client waits for 100 Continue before its body.
func expectsContinue(r *http.Request) bool {
	return strings.EqualFold(strings.TrimSpace(r.Header.Get("Expect")), "100-continue")
}

// streamChunk is the most a stream takes from the engine per write: the rest stays in the
// engine, under its bounds, instead of in a second copy here behind a write that blocks.
const streamChunk = 256 << 10

// requestBuffers hold what ServeHTTP lends the engine for one call; pooled, so a steady load
// reads bodies and joins headers without allocating.
type requestBuffers struct {
	body    []byte
	joined  []byte
	lens    []C.size_t
	headers [][2]string // the answer's
	answer  []byte      // the answer's body
}

var requestPool = sync.Pool{New: func() any { return new(requestBuffers) }}

// ServeHTTP answers one HTTP request to the MCP endpoint.
func (s *HTTPServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.done == nil { // a zero HTTPServer, not made by NewHTTPServer
		http.Error(w, "server closed", http.StatusServiceUnavailable)
		return
	}
	if r.Body == nil { // (a request built by hand; a server's always has one)
		r.Body = http.NoBody
	}
	bufs := requestPool.Get().(*requestBuffers)
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		// A rare large one is not kept (a head of a megabyte of headers, say).
		if cap(bufs.body) <= 64<<10 && cap(bufs.answer) <= 64<<10 && cap(bufs.joined) <= 64<<10 {
			clear(bufs.headers) // no strings kept alive in the pool
			requestPool.Put(bufs)
		}
	}
	defer release()
	// A declared length over the limit is refused before any of it is read (and net/http
	// closes the connection rather than read the rest). A declared length within the limit
	// is enforced by net/http's body reader itself, so only a body of unknown length
	// (chunked) needs the MaxBytesReader.
	if r.ContentLength > int64(s.maxBody) {
		// The rest is read and dropped first (up to discardLimit, within the body timeout),
		// so that a client still sending reads the 413 rather than a reset connection (Node's
		// fetch and httpx reported a broken pipe). A client that waits for 100 Continue has
		// sent nothing, and one declaring more than discardLimit is refused at once. Over
		// HTTP/1 the connection is closed after it (what was not read cannot be skipped);
		// over HTTP/2 only the stream ends ("Connection: close" would make net/http send
		// GOAWAY, and end the client's other requests' connection too).
		if r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close")
		}
		if r.ContentLength <= int64(s.discardLimit()) && !expectsContinue(r) {
			_, _ = s.discardBody(w, r.Body, r.ContentLength)
		}
		s.refuse(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	body := io.Reader(r.Body)
	if r.ContentLength < 0 {
		body = http.MaxBytesReader(w, r.Body, int64(s.maxBody))
	}
	read, taken, err := s.readBody(w, body, r.Body != http.NoBody, bufs.body[:0])
	bufs.body = read
	if err != nil {
		s.bodies.Add(-taken)
		if cap(bufs.body) > 64<<10 {
			bufs.body = nil // (not held, uncounted, while the rest is read and dropped)
		}
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			// As above: the rest (up to discardLimit) is read and dropped before the 413, at
			// MinBodyRate too.
			_, _ = s.discardBody(w, r.Body, int64(s.discardLimit()))
			s.refuse(w, "body too large", http.StatusRequestEntityTooLarge)
		case errors.Is(err, errBodiesBusy):
			// The same, for a 503 the client may retry; but a body over MaxBody (chunked:
			// seen only now) gets its 413, or its client would send it again for nothing.
			// (Past MaxBody counts too where no MaxBytesReader was needed: behind a middleware
			// that decompresses the body, whose declared length is the compressed one.)
			// (At MinBodyRate, as above: the deadline readBody left may be its first grace,
			// which a client sending at a good rate outlasts.)
			if n, err := s.discardBody(w, body, int64(s.discardLimit())); errors.As(err, &tooBig) ||
				int64(len(read))+n > int64(s.maxBody) {
				_, _ = s.discardBody(w, r.Body, int64(s.discardLimit()))
				s.refuse(w, "body too large", http.StatusRequestEntityTooLarge)
				break
			}
			if r.ProtoMajor == 1 {
				w.Header().Set("Connection", "close")
			}
			w.Header().Set("Retry-After", "1")
			s.refuse(w, "too many request bodies being read", http.StatusServiceUnavailable)
		case errors.Is(err, os.ErrDeadlineExceeded):
			s.refuse(w, "body not received in time", http.StatusRequestTimeout)
		default:
			// A broken chunked body, or one cut short (the client may be gone, and then
			// nobody reads this): never the empty 200 net/http sends for a handler that
			// writes nothing.
			s.refuse(w, "malformed or incomplete body", http.StatusBadRequest)
		}
		return
	}
	// Every header as name,value pairs in one byte string. Host comes from r.Host: net/http
	// takes it out of r.Header over HTTP/1, but its HTTP/2 server leaves a `host` field there
	// beside `:authority`, and the engine refuses two Host headers (400).
	joined := bufs.joined[:0]
	lens := bufs.lens[:0]
	count := 0
	add := func(name, value string) {
		joined = append(joined, name...)
		joined = append(joined, value...)
		lens = append(lens, C.size_t(len(name)), C.size_t(len(value)))
		count++
	}
	if r.Host != "" { // (HTTP/1.0 and HTTP/2 may send none; the engine lets that pass)
		add("Host", r.Host)
	}
	for name, values := range r.Header {
		if name == "Host" && r.Host != "" {
			continue
		}
		for _, v := range values {
			add(name, v)
		}
	}
	if count == 0 {
		// No header at all (an HTTP/1.0 request needs no Host): C still gets an array.
		lens = append(lens, 0, 0)
	}
	bufs.joined, bufs.lens = joined, lens

	if r.Method == http.MethodGet && !canFlush(w) {
		// A GET stream that cannot be flushed would send nothing, not even its head, until
		// net/http's buffer fills: 405 tells the client that no GET stream is offered here
		// (the spec's answer for that), so it goes on without one. The engine's refusals
		// come first (a foreign Origin's 403 is a MUST): it is asked as a PUT, which it
		// refuses after its checks, with nothing else done.
		if a, ok := s.respond(w, http.MethodPut, joined, lens, count, read, taken, bufs); !ok {
			return
		} else if a.status != http.StatusMethodNotAllowed {
			setHeaders(w.Header(), a.headers)
			w.WriteHeader(a.status)
			_, _ = w.Write(a.body)
			return
		}
		s.cannotFlush()
		w.Header().Set("Allow", s.allow)
		http.Error(w, "no SSE stream: the http.ResponseWriter cannot flush", http.StatusMethodNotAllowed)
		return
	}
	a, ok := s.respond(w, r.Method, joined, lens, count, read, taken, bufs)
	if cap(bufs.body) > 64<<10 {
		// A large body's buffer goes now, not once a slow client has its answer or its
		// stream ends (its bytes of MaxBodyTotal were given back when the engine took it).
		bufs.body = nil
	}
	if !ok {
		return
	}

	if !a.hasBody {
		// A panic in the writer (a middleware's Flush that cannot flush, a wrapper's Write)
		// must not leave the engine's stream attached for good (its session never expiring,
		// its request never cancelled): it is let go, and the panic goes on.
		streamed := false
		defer func() {
			if !streamed {
				s.gone(a.stream)
			}
		}()
		setHeaders(w.Header(), a.headers)
		w.WriteHeader(a.status)
		// The request's buffers go back now (the headers were copied): a stream may stay
		// open for hours, and each held up to 128 KiB that other requests had grown.
		release()
		s.stream(w, r, a.stream)
		streamed = true
		return
	}
	setHeaders(w.Header(), a.headers)
	if a.hasBody {
		// A client that stops reading must not hold the answer (and this goroutine, and
		// its connection) for good: a small answer fits in the socket's buffers, but many
		// pipelined ones fill them. The deadline stays set after the handler returns, for
		// net/http's flush of what it buffered (net/http lifts it after that flush; lifting
		// it here left the flush unguarded).
		s.deadlineSet(http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.sendTime)))
	}
	w.WriteHeader(a.status)
	if a.hasBody {
		// A large answer goes out streamChunk at a time, each piece under a fresh send
		// timeout, as a stream's pieces do: the timeout cuts a client that stopped reading,
		// not one that reads a 16 MiB answer slowly.
		body := a.body
		for len(body) > streamChunk {
			if _, err := w.Write(body[:streamChunk]); err != nil {
				return
			}
			body = body[streamChunk:]
			s.deadlineSet(http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.sendTime)))
		}
		_, _ = w.Write(body)
	}
}

// readBody reads body into buf (growing it), within BodyTimeout and at MinBodyRate at
// least. Both are read deadlines: net/http loses the request at the first read that fails
// on one (it cancels the request's context; a chunked body keeps the error), so a deadline
// cannot be extended after it passed, only before each read. The deadline is the latest the
// bytes received so far allow, start + max(grace, received/rate), at most start +
// BodyTimeout: a read still waiting at it means the body's average rate fell below the
// minimum. It is moved only when a read brings it later: a body that comes in one read (most
// do, net/http has it buffered) costs one deadline, and a fast large one reaches the cap
// within its first reads (at 7,200 bytes by default) and costs none after. It is lifted at
// the body's end, as net/http does, to watch for a closed connection, which must not time
// out under an SSE stream. hasBody is false for a body with nothing to read (http.NoBody).
// Each growth of buf is taken from MaxBodyTotal first (errBodiesBusy when it does not fit);
// taken is how much, to give back once the body is no longer needed, even with an error.
func (s *HTTPServer) readBody(w http.ResponseWriter, body io.Reader, hasBody bool, buf []byte) (_ []byte, taken int64, err error) {
	if !hasBody {
		return buf, 0, nil // (nor any of MaxBodyTotal taken for it)
	}
	// A body reader that panics (or ends the goroutine) gives back what was taken for it
	// from MaxBodyTotal, which the caller does only for a body that returned.
	returned := false
	defer func() {
		if !returned {
			s.bodies.Add(-taken)
		}
	}()
	read := func() ([]byte, error) {
		rc := http.NewResponseController(w)
		start := time.Now()
		set := s.bodyAllowance(0) // the deadline set, after start
		s.deadlineSet(rc.SetReadDeadline(start.Add(set)))
		for {
			if cap(buf)-len(buf) < bytes.MinRead {
				// To the next power of two, as bytes.Buffer doubles (a large body costs a few
				// copies, not one per append's 25%), but not past what a body within MaxBody needs
				// to read its end. Made at exactly the size taken from MaxBodyTotal (slices.Grow
				// may round it up to twice that).
				need := len(buf) + bytes.MinRead
				size := max(need, min(1<<bits.Len(uint(need-1)), s.maxBody+1))
				if !s.takeBodyBytes(int64(size - cap(buf))) {
					return buf, errBodiesBusy
				}
				taken += int64(size - cap(buf))
				buf = append(make([]byte, 0, size), buf...)
			}
			n, err := body.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if len(buf) > s.maxBody {
				// Past MaxBody whatever declared the length: a middleware that decompresses the
				// body keeps the compressed Content-Length, which net/http's own reader enforced.
				return buf, &http.MaxBytesError{Limit: int64(s.maxBody)}
			}
			if err == io.EOF {
				// Lifted, as net/http lifts it when its body ends: when a middleware read the
				// body before this (and hands on a copy), net/http's watch for a closed
				// connection had begun, and the deadline set above would end it, cancel the
				// request and cut its SSE stream.
				s.deadlineSet(rc.SetReadDeadline(time.Time{}))
				return buf, nil
			}
			if err != nil {
				// (Past MaxBody, the caller reads and drops the rest: discardBody.)
				return buf, err
			}
			if n > 0 && set < s.bodyTime {
				if allowed := s.bodyAllowance(len(buf)); allowed > set {
					set = allowed
					s.deadlineSet(rc.SetReadDeadline(start.Add(set)))
				}
			}
		}
	}
	buf, err = read()
	returned = true
	return buf, taken, err
}

// discardBody reads and drops n bytes of body within BodyTimeout and at MinBodyRate, as
// readBody reads one: a body declared over MaxBody whose bytes do not come holds its request
// for little more than the grace, not for the whole BodyTimeout. It returns the bytes dropped,
// and why it stopped short of n (io.EOF at the body's end).
func (s *HTTPServer) discardBody(w http.ResponseWriter, body io.Reader, n int64) (int64, error) {
	rc := http.NewResponseController(w)
	start := time.Now()
	set := s.bodyAllowance(0)
	s.deadlineSet(rc.SetReadDeadline(start.Add(set)))
	paced := &pacedReader{r: body, moved: func(got int64) {
		if set < s.bodyTime {
			if allowed := s.bodyAllowance(int(min(got, math.MaxInt32))); allowed > set {
				set = allowed
				s.deadlineSet(rc.SetReadDeadline(start.Add(set)))
			}
		}
	}}
	return io.CopyN(io.Discard, paced, n)
}

// pacedReader tells moved how many bytes it has read so far after each read that brought
// some.
type pacedReader struct {
	r     io.Reader
	got   int64
	moved func(got int64)
}

func (p *pacedReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.got += int64(n)
		p.moved(p.got)
	}
	return n, err
}

// errBodiesBusy is readBody's error for a body that does not fit in what the other bodies
// being read leave of MaxBodyTotal.
var errBodiesBusy = errors.New("mcpwire: request bodies past MaxBodyTotal")

// takeBodyBytes takes n bytes of MaxBodyTotal for a body being read; false (nothing taken)
// when they do not fit.
func (s *HTTPServer) takeBodyBytes(n int64) bool {
	for {
		held := s.bodies.Load()
		if held+n > s.maxTotal {
			return false
		}
		if s.bodies.CompareAndSwap(held, held+n) {
			return true
		}
	}
}

// bodyAllowance is how long after it began a body that has brought n bytes may wait for
// more: the grace, or as long as n bytes last at MinBodyRate, at most BodyTimeout.
func (s *HTTPServer) bodyAllowance(n int) time.Duration {
	if s.minRate <= 0 {
		return s.bodyTime
	}
	secs := float64(n) / float64(s.minRate)
	if secs >= s.bodyTime.Seconds() { // (and no overflow below)
		return s.bodyTime
	}
	return min(max(s.grace, time.Duration(secs*float64(time.Second))), s.bodyTime)
}

// setHeaders sets the answer's headers in h, with their values in one allocation instead of
// one per header. Each name the answer has replaces what h held under it (a middleware's
// default Content-Type, say: two would leave clients to pick one); a name the answer repeats
// keeps every value, in order.
func setHeaders(h http.Header, headers [][2]string) {
	values := make([]string, len(headers))
	for i, kv := range headers {
		name := http.CanonicalHeaderKey(kv[0])
		values[i] = kv[1]
		if old, ok := h[name]; ok && namedBefore(headers[:i], kv[0]) {
			h[name] = append(old, kv[1])
		} else {
			h[name] = values[i : i+1 : i+1]
		}
	}
}

// namedBefore reports whether headers has a header called name (in any case).
func namedBefore(headers [][2]string, name string) bool {
	for _, kv := range headers {
		if strings.EqualFold(kv[0], name) {
			return true
		}
	}
	return false
}

// respond runs one HTTP request through the engine and copies out what to answer; false when
// it answered w itself (an error). s.mu is held for the call and released on every way out,
// a runtime.Goexit in the app included; so are the body's taken bytes of MaxBodyTotal given
// back (the engine has taken the body by then).
func (s *HTTPServer) respond(w http.ResponseWriter, method string, joined []byte, lens []C.size_t,
	count int, body []byte, taken int64, bufs *requestBuffers) (a answer, ok bool) {
	defer s.bodies.Add(-taken)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr == nil {
		s.refuse(w, "server closed", http.StatusServiceUnavailable)
		return a, false
	}
	// The request, and its first event when the answer is a stream: one cgo call.
	first := C.mcpwgo_http_handle_first(s.ptr, s.ns(), cString(method), C.size_t(len(method)),
		cBytes(joined), &lens[0], C.size_t(count), (*C.uint8_t)(bytesPtr(body)), C.size_t(len(body)),
		s.pending, &s.record[0], s.arenaPtr(), s.arenaCap())
	runtime.KeepAlive(joined)
	runtime.KeepAlive(lens)
	runtime.KeepAlive(body)
	got := first.answer
	if got.rc != C.MCPW_OK {
		s.failedLocked(w, check("handle request", got.rc))
		return a, false
	}
	if got.response.has_stream {
		// Answer what the app answers at once, then see whether the whole answer is there:
		// the last poll, the settling and the timers' deadline take one cgo call.
		stream := got.response.stream
		returned := false
		defer func() {
			if !returned && s.ptr != nil {
				// runtime.Goexit in the app: nobody will write this stream; the engine
				// forgets it as it would a departed client's.
				s.noteLocked(check("stream closed", C.mcpw_http_server_stream_closed(s.ptr, s.ns(), stream)))
				s.notifyLocked()
			}
		}()
		s.take(first.polled)
		for {
			next := C.mcpwgo_http_next_or_settle(s.ptr, stream, s.pending, &s.record[0], s.arenaPtr(), s.arenaCap())
			if next.settled == 0 {
				s.take(next.polled)
				continue
			}
			returned = true // (no more app code on this request)
			// The answer's views live until the next call on the server that is not const
			// (wakeLocked may make one): copied first.
			if next.answer.rc == C.MCPW_OK {
				a = copyAnswer(&next.answer.response, bufs)
			}
			s.wakeLocked()
			s.rearmTo(next.deadline)
			if next.answer.rc != C.MCPW_OK {
				s.failedLocked(w, check("settle", next.answer.rc))
				return a, false
			}
			break
		}
	} else {
		// Answered without a stream (a notification's 202, a refusal): the events it caused,
		// such as a cancellation, go to the app now rather than with the next request.
		a = copyAnswer(&got.response, bufs)
		s.dispatchLocked()
		s.notifyLocked()
	}
	return a, true
}

// stream drains SSE stream id into w until it finishes or the client goes away.
func (s *HTTPServer) stream(w http.ResponseWriter, r *http.Request, id uint64) {
	// Every write gets the send timeout, and so does net/http's flush of the end after the
	// handler returns (net/http lifts it after that flush).
	rc := http.NewResponseController(w)
	defer func() { s.deadlineSet(rc.SetWriteDeadline(time.Now().Add(s.sendTime))) }()
	s.deadlineSet(rc.SetWriteDeadline(time.Now().Add(s.sendTime)))
	if err := rc.Flush(); errors.Is(err, http.ErrNotSupported) { // the head goes out at once
		s.cannotFlush()
	}
	var buf []byte
	for {
		s.mu.Lock()
		if s.ptr == nil || s.broken != nil {
			s.mu.Unlock()
			return
		}
		p := C.mcpwgo_http_poll_stream(s.ptr, C.uint64_t(id))
		if p.rc != C.MCPW_OK || p.open == 0 {
			if len(s.parked) > 0 {
				s.wakeStreamsLocked()
			}
			s.mu.Unlock()
			return
		}
		n := int(p.len)
		finished := p.finished != 0
		if n > streamChunk {
			n, finished = streamChunk, false
		}
		if n > 0 {
			// Copied out, and consumed only once written (below): a client that leaves
			// while the write waits leaves these bytes unconsumed, and the engine keeps the
			// answers among them for its resumption, even past the event store's bounds.
			buf = append(buf[:0], unsafe.Slice((*byte)(unsafe.Pointer(p.bytes)), n)...)
			// The poll may have moved the session's output on to other streams (an answer
			// that waited behind these bytes): they are woken now, not once this write,
			// which a slow client may hold up to SendTimeout, is over.
			if len(s.parked) > 0 {
				s.wakeStreamsLocked()
			}
			s.mu.Unlock()
			if !s.writeOut(w, rc, buf) {
				s.gone(id)
				return
			}
			s.mu.Lock()
			if s.ptr != nil {
				s.noteLocked(check("consume stream", C.mcpw_http_server_consume_stream(s.ptr, C.uint64_t(id), C.size_t(n))))
				// (As finished: the stream may have ended while its piece was written, a
				// cancellation say, and this consume was its last.)
				s.drainedLocked(true)
			}
			s.mu.Unlock()
			continue // more may be waiting, or the end
		}
		var changed chan struct{}
		if !finished {
			// Drained first: a stream named while nobody waited is not named again until
			// it is taken. Then parked, under the lock every change takes.
			s.wakeStreamsLocked()
			changed = make(chan struct{})
			s.parked[id] = changed
		} else {
			s.drainedLocked(true)
		}
		s.mu.Unlock()
		if finished {
			return
		}
		if cap(buf) > 16<<10 {
			// A quiet stream may wait for good: it does not keep the copy of a large message
			// (up to streamChunk) while it does, as the engine does not keep its own.
			buf = nil
		}
		// Lifted while the stream waits: over HTTP/2 net/http resets a stream whose write
		// deadline passes, written to or not, and a quiet stream whose client reads would be
		// cut after SendTimeout. The next write sets it again.
		s.deadlineSet(rc.SetWriteDeadline(time.Time{}))
		select {
		case <-changed:
		case <-r.Context().Done():
			s.mu.Lock()
			if s.parked[id] == changed {
				delete(s.parked, id)
			}
			s.mu.Unlock()
			s.gone(id)
			return
		}
	}
}

// writeOut writes a piece of an SSE stream and flushes it, under the send timeout: a client
// that stops reading is cut (net/http closes the connection after a failed write) instead of
// holding the stream. It reports whether the client took it.
func (s *HTTPServer) writeOut(w http.ResponseWriter, rc *http.ResponseController, b []byte) bool {
	s.deadlineSet(rc.SetWriteDeadline(time.Now().Add(s.sendTime)))
	if _, err := w.Write(b); err != nil {
		return false
	}
	err := rc.Flush()
	return err == nil || errors.Is(err, http.ErrNotSupported)
}

// drainedLocked follows a stream's progress: draining it can move other streams along, and
// one written out to the end (finished) may let its session's idle time start, so that the
// engine wants the time and the timer must look again.
func (s *HTTPServer) drainedLocked(finished bool) {
	if len(s.parked) > 0 {
		s.wakeStreamsLocked()
	}
	if finished {
		s.rearmLocked()
	}
}

// gone reports a client that left before its stream finished.
func (s *HTTPServer) gone(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr == nil {
		return
	}
	s.noteLocked(check("stream closed", C.mcpw_http_server_stream_closed(s.ptr, s.ns(), C.uint64_t(id))))
	s.dispatchLocked()
	s.notifyLocked()
}
