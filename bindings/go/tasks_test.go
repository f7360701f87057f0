package mcpwire

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// wallMs is 2026-11-24T12:00:00Z, the wall clock at the pair's epoch in these tests.
const wallMs = 1_795_521_600_000

// withTasksExtension declares elicitation too: a task's input requests go only to a client
// that declared what they need.
const withTasksExtension = `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`

// tasksPair is a 2026-07-28 pair whose server declared the tasks extension and whose client
// declares it on every request (or not, with extension false).
func tasksPair(t *testing.T, extension bool) *pair {
	t.Helper()
	c := clientConfig()
	c.Versions = []string{"2026-07-28"}
	c.Capabilities = json.RawMessage(`{}`)
	if extension {
		c.Capabilities = json.RawMessage(withTasksExtension)
	}
	s := serverConfig()
	s.Versions = nil
	s.Capabilities = json.RawMessage(`{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`)
	p := newPair(t, c, s)
	p.drive()
	p.clientEvents, p.serverEvents = nil, nil
	return p
}

func newTasks(t *testing.T, cfg *TaskConfig, now time.Time) *Tasks {
	t.Helper()
	tasks, err := NewTasks(cfg, now, wallMs)
	mustOK(t, err)
	t.Cleanup(func() { tasks.Close() })
	return tasks
}

// clientResponse is the client's answer to its request id, as JSON (a result, or an error
// object).
func clientResponse(t *testing.T, p *pair, id RequestID) map[string]any {
	t.Helper()
	for _, ev := range p.clientEvents {
		var raw json.RawMessage
		switch e := ev.(type) {
		case *ResponseEvent:
			if e.Request == id {
				raw = e.Result
			}
		case *ErrorEvent:
			if e.Request == id {
				raw, _ = json.Marshal(map[string]any{"code": e.Code, "message": e.Message})
			}
		}
		if raw != nil {
			var out map[string]any
			mustOK(t, json.Unmarshal(raw, &out))
			return out
		}
	}
	t.Fatalf("no answer to %d in %s", id, dump(p.clientEvents))
	return nil
}

// serveTasks hands the server's requests to the table (as an application does before its own
// dispatch) and returns the ones it did not serve.
func serveTasks(t *testing.T, p *pair, tasks *Tasks) []*RequestEvent {
	t.Helper()
	var rest []*RequestEvent
	for _, ev := range p.serverEvents {
		req, ok := ev.(*RequestEvent)
		if !ok {
			continue
		}
		served, err := tasks.Serve(p.now, p.server, req.ID, req.Method, req.Params)
		mustOK(t, err)
		if !served {
			rest = append(rest, req)
		}
	}
	p.serverEvents = nil
	return rest
}

func (p *pair) clientRequest(method, params string) RequestID {
	p.t.Helper()
	id, err := p.client.Request(p.now, method, json.RawMessage(params), nil)
	mustOK(p.t, err)
	p.drive()
	return id
}

func TestTasksTheWholeFlow(t *testing.T) {
	p := tasksPair(t, true)
	tasks := newTasks(t, nil, p.now)

	// A tools/call that declared the extension is answered with a task handle at once.
	p.clientRequest("tools/call", `{"name":"deploy"}`)
	call := p.takeServer().(*RequestEvent)
	ctx, ok := p.server.RequestContext(call.ID)
	if !ok || ctx.ClientCapabilities&CapTasksExtension == 0 {
		t.Fatalf("context %+v %v", ctx, ok)
	}
	task, err := tasks.Create(p.now)
	mustOK(t, err)
	if len(task) != 32 {
		t.Fatalf("task id %q", task)
	}
	mustOK(t, tasks.Respond(p.server, call.ID, task))
	p.drive()
	wire := string(p.serverSent)
	for _, want := range []string{`"resultType":"task"`, `"taskId":"` + task + `"`, `"status":"working"`,
		`"createdAt":"2026-11-24T12:00:00.000Z"`, `"ttlMs":3600000`, `"pollIntervalMs":1000`} {
		if !strings.Contains(wire, want) {
			t.Fatalf("%s not in %s", want, wire)
		}
	}
	if err := tasks.Respond(p.server, call.ID, task); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("answered twice: %v", err)
	}
	p.clientEvents = nil

	// tasks/get through Serve; any other method is the application's.
	get := p.clientRequest("tasks/get", `{"taskId":"`+task+`"}`)
	list := p.clientRequest("tools/list", `{}`)
	rest := serveTasks(t, p, tasks)
	if len(rest) != 1 || rest[0].Method != "tools/list" {
		t.Fatalf("not served: %+v", rest)
	}
	mustOK(t, p.server.Respond(rest[0].ID, json.RawMessage(`{"tools":[]}`)))
	p.drive()
	if r := clientResponse(t, p, get); r["status"] != "working" || r["taskId"] != task {
		t.Fatalf("tasks/get %v", r)
	}
	clientResponse(t, p, list)

	// Input: the task asks, the client sees the request and answers it with tasks/update.
	p.now = p.now.Add(2 * time.Millisecond)
	mustOK(t, tasks.SetMessage(p.now, task, "waiting for approval"))
	elicit := json.RawMessage(`{"method":"elicitation/create","params":{"message":"Deploy?","requestedSchema":{"type":"object","properties":{}}}}`)
	mustOK(t, tasks.Ask(p.now, task, "confirm", elicit))
	if err := tasks.Ask(p.now, task, "confirm", elicit); !errors.Is(err, ErrTaskKeyReused) {
		t.Fatalf("key reused: %v", err)
	}
	if s, err := tasks.Status(task); err != nil || s != TaskInputRequired || s.String() != "input_required" {
		t.Fatalf("status %v %v", s, err)
	}
	get = p.clientRequest("tasks/get", `{"taskId":"`+task+`"}`)
	serveTasks(t, p, tasks)
	p.drive()
	r := clientResponse(t, p, get)
	requests, _ := r["inputRequests"].(map[string]any)
	if r["status"] != "input_required" || requests["confirm"] == nil || r["statusMessage"] != "waiting for approval" ||
		r["lastUpdatedAt"] != "2026-11-24T12:00:00.002Z" {
		t.Fatalf("tasks/get %v", r)
	}
	update := p.clientRequest("tasks/update",
		`{"taskId":"`+task+`","inputResponses":{"confirm":{"action":"accept","content":{}},"never-asked":{}}}`)
	serveTasks(t, p, tasks)
	p.drive()
	if r := clientResponse(t, p, update); r["code"] != nil {
		t.Fatalf("tasks/update %v", r)
	}
	ev, ok := tasks.PollEvent()
	if !ok || ev.Kind != TaskEventInput || ev.Task != task || ev.Key != "confirm" ||
		string(ev.Response) != `{"action":"accept","content":{}}` || ev.Kind.String() != "input" {
		t.Fatalf("event %+v %v", ev, ok)
	}
	if ev, ok := tasks.PollEvent(); ok {
		t.Fatalf("a second event %+v", ev)
	}
	if s, _ := tasks.Status(task); s != TaskWorking {
		t.Fatalf("status %v", s)
	}

	// Completed: tasks/get carries the result, and the task never changes again.
	mustOK(t, tasks.Complete(p.now, task, json.RawMessage(`{"content":[{"type":"text","text":"deployed"}]}`)))
	get = p.clientRequest("tasks/get", `{"taskId":"`+task+`"}`)
	serveTasks(t, p, tasks)
	p.drive()
	r = clientResponse(t, p, get)
	result, _ := r["result"].(map[string]any)
	if r["status"] != "completed" || result == nil || !strings.Contains(fmt.Sprint(result), "deployed") {
		t.Fatalf("tasks/get %v", r)
	}
	if s, _ := tasks.Status(task); !s.IsTerminal() {
		t.Fatalf("status %v", s)
	}
	method, params, err := tasks.StatusNotification(task)
	if err != nil || method != "notifications/tasks" ||
		!strings.Contains(string(params), `"status":"completed"`) || !strings.Contains(string(params), "deployed") {
		t.Fatalf("status notification %q %s %v", method, params, err)
	}
	if _, _, err := tasks.StatusNotification("nope"); !errors.Is(err, ErrUnknownTask) {
		t.Fatalf("unknown task: %v", err)
	}
	for name, err := range map[string]error{
		"complete": tasks.Complete(p.now, task, json.RawMessage(`{}`)),
		"ask":      tasks.Ask(p.now, task, "again", elicit),
		"message":  tasks.SetMessage(p.now, task, ""),
		"fail":     tasks.Fail(p.now, task, CodeInternalError, "x", nil),
		"cancel":   tasks.Cancel(p.now, task),
	} {
		if !errors.Is(err, ErrTaskTerminal) {
			t.Fatalf("%s on a terminal task: %v", name, err)
		}
	}

	// tasks/cancel is a request; the work stops when the application says so.
	other, err := tasks.Create(p.now)
	mustOK(t, err)
	cancel := p.clientRequest("tasks/cancel", `{"taskId":"`+other+`"}`)
	serveTasks(t, p, tasks)
	p.drive()
	if r := clientResponse(t, p, cancel); r["code"] != nil {
		t.Fatalf("tasks/cancel %v", r)
	}
	if !tasks.CancelRequested(other) || tasks.CancelRequested(task) {
		t.Fatal("cancel requested")
	}
	ev, ok = tasks.PollEvent()
	if !ok || ev.Kind != TaskEventCancelRequested || ev.Task != other || ev.Key != "" || ev.Response != nil {
		t.Fatalf("event %+v", ev)
	}
	mustOK(t, tasks.Cancel(p.now, ev.Task))
	if s, _ := tasks.Status(other); s != TaskCancelled {
		t.Fatalf("status %v", s)
	}

	// A protocol-level failure.
	failing, err := tasks.Create(p.now)
	mustOK(t, err)
	mustOK(t, tasks.Fail(p.now, failing, CodeInternalError, "the job failed", json.RawMessage(`{"step":2}`)))
	get = p.clientRequest("tasks/get", `{"taskId":"`+failing+`"}`)
	serveTasks(t, p, tasks)
	p.drive()
	r = clientResponse(t, p, get)
	if e, _ := r["error"].(map[string]any); r["status"] != "failed" || e["message"] != "the job failed" {
		t.Fatalf("tasks/get %v", r)
	}

	// Unknown tasks.
	get = p.clientRequest("tasks/get", `{"taskId":"nope"}`)
	serveTasks(t, p, tasks)
	p.drive()
	if r := clientResponse(t, p, get); r["code"] != float64(CodeInvalidParamsRPC) {
		t.Fatalf("unknown task %v", r)
	}
	if _, err := tasks.Status("nope"); !errors.Is(err, ErrUnknownTask) {
		t.Fatalf("status: %v", err)
	}
	if err := tasks.Complete(p.now, "nope", json.RawMessage(`{}`)); !errors.Is(err, ErrUnknownTask) {
		t.Fatalf("complete: %v", err)
	}
}

func TestTasksRefusedWithoutTheExtension(t *testing.T) {
	p := tasksPair(t, false)
	tasks := newTasks(t, nil, p.now)
	task, err := tasks.Create(p.now)
	mustOK(t, err)

	p.clientRequest("tools/call", `{"name":"deploy"}`)
	call := p.takeServer().(*RequestEvent)
	if ctx, _ := p.server.RequestContext(call.ID); ctx.ClientCapabilities&CapTasksExtension != 0 {
		t.Fatalf("context %+v", ctx)
	}
	if err := tasks.Respond(p.server, call.ID, task); !errors.Is(err, ErrNotNegotiated) {
		t.Fatalf("respond task: %v", err)
	}
	// The request is answered normally; the task is given up.
	mustOK(t, tasks.Cancel(p.now, task))
	mustOK(t, p.server.Respond(call.ID, json.RawMessage(`{"content":[]}`)))
	p.drive()
	if strings.Contains(string(p.serverSent), `"resultType":"task"`) {
		t.Fatalf("a task went out: %s", p.serverSent)
	}

	// The tasks methods themselves are refused by the engine (-32021) without reaching the
	// application: a client without the extension sends them raw here.
	line := `{"jsonrpc":"2.0","id":"t1","method":"tasks/get","params":{"taskId":"` + task + `",` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}` + "\n"
	mustOK(t, p.server.Feed(p.now, []byte(line)))
	evs := p.server.AppendEvents(nil)
	if len(evs) != 1 {
		t.Fatalf("events %s", dump(evs))
	}
	v, ok := evs[0].(*ViolationEvent)
	if !ok || v.Violation != ViolationMissingClientCapability || v.Violation.String() != "missing-client-capability" {
		t.Fatalf("events %s", dump(evs))
	}
	out, err := p.server.AppendOutput(nil)
	mustOK(t, err)
	if !strings.Contains(string(out), "-32021") {
		t.Fatalf("answer %s", out)
	}

	// A handshake-era connection has no tasks of this extension: in 2025-11-25 (the pair's
	// version) only a request that asked for an experimental task may get one.
	h := handshakePair(t)
	_, err = h.client.Request(h.now, "tools/call", json.RawMessage(`{"name":"x"}`), nil)
	mustOK(t, err)
	h.drive()
	req := h.takeServer().(*RequestEvent)
	other, err := tasks.Create(h.now)
	mustOK(t, err)
	if err := tasks.Respond(h.server, req.ID, other); !errors.Is(err, ErrNotEligible) {
		t.Fatalf("handshake era: %v", err)
	}
	if _, err := tasks.Serve(h.now, nil, req.ID, "tasks/get", nil); !errors.Is(err, ErrNullArgument) {
		t.Fatalf("nil conn: %v", err)
	}
}

func TestTasksExpireAtTheirTTL(t *testing.T) {
	p := tasksPair(t, true)
	start := p.now
	tasks := newTasks(t, &TaskConfig{TTL: time.Second}, start)
	if _, ok := tasks.PollTimeout(); ok {
		t.Fatal("a deadline without tasks")
	}
	a, err := tasks.Create(start)
	mustOK(t, err)
	b, err := tasks.Create(start.Add(500 * time.Millisecond))
	mustOK(t, err)
	mustOK(t, tasks.Complete(start.Add(600*time.Millisecond), b, json.RawMessage(`{"content":[]}`)))
	if at, ok := tasks.PollTimeout(); !ok || !at.Equal(start.Add(time.Second)) {
		t.Fatalf("deadline %v %v", at, ok)
	}
	mustOK(t, tasks.HandleTimeout(start.Add(999*time.Millisecond)))
	if ev, ok := tasks.PollEvent(); ok {
		t.Fatalf("early %+v", ev)
	}
	mustOK(t, tasks.HandleTimeout(start.Add(time.Second)))
	ev, ok := tasks.PollEvent()
	if !ok || ev.Kind != TaskEventExpired || ev.Task != a {
		t.Fatalf("event %+v %v", ev, ok)
	}
	if _, err := tasks.Status(a); !errors.Is(err, ErrUnknownTask) {
		t.Fatalf("expired: %v", err)
	}
	// The client polling it learns it is gone.
	p.now = start.Add(time.Second)
	get := p.clientRequest("tasks/get", `{"taskId":"`+a+`"}`)
	serveTasks(t, p, tasks)
	p.drive()
	if r := clientResponse(t, p, get); r["code"] != float64(CodeInvalidParamsRPC) {
		t.Fatalf("expired task %v", r)
	}
	// A terminal task expires quietly.
	mustOK(t, tasks.HandleTimeout(start.Add(1500*time.Millisecond)))
	if ev, ok := tasks.PollEvent(); ok {
		t.Fatalf("event for a terminal task %+v", ev)
	}
	if _, err := tasks.Status(b); !errors.Is(err, ErrUnknownTask) {
		t.Fatalf("expired: %v", err)
	}
	if _, ok := tasks.PollTimeout(); ok {
		t.Fatal("a deadline left")
	}

	// No TTL: nothing expires.
	forever := newTasks(t, &TaskConfig{TTL: -1}, start)
	c, err := forever.Create(start)
	mustOK(t, err)
	if _, ok := forever.PollTimeout(); ok {
		t.Fatal("a deadline without TTL")
	}
	mustOK(t, forever.HandleTimeout(start.Add(1000*time.Hour)))
	if s, err := forever.Status(c); err != nil || s != TaskWorking {
		t.Fatalf("status %v %v", s, err)
	}
}

func TestTasksBoundsAndClose(t *testing.T) {
	start := time.Unix(0, 0)
	tasks := newTasks(t, &TaskConfig{MaxTasks: 1, MaxInputRequests: 1, MaxPayload: 64}, start)
	first, err := tasks.Create(start)
	mustOK(t, err)
	if _, err := tasks.Create(start); !errors.Is(err, ErrTasksFull) {
		t.Fatalf("full: %v", err)
	}
	mustOK(t, tasks.Complete(start, first, json.RawMessage(`{}`)))
	// Ended, but no client has fetched its result: it keeps its place for its TTL.
	if _, err := tasks.Create(start); !errors.Is(err, ErrTasksFull) {
		t.Fatalf("full with an unfetched result: %v", err)
	}
	p := tasksPair(t, true)
	p.clientRequest("tasks/get", `{"taskId":"`+first+`"}`)
	serveTasks(t, p, tasks)
	second, err := tasks.Create(start)
	mustOK(t, err)
	if _, err := tasks.Status(first); !errors.Is(err, ErrUnknownTask) {
		t.Fatalf("evicted once fetched: %v", err)
	}
	mustOK(t, tasks.Ask(start, second, "k1", json.RawMessage(`{"method":"roots/list"}`)))
	if err := tasks.Ask(start, second, "k2", json.RawMessage(`{"method":"roots/list"}`)); !errors.Is(err, ErrTooManyInputRequests) {
		t.Fatalf("too many: %v", err)
	}
	big := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 64) + `"}]}`)
	if err := tasks.Complete(start, second, big); !errors.Is(err, ErrInvalidTaskPayload) {
		t.Fatalf("too large: %v", err)
	}
	if err := tasks.Complete(start, second, json.RawMessage(`[1]`)); !errors.Is(err, ErrInvalidTaskPayload) {
		t.Fatalf("not an object: %v", err)
	}
	if err := tasks.Complete(start, second, json.RawMessage(`{`)); !errors.Is(err, ErrInvalidJSON) {
		t.Fatalf("not JSON: %v", err)
	}
	var re *ResultError
	if err := tasks.Cancel(start, "nope"); !errors.As(err, &re) || re.Code != CodeUnknownTask || !re.Code.IsRefused() {
		t.Fatalf("unknown: %v", err)
	}
	if _, err := NewTasks(&TaskConfig{MaxTasks: -1}, start, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative: %v", err)
	}
	if _, err := NewTasks(nil, start, -5); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative wall clock: %v", err)
	}

	mustOK(t, tasks.Close())
	mustOK(t, tasks.Close())
	if _, err := tasks.Create(start); err != ErrFreed {
		t.Fatalf("after close: %v", err)
	}
	if _, ok := tasks.PollEvent(); ok {
		t.Fatal("event after close")
	}
	if tasks.CancelRequested(second) {
		t.Fatal("cancel requested after close")
	}
}

// TestTasksPerOwnerCap: one owner at MaxTasksPerOwner gets ErrTasksFull while another still
// gets tasks, and its own oldest terminal task whose result it fetched makes room for it.
func TestTasksPerOwnerCap(t *testing.T) {
	start := time.Unix(0, 0)
	tasks := newTasks(t, &TaskConfig{MaxTasksPerOwner: 2}, start)
	first, err := tasks.CreateLegacy(start, 1)
	mustOK(t, err)
	_, err = tasks.CreateLegacy(start, 1)
	mustOK(t, err)
	if _, err := tasks.CreateLegacy(start, 1); !errors.Is(err, ErrTasksFull) {
		t.Fatalf("owner 1 full: %v", err)
	}
	_, err = tasks.CreateLegacy(start, 2)
	mustOK(t, err)
	mustOK(t, tasks.Complete(start, first, json.RawMessage(`{}`)))
	if _, err := tasks.CreateLegacy(start, 1); !errors.Is(err, ErrTasksFull) {
		t.Fatalf("full with an unfetched result: %v", err)
	}
	p := legacyPair(t, `{}`, legacyTasksCaps)
	if _, served := legacyRound(t, p, tasks, 1, "tasks/result", `{"taskId":"`+first+`"}`); !served {
		t.Fatal("tasks/result not served")
	}
	_, err = tasks.CreateLegacy(start, 1)
	mustOK(t, err)
	if _, err := tasks.Status(first); !errors.Is(err, ErrUnknownTask) {
		t.Fatalf("owner 1's terminal task evicted: %v", err)
	}
	if _, err := NewTasks(&TaskConfig{MaxTasksPerOwner: -1}, start, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative: %v", err)
	}
}

// TestTasksConcurrentWork finishes tasks from many goroutines while another serves the
// client's polls (meaningful under -race).
func TestTasksConcurrentWork(t *testing.T) {
	p := tasksPair(t, true)
	tasks := newTasks(t, nil, p.now)
	const n = 16
	ids := make([]string, n)
	for i := range ids {
		id, err := tasks.Create(p.now)
		mustOK(t, err)
		ids[i] = id
	}
	var wg sync.WaitGroup
	base := p.now
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			now := base.Add(time.Duration(i) * time.Millisecond)
			if err := tasks.SetMessage(now, id, "working"); err != nil {
				t.Error(err)
			}
			if err := tasks.Complete(now, id, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
				t.Error(err)
			}
		}()
	}
	var gets []RequestID
	for _, id := range ids {
		gets = append(gets, p.clientRequest("tasks/get", `{"taskId":"`+id+`"}`))
		serveTasks(t, p, tasks)
	}
	wg.Wait()
	p.drive()
	for _, get := range gets {
		if r := clientResponse(t, p, get); r["code"] != nil {
			t.Fatalf("tasks/get %v", r)
		}
	}
	for _, id := range ids {
		if s, err := tasks.Status(id); err != nil || s != TaskCompleted {
			t.Fatalf("status %v %v", s, err)
		}
	}
}

// TestTaskConfigTTLNearTheLargestDuration: rounding a TTL up to milliseconds saturates
// instead of wrapping (the largest Duration is 9223372036854.775807 ms, written as
// 9223372036855).
func TestTaskConfigTTLNearTheLargestDuration(t *testing.T) {
	start := time.Unix(0, 0)
	for _, ttl := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - 775_806} {
		tasks := newTasks(t, &TaskConfig{TTL: ttl}, start)
		task, err := tasks.Create(start)
		mustOK(t, err)
		_, params, err := tasks.StatusNotification(task)
		mustOK(t, err)
		var got struct{ TTLMs json.Number }
		mustOK(t, json.Unmarshal(params, &got))
		if got.TTLMs != "9223372036855" {
			t.Fatalf("TTL %d ns: ttlMs %s", ttl, got.TTLMs)
		}
	}
}

// A poll that fails (a panic inside the table poisons it: every later call fails) ends a
// drain loop like an empty queue; Err tells the two apart, as Conn.Err does. (No call makes
// the table panic on purpose: the failure is handed to the same bookkeeping the polls use.)
func TestTasksErrReportsTheFirstFailedPoll(t *testing.T) {
	tasks := newTasks(t, nil, time.Unix(1000, 0))
	if _, ok := tasks.PollEvent(); ok || tasks.Err() != nil {
		t.Fatalf("an empty table: %v, %v", ok, tasks.Err())
	}
	if _, ok := tasks.PollResult(); ok || tasks.Err() != nil {
		t.Fatalf("an empty table: %v, %v", ok, tasks.Err())
	}
	tasks.mu.Lock()
	tasks.failed(&ResultError{Op: "poll event", Code: CodePanic})
	tasks.failed(&ResultError{Op: "poll event", Code: CodePoisoned})
	tasks.mu.Unlock()
	if !errors.Is(tasks.Err(), ErrPanic) {
		t.Fatalf("Err: %v, want the first failure", tasks.Err())
	}
}
