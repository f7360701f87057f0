package mcpwire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The 2025-11-25 additions: URL elicitation required and its completion, task handles as
// events, and the experimental tasks of that version.

const urlRequired = `[{"mode":"url","elicitationId":"e-7","url":"https://example.com/authorize","message":"Authorize access"}]`

// legacyPair is a 2025-11-25 pair whose client declares clientCaps and whose server declares
// serverCaps, past the handshake with its Ready events cleared.
func legacyPair(t *testing.T, clientCaps, serverCaps string) *pair {
	t.Helper()
	c := clientConfig()
	c.Versions = []string{"2025-11-25"}
	c.Capabilities = json.RawMessage(clientCaps)
	s := serverConfig()
	s.Capabilities = json.RawMessage(serverCaps)
	p := newPair(t, c, s)
	p.drive()
	p.clientEvents, p.serverEvents = nil, nil
	return p
}

// serverRequest is the server's next event, which must be a request for method.
func serverRequest(t *testing.T, p *pair, method string) *RequestEvent {
	t.Helper()
	req, ok := p.takeServer().(*RequestEvent)
	if !ok || req.Method != method {
		t.Fatalf("want a %s request, got %s", method, dump([]Event{req}))
	}
	return req
}

func TestURLElicitationRequiredAndItsCompletion(t *testing.T) {
	p := legacyPair(t, `{"elicitation":{"url":{}}}`, `{"tools":{}}`)
	call := p.clientRequest("tools/call", `{"name":"files"}`)
	req := serverRequest(t, p, "tools/call")
	for _, bad := range []string{`[]`, `[{"mode":"form","message":"m"}]`} {
		if err := p.server.RespondURLElicitationRequired(req.ID, json.RawMessage(bad)); !errors.Is(err, ErrInvalidParams) {
			t.Fatalf("%s: %v", bad, err)
		}
	}
	mustOK(t, p.server.RespondURLElicitationRequired(req.ID, json.RawMessage(urlRequired)))
	p.drive()
	ev, ok := p.takeClient().(*URLElicitationRequiredEvent)
	if !ok || ev.Request != call || string(ev.Elicitations) != urlRequired {
		t.Fatalf("got %s", dump([]Event{ev}))
	}
	// The completion of an id never seen is ignored; ours comes once.
	for _, id := range []string{"nobody", "e-7", "e-7"} {
		mustOK(t, p.server.Notify("notifications/elicitation/complete", json.RawMessage(`{"elicitationId":"`+id+`"}`)))
	}
	p.drive()
	done, ok := p.takeClient().(*ElicitationCompleteEvent)
	if !ok || done.ElicitationID != "e-7" {
		t.Fatalf("got %s", dump([]Event{done}))
	}
	p.expectQuiet()
	s, err := p.client.Status()
	mustOK(t, err)
	if s.Stats.IgnoredElicitationCompletions != 2 {
		t.Fatalf("stats %+v", s.Stats)
	}

	// A client without elicitation.url; a version before URL mode.
	p = legacyPair(t, `{"elicitation":{}}`, `{"tools":{}}`)
	p.clientRequest("tools/call", `{"name":"x"}`)
	req = serverRequest(t, p, "tools/call")
	if err := p.server.RespondURLElicitationRequired(req.ID, json.RawMessage(urlRequired)); !errors.Is(err, ErrNotNegotiated) {
		t.Fatalf("got %v", err)
	}
	c := clientConfig()
	c.Versions = []string{"2025-06-18"}
	p = newPair(t, c, serverConfig())
	p.drive()
	p.clientEvents, p.serverEvents = nil, nil
	p.clientRequest("tools/call", `{"name":"x"}`)
	req = serverRequest(t, p, "tools/call")
	if err := p.server.RespondURLElicitationRequired(req.ID, json.RawMessage(urlRequired)); !errors.Is(err, ErrNotInVersion) {
		t.Fatalf("got %v", err)
	}
}

func TestTaskCreatedEventIn2026(t *testing.T) {
	if CapTasksToolsCall != 1<<23 || CapTasksSampling != 1<<24 || CapTasksElicitation != 1<<25 {
		t.Fatal("capability flags")
	}
	p := tasksPair(t, true)
	tasks := newTasks(t, nil, p.now)
	call := p.clientRequest("tools/call", `{"name":"slow"}`)
	req := serverRequest(t, p, "tools/call")
	task, err := tasks.Create(p.now)
	mustOK(t, err)
	mustOK(t, tasks.Respond(p.server, req.ID, task))
	p.drive()
	ev, ok := p.takeClient().(*TaskCreatedEvent)
	if !ok || ev.Request != call {
		t.Fatalf("got %s", dump([]Event{ev}))
	}
	var handle map[string]any
	mustOK(t, json.Unmarshal(ev.Task, &handle))
	if handle["resultType"] != "task" || handle["taskId"] != task {
		t.Fatalf("handle %s", ev.Task)
	}
}

const legacyTasksCaps = `{"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}`

// legacyRound sends method from the client and hands it to the table as owner; it returns the
// client's request id and whether the table took it.
func legacyRound(t *testing.T, p *pair, tasks *Tasks, owner uint64, method, params string) (RequestID, bool) {
	t.Helper()
	id := p.clientRequest(method, params)
	req := serverRequest(t, p, method)
	served, err := tasks.ServeLegacy(p.now, owner, p.server, req.ID, req.Method, req.Params)
	mustOK(t, err)
	p.drive()
	return id, served
}

func TestLegacyTasksFromCreationToTasksResult(t *testing.T) {
	p := legacyPair(t, `{"sampling":{}}`, legacyTasksCaps)
	tasks := newTasks(t, nil, p.now)

	// A task-augmented tools/call gets a {"task":{...}} handle.
	call := p.clientRequest("tools/call", `{"name":"x","task":{}}`)
	req := serverRequest(t, p, "tools/call")
	task, err := tasks.CreateLegacy(p.now, 1)
	mustOK(t, err)
	mustOK(t, tasks.Respond(p.server, req.ID, task))
	p.drive()
	created, ok := p.takeClient().(*TaskCreatedEvent)
	if !ok || created.Request != call || !strings.HasPrefix(string(created.Task), `{"task":{"taskId":"`+task+`"`) {
		t.Fatalf("got %s", dump([]Event{created}))
	}

	// tasks/get for its owner; another owner does not see it; other methods are ours.
	params := `{"taskId":"` + task + `"}`
	get, served := legacyRound(t, p, tasks, 1, "tasks/get", params)
	if r := clientResponse(t, p, get); !served || r["status"] != "working" || r["pollInterval"] != 1000.0 {
		t.Fatalf("tasks/get: %v", r)
	}
	get, _ = legacyRound(t, p, tasks, 2, "tasks/get", params)
	if r := clientResponse(t, p, get); r["code"] != -32602.0 {
		t.Fatalf("another owner: %v", r)
	}
	p.clientEvents = nil
	p.clientRequest("tools/list", `{}`)
	req = serverRequest(t, p, "tools/list")
	if served, err := tasks.ServeLegacy(p.now, 1, p.server, req.ID, req.Method, req.Params); err != nil || served {
		t.Fatalf("tools/list: %v %v", served, err)
	}
	mustOK(t, p.server.Respond(req.ID, json.RawMessage(`{"tools":[]}`)))
	p.drive()
	p.clientEvents = nil

	// tasks/result waits for the task's end.
	waiting, served := legacyRound(t, p, tasks, 1, "tasks/result", params)
	if !served || len(p.clientEvents) != 0 {
		t.Fatalf("tasks/result answered early: %s", dump(p.clientEvents))
	}
	if _, ok := tasks.PollResult(); ok {
		t.Fatal("a result before the task ended")
	}
	mustOK(t, tasks.Ask(p.now, task, "k", json.RawMessage(`{"method":"roots/list"}`)))
	mustOK(t, tasks.Resume(p.now, task))
	if s, err := tasks.Status(task); err != nil || s != TaskWorking {
		t.Fatalf("after Resume: %v %v", s, err)
	}
	mustOK(t, tasks.Complete(p.now, task, json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)))
	if err := tasks.Resume(p.now, task); !errors.Is(err, ErrTaskTerminal) {
		t.Fatalf("Resume of a terminal task: %v", err)
	}
	ready, ok := tasks.PollResult()
	if !ok || ready.Owner != 1 || ready.IsError {
		t.Fatalf("PollResult: %+v %v", ready, ok)
	}
	if _, ok := tasks.PollResult(); ok {
		t.Fatal("a second result")
	}
	mustOK(t, ready.Write(p.server))
	p.drive()
	r := clientResponse(t, p, waiting)
	meta, _ := r["_meta"].(map[string]any)
	related, _ := meta["io.modelcontextprotocol/related-task"].(map[string]any)
	if related["taskId"] != task || !strings.Contains(mustString(t, r), "done") {
		t.Fatalf("tasks/result: %v", r)
	}

	// A failure comes back as its error, with the id of the waiting request.
	other, err := tasks.CreateLegacy(p.now, 1)
	mustOK(t, err)
	p.clientEvents = nil
	waiting, _ = legacyRound(t, p, tasks, 1, "tasks/result", `{"taskId":"`+other+`"}`)
	mustOK(t, tasks.Fail(p.now, other, -32603, "it broke", json.RawMessage(`{"step":2}`)))
	ready, ok = tasks.PollResult()
	if !ok || !ready.IsError || ready.Code != -32603 || ready.Message != "it broke" || string(ready.Data) != `{"step":2}` {
		t.Fatalf("PollResult: %+v %v", ready, ok)
	}
	if err := ready.Write(p.client); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("the wrong connection: %v", err)
	}
	mustOK(t, ready.Write(p.server))
	p.drive()
	if r := clientResponse(t, p, waiting); r["message"] != "it broke" {
		t.Fatalf("tasks/result: %v", r)
	}

	// tasks/cancel ends a task at once.
	other, err = tasks.CreateLegacy(p.now, 1)
	mustOK(t, err)
	p.clientEvents = nil
	cancel, _ := legacyRound(t, p, tasks, 1, "tasks/cancel", `{"taskId":"`+other+`"}`)
	if r := clientResponse(t, p, cancel); r["status"] != "cancelled" {
		t.Fatalf("tasks/cancel: %v", r)
	}
	if ev, ok := tasks.PollEvent(); !ok || ev.Kind != TaskEventCancelRequested || ev.Task != other {
		t.Fatalf("PollEvent: %+v %v", ev, ok)
	}

	// After Close.
	tasks.Close()
	if _, err := tasks.CreateLegacy(p.now, 1); err != ErrFreed {
		t.Fatalf("CreateLegacy after Close: %v", err)
	}
	if err := tasks.Resume(p.now, task); err != ErrFreed {
		t.Fatalf("Resume after Close: %v", err)
	}
	if _, err := tasks.ServeLegacy(p.now, 1, p.server, IntID(1), "tasks/get", nil); err != ErrFreed {
		t.Fatalf("ServeLegacy after Close: %v", err)
	}
	if _, ok := tasks.PollResult(); ok {
		t.Fatal("PollResult after Close")
	}
	if err := (TaskResult{}).Write(nil); err == nil {
		t.Fatal("Write to a nil Conn")
	}
}

func mustString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	mustOK(t, err)
	return string(b)
}

// A task failed with -32042 (URL elicitation required, with its elicitations) answers its
// tasks/result even to a client that did not declare URL elicitation, which cannot be sent
// -32042: as -32603 with the message. Write failed before, and the request went unanswered.
func TestLegacyTaskFailedWithURLElicitationStillAnswers(t *testing.T) {
	p := legacyPair(t, `{"sampling":{}}`, legacyTasksCaps)
	tasks := newTasks(t, nil, p.now)
	task, err := tasks.CreateLegacy(p.now, 1)
	mustOK(t, err)
	params := `{"taskId":"` + task + `"}`
	waiting, _ := legacyRound(t, p, tasks, 1, "tasks/result", params)
	if err := tasks.Fail(p.now, task, -32042, "go", nil); !errors.Is(err, ErrInvalidTaskPayload) {
		t.Fatalf("-32042 without its elicitations: %v", err)
	}
	data := `{"elicitations":[{"mode":"url","elicitationId":"e1","url":"https://example.com/auth","message":"Sign in"}]}`
	mustOK(t, tasks.Fail(p.now, task, -32042, "Sign in first", json.RawMessage(data)))
	ready, ok := tasks.PollResult()
	if !ok || ready.Code != -32042 {
		t.Fatalf("PollResult: %+v %v", ready, ok)
	}
	mustOK(t, ready.Write(p.server))
	p.drive()
	if r := clientResponse(t, p, waiting); r["code"] != -32603.0 || r["message"] != "Sign in first" {
		t.Fatalf("tasks/result: %v", r)
	}
}

// WriteResult writes what PollResult returned through the table: a tasks/result the client
// cancelled meanwhile gets nothing, and its task is then not fetched, so that it keeps its
// place at MaxTasks and the client's retry gets the result (written with TaskResult.Write,
// the task counted as fetched, made room for the next one, and the retry found no task).
func TestLegacyTasksWriteResultKeepsACancelledWaitersTask(t *testing.T) {
	p := legacyPair(t, `{"sampling":{}}`, legacyTasksCaps)
	tasks := newTasks(t, &TaskConfig{MaxTasks: 1}, p.now)
	if err := tasks.WriteResult(p.server); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("nothing polled: %v", err)
	}
	task, err := tasks.CreateLegacy(p.now, 1)
	mustOK(t, err)
	params := `{"taskId":"` + task + `"}`
	waiting, _ := legacyRound(t, p, tasks, 1, "tasks/result", params)
	mustOK(t, p.client.Cancel(p.now, waiting, "gave up"))
	p.drive()
	p.clientEvents, p.serverEvents = nil, nil
	mustOK(t, tasks.Complete(p.now, task, json.RawMessage(`{"content":[]}`)))
	if _, ok := tasks.PollResult(); !ok {
		t.Fatal("no result for the cancelled waiter")
	}
	mustOK(t, tasks.WriteResult(p.server))
	p.drive()
	if len(p.clientEvents) != 0 {
		t.Fatalf("an answer to a cancelled request: %s", dump(p.clientEvents))
	}
	if _, err := tasks.CreateLegacy(p.now, 1); !errors.Is(err, ErrTasksFull) {
		t.Fatalf("the unfetched task made room: %v", err)
	}
	retry, _ := legacyRound(t, p, tasks, 1, "tasks/result", params)
	if r := clientResponse(t, p, retry); r["content"] == nil {
		t.Fatalf("the retry: %v", r)
	}
	_, err = tasks.CreateLegacy(p.now, 1)
	mustOK(t, err)
}
