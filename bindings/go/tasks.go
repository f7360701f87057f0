package mcpwire

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"errors"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// TaskConfig bounds a Tasks table; nil or the zero value means the defaults.
type TaskConfig struct {
	// MaxTasks is how many tasks the table keeps at once; at the cap, Create drops the oldest
	// terminal task whose end a client fetched (2026-07-28: its tasks/get of the ended task;
	// 2025-11-25: its tasks/result or tasks/cancel) or that was cancelled, or fails with ErrTasksFull when
	// there is none: a completed or failed task nobody fetched stays for its whole TTL (with
	// no TTL, any terminal task may make room). 0: 1024.
	MaxTasks int
	// MaxTasksPerOwner is how many tasks one requestor (CreateLegacy's owner) may hold at
	// once, terminal ones included, so that one session cannot take every slot of MaxTasks;
	// at the cap, CreateLegacy drops that owner's oldest terminal task that may go (as for
	// MaxTasks), or fails with ErrTasksFull for that owner only when there is none. Create's tasks (2026-07-28)
	// have no owner: only MaxTasks bounds them. 0: 256.
	MaxTasksPerOwner int
	// TTL is how long a task lives from its creation (the ttlMs clients see), rounded up to
	// milliseconds. 0: one hour; negative: no limit (then only MaxTasks bounds the table).
	TTL time.Duration
	// PollInterval is the polling interval suggested to clients (pollIntervalMs), rounded up
	// to milliseconds. 0: one second.
	PollInterval time.Duration
	// MaxInputRequests bounds the input requests a task has outstanding at once (Ask).
	// 0: 16.
	MaxInputRequests int
	// MaxPayload is the largest result, error or input request a task keeps, in bytes of
	// JSON. 0: 1 MiB.
	MaxPayload int
}

// TaskStatus is where a task is. The last three are terminal: a task in them never changes
// again.
type TaskStatus int

// The task statuses.
const (
	TaskWorking       TaskStatus = C.MCPW_TASK_STATUS_WORKING        // the work is going on
	TaskInputRequired TaskStatus = C.MCPW_TASK_STATUS_INPUT_REQUIRED // it waits for the client's answers (Ask)
	TaskCompleted     TaskStatus = C.MCPW_TASK_STATUS_COMPLETED      // it finished with a result (Complete)
	TaskFailed        TaskStatus = C.MCPW_TASK_STATUS_FAILED         // it failed with a JSON-RPC error (Fail), or a legacy task completed with isError true
	TaskCancelled     TaskStatus = C.MCPW_TASK_STATUS_CANCELLED      // it was cancelled (Cancel)
	TaskStatusOther   TaskStatus = C.MCPW_TASK_STATUS_OTHER          // a status this version has no name for
)

var taskStatusNames = map[TaskStatus]string{
	TaskWorking: "working", TaskInputRequired: "input_required", TaskCompleted: "completed",
	TaskFailed: "failed", TaskCancelled: "cancelled", TaskStatusOther: "other",
}

// String is the status's wire name ("input_required").
func (s TaskStatus) String() string { return enumName(taskStatusNames, s, "task-status") }

// IsTerminal reports whether the status is final (completed, failed or cancelled).
func (s TaskStatus) IsTerminal() bool {
	return s == TaskCompleted || s == TaskFailed || s == TaskCancelled
}

// TaskEventKind says what a TaskEvent reports.
type TaskEventKind int

// The task event kinds.
const (
	// TaskEventInput: the client answered the input request Key of Task (tasks/update) with
	// Response. Once every outstanding request is answered the task is working again.
	TaskEventInput TaskEventKind = C.MCPW_TASK_EVENT_INPUT
	// TaskEventCancelRequested: the client asked to cancel Task (tasks/cancel). Cancellation
	// is cooperative: call Cancel once the work stopped, or finish the task normally. (A
	// 2025-11-25 task is cancelled already: just stop the work; a later Cancel, Complete or
	// Fail gets ErrTaskTerminal.)
	TaskEventCancelRequested TaskEventKind = C.MCPW_TASK_EVENT_CANCEL_REQUESTED
	// TaskEventExpired: Task reached its TTL and was deleted; stop any work left for it.
	TaskEventExpired TaskEventKind = C.MCPW_TASK_EVENT_EXPIRED
	// TaskEventOther: something this version has no kind for; ignore it.
	TaskEventOther TaskEventKind = C.MCPW_TASK_EVENT_OTHER
)

var taskEventNames = map[TaskEventKind]string{
	TaskEventInput: "input", TaskEventCancelRequested: "cancel-requested",
	TaskEventExpired: "expired", TaskEventOther: "other",
}

// String names the kind ("cancel-requested").
func (k TaskEventKind) String() string { return enumName(taskEventNames, k, "task-event") }

// TaskEvent is what the client did to a task (or its expiry), from Tasks.PollEvent. It owns
// its data.
type TaskEvent struct {
	Kind TaskEventKind
	// Task is the task's id.
	Task string
	// Key is the input request's key, as given to Ask (TaskEventInput).
	Key string
	// Response is the client's answer, raw JSON (TaskEventInput): an elicitation or sampling
	// result, for example.
	Response json.RawMessage
}

// Tasks is a server's task table for the tasks extension of 2026-07-28
// (io.modelcontextprotocol/tasks, SEP-2663): a long tools/call is answered at once with a
// task handle, and the client polls tasks/get until the task is terminal, answers its input
// requests with tasks/update, or cancels it with tasks/cancel.
//
// The table stands apart from any Conn because a task outlives the request that created it
// (over HTTP each 2026-07-28 request has a connection of its own): keep one per server. The
// flow:
//
//  1. On a tools/call whose request declared the extension (CapTasksExtension in
//     Conn.RequestContext), Create a task and Respond with it.
//  2. Hand every request to Serve before your own dispatch: it answers tasks/get,
//     tasks/update and tasks/cancel of 2026-07-28, and says false for anything else (a
//     2025-11-25 session's tasks/get goes on to ServeLegacy).
//  3. As the work goes on: Ask for input (answers come as TaskEventInput from PollEvent),
//     SetMessage for progress, then Complete, Fail or Cancel.
//  4. Drain PollEvent after Serve and HandleTimeout; call HandleTimeout at PollTimeout.
//
// The same table serves the experimental tasks of 2025-11-25: CreateLegacy, ServeLegacy
// (tasks/result waits for the task's end), Resume and PollResult.
//
// A Tasks is safe for concurrent use (work finishing on other goroutines), as a Conn is (a
// Conn an HTTPServer lends is for its callback only, or With's function). Close
// frees it; a finalizer calls Close for a table that becomes unreachable without it.
type Tasks struct {
	mu     sync.Mutex
	ptr    *C.mcpw_tasks
	origin time.Time
	lastNs uint64
	err    error // sticky: why PollEvent or PollResult stopped (a poisoned table)
}

// Err is the error that stopped PollEvent or PollResult (a panic inside the table poisons
// it: they then report nothing), ErrFreed once the table is closed, or nil. Check it when a
// drain loop ends, as Conn.Err.
func (t *Tasks) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil && t.ptr == nil {
		return ErrFreed
	}
	return t.err
}

// NewTasks creates an empty table with cfg (nil for the defaults). now and unixMs are the
// same instant, on the clock of every later now given to the table (time.Now() readings,
// or simulated times) and on the wall clock in milliseconds since 1970
// (now.UnixMilli() for a real clock): the times a task carries (createdAt, lastUpdatedAt)
// are counted from them. A negative MaxTasks, MaxTasksPerOwner, MaxInputRequests,
// MaxPayload or PollInterval (or unixMs) is ErrInvalidArgument; a negative TTL means no
// limit, as TaskConfig says.
func NewTasks(cfg *TaskConfig, now time.Time, unixMs int64) (*Tasks, error) {
	var c TaskConfig
	if cfg != nil {
		c = *cfg
	}
	if c.MaxTasks < 0 || c.MaxTasksPerOwner < 0 || c.MaxInputRequests < 0 || c.MaxPayload < 0 ||
		c.PollInterval < 0 || unixMs < 0 {
		return nil, &ResultError{Op: "new tasks", Code: CodeInvalidArgument}
	}
	hasTTL, ttl := 0, uint64(0)
	if c.TTL != 0 {
		hasTTL, ttl = 1, millisCeil(c.TTL) // negative: 0, no limit
	}
	made := C.mcpwgo_tasks_new(0, C.uint64_t(unixMs), C.size_t(c.MaxTasks), C.int(hasTTL),
		C.uint64_t(ttl), C.uint64_t(millisCeil(c.PollInterval)), C.size_t(c.MaxInputRequests),
		C.size_t(c.MaxPayload), C.size_t(c.MaxTasksPerOwner))
	if err := check("new tasks", made.rc); err != nil {
		return nil, err
	}
	t := &Tasks{ptr: made.tasks, origin: now}
	runtime.SetFinalizer(t, (*Tasks).Close)
	return t, nil
}

// Close frees the table and every task in it (clients polling them then get "task not
// found" from whoever answers). Calling it again does nothing; every other method returns
// ErrFreed afterwards. It always returns nil.
func (t *Tasks) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return nil
	}
	C.mcpw_tasks_free(t.ptr)
	t.ptr = nil
	runtime.SetFinalizer(t, nil)
	return nil
}

// ns turns now into the table's clock: nanoseconds since NewTasks, never going backwards.
// The caller holds t.mu.
func (t *Tasks) ns(now time.Time) C.uint64_t {
	if d := now.Sub(t.origin); d > 0 && uint64(d) > t.lastNs {
		t.lastNs = uint64(d)
	}
	return C.uint64_t(t.lastNs)
}

// Create makes a working task and returns its id: 128 bits from getrandom(2) (task ids are
// bearer handles), as 32 hex digits. It is visible to tasks/get at once; answer the request
// with Respond. At MaxTasks with no fetched or cancelled terminal task to drop, it fails with
// ErrTasksFull: answer the request without a task then.
func (t *Tasks) Create(now time.Time) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return "", ErrFreed
	}
	v := C.mcpwgo_tasks_create(t.ptr, t.ns(now))
	runtime.KeepAlive(t)
	if err := check("create task", v.rc); err != nil {
		return "", err
	}
	return goText(unsafe.Pointer(v.view.ptr), uint(v.view.len)), nil
}

// CreateLegacy is Create for a 2025-11-25 task-augmented request (the experimental tasks of
// that version: a tools/call whose params have a task member, let through only where the
// server declared tasks.requests.tools.call). The task belongs to owner, a number of your
// choosing for the session or connection that asked: ServeLegacy shows a requestor its own
// tasks only. Its wire shapes are that version's ({"task":{...}}, ttl, pollInterval). Answer
// the request with Respond. An owner holding MaxTasksPerOwner tasks has its oldest terminal
// one that may go (see MaxTasks) dropped to make room, or, with none, gets ErrTasksFull (others
// still get tasks).
func (t *Tasks) CreateLegacy(now time.Time, owner uint64) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return "", ErrFreed
	}
	v := C.mcpwgo_tasks_create_legacy(t.ptr, t.ns(now), C.uint64_t(owner))
	runtime.KeepAlive(t)
	if err := check("create legacy task", v.rc); err != nil {
		return "", err
	}
	return goText(unsafe.Pointer(v.view.ptr), uint(v.view.len)), nil
}

// taskAnswerGuess is what a tasks call counts toward its Conn's output estimate (see
// Conn.given): a stored result may be large, so enough that Serve soon asks the engine.
const taskAnswerGuess = 64 << 10

// Respond answers the peer's request id on conn with the handle of task (its
// CreateTaskResult: in 2026-07-28, for a tools/call, resultType "task" with the task's id,
// status and times; in 2025-11-25, for a task-augmented request and a CreateLegacy task,
// {"task":{...}}). It fails with ErrNotNegotiated when a 2026-07-28 request, or the server's
// own Capabilities, did not declare the extension (answer it normally then, and Cancel the
// task), ErrNotEligible for a
// 2026-07-28 request but tools/call or a 2025-11-25 request that did not ask for a task,
// ErrInvalidParams for a task of the other version's shape, ErrNotInVersion before
// 2025-11-25, ErrUnknownRequest for an id not in flight and ErrUnknownTask for an unknown
// task; nothing changes then.
func (t *Tasks) Respond(conn *Conn, id ID, task string) error {
	if conn == nil {
		return &ResultError{Op: "respond task", Code: CodeNullArgument}
	}
	// conn first: a call blocked on conn (its lock held elsewhere) holds no other table
	// user back.
	if !conn.lock() {
		return ErrFreed
	}
	defer conn.unlockChanged() // (answers went out on conn)
	conn.gave(taskAnswerGuess)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return ErrFreed
	}
	rc := C.mcpwgo_tasks_respond(conn.ptr, C.uint32_t(id.kind), C.int64_t(id.num), cString(id.wire),
		C.size_t(len(id.wire)), t.ptr, cString(task), C.size_t(len(task)))
	runtime.KeepAlive(t)
	runtime.KeepAlive(conn)
	return check("respond task", rc)
}

// Serve answers the peer's request id on conn when method is a tasks method of the
// extension: tasks/get with the task (its input requests, result or error by status),
// tasks/update and tasks/cancel with an empty acknowledgement (their effects come from
// PollEvent), an unknown task with -32602. It reports false, answering nothing, for any
// other method, and for a request that is not a 2026-07-28 one (a 2025-11-25 session's
// tasks/get is ServeLegacy's): answer that one yourself. params is the request's params (nil when absent).
// Drain PollEvent afterwards. It checks no access: the extension requires a check on every
// task-related request, so make sure the caller may see the task first (and set
// Config.ReviewListens so that listens naming task ids are checked too).
func (t *Tasks) Serve(now time.Time, conn *Conn, id ID, method string, params json.RawMessage) (bool, error) {
	if conn == nil {
		return false, &ResultError{Op: "serve tasks", Code: CodeNullArgument}
	}
	// conn first: a call blocked on conn (its lock held elsewhere) holds no other table
	// user back.
	if !conn.lock() {
		return false, ErrFreed
	}
	defer conn.unlockChanged() // (answers went out on conn)
	conn.gave(taskAnswerGuess)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return false, ErrFreed
	}
	r := C.mcpwgo_tasks_serve(t.ptr, t.ns(now), conn.ptr, C.uint32_t(id.kind), C.int64_t(id.num),
		cString(id.wire), C.size_t(len(id.wire)), cString(method), C.size_t(len(method)),
		cBytes(params), C.size_t(len(params)))
	runtime.KeepAlive(t)
	runtime.KeepAlive(conn)
	if err := check("serve tasks", r.rc); err != nil {
		return false, err
	}
	return r.served != 0, nil
}

// ServeLegacy (2025-11-25) answers the peer's request id on conn, from owner (as given to
// CreateLegacy; it sees its own tasks only), when method is a tasks method of that version:
// tasks/get and tasks/cancel with the task, tasks/list with the owner's tasks, tasks/result
// with the underlying request's result (with the related-task _meta) or error once the task
// has ended. A tasks/result on a running task is not answered now: it comes from PollResult
// once the task ends or expires; those the client cancelled meanwhile stop waiting (conn is
// owner's connection), and at most 1024 wait for one task (more get -32603 at once).
// tasks/cancel ends the task as cancelled at once and reports
// TaskEventCancelRequested. An unknown task, or cancelling a terminal one, gets -32602. It
// reports false, answering nothing, for any other method. Drain PollEvent and PollResult
// afterwards. After ErrOutputFull nothing changed (a tasks/cancel has not cancelled its task
// yet): let the output drain and call again with the same request.
func (t *Tasks) ServeLegacy(now time.Time, owner uint64, conn *Conn, id ID, method string, params json.RawMessage) (bool, error) {
	if conn == nil {
		return false, &ResultError{Op: "serve legacy tasks", Code: CodeNullArgument}
	}
	// conn first: a call blocked on conn (its lock held elsewhere) holds no other table
	// user back.
	if !conn.lock() {
		return false, ErrFreed
	}
	defer conn.unlockChanged() // (answers went out on conn)
	conn.gave(taskAnswerGuess)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return false, ErrFreed
	}
	r := C.mcpwgo_tasks_serve_legacy(t.ptr, t.ns(now), C.uint64_t(owner), conn.ptr, C.uint32_t(id.kind),
		C.int64_t(id.num), cString(id.wire), C.size_t(len(id.wire)), cString(method),
		C.size_t(len(method)), cBytes(params), C.size_t(len(params)))
	runtime.KeepAlive(t)
	runtime.KeepAlive(conn)
	if err := check("serve legacy tasks", r.rc); err != nil {
		return false, err
	}
	return r.served != 0, nil
}

// TaskResult is a 2025-11-25 tasks/result request that can be answered now (its task ended
// or expired), from Tasks.PollResult. It owns its data. Answer it with Write on the
// connection of Owner.
type TaskResult struct {
	// Owner is whose task it was (as given to CreateLegacy).
	Owner uint64
	// ID is the waiting tasks/result request's id.
	ID ID
	// IsError says the answer is a JSON-RPC error (Code, Message, Data) rather than Result.
	IsError bool
	// Result is the raw result: what the task's request would have returned, with the
	// related-task _meta.
	Result json.RawMessage
	Code   int64
	// Message is the error message.
	Message string
	// Data is the raw error data, or nil.
	Data json.RawMessage
}

// Write answers the waiting request on conn (the connection of r.Owner) with r's result or
// error. An error conn cannot carry (-32042 to a client that did not declare URL
// elicitation) goes out as -32603 with its message, so that the request is answered.
// Tasks.WriteResult does the same and tells the table when the client had cancelled the
// request: prefer it when the result was just polled.
func (r TaskResult) Write(conn *Conn) error {
	if conn == nil {
		return &ResultError{Op: "write task result", Code: CodeNullArgument}
	}
	if !r.IsError {
		return conn.Respond(r.ID, r.Result)
	}
	err := conn.RespondError(r.ID, r.Code, r.Message, r.Data)
	for _, cannot := range []error{ErrNotNegotiated, ErrInvalidParams, ErrCodeNotInVersion, ErrNotInVersion} {
		if errors.Is(err, cannot) {
			return conn.RespondError(r.ID, CodeInternalError, r.Message, nil)
		}
	}
	return err
}

// PollResult returns the next 2025-11-25 tasks/result that can be answered now, oldest first,
// and false when there is none. Call it until false after the calls that end tasks
// (Complete, Fail, Cancel, ServeLegacy) and after HandleTimeout, and answer each with
// WriteResult (or its Write).
func (t *Tasks) PollResult() (TaskResult, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return TaskResult{}, false
	}
	p := C.mcpwgo_tasks_poll_result(t.ptr)
	defer runtime.KeepAlive(t)
	if p.rc != C.MCPW_OK {
		t.failed(check("poll result", p.rc))
		return TaskResult{}, false
	}
	if !bool(p.result.ready) {
		return TaskResult{}, false
	}
	// The views are the table's until its next call: copy them now.
	r := &p.result
	out := TaskResult{Owner: uint64(r.owner), IsError: bool(r.is_error), Code: int64(r.code),
		Message: copyStr(r.message), Result: copyJSON(r.result), Data: copyJSON(r.data)}
	switch r.id.kind {
	case C.MCPW_ID_INT:
		out.ID = ID{kind: idInt, num: int64(r.id.integer)}
	case C.MCPW_ID_STRING:
		out.ID = ID{kind: idString, wire: copyStr(r.id.string)}
	}
	return out, true
}

// WriteResult answers the tasks/result that PollResult returned last on conn (the connection
// of its Owner), as TaskResult.Write does, then forgets it: ErrUnknownRequest when there is
// none. A request the client cancelled meanwhile gets nothing (nil), and its task then counts
// as not fetched: it is kept for the client's retry within its TTL instead of making room
// for a new task. When conn refuses it (ErrUnknownRequest for a request not in flight there,
// ErrClosed, ...) it is kept, to try another connection; after ErrOutputFull the next
// PollResult returns it again, to write once conn's output is drained.
func (t *Tasks) WriteResult(conn *Conn) error {
	if conn == nil {
		return &ResultError{Op: "write task result", Code: CodeNullArgument}
	}
	// conn first, as in ServeLegacy.
	if !conn.lock() {
		return ErrFreed
	}
	defer conn.unlockChanged() // (the answer went out on conn)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return ErrFreed
	}
	rc := C.mcpw_tasks_write_result(t.ptr, conn.ptr)
	runtime.KeepAlive(t)
	runtime.KeepAlive(conn)
	return check("write task result", rc)
}

// Status is the task's status; ErrUnknownTask for a task never created, expired or dropped.
func (t *Tasks) Status(task string) (TaskStatus, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return 0, ErrFreed
	}
	s := C.mcpwgo_tasks_state(t.ptr, cString(task), C.size_t(len(task)))
	runtime.KeepAlive(t)
	if err := check("task status", s.rc); err != nil {
		return 0, err
	}
	return TaskStatus(s.status), nil
}

// CancelRequested reports whether the client asked to cancel the task (it stays asked, after
// the task ended too, until the table drops the task); false for an unknown task. Long work can check it between steps.
func (t *Tasks) CancelRequested(task string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return false
	}
	s := C.mcpwgo_tasks_state(t.ptr, cString(task), C.size_t(len(task)))
	runtime.KeepAlive(t)
	return s.rc == C.MCPW_OK && s.cancel_requested != 0
}

// SetMessage sets the task's statusMessage (a progress description, say); "" clears it.
// ErrUnknownTask for an unknown task, ErrTaskTerminal for a terminal one.
func (t *Tasks) SetMessage(now time.Time, task, message string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return ErrFreed
	}
	rc := C.mcpw_tasks_set_message(t.ptr, t.ns(now), cString(task), C.size_t(len(task)),
		cString(message), C.size_t(len(message)))
	runtime.KeepAlive(t)
	return check("set task message", rc)
}

// Ask asks the client for input: request (a JSON object such as
// {"method":"elicitation/create","params":{...}}) goes out under key in the task's
// inputRequests, and the task is input_required until every outstanding request has its
// answer (TaskEventInput). A key is used once in a task's life (ErrTaskKeyReused); at
// MaxInputRequests outstanding, ErrTooManyInputRequests; a request that is no input request
// of Multi Round-Trip Requests (elicitation/create or sampling/createMessage with a params
// object, or roots/list) or is over MaxPayload, ErrInvalidTaskPayload. Ask only for what the
// client declared: Serve answers a tasks/get from a client without it with -32021.
func (t *Tasks) Ask(now time.Time, task, key string, request json.RawMessage) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return ErrFreed
	}
	rc := C.mcpw_tasks_ask(t.ptr, t.ns(now), cString(task), C.size_t(len(task)), cString(key),
		C.size_t(len(key)), cBytes(request), C.size_t(len(request)))
	runtime.KeepAlive(t)
	return check("ask", rc)
}

// Complete finishes the task with result (a JSON object: what the request would have
// returned, a CallToolResult with isError true included). Outstanding input requests are
// dropped. ErrTaskTerminal once the task is terminal; ErrInvalidTaskPayload for a result
// that is not an object or is over MaxPayload.
func (t *Tasks) Complete(now time.Time, task string, result json.RawMessage) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return ErrFreed
	}
	rc := C.mcpw_tasks_complete(t.ptr, t.ns(now), cString(task), C.size_t(len(task)),
		cBytes(result), C.size_t(len(result)))
	runtime.KeepAlive(t)
	return check("complete task", rc)
}

// Fail finishes the task with a JSON-RPC error: code, message and data (any JSON value, or
// nil for none). For a protocol-level fault; a tool that ran and reported an error
// Completes with isError true instead. A code the task's protocol version does not define
// (2025-11-25 for CreateLegacy's tasks, 2026-07-28 otherwise; Conn.RespondError's rules) is
// ErrInvalidTaskPayload, and so is -32042 without the elicitations of URL elicitation in
// data; -32002 is written as 2026-07-28's -32602 there.
func (t *Tasks) Fail(now time.Time, task string, code int64, message string, data json.RawMessage) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return ErrFreed
	}
	rc := C.mcpw_tasks_fail(t.ptr, t.ns(now), cString(task), C.size_t(len(task)), C.int64_t(code),
		cString(message), C.size_t(len(message)), cBytes(data), C.size_t(len(data)))
	runtime.KeepAlive(t)
	return check("fail task", rc)
}

// Resume puts the task back to working after input_required, dropping its outstanding input
// requests: the 2025-11-25 flow, where the server sends its input requests itself (related to
// the task) and resumes the task when their answers came. A working task stays so.
// ErrUnknownTask for an unknown task, ErrTaskTerminal for a terminal one.
func (t *Tasks) Resume(now time.Time, task string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return ErrFreed
	}
	rc := C.mcpw_tasks_resume(t.ptr, t.ns(now), cString(task), C.size_t(len(task)))
	runtime.KeepAlive(t)
	return check("resume task", rc)
}

// Cancel ends the task as cancelled: the work stopped, after TaskEventCancelRequested or for
// the server's own reasons.
func (t *Tasks) Cancel(now time.Time, task string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return ErrFreed
	}
	rc := C.mcpw_tasks_cancel(t.ptr, t.ns(now), cString(task), C.size_t(len(task)))
	runtime.KeepAlive(t)
	return check("cancel task", rc)
}

// PollEvent returns the next thing the client did to a task (or a task's expiry), oldest
// first, and false when there is none. Call it until false after Serve and HandleTimeout.
func (t *Tasks) PollEvent() (TaskEvent, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return TaskEvent{}, false
	}
	p := C.mcpwgo_tasks_poll_event(t.ptr)
	defer runtime.KeepAlive(t)
	if p.rc != C.MCPW_OK {
		t.failed(check("poll event", p.rc))
		return TaskEvent{}, false
	}
	if p.event.kind == C.MCPW_TASK_EVENT_NONE {
		return TaskEvent{}, false
	}
	// The views are the table's until its next call: copy them now.
	ev := TaskEvent{Kind: TaskEventKind(p.event.kind), Task: copyStr(p.event.task), Key: copyStr(p.event.key)}
	if p.event.response.ptr != nil {
		ev.Response = json.RawMessage(goBytes(unsafe.Pointer(p.event.response.ptr), uint(p.event.response.len)))
	}
	return ev, true
}

// PollTimeout is when the next task expires, and false when none can (no tasks, or no TTL):
// call HandleTimeout then. Re-arm the timer after Create and after every HandleTimeout.
func (t *Tasks) PollTimeout() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return time.Time{}, false
	}
	d := C.mcpwgo_tasks_poll_timeout(t.ptr)
	runtime.KeepAlive(t)
	if d.rc != C.MCPW_OK || d.has == 0 {
		return time.Time{}, false
	}
	return deadlineAt(t.origin, uint64(d.at_ns)), true
}

// HandleTimeout deletes every task whose TTL ran out by now; one that was not terminal yet
// also gets a TaskEventExpired, so drain PollEvent next. Calling it early does nothing.
func (t *Tasks) HandleTimeout(now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return ErrFreed
	}
	rc := C.mcpw_tasks_handle_timeout(t.ptr, t.ns(now))
	runtime.KeepAlive(t)
	return check("handle task timeout", rc)
}

// StatusNotification returns the status notification of the task as it stands: the method is
// "notifications/tasks" for an extension task (params: the full DetailedTask; send it with
// Conn.Notify on every connection, and the engine delivers it only on the
// subscriptions/listen streams granted this task), or "notifications/tasks/status" for
// a 2025-11-25 task (the flat Task; send it on its owner's connection). Both are optional in
// the spec: clients keep polling. ErrUnknownTask for an unknown task.
func (t *Tasks) StatusNotification(task string) (method string, params json.RawMessage, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return "", nil, ErrFreed
	}
	var m, p C.mcpw_str
	rc := C.mcpw_tasks_status_notification(t.ptr, cString(task), C.size_t(len(task)), &m, &p)
	if err := check("task status notification", rc); err != nil {
		runtime.KeepAlive(t)
		return "", nil, err
	}
	method, params = copyStr(m), copyJSON(p)
	runtime.KeepAlive(t)
	return method, params, nil
}

// copyStr copies a view the library lent ("" when absent).
func copyStr(s C.mcpw_str) string {
	if s.ptr == nil {
		return ""
	}
	return goText(unsafe.Pointer(s.ptr), uint(s.len))
}

// copyJSON copies raw JSON the library lent (nil when absent).
func copyJSON(s C.mcpw_str) json.RawMessage {
	if s.ptr == nil {
		return nil
	}
	return json.RawMessage(goBytes(unsafe.Pointer(s.ptr), uint(s.len)))
}

// failed keeps the first error of a poll (with t.mu held), for Err.
func (t *Tasks) failed(err error) {
	if t.err == nil {
		t.err = err
	}
}
