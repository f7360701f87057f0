package mcpwire

/*
#cgo pkg-config: mcpwire
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Version is the version of the mcpwire library linked ("0.1.0").
func Version() string { return C.GoString(C.mcpw_version()) }

// HeaderVersion is the version of the header this package was compiled against.
const HeaderVersion = C.MCPWIRE_VERSION

// JSON-RPC and MCP error codes for RespondError.
const (
	CodeParseError       = C.MCPW_JSONRPC_PARSE_ERROR
	CodeInvalidRequest   = C.MCPW_JSONRPC_INVALID_REQUEST
	CodeMethodNotFound   = C.MCPW_JSONRPC_METHOD_NOT_FOUND
	CodeInvalidParamsRPC = C.MCPW_JSONRPC_INVALID_PARAMS
	CodeInternalError    = C.MCPW_JSONRPC_INTERNAL_ERROR
	CodeResourceNotFound = C.MCPW_MCP_RESOURCE_NOT_FOUND
)

// How many events one crossing into C may copy out, and the initial size of the byte arena
// their text is copied into (it grows to fit the largest event).
const (
	batchEvents = 256
	batchArena  = 64 << 10
)

// The initial size of the byte arena of an HTTPClient and of an HTTPServer, which poll one
// event at a time (it grows to fit the largest event).
const eventArena = 4096

// arenaKept is the largest event arena kept once its events are copied out. One grown past
// it for a rare large event (up to MaxFrame, 16 MiB by default) is let go, so that a Conn,
// an HTTPClient or an HTTPServer does not hold that much for the rest of its life; up to it
// the arena is kept, so that events of common sizes do not each cost a new one.
const arenaKept = 1 << 20

// trimArena returns arena, or a new one of base bytes when arena grew past arenaKept. Call it
// only when no polled event's text is still in arena (events copy their text out).
func trimArena(arena []byte, base int) []byte {
	if len(arena) > arenaKept {
		return make([]byte, base)
	}
	return arena
}

// Conn is one MCP connection, client or server: a sans-IO engine. Bytes and the current
// time go in (Feed, FeedEOF, HandleTimeout); events (NextEvent), bytes to write (WriteTo)
// and the next deadline (NextDeadline) come out. After every input or command, drain in
// this order: events until NextEvent says false (acting on them may issue commands), then
// WriteTo, then re-arm the timer from NextDeadline.
//
// A Conn is safe for use by several goroutines: calls on it take turns (WriteTo's writer
// runs outside them). Serve notices a command another goroutine gives while it
// waits, and writes its output at once. The events are one stream: drain them from one
// goroutine (Serve's, when Serve runs). A Conn an HTTPServer lends to its app is for that
// call only (With lends one later); an HTTPClient's Conn serves any goroutine until the
// client is closed. Close releases the C handle; it is idempotent, and a
// finalizer calls it for a Conn that becomes unreachable without it. Shutdown is the
// graceful MCP close.
type Conn struct {
	// mu orders the calls of several goroutines (the engine handle is not thread-safe);
	// the fields below it are read and written with it held. An HTTPClient's view takes
	// its client's lock instead (outer), and is lent again under it for every call (relend).
	mu     sync.Mutex
	outer  *sync.Mutex
	relend func() *C.mcpw_conn
	// changes counts commands, so that Serve sees one given while it was not looking;
	// waiting is set while Serve waits, and wake is how a command then tells it.
	changes uint64
	waiting bool
	wake    chan struct{}
	// driven is set while Serve (or an HTTPClient's Run) drives the Conn: it alone then
	// takes the events and writes the output, and NextEvent, AppendEvents, WriteTo and
	// AppendOutput from the outside give nothing (see NextEvent).
	driven atomic.Bool
	// given over-estimates the output added by commands since WriteTo last emptied it: each
	// command counts commandOutput bytes and its payload. Atomic: Serve reads it without
	// the lock.
	given atomic.Int64
	// roomBelow: Serve hands out the next event, and feeds more input, only while the
	// output holds less than this (half the engine's bound, checked with the engine once
	// given passes it), so that the answers an event gets always fit.
	roomBelow int64
	giving    int64 // this command's payload, added to given as the lock is let go
	// inputPiece is how much input Serve feeds between drains (see InputPiece).
	inputPiece int
	// grace is Config.ShutdownGrace, for Serve and HTTPClient.Run.
	grace time.Duration

	ptr     *C.mcpw_conn
	drainer *C.mcpwgo_drainer // C memory: the event held across back-to-back drains
	origin  time.Time
	lastNs  uint64
	err     error // sticky: set when polling events failed

	view bool // lent by an HTTPServer for one callback: not ours to free
	// cut: a lent view's lending ended (set by its lender, possibly while another goroutine
	// holds the view by mistake: atomic, so that it then reads ErrFreed without a race).
	cut     atomic.Bool
	wbuf    []byte  // WriteTo's copy of the next bytes to write
	queue   []Event // events copied out of the engine, not yet returned
	head    int
	records []C.mcpwgo_record
	arena   []byte
}

// isFreed is freed with the Conn taken.
func (c *Conn) isFreed() bool {
	c.mutex().Lock()
	defer c.mutex().Unlock()
	return c.freed()
}

// freed reports whether calls must be refused with ErrFreed: the handle was freed, or the
// view's lending ended.
func (c *Conn) freed() bool { return c.ptr == nil || c.cut.Load() }

// endLending cuts a lent view off (its callback returned): a call that a goroutine which
// kept it is making ends first (the view's lock), and every later one returns ErrFreed.
func (c *Conn) endLending() {
	c.mu.Lock()
	c.cut.Store(true)
	c.mu.Unlock()
}

// mutex is the lock the Conn's calls take.
func (c *Conn) mutex() *sync.Mutex {
	if c.outer != nil {
		return c.outer
	}
	return &c.mu
}

// lock takes the Conn for one call; false, with the Conn not taken, when calls must be
// refused with ErrFreed.
func (c *Conn) lock() bool {
	m := c.mutex()
	m.Lock()
	if c.relend != nil {
		c.ptr = c.relend()
	}
	if c.freed() {
		m.Unlock()
		return false
	}
	return true
}

// serveWake gives Serve the channel a command on another goroutine wakes it with; false
// when another Serve (or an HTTPClient's Run) drives c already. serveDone takes it back.
func (c *Conn) serveWake() (chan struct{}, bool) {
	c.mutex().Lock()
	defer c.mutex().Unlock()
	if c.wake != nil {
		return nil, false
	}
	c.wake = make(chan struct{}, 1)
	c.driven.Store(true)
	return c.wake, true
}

// serveDone ends what serveWake began, as Serve returns.
func (c *Conn) serveDone() {
	c.mutex().Lock()
	defer c.mutex().Unlock()
	c.wake, c.waiting = nil, false
	c.driven.Store(false)
}

// changeMark is the count of commands so far; it also ends the wait beginWait began (Serve
// looks again: its own commands need not wake it).
func (c *Conn) changeMark() uint64 {
	c.mutex().Lock()
	defer c.mutex().Unlock()
	c.waiting = false
	return c.changes
}

// beginWait marks Serve as waiting, so that the next command wakes it; false, with nothing
// marked, when a command came since mark (Serve looks again instead of waiting).
func (c *Conn) beginWait(mark uint64) bool {
	c.mutex().Lock()
	defer c.mutex().Unlock()
	if c.changes != mark {
		return false
	}
	c.waiting = true
	return true
}

// unlock ends a call that changed nothing Serve waits on.
func (c *Conn) unlock() { c.mutex().Unlock() }

// unlockChanged ends a command: output, events or deadlines may have changed, so a Serve
// waiting on another goroutine is woken to look.
func (c *Conn) unlockChanged() {
	c.changes++
	c.given.Add(commandOutput + c.giving) // (one atomic operation per command)
	c.giving = 0
	var wake chan struct{}
	if c.waiting {
		wake = c.wake
	}
	c.mutex().Unlock()
	if wake != nil {
		select {
		case wake <- struct{}{}:
		default: // (already woken)
		}
	}
}

// commandOutput is what one command is assumed to add to the output besides its payload (an
// envelope, an id, a method): more than most do, so given over-estimates.
const commandOutput = 512

// outputBound is the engine's bound on the output (Limits.MaxBufferedOutput).
func outputBound(cfg *Config) int64 {
	if cfg != nil && cfg.Limits.MaxBufferedOutput > 0 {
		return int64(cfg.Limits.MaxBufferedOutput)
	}
	return 16 << 20 // the engine's default
}

// defaultInputPiece is the engine's input piece under its default limits (see InputPiece).
const defaultInputPiece = 4096

// gave counts n bytes of a command's payload into given (with the Conn taken).
func (c *Conn) gave(n int) { c.giving += int64(n) }

// NewConn creates a connection from cfg at time now; every later time passed to the Conn
// is measured from now on the same clock (time.Now() readings, or simulated times). A
// client queues its first request at once (server/discover or initialize, as
// Config.ClientEra says): call WriteTo next.
func NewConn(cfg *Config, now time.Time) (*Conn, error) {
	config, err := cfg.build()
	if err != nil {
		return nil, err
	}
	made := C.mcpwgo_conn_new(config, 0)
	C.mcpw_config_free(config)
	if err := check("new conn", made.rc); err != nil {
		return nil, err
	}
	var piece C.size_t
	if C.mcpw_conn_input_piece(made.conn, &piece) != C.MCPW_OK { // (cannot fail on a new conn)
		piece = defaultInputPiece
	}
	c := &Conn{
		ptr:        made.conn,
		drainer:    (*C.mcpwgo_drainer)(C.calloc(1, C.size_t(unsafe.Sizeof(C.mcpwgo_drainer{})))),
		origin:     now,
		records:    make([]C.mcpwgo_record, batchEvents),
		arena:      make([]byte, batchArena),
		roomBelow:  max(outputBound(cfg)/2, 1), // (a bound of 1 byte: room only when empty)
		inputPiece: int(piece),
		grace:      cfg.shutdownGrace(),
	}
	runtime.SetFinalizer(c, (*Conn).Close)
	return c, nil
}

// Close frees the connection handle and everything it holds. It does not send anything
// (see Shutdown for the graceful MCP close). Calling it again does nothing; every other
// method returns ErrFreed afterwards. It always returns nil. On a Conn an HTTPServer or an
// HTTPClient lends, it does nothing: the connection is its lender's (end a session with the
// client's EndSession and Close, or let the server's timeouts end it).
func (c *Conn) Close() error {
	if c == nil {
		return nil
	}
	if !c.lock() {
		return nil
	}
	if c.view {
		c.unlock()
		return nil
	}
	// A Serve waiting on another goroutine wakes, and returns ErrFreed.
	defer c.unlockChanged()
	C.mcpw_conn_free(c.ptr)
	C.free(unsafe.Pointer(c.drainer))
	c.ptr, c.drainer = nil, nil
	runtime.SetFinalizer(c, nil)
	return nil
}

// ns turns now into the engine's clock: nanoseconds since NewConn, never going backwards.
func (c *Conn) ns(now time.Time) C.uint64_t {
	if d := now.Sub(c.origin); d > 0 && uint64(d) > c.lastNs {
		c.lastNs = uint64(d)
	}
	return C.uint64_t(c.lastNs)
}

// Capabilities is a set of capability flags (mcpw_conn_request_context's bits).
type Capabilities uint32

// Client capability flags, for RequestContext.ClientCapabilities.
const (
	CapRoots           Capabilities = C.MCPW_CAP_ROOTS
	CapSampling        Capabilities = C.MCPW_CAP_SAMPLING
	CapSamplingTools   Capabilities = C.MCPW_CAP_SAMPLING_TOOLS
	CapElicitation     Capabilities = C.MCPW_CAP_ELICITATION
	CapElicitationForm Capabilities = C.MCPW_CAP_ELICITATION_FORM
	CapElicitationURL  Capabilities = C.MCPW_CAP_ELICITATION_URL
	CapTasks           Capabilities = C.MCPW_CAP_TASKS
	// CapTasksExtension: the request declared the tasks extension of 2026-07-28
	// (io.modelcontextprotocol/tasks under extensions), so it may be answered with a task
	// (Tasks.Respond).
	CapTasksExtension Capabilities = C.MCPW_CAP_TASKS_EXTENSION
	// CapTasksToolsCall: server, 2025-11-25, tasks.requests.tools.call (tools/call may be
	// task-augmented).
	CapTasksToolsCall Capabilities = C.MCPW_CAP_TASKS_TOOLS_CALL
	// CapTasksSampling: client, 2025-11-25, tasks.requests.sampling.createMessage.
	CapTasksSampling Capabilities = C.MCPW_CAP_TASKS_SAMPLING
	// CapTasksElicitation: client, 2025-11-25, tasks.requests.elicitation.create.
	CapTasksElicitation Capabilities = C.MCPW_CAP_TASKS_ELICITATION
)

// RequestContext is what a peer's 2026-07-28 request declared about itself.
type RequestContext struct {
	// Version is the protocol version the request carried.
	Version string
	// ClientCapabilities are the capabilities the request declared.
	ClientCapabilities Capabilities
}

// RequestContext reads what the peer's request id (still in flight) declared; false for a
// handshake-era request (the session's capabilities are PeerCapabilities) or an unknown id.
// Use it to refuse work that needs a capability the request did not declare.
func (c *Conn) RequestContext(id ID) (RequestContext, bool) {
	if !c.lock() {
		return RequestContext{}, false
	}
	defer c.unlock()
	got := C.mcpwgo_request_context(c.ptr, C.uint32_t(id.kind), C.int64_t(id.num), cString(id.wire), C.size_t(len(id.wire)))
	runtime.KeepAlive(c)
	runtime.KeepAlive(id.wire)
	if got.rc != C.MCPW_OK || !got.context.known {
		return RequestContext{}, false
	}
	v := got.context.version
	return RequestContext{
		Version:            goText(unsafe.Pointer(v.ptr), uint(v.len)),
		ClientCapabilities: Capabilities(got.context.client_capabilities),
	}, true
}

// ---- Inputs -----------------------------------------------------------------------------

// Feed hands the engine bytes read from the transport, in any chunking, with the time they
// arrived. The engine consumes all of them and keeps no pointer into data. In a loop of
// your own, feed a large read InputPiece bytes at a time, handing out events between
// pieces: fed at once, the peer's pipelined requests beyond MaxInboundInFlight are refused.
func (c *Conn) Feed(now time.Time, data []byte) error {
	if !c.lock() {
		return ErrFreed
	}
	defer c.unlockChanged()
	fed := C.mcpwgo_feed(c.ptr, c.ns(now), (*C.uint8_t)(bytesPtr(data)), C.size_t(len(data)))
	runtime.KeepAlive(c)
	// What the engine answered on its own (error answers to junk: up to half its bound per
	// InputPiece) counts, exactly, in what Serve checks its room against.
	c.given.Store(int64(fed.len))
	return check("feed", fed.rc)
}

// InputPiece is how many bytes to Feed at a time when one read brought more, handing out
// every event (and answering) between pieces: 4 KiB, less when the Config lowered
// MaxInboundInFlight, MaxBufferedOutput or MaxQueuedEvents. Serve feeds this way; use it in
// a loop of your own, so that a peer that pipelines thousands of requests in one write gets
// every one answered instead of "too many requests" errors.
func (c *Conn) InputPiece() int {
	if c.inputPiece <= 0 { // (a Conn not made by NewConn: a view an HTTP host lent)
		return defaultInputPiece
	}
	return c.inputPiece
}

// FeedEOF tells the engine the transport reached end of input: a last unterminated line is
// processed, our requests in flight are abandoned and the connection closes.
func (c *Conn) FeedEOF(now time.Time) error {
	if !c.lock() {
		return ErrFreed
	}
	defer c.unlockChanged()
	rc := C.mcpw_conn_handle_eof(c.ptr, c.ns(now))
	runtime.KeepAlive(c)
	return check("feed eof", rc)
}

// HandleTimeout fires every timer due at now (request timeouts, the end of a graceful
// close). Calling it early does nothing. A Conn an HTTPServer or HTTPClient lent returns
// ErrNotOwner: its lender fires its timers, with its own.
func (c *Conn) HandleTimeout(now time.Time) error {
	if !c.lock() {
		return ErrFreed
	}
	defer c.unlockChanged()
	rc := C.mcpw_conn_handle_timeout(c.ptr, c.ns(now))
	runtime.KeepAlive(c)
	return check("handle timeout", rc)
}

// NextDeadline is the earliest time at which HandleTimeout has work, and false when no timer
// is armed. It changes after inputs and commands: re-arm the timer from it every time round
// the loop. On a Conn an HTTPServer or HTTPClient lent it is always false: its lender's
// timers are the ones to arm.
func (c *Conn) NextDeadline() (time.Time, bool) {
	if !c.lock() {
		return time.Time{}, false
	}
	defer c.unlock()
	d := C.mcpwgo_poll_timeout(c.ptr)
	runtime.KeepAlive(c)
	if d.rc != C.MCPW_OK || d.has == 0 {
		return time.Time{}, false
	}
	return deadlineAt(c.origin, uint64(d.at_ns)), true
}

// deadlineAt turns an engine deadline (nanoseconds after origin) into a time. A deadline past
// the largest Duration (the engine saturates one that a server's enormous `retry` put out of
// reach) stays that far away instead of wrapping into the past, where a timer armed from it
// would fire at once, for ever.
func deadlineAt(origin time.Time, ns uint64) time.Time {
	return origin.Add(time.Duration(min(ns, math.MaxInt64)))
}

// ---- Commands ---------------------------------------------------------------------------

// ProgressReset says whether a request's timeout restarts when progress arrives for it.
type ProgressReset int

// The choices for RequestOptions.ResetOnProgress.
const (
	ResetDefault ProgressReset = iota // as Config.ResetTimeoutOnProgress says
	ResetOn                           // restart it (bounded by the maximum total timeout)
	ResetOff                          // never restart it
)

// RequestOptions adjusts one request; nil or the zero value means the defaults.
type RequestOptions struct {
	// Timeout for this request (rounded up to milliseconds); 0 uses Config.RequestTimeout,
	// except for subscriptions/listen, which then has none: its stream lasts until it is
	// cancelled or the connection closes. Negative (a deadline already passed): the request
	// times out at the first HandleTimeout.
	Timeout time.Duration
	// Progress asks for progress: the engine adds _meta.progressToken to the params and
	// reports progress as ProgressEvents.
	Progress bool
	// ResetOnProgress overrides Config.ResetTimeoutOnProgress.
	ResetOnProgress ProgressReset
}

// Request sends a request: method with params (a JSON object, or nil for none). The answer
// arrives as a ResponseEvent, ErrorEvent, TimedOutEvent or AbandonedEvent carrying the
// returned id.
func (c *Conn) Request(now time.Time, method string, params json.RawMessage, opts *RequestOptions) (RequestID, error) {
	if !c.lock() {
		return 0, ErrFreed
	}
	defer c.unlockChanged()
	var o RequestOptions
	if opts != nil {
		o = *opts
	}
	progress := 0
	if o.Progress {
		progress = 1
	}
	c.gave(len(params))
	r := C.mcpwgo_request(c.ptr, c.ns(now), cString(method), C.size_t(len(method)),
		cBytes(params), C.size_t(len(params)), C.uint64_t(timeoutMillis(o.Timeout)),
		C.uint32_t(progress), C.uint32_t(o.ResetOnProgress))
	runtime.KeepAlive(c)
	if err := check("request", r.rc); err != nil {
		return 0, err
	}
	return RequestID(r.id), nil
}

// Notify sends a notification: method with params (a JSON object, or nil for none).
func (c *Conn) Notify(method string, params json.RawMessage) error {
	if !c.lock() {
		return ErrFreed
	}
	defer c.unlockChanged()
	c.gave(len(params))
	rc := C.mcpw_conn_notify(c.ptr, cString(method), C.size_t(len(method)), cBytes(params), C.size_t(len(params)))
	runtime.KeepAlive(c)
	return check("notify", rc)
}

// Respond answers the peer's request id with result: a JSON object, as every MCP result is
// (any other value gets ErrInvalidParams). Answering a request the peer has cancelled
// succeeds and sends nothing. Answering a 2026-07-28 subscriptions/listen request ends that
// subscription: its result carries the subscription id in _meta and nothing else, whatever
// object result holds (a listen waiting for
// GrantListen is not granted by it: it is acknowledged with nothing granted, then ended).
// In 2026-07-28 it sends complete results only: a resultType other than "complete" gets
// ErrInvalidParams (use RespondInputRequired, or Tasks.Respond for a task handle).
func (c *Conn) Respond(id ID, result json.RawMessage) error {
	if !c.lock() {
		return ErrFreed
	}
	defer c.unlockChanged()
	c.gave(len(result))
	rc := C.mcpwgo_respond(c.ptr, C.uint32_t(id.kind), C.int64_t(id.num), cString(id.wire),
		C.size_t(len(id.wire)), cBytes(result), C.size_t(len(result)))
	runtime.KeepAlive(c)
	return check("respond", rc)
}

// RespondError answers the peer's request id with a JSON-RPC error: code, message and data
// (any JSON value, or nil for none). Codes the negotiated version does not define (before
// one is negotiated: that no configured version defines) are refused with
// ErrCodeNotInVersion, except CodeResourceNotFound, which is sent as the
// version's "resource not found" code (-32602 from 2026-07-28 on, which replaced -32002).
// -32021 and -32022 need the data the schema requires (requiredCapabilities; supported and
// requested), else ErrInvalidParams.
func (c *Conn) RespondError(id ID, code int64, message string, data json.RawMessage) error {
	if !c.lock() {
		return ErrFreed
	}
	defer c.unlockChanged()
	c.gave(len(message) + len(data))
	msg := cString(message)
	if msg == nil {
		msg = &C.mcpwgo_empty[0]
	}
	rc := C.mcpwgo_respond_error(c.ptr, C.uint32_t(id.kind), C.int64_t(id.num), cString(id.wire),
		C.size_t(len(id.wire)), C.int64_t(code), msg, C.size_t(len(message)),
		cBytes(data), C.size_t(len(data)))
	runtime.KeepAlive(c)
	return check("respond error", rc)
}

// ListenItemKind says what one item of a 2026-07-28 subscriptions/listen request asks to hear.
type ListenItemKind int

// The kinds of ListenItem.
const (
	ListenToolsListChanged     ListenItemKind = C.MCPW_LISTEN_TOOLS_LIST_CHANGED     // notifications/tools/list_changed
	ListenPromptsListChanged   ListenItemKind = C.MCPW_LISTEN_PROMPTS_LIST_CHANGED   // notifications/prompts/list_changed
	ListenResourcesListChanged ListenItemKind = C.MCPW_LISTEN_RESOURCES_LIST_CHANGED // notifications/resources/list_changed
	ListenResource             ListenItemKind = C.MCPW_LISTEN_RESOURCE               // notifications/resources/updated for the URI in Text
	ListenTask                 ListenItemKind = C.MCPW_LISTEN_TASK                   // notifications/tasks for the task id in Text
)

// ListenItem is one thing a subscriptions/listen request asks to hear: a list change, or the
// updates of one resource (Text is its URI) or one task (Text is its id).
type ListenItem struct {
	Kind ListenItemKind
	Text string
}

// ListenItems lists what the 2026-07-28 subscriptions/listen request id asks to hear and we
// can honour, while it waits for GrantListen: the list changes our capabilities declare,
// then at most 256 resource URIs, then at most 256 task ids. Such a request comes as a
// RequestEvent only when Config.ReviewListens is set. ErrUnknownRequest for any other id.
func (c *Conn) ListenItems(id ID) ([]ListenItem, error) {
	if !c.lock() {
		return nil, ErrFreed
	}
	defer c.unlock()
	return c.listenItems(id)
}

// listenItems is ListenItems with the lock held.
func (c *Conn) listenItems(id ID) ([]ListenItem, error) {
	var n C.size_t
	rc := C.mcpwgo_listen_items(c.ptr, C.uint32_t(id.kind), C.int64_t(id.num), cString(id.wire),
		C.size_t(len(id.wire)), nil, 0, &n)
	if err := check("listen items", rc); err != nil {
		return nil, err
	}
	raw := make([]C.mcpw_listen_item, int(n)+1)
	rc = C.mcpwgo_listen_items(c.ptr, C.uint32_t(id.kind), C.int64_t(id.num), cString(id.wire),
		C.size_t(len(id.wire)), &raw[0], n, &n)
	runtime.KeepAlive(c)
	runtime.KeepAlive(id.wire)
	if err := check("listen items", rc); err != nil {
		return nil, err
	}
	items := make([]ListenItem, int(n))
	for i := range items {
		items[i] = ListenItem{
			Kind: ListenItemKind(raw[i].kind),
			Text: goText(unsafe.Pointer(raw[i].text.ptr), uint(raw[i].text.len)),
		}
	}
	return items, nil
}

// GrantListen grants the 2026-07-28 subscriptions/listen request id, which came as a
// RequestEvent because Config.ReviewListens is set, and sends its acknowledgement. keep is
// called once for each of its ListenItems, without the connection's lock: check there that
// the client may follow the task or resource (the tasks extension requires an access check
// on every task-related request). The stream carries the items keep returned true for. To
// refuse the whole listen, answer it with RespondError instead. Granting a listen the client
// cancelled succeeds and sends nothing. ErrUnknownRequest when id is not a listen waiting for
// its grant, or when what it asks for changed while keep ran (the client cancelled it and
// sent another under the same id, asking for other items: the engine refuses such a reuse
// while it remembers the cancelled id, one of the last Limits.MaxRememberedIDs).
func (c *Conn) GrantListen(id ID, keep func(ListenItem) bool) error {
	items, err := c.ListenItems(id)
	if errors.Is(err, ErrUnknownRequest) {
		return c.grantNothing(id) // the engine tells a cancelled listen from an unknown id
	}
	if err != nil {
		return err
	}
	flags := make([]C.bool, len(items)+1)
	for i, item := range items {
		flags[i] = C.bool(keep(item))
	}
	if !c.lock() {
		return ErrFreed
	}
	defer c.unlockChanged()
	now, err := c.listenItems(id)
	if err == nil && !slices.Equal(now, items) {
		return ErrUnknownRequest
	}
	if err != nil && !errors.Is(err, ErrUnknownRequest) {
		return err
	}
	// An id no longer waiting goes to the engine all the same: it tells a cancelled listen
	// (nothing to send) from an unknown one.
	n := len(items)
	if err != nil {
		n = 0
	}
	acknowledgement := 256
	for _, item := range items {
		acknowledgement += len(item.Text) + 4
	}
	c.gave(acknowledgement)
	rc := C.mcpwgo_grant_listen(c.ptr, C.uint32_t(id.kind), C.int64_t(id.num), cString(id.wire),
		C.size_t(len(id.wire)), &flags[0], C.size_t(n))
	runtime.KeepAlive(c)
	runtime.KeepAlive(id.wire)
	return check("grant listen", rc)
}

// grantNothing asks the engine to grant id no items: Ok for a listen the client cancelled,
// ErrUnknownRequest for an id that is no listen waiting for its grant.
func (c *Conn) grantNothing(id ID) error {
	if !c.lock() {
		return ErrFreed
	}
	defer c.unlockChanged()
	var none C.bool
	rc := C.mcpwgo_grant_listen(c.ptr, C.uint32_t(id.kind), C.int64_t(id.num), cString(id.wire),
		C.size_t(len(id.wire)), &none, 0)
	runtime.KeepAlive(c)
	runtime.KeepAlive(id.wire)
	return check("grant listen", rc)
}

// ProgressUpdate is one progress report on a request of the peer's.
type ProgressUpdate struct {
	// Progress must be finite and increase with every report.
	Progress float64
	// Total is sent when HasTotal; it must be finite (else ErrNonIncreasingProgress).
	Total    float64
	HasTotal bool
	// Message is sent, where the protocol version has it, when not empty.
	Message string
}

// Progress reports progress on the peer's request id, which must have carried a progress
// token (else ErrNoProgressToken).
func (c *Conn) Progress(id ID, p ProgressUpdate) error {
	if !c.lock() {
		return ErrFreed
	}
	defer c.unlockChanged()
	hasTotal := 0
	if p.HasTotal {
		hasTotal = 1
	}
	c.gave(len(p.Message))
	rc := C.mcpwgo_progress(c.ptr, C.uint32_t(id.kind), C.int64_t(id.num), cString(id.wire),
		C.size_t(len(id.wire)), C.double(p.Progress), C.double(p.Total), C.int(hasTotal),
		cString(p.Message), C.size_t(len(p.Message)))
	runtime.KeepAlive(c)
	return check("progress", rc)
}

// Cancel cancels our request: the peer is told (with reason, when not empty) and the request
// ends here, with no event; an answer arriving later is dropped. A 2025-11-25 task-augmented
// request whose task handle has not come ends without a word to the peer (tasks are cancelled
// with tasks/cancel, and there is no task id yet); if the handle still comes, the engine
// sends tasks/cancel for that task itself (where the peer declared tasks.cancel).
func (c *Conn) Cancel(now time.Time, request RequestID, reason string) error {
	if !c.lock() {
		return ErrFreed
	}
	defer c.unlockChanged()
	rc := C.mcpw_conn_cancel(c.ptr, c.ns(now), C.int64_t(request), cString(reason), C.size_t(len(reason)))
	runtime.KeepAlive(c)
	return check("cancel", rc)
}

// Shutdown begins the graceful MCP close: no new requests or notifications; the requests in
// flight either way get until now+grace to be answered (ours by the peer, the peer's by the
// handler, which goes on answering them), and the close ends as soon as none is left. When
// the grace runs out first, the peer is sent a cancellation for each of ours still
// unanswered, the peer's own still unanswered get an error (-32603), and the connection
// closes (a ClosedEvent with CloseLocal; Serve writes the cancellations before it returns).
// A 2026-07-28 server first ends the peer's subscriptions/listen requests with their results;
// a client's own, which nothing else ends, are cancelled at once (an AbandonedEvent each).
// Called again while closing, it can only bring the end sooner. Shutting down a closed
// connection does nothing. It does not free the handle: call Close for that.
func (c *Conn) Shutdown(now time.Time, grace time.Duration) error {
	if !c.lock() {
		return ErrFreed
	}
	defer c.unlockChanged()
	rc := C.mcpw_conn_close(c.ptr, c.ns(now), C.uint64_t(millisCeil(grace)))
	runtime.KeepAlive(c)
	return check("shutdown", rc)
}

// RefusePeerRequests answers every request of the peer's still in flight with an internal
// error (-32603) carrying message, all but 2026-07-28 listens, and
// returns how many it answered. Use it when nothing will answer them any more (a host that
// stops, or a handler that will take no more work) before Shutdown, whose close waits for
// the answers to the peer's requests too and would otherwise wait its whole grace. One the
// output has no room for is not answered (its peer is not reading).
func (c *Conn) RefusePeerRequests(message string) (int, error) {
	if !c.lock() {
		return 0, ErrFreed
	}
	defer c.unlockChanged()
	var n C.size_t
	rc := C.mcpw_conn_refuse_peer_requests(c.ptr, cString(message), C.size_t(len(message)), &n)
	runtime.KeepAlive(c)
	return int(n), check("refuse peer requests", rc)
}

// RequestRelated sends a request on behalf of the peer's request parent (a server asking
// the client for sampling or elicitation while it works on parent): in 2026-07-28 the
// request travels with parent's answer stream; in the handshake era it is a plain request.
func (c *Conn) RequestRelated(now time.Time, parent ID, method string, params json.RawMessage, opts *RequestOptions) (RequestID, error) {
	if !c.lock() {
		return 0, ErrFreed
	}
	defer c.unlockChanged()
	var o RequestOptions
	if opts != nil {
		o = *opts
	}
	progress := 0
	if o.Progress {
		progress = 1
	}
	c.gave(len(params))
	r := C.mcpwgo_request_related(c.ptr, c.ns(now), C.uint32_t(parent.kind), C.int64_t(parent.num),
		cString(parent.wire), C.size_t(len(parent.wire)), cString(method), C.size_t(len(method)),
		cBytes(params), C.size_t(len(params)), C.uint64_t(timeoutMillis(o.Timeout)),
		C.uint32_t(progress), C.uint32_t(o.ResetOnProgress))
	runtime.KeepAlive(c)
	if err := check("request related", r.rc); err != nil {
		return 0, err
	}
	return RequestID(r.id), nil
}

// Log (server) sends a log message (notifications/message) about the peer's request id, at
// level, from logger (empty for none), with data (any JSON value). In 2026-07-28 it goes out
// only if the request asked for this level or a more verbose one; in the handshake era,
// always. Either way we must have declared logging (else ErrNotNegotiated). It reports
// whether the message was sent; a client gets ErrWrongDirection.
func (c *Conn) Log(id ID, level LogLevel, logger string, data json.RawMessage) (bool, error) {
	if !c.lock() {
		return false, ErrFreed
	}
	defer c.unlockChanged()
	c.gave(len(logger) + len(data))
	r := C.mcpwgo_log(c.ptr, C.uint32_t(id.kind), C.int64_t(id.num), cString(id.wire), C.size_t(len(id.wire)),
		C.uint32_t(level), cString(logger), C.size_t(len(logger)), cBytes(data), C.size_t(len(data)))
	runtime.KeepAlive(c)
	if err := check("log", r.rc); err != nil {
		return false, err
	}
	return r.sent != 0, nil
}

// RespondInputRequired (server, 2026-07-28) answers the peer's tools/call, prompts/get or
// resources/read id with "input required": inputRequests (a JSON object, or nil for none)
// and/or requestState (empty for none).
func (c *Conn) RespondInputRequired(id ID, inputRequests json.RawMessage, requestState string) error {
	if !c.lock() {
		return ErrFreed
	}
	defer c.unlockChanged()
	c.gave(len(inputRequests) + len(requestState))
	rc := C.mcpwgo_respond_input_required(c.ptr, C.uint32_t(id.kind), C.int64_t(id.num), cString(id.wire),
		C.size_t(len(id.wire)), cBytes(inputRequests), C.size_t(len(inputRequests)),
		cString(requestState), C.size_t(len(requestState)))
	runtime.KeepAlive(c)
	return check("respond input required", rc)
}

// RespondURLElicitationRequired (server, 2025-11-25) answers the peer's request id with the
// error -32042: the user must complete the URL-mode elicitations first (elicitations is the
// JSON array of objects with mode "url", elicitationId, url and message). The client gets a
// URLElicitationRequiredEvent; announce each one's end with Notify of
// notifications/elicitation/complete. It fails with ErrNotInVersion outside 2025-11-25,
// ErrNotNegotiated when the client did not declare elicitation.url, ErrInvalidParams for
// elicitations that are not such an array; nothing is sent then.
func (c *Conn) RespondURLElicitationRequired(id ID, elicitations json.RawMessage) error {
	if !c.lock() {
		return ErrFreed
	}
	defer c.unlockChanged()
	c.gave(len(elicitations))
	rc := C.mcpwgo_respond_url_elicitation_required(c.ptr, C.uint32_t(id.kind), C.int64_t(id.num),
		cString(id.wire), C.size_t(len(id.wire)), cBytes(elicitations), C.size_t(len(elicitations)))
	runtime.KeepAlive(c)
	return check("respond url elicitation required", rc)
}

// Retry (client, 2026-07-28) sends again the request an InputRequiredEvent ended, with the
// original params, inputResponses (a JSON object) and the server's request state. The retry
// is a new request with its own id.
func (c *Conn) Retry(now time.Time, request RequestID, inputResponses json.RawMessage) (RequestID, error) {
	if !c.lock() {
		return 0, ErrFreed
	}
	defer c.unlockChanged()
	c.gave(len(inputResponses))
	r := C.mcpwgo_retry(c.ptr, c.ns(now), C.int64_t(request), cBytes(inputResponses), C.size_t(len(inputResponses)))
	runtime.KeepAlive(c)
	if err := check("retry", r.rc); err != nil {
		return 0, err
	}
	return RequestID(r.id), nil
}

// ---- Outputs ----------------------------------------------------------------------------

// NextEvent returns the next event, and false when there is none (or polling failed: see
// Err). Call it until false after every input and command:
//
//	for ev, ok := c.NextEvent(); ok; ev, ok = c.NextEvent() { ... }
//
// Events are copied out of the engine in batches, one crossing into C for up to 256 of
// them, so draining costs little per event.
//
// While Serve (or an HTTPClient's Run) drives the Conn, it hands every event to its
// handler, and NextEvent returns false: an event taken here would be one the loop never
// saw (its ClosedEvent, say, after which Serve would wait for good).
func (c *Conn) NextEvent() (Event, bool) {
	if c.driven.Load() {
		return nil, false
	}
	return c.nextEvent()
}

// nextEvent is NextEvent for the goroutine that drains the events (Serve's, when it runs).
func (c *Conn) nextEvent() (Event, bool) {
	// The queue is the draining goroutine's alone (Close leaves it be): only a refill, which
	// reaches the engine, takes the Conn.
	if c.head == len(c.queue) && !c.lockedRefill() {
		return nil, false
	}
	ev := c.queue[c.head]
	c.queue[c.head] = nil
	c.head++
	return ev, true
}

// AppendEvents appends every event available now to dst and returns it (none while Serve
// or an HTTPClient's Run drives the Conn, as NextEvent).
func (c *Conn) AppendEvents(dst []Event) []Event {
	if c.driven.Load() {
		return dst
	}
	for {
		if c.head == len(c.queue) && !c.lockedRefill() {
			return dst
		}
		dst = append(dst, c.queue[c.head:]...)
		for i := c.head; i < len(c.queue); i++ {
			c.queue[i] = nil
		}
		c.head = len(c.queue)
	}
}

// Err is the error that stopped NextEvent (a poisoned handle), ErrFreed once the Conn is
// closed (or, for a lent Conn, once its lender took it back), or nil. Check it when a drain
// loop ends: NextEvent reports no events in each case.
func (c *Conn) Err() error {
	c.mutex().Lock()
	defer c.mutex().Unlock()
	if c.err == nil && c.freed() {
		return ErrFreed
	}
	return c.err
}

// lockedRefill is refill with the Conn taken.
func (c *Conn) lockedRefill() bool {
	c.mutex().Lock()
	defer c.mutex().Unlock()
	return c.refill()
}

// refill copies the next batch of events out of the engine into the queue.
func (c *Conn) refill() bool {
	if c.freed() || c.err != nil || c.view {
		// (A view's events come from its lender; the queue, empty, is left as it is: an
		// HTTPClient's view may be called from several goroutines.)
		return false
	}
	c.queue, c.head = c.queue[:0], 0
	for {
		d := C.mcpwgo_drain(c.ptr, c.drainer, &c.records[0], C.size_t(len(c.records)),
			(*C.uint8_t)(unsafe.Pointer(&c.arena[0])), C.size_t(len(c.arena)))
		runtime.KeepAlive(c)
		if d.count > 0 {
			c.decode(int(d.count), int(d.used))
		}
		if d.rc != C.MCPW_OK {
			c.err = check("poll event", d.rc)
			break
		}
		if d.need == 0 {
			break
		}
		// The next event did not fit the arena; it stays polled in the drainer and must be
		// copied now, before any other call on the handle ends its views.
		if int(d.need) > len(c.arena) {
			c.arena = make([]byte, int(d.need))
		}
	}
	c.arena = trimArena(c.arena, batchArena)
	return len(c.queue) > 0
}

// decode turns count records (with used bytes of text in the arena) into events. All their
// text shares one fresh allocation; each field is a disjoint slice of it.
func (c *Conn) decode(count, used int) {
	c.queue = decodeRecords(c.records[:count], c.arena[:used], c.queue)
}

// decodeRecords appends the events of records (their text in arena) to dst.
func decodeRecords(records []C.mcpwgo_record, arena []byte, dst []Event) []Event {
	t := recordText{arena: arena}
	requests := 0
	for i := range records {
		if records[i].kind == C.MCPW_EVENT_REQUEST {
			requests++
		}
	}
	if requests > 1 {
		t.requests = make([]RequestEvent, 0, requests)
	}
	for i := range records {
		dst = append(dst, t.event(&records[i]))
	}
	return dst
}

// recordText reads the text of polled records. The arena is the engine's and is reused, so
// the text that events keep is copied out: all of it in one allocation, made on first need.
// Protocol versions and common method names are interned instead, so an event such as a
// stateless request's ReadyEvent allocates no text at all.
//
// A batch's request events share one allocation too (requests, when the batch has several):
// one allocation per batch instead of one per request. An application that keeps one of
// them keeps the batch's (at most 256, 72 bytes each) alive with it, as it already keeps
// the batch's text.
type recordText struct {
	arena    []byte
	text     []byte         // the copy of arena, nil until a view needs it
	requests []RequestEvent // room for the batch's request events, or nil
}

// request returns a new, zero request event, from the batch's shared allocation while it has
// room.
func (t *recordText) request() *RequestEvent {
	n := len(t.requests)
	if n == cap(t.requests) {
		return new(RequestEvent)
	}
	t.requests = t.requests[:n+1]
	return &t.requests[n]
}

func (t *recordText) copied() []byte {
	if t.text == nil {
		t.text = make([]byte, len(t.arena))
		copy(t.text, t.arena)
	}
	return t.text
}

func (t *recordText) view(r *C.mcpwgo_record, i int) (string, bool) {
	n := int(r.len[i])
	if n < 0 {
		return "", false
	}
	off := int(r.off[i])
	if s, ok := interned(t.arena[off : off+n]); ok {
		return s, true
	}
	return bytesToString(t.copied()[off : off+n]), true
}

func (t *recordText) str(r *C.mcpwgo_record, i int) string {
	s, _ := t.view(r, i)
	return s
}

func (t *recordText) raw(r *C.mcpwgo_record, i int) json.RawMessage {
	n := int(r.len[i])
	if n < 0 {
		return nil
	}
	off := int(r.off[i])
	return json.RawMessage(t.copied()[off : off+n : off+n])
}

func (t *recordText) id(r *C.mcpwgo_record) ID {
	switch r.id_kind {
	case C.MCPW_ID_INT:
		return ID{kind: idInt, num: int64(r.id_int)}
	case C.MCPW_ID_STRING:
		return ID{kind: idString, wire: t.str(r, C.MCPWGO_ID)}
	}
	return ID{}
}

// interned returns the constant string equal to b when b is a protocol version or a common
// method name (the comparison allocates nothing).
func interned(b []byte) (string, bool) {
	switch string(b) {
	case "2024-11-05":
		return "2024-11-05", true
	case "2025-03-26":
		return "2025-03-26", true
	case "2025-06-18":
		return "2025-06-18", true
	case "2025-11-25":
		return "2025-11-25", true
	case "2026-07-28":
		return "2026-07-28", true
	case "tools/call":
		return "tools/call", true
	case "tools/list":
		return "tools/list", true
	case "ping":
		return "ping", true
	case "notifications/initialized":
		return "notifications/initialized", true
	case "notifications/cancelled":
		return "notifications/cancelled", true
	case "notifications/progress":
		return "notifications/progress", true
	}
	return "", false
}

// event decodes one record.
func (t *recordText) event(r *C.mcpwgo_record) Event {
	switch r.kind {
	case C.MCPW_EVENT_READY:
		return &ReadyEvent{Version: t.str(r, C.MCPWGO_VERSION)}
	case C.MCPW_EVENT_CLOSED:
		return &ClosedEvent{Reason: CloseReason(r.close_reason), Code: int64(r.code), Version: t.str(r, C.MCPWGO_VERSION)}
	case C.MCPW_EVENT_REQUEST:
		ev := t.request()
		*ev = RequestEvent{ID: t.id(r), Method: t.str(r, C.MCPWGO_METHOD), Params: t.raw(r, C.MCPWGO_PARAMS)}
		return ev
	case C.MCPW_EVENT_NOTIFICATION:
		return &NotificationEvent{Method: t.str(r, C.MCPWGO_METHOD), Params: t.raw(r, C.MCPWGO_PARAMS)}
	case C.MCPW_EVENT_PEER_CANCELLED:
		reason, has := t.view(r, C.MCPWGO_REASON)
		return &PeerCancelledEvent{ID: t.id(r), Reason: reason, HasReason: has}
	case C.MCPW_EVENT_RESPONSE:
		return &ResponseEvent{Request: RequestID(r.request), Result: t.raw(r, C.MCPWGO_RESULT)}
	case C.MCPW_EVENT_ERROR:
		return &ErrorEvent{Request: RequestID(r.request), Code: int64(r.code),
			Message: t.str(r, C.MCPWGO_MESSAGE), Data: t.raw(r, C.MCPWGO_DATA)}
	case C.MCPW_EVENT_PROGRESS:
		msg, has := t.view(r, C.MCPWGO_MESSAGE)
		return &ProgressEvent{Request: RequestID(r.request), Progress: float64(r.progress),
			Total: float64(r.total), HasTotal: r.has_total != 0, Message: msg, HasMessage: has}
	case C.MCPW_EVENT_TIMED_OUT:
		return &TimedOutEvent{Request: RequestID(r.request)}
	case C.MCPW_EVENT_ABANDONED:
		return &AbandonedEvent{Request: RequestID(r.request)}
	case C.MCPW_EVENT_INPUT_REQUIRED:
		state, has := t.view(r, C.MCPWGO_REQUEST_STATE)
		return &InputRequiredEvent{Request: RequestID(r.request), InputRequests: t.raw(r, C.MCPWGO_INPUT_REQUESTS),
			RequestState: state, HasRequestState: has}
	case C.MCPW_EVENT_TASK_CREATED:
		return &TaskCreatedEvent{Request: RequestID(r.request), Task: t.raw(r, C.MCPWGO_RESULT)}
	case C.MCPW_EVENT_URL_ELICITATION_REQUIRED:
		return &URLElicitationRequiredEvent{Request: RequestID(r.request), Elicitations: t.raw(r, C.MCPWGO_DATA)}
	case C.MCPW_EVENT_ELICITATION_COMPLETE:
		return &ElicitationCompleteEvent{ElicitationID: t.str(r, C.MCPWGO_MESSAGE)}
	case C.MCPW_EVENT_INVALID_RESPONSE:
		return &InvalidResponseEvent{Request: RequestID(r.request)}
	case C.MCPW_EVENT_FAILED:
		return &FailedEvent{Request: RequestID(r.request), Status: int(r.code), Reason: t.str(r, C.MCPWGO_MESSAGE)}
	case C.MCPW_EVENT_VIOLATION:
		return &ViolationEvent{Violation: Violation(r.violation), DecodeReason: DecodeReason(r.decode_reason),
			ID: t.id(r), Method: t.str(r, C.MCPWGO_METHOD)}
	}
	return &UnknownEvent{Kind: int(r.kind)}
}

// WriteTo writes the pending output to w until none is left, and returns how many bytes w
// took. A short write consumes exactly what was written and is retried; an error from w is
// returned after consuming what it did take, so a later WriteTo resumes at the right byte
// (a non-blocking writer returning EAGAIN just leaves the rest pending). Each Write gets a
// copy of up to 64 KiB, made with the Conn taken; the Write itself runs without it, so other
// goroutines' commands and Close do not wait for a slow writer, and w may call the Conn. w
// must not keep the slice (the next Write reuses it). One writer at a time: two WriteTo
// calls at once would both write the same bytes. While Serve (or an HTTPClient's Run)
// drives the Conn, it is the writer, and WriteTo writes nothing and fails.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	if c.driven.Load() {
		return 0, errServing
	}
	return c.writeTo(w)
}

// writeTo is WriteTo for the writer of the output (Serve's, when it runs).
func (c *Conn) writeTo(w io.Writer) (int64, error) {
	total, _, err := c.writeOut(w, 0, nil)
	return total, err
}

// writeOut is WriteTo; but with handOver > 0, when the output it finds (at first, or after a
// Write, with more given meanwhile) is handOver bytes or more, or when it has written
// handOver bytes and more output came meanwhile, it stops there and reports big (Serve hands
// the rest to its writer goroutine: another goroutine that keeps giving commands, each write
// finding a little more, would otherwise hold Serve's loop here for as long as it goes on).
// before, when not nil, is called once, before the first Write.
func (c *Conn) writeOut(w io.Writer, handOver int, before func()) (total int64, big bool, err error) {
	for {
		// Up to writeChunk bytes are copied out with the Conn taken, and written without it:
		// the commands of other goroutines, and Close, do not wait for a slow writer, and
		// the writer may call the Conn.
		if !c.lock() {
			return total, false, ErrFreed
		}
		lent := C.mcpwgo_transmit(c.ptr)
		runtime.KeepAlive(c)
		if err := check("transmit", lent.rc); err != nil || lent.len == 0 {
			if err == nil {
				c.given.Store(0) // all written: nothing is estimated any more
			}
			c.unlock()
			return total, false, err
		}
		if handOver > 0 && (int(lent.len) >= handOver || total >= int64(handOver)) {
			c.unlock()
			return total, true, nil
		}
		buf := append(c.wbuf[:0], unsafe.Slice((*byte)(unsafe.Pointer(lent.bytes)), min(int(lent.len), writeChunk))...)
		c.wbuf = nil // (a second writer, against the rules, gets a buffer of its own)
		c.unlock()
		if before != nil {
			before()
			before = nil
		}
		n, err := w.Write(buf)
		if n < 0 || n > len(buf) {
			n = 0
			if err == nil {
				err = io.ErrShortWrite
			}
		}
		if !c.lock() {
			return total + int64(n), false, ErrFreed // closed while writing
		}
		c.wbuf = buf
		if n > 0 {
			if cerr := c.consume(n); cerr != nil {
				c.unlock()
				return total + int64(n), false, cerr // (w took them all the same)
			}
			total += int64(n)
		}
		c.unlock()
		if err != nil {
			return total, false, err
		}
		if n == 0 {
			return total, false, io.ErrShortWrite
		}
	}
}

// writeChunk is the most WriteTo hands its writer in one Write.
const writeChunk = 64 << 10

// AppendOutput appends all pending output to dst, marks it written, and returns dst. While
// Serve (or an HTTPClient's Run) drives the Conn, it takes nothing and fails, as WriteTo.
func (c *Conn) AppendOutput(dst []byte) ([]byte, error) {
	if c.driven.Load() {
		return dst, errServing
	}
	if !c.lock() {
		return dst, ErrFreed
	}
	defer c.unlock()
	for {
		lent := C.mcpwgo_transmit(c.ptr)
		runtime.KeepAlive(c)
		if err := check("transmit", lent.rc); err != nil {
			return dst, err
		}
		if lent.len == 0 {
			return dst, nil
		}
		dst = append(dst, unsafe.Slice((*byte)(unsafe.Pointer(lent.bytes)), int(lent.len))...)
		if err := c.consume(int(lent.len)); err != nil {
			return dst, err
		}
	}
}

// measureGiven sets given to the output the engine holds (what it lends next), and returns
// it: with the Conn taken, so that no command's estimate is lost between the two.
func (c *Conn) measureGiven() int64 {
	return int64(c.pendingOutput(true))
}

// PendingOutput reports how many bytes the engine lends next (0: nothing to write).
func (c *Conn) PendingOutput() int {
	return c.pendingOutput(false)
}

// pendingOutput is PendingOutput; with store, given is set to it too, with the Conn taken.
func (c *Conn) pendingOutput(store bool) int {
	if !c.lock() {
		return 0
	}
	defer c.unlock()
	lent := C.mcpwgo_transmit(c.ptr)
	runtime.KeepAlive(c)
	if lent.rc != C.MCPW_OK {
		return 0
	}
	if store {
		c.given.Store(int64(lent.len))
	}
	return int(lent.len)
}

func (c *Conn) consume(n int) error {
	rc := C.mcpw_conn_consume(c.ptr, C.size_t(n))
	runtime.KeepAlive(c)
	return check("consume", rc)
}

// ---- Getters ----------------------------------------------------------------------------

// Stats counts what the engine dropped quietly, as the spec asks.
type Stats struct {
	LateResponses         uint64 // responses to our requests after a timeout or cancel
	DroppedProgress       uint64 // progress for unknown or finished requests
	NonIncreasingProgress uint64 // progress whose value did not increase
	IgnoredCancellations  uint64 // cancellations for requests not in flight
	// SuppressedResponses counts answers not sent: to requests the peer had cancelled, and
	// (HTTPClient) answers past 1,024 waiting while a server asks faster than it takes them.
	SuppressedResponses uint64
	DroppedEvents       uint64 // peer notifications dropped because the queue was full
	// IgnoredElicitationCompletions counts notifications/elicitation/complete for unknown or
	// already-completed elicitation ids.
	IgnoredElicitationCompletions uint64
}

// Status is a snapshot of the connection's lifecycle and bookkeeping.
type Status struct {
	State State
	Role  Role
	// OursInFlight is how many of our requests await an answer; PeersInFlight how many of
	// the peer's await ours.
	OursInFlight  int
	PeersInFlight int
	Stats         Stats
}

// Status reads the connection's state, role, requests in flight and drop counters in one
// call.
func (c *Conn) Status() (Status, error) {
	if !c.lock() {
		return Status{State: StateClosed}, ErrFreed
	}
	defer c.unlock()
	s := C.mcpwgo_conn_status(c.ptr)
	runtime.KeepAlive(c)
	if err := check("status", s.rc); err != nil {
		return Status{}, err
	}
	return Status{
		State:         State(s.state),
		Role:          Role(s.role),
		OursInFlight:  int(s.ours),
		PeersInFlight: int(s.peers),
		Stats: Stats{
			LateResponses:                 uint64(s.stats.late_responses),
			DroppedProgress:               uint64(s.stats.dropped_progress),
			NonIncreasingProgress:         uint64(s.stats.non_increasing_progress),
			IgnoredCancellations:          uint64(s.stats.ignored_cancellations),
			SuppressedResponses:           uint64(s.stats.suppressed_responses),
			DroppedEvents:                 uint64(s.stats.dropped_events),
			IgnoredElicitationCompletions: uint64(s.ignored_elicitation_completions),
		},
	}, nil
}

// State is where the lifecycle stands (StateClosed once the handle is freed).
func (c *Conn) State() State {
	s, err := c.Status()
	if err != nil {
		return StateClosed
	}
	return s.State
}

// Era is the protocol era in force (EraUndecided while a client probes).
func (c *Conn) Era() Era {
	if !c.lock() {
		return EraOther
	}
	defer c.unlock()
	r := C.mcpwgo_conn_era(c.ptr)
	runtime.KeepAlive(c)
	if r.rc != C.MCPW_OK {
		return EraOther
	}
	return Era(r.era)
}

// ProtocolVersion is the negotiated protocol version, or "" before negotiation.
func (c *Conn) ProtocolVersion() string {
	if !c.lock() {
		return ""
	}
	defer c.unlock()
	v := C.mcpwgo_protocol_version(c.ptr)
	runtime.KeepAlive(c)
	return copyView(v)
}

// PeerInfo is the peer's clientInfo / serverInfo object, or nil before the handshake.
func (c *Conn) PeerInfo() json.RawMessage {
	if !c.lock() {
		return nil
	}
	defer c.unlock()
	v := C.mcpwgo_peer_info(c.ptr)
	defer runtime.KeepAlive(c)
	return copyRaw(v)
}

// PeerCapabilities is the peer's capabilities object as it declared it, or nil before the
// handshake.
func (c *Conn) PeerCapabilities() json.RawMessage {
	if !c.lock() {
		return nil
	}
	defer c.unlock()
	v := C.mcpwgo_peer_capabilities(c.ptr)
	defer runtime.KeepAlive(c)
	return copyRaw(v)
}

// PeerInstructions (client) is the server's instructions, and false when it sent none.
func (c *Conn) PeerInstructions() (string, bool) {
	if !c.lock() {
		return "", false
	}
	defer c.unlock()
	v := C.mcpwgo_peer_instructions(c.ptr)
	defer runtime.KeepAlive(c)
	if v.rc != C.MCPW_OK || v.view.ptr == nil {
		return "", false
	}
	return copyView(v), true
}

// ---- Memory helpers ---------------------------------------------------------------------

// goText copies the n bytes at p (NULL with 0 for none) into a string. Used instead of
// C.GoStringN, whose C.int length wraps for a text past 2 GiB (a frame that large is possible
// with a raised MaxFrame), and panics.
func goText(p unsafe.Pointer, n uint) string {
	if n == 0 {
		return ""
	}
	return string(unsafe.Slice((*byte)(p), n))
}

// goBytes copies the n bytes at p into a new slice (empty but not nil when n is 0 and p is
// not NULL), as C.GoBytes does, with no 2 GiB limit (see goText).
func goBytes(p unsafe.Pointer, n uint) []byte {
	if p == nil {
		return nil
	}
	return bytes.Clone(unsafe.Slice((*byte)(p), n))
}

func copyView(v C.mcpwgo_view) string {
	if v.rc != C.MCPW_OK || v.view.ptr == nil {
		return ""
	}
	return goText(unsafe.Pointer(v.view.ptr), uint(v.view.len))
}

func copyRaw(v C.mcpwgo_view) json.RawMessage {
	if v.rc != C.MCPW_OK || v.view.ptr == nil {
		return nil
	}
	return json.RawMessage(goBytes(unsafe.Pointer(v.view.ptr), uint(v.view.len)))
}

// cString lends the bytes of s to C for the duration of one call (nil when empty). The
// library reads them during the call only and keeps no pointer.
func cString(s string) *C.char {
	if len(s) == 0 {
		return nil
	}
	return (*C.char)(*(*unsafe.Pointer)(unsafe.Pointer(&s)))
}

// cBytes lends b to C for the duration of one call (nil when nil or empty).
func cBytes(b []byte) *C.char {
	return (*C.char)(bytesPtr(b))
}

func bytesPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// bytesToString views b as a string without copying; b must never change afterwards.
func bytesToString(b []byte) string {
	return *(*string)(unsafe.Pointer(&b))
}
