//! The tasks extension of 2026-07-28 (SEP-2663): the engine's gating and the `Tasks` table's
//! state machine, in simulated time.

mod common;

use std::time::Duration;

use common::pair::{Ev, drain, take_output};
use mcpwire::Timestamp;
use mcpwire::conn::{Config, Connection, Error, State};
use mcpwire::jsonrpc::{Id, RawJson};
use mcpwire::mcp::Caps;
use mcpwire::tasks::{LegacyAnswer, TaskConfig, TaskError, TaskEvent, TaskStatus, Tasks};
use serde_json::{Value, json};

const T0: Timestamp = Timestamp::ZERO;
/// 2026-11-24T12:00:00Z.
const WALL: u64 = 1_795_521_600_000;

fn raw(s: &str) -> RawJson<'_> {
    RawJson::new(s).unwrap()
}

fn ids() -> impl FnMut(&mut [u8]) {
    let mut n = 0u8;
    move |buf: &mut [u8]| {
        n = n.wrapping_add(1);
        buf.fill(n);
    }
}

fn server(extension: bool) -> Connection {
    let caps = if extension {
        r#"{"tools":{},"prompts":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#
    } else {
        r#"{"tools":{}}"#
    };
    Connection::new(
        Config::server("tasks-test", "1")
            .with_capabilities(caps)
            .unwrap(),
        T0,
    )
    .unwrap()
}

/// A stateless request declaring the client capabilities `caps`.
fn request(conn: &mut Connection, id: u64, method: &str, params: &str, caps: &str) -> Vec<Ev> {
    let sep = if params.is_empty() { "" } else { "," };
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{caps}}}{sep}{params}}}}}"#
    );
    conn.handle_input(T0, format!("{line}\n").as_bytes());
    drain(conn)
}

fn output(conn: &mut Connection) -> Vec<Value> {
    String::from_utf8(take_output(conn))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const WITH: &str = r#"{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#;
const WITHOUT: &str = "{}";

#[test]
fn tasks_methods_need_the_extension_on_both_sides() {
    // A client that did not declare it gets -32021 naming it.
    let mut s = server(true);
    for (i, method) in ["tasks/get", "tasks/update", "tasks/cancel"]
        .into_iter()
        .enumerate()
    {
        let evs = request(&mut s, i as u64, method, r#""taskId":"x""#, WITHOUT);
        assert!(
            !evs.iter().any(|e| matches!(e, Ev::Request { .. })),
            "{evs:?}"
        );
        let out = output(&mut s);
        assert_eq!(out[0]["error"]["code"], -32021, "{method}: {out:?}");
        assert_eq!(
            out[0]["error"]["data"]["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
            json!({})
        );
    }
    // Listening for task notifications needs it too.
    request(
        &mut s,
        9,
        "subscriptions/listen",
        r#""notifications":{"taskIds":["x"]}"#,
        WITHOUT,
    );
    assert_eq!(output(&mut s)[0]["error"]["code"], -32021);
    // With it, they reach the application.
    let evs = request(&mut s, 10, "tasks/get", r#""taskId":"x""#, WITH);
    assert!(
        matches!(&evs[..], [Ev::Request { method, .. }] if method == "tasks/get"),
        "{evs:?}"
    );
    // An empty list asks for nothing: the listen is acknowledged.
    request(
        &mut s,
        12,
        "subscriptions/listen",
        r#""notifications":{"taskIds":[]}"#,
        WITHOUT,
    );
    let out = output(&mut s);
    assert_eq!(
        out[0]["method"], "notifications/subscriptions/acknowledged",
        "{out:?}"
    );
    // A server that did not declare the extension has no such methods.
    let mut plain = server(false);
    request(&mut plain, 1, "tasks/get", r#""taskId":"x""#, WITH);
    assert_eq!(output(&mut plain)[0]["error"]["code"], -32601);
    // Nor does it refuse a listen that asks for task ids: "Notification types the server
    // does not support are omitted" (subscriptions). It refused it with -32021, naming an
    // extension it does not have.
    request(
        &mut plain,
        2,
        "subscriptions/listen",
        r#""notifications":{"taskIds":["x"]}"#,
        WITHOUT,
    );
    let out = output(&mut plain);
    assert_eq!(
        out[0]["method"], "notifications/subscriptions/acknowledged",
        "{out:?}"
    );
    assert_eq!(out[0]["params"]["notifications"].get("taskIds"), None);
    // The 2025-11-25 methods that SEP-2663 removed stay unknown.
    for method in ["tasks/result", "tasks/list"] {
        request(&mut s, 11, method, r#""taskId":"x""#, WITH);
        assert_eq!(output(&mut s)[0]["error"]["code"], -32601, "{method}");
    }
}

#[test]
fn a_task_handle_goes_only_to_a_tools_call_that_declared_the_extension() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut s = server(true);
    let task = tasks.create(T0, &mut ids()).unwrap();
    let handle = tasks.create_result(&task).unwrap();

    // Declared: the handle goes out as it is, with `resultType: "task"`.
    request(&mut s, 1, "tools/call", r#""name":"slow""#, WITH);
    s.respond_task(mcpwire::jsonrpc::Id::Int(1), raw(&handle))
        .unwrap();
    let out = output(&mut s);
    let r = &out[0]["result"];
    assert_eq!(r["resultType"], "task");
    assert_eq!(r["taskId"], task.as_str());
    assert_eq!(r["status"], "working");
    assert_eq!(r["createdAt"], "2026-11-24T12:00:00.000Z");
    assert_eq!(r["ttlMs"], 3_600_000);
    assert_eq!(r["pollIntervalMs"], 1000);
    for absent in [
        "result",
        "error",
        "inputRequests",
        "requestState",
        "task",
        "ttl",
    ] {
        assert!(r.get(absent).is_none(), "{absent} in {r}");
    }

    // Not declared: refused, and the request can still be answered normally.
    request(&mut s, 2, "tools/call", r#""name":"slow""#, WITHOUT);
    assert_eq!(
        s.respond_task(mcpwire::jsonrpc::Id::Int(2), raw(&handle)),
        Err(Error::NotNegotiated(Caps::TASKS_EXTENSION))
    );
    // Nor can a plain answer smuggle a task handle out.
    assert_eq!(
        s.respond(mcpwire::jsonrpc::Id::Int(2), raw(&handle)),
        Err(Error::InvalidParams)
    );
    s.respond(
        mcpwire::jsonrpc::Id::Int(2),
        raw(r#"{"content":[{"type":"text","text":"done now"}]}"#),
    )
    .unwrap();
    assert_eq!(output(&mut s)[0]["result"]["resultType"], "complete");

    // Only tools/call may be answered with a task.
    request(&mut s, 3, "prompts/get", r#""name":"p""#, WITH);
    assert_eq!(
        s.respond_task(mcpwire::jsonrpc::Id::Int(3), raw(&handle)),
        Err(Error::NotEligible)
    );
    // And what is given must be a task handle.
    request(&mut s, 4, "tools/call", r#""name":"slow""#, WITH);
    assert_eq!(
        s.respond_task(mcpwire::jsonrpc::Id::Int(4), raw(r#"{"content":[]}"#)),
        Err(Error::InvalidParams)
    );

    // A server that did not declare the extension hands out no task, whatever the client
    // declared: its own tasks/get, tasks/update and tasks/cancel would answer -32601.
    let mut plain = server(false);
    request(&mut plain, 5, "tools/call", r#""name":"slow""#, WITH);
    assert_eq!(
        plain.respond_task(mcpwire::jsonrpc::Id::Int(5), raw(&handle)),
        Err(Error::NotNegotiated(Caps::TASKS_EXTENSION))
    );
    let evs = request(
        &mut plain,
        6,
        "tasks/get",
        &format!(r#""taskId":"{task}""#),
        WITH,
    );
    assert!(
        !evs.iter().any(|e| matches!(e, Ev::Request { .. })),
        "{evs:?}"
    );
    let out = output(&mut plain);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0]["id"], 6);
    assert_eq!(out[0]["error"]["code"], -32601);
}

/// Every client capability an input request may need.
fn all_input() -> Caps {
    Caps::ROOTS
        | Caps::SAMPLING
        | Caps::ELICITATION
        | Caps::ELICITATION_FORM
        | Caps::ELICITATION_URL
}

/// `tasks/get` through the table, as the client sees it.
fn get(tasks: &mut Tasks, now: Timestamp, task: &str) -> Value {
    let params = json!({ "taskId": task }).to_string();
    match tasks.answer(now, all_input(), "tasks/get", Some(raw(&params))) {
        Some(Ok(r)) => serde_json::from_str(&r).unwrap(),
        other => panic!("{other:?}"),
    }
}

fn update(tasks: &mut Tasks, now: Timestamp, task: &str, responses: Value) -> Value {
    let params = json!({ "taskId": task, "inputResponses": responses }).to_string();
    match tasks.answer(now, all_input(), "tasks/update", Some(raw(&params))) {
        Some(Ok(r)) => serde_json::from_str(&r).unwrap(),
        other => panic!("{other:?}"),
    }
}

type Answered = Option<Result<String, mcpwire::tasks::TaskRefusal>>;

fn cancel(tasks: &mut Tasks, now: Timestamp, task: &str) -> Answered {
    let params = json!({ "taskId": task }).to_string();
    tasks.answer(now, all_input(), "tasks/cancel", Some(raw(&params)))
}

fn at(ms: u64) -> Timestamp {
    Timestamp::from_millis(ms)
}

#[test]
fn working_to_input_required_and_back_then_completed() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let task = tasks.create(T0, &mut ids()).unwrap();
    let t = get(&mut tasks, T0, &task);
    assert_eq!(t["status"], "working");
    assert!(t.get("result").is_none() && t.get("inputRequests").is_none());

    tasks
        .set_message(at(100), &task, Some("step 1 of 2"))
        .unwrap();
    let elicit = r#"{"method":"elicitation/create","params":{"mode":"form","message":"Sure?","requestedSchema":{"type":"object","properties":{}}}}"#;
    tasks.ask(at(200), &task, "a", raw(elicit)).unwrap();
    tasks.ask(at(200), &task, "b", raw(elicit)).unwrap();
    let t = get(&mut tasks, at(250), &task);
    assert_eq!(t["status"], "input_required");
    assert_eq!(t["statusMessage"], "step 1 of 2");
    assert_eq!(t["lastUpdatedAt"], "2026-11-24T12:00:00.200Z");
    assert_eq!(
        t["inputRequests"]["a"]["method"], "elicitation/create",
        "{t}"
    );
    assert_eq!(t["inputRequests"].as_object().unwrap().len(), 2);

    // A partial answer (plus one for a key never issued): acknowledged, only `a` is taken.
    let ack = update(
        &mut tasks,
        at(300),
        &task,
        json!({"a": {"action": "accept", "content": {}}, "zzz": {}}),
    );
    assert_eq!(ack, json!({}));
    assert_eq!(
        tasks.poll_event(),
        Some(TaskEvent::Input {
            task: task.clone(),
            key: "a".into(),
            response: r#"{"action":"accept","content":{}}"#.into()
        })
    );
    assert_eq!(tasks.poll_event(), None);
    let t = get(&mut tasks, at(300), &task);
    assert_eq!(
        t["status"], "input_required",
        "until every request is answered"
    );
    // The task changed (one request fewer): lastUpdatedAt says so (it stayed at .200).
    assert_eq!(t["lastUpdatedAt"], "2026-11-24T12:00:00.300Z");
    // Refused whole, nothing taken: a response that is no object (the schema's InputResponse
    // is a result object; `null` used up the key for good), and a key written twice (a
    // reader keeping the last one would see another answer than the application got).
    for bad in [
        format!(r#"{{"taskId":"{task}","inputResponses":{{"b":null}}}}"#),
        format!(r#"{{"taskId":"{task}","inputResponses":{{"zzz":{{}},"b":7}}}}"#),
        format!(
            r#"{{"taskId":"{task}","inputResponses":{{"b":{{"action":"decline"}},"b":{{"action":"accept"}}}}}}"#
        ),
    ] {
        match tasks.answer(at(310), all_input(), "tasks/update", Some(raw(&bad))) {
            Some(Err((code, _, _))) => assert_eq!(code, -32602, "{bad}"),
            other => panic!("{bad}: {other:?}"),
        }
        assert_eq!(tasks.poll_event(), None, "{bad}");
    }
    assert_eq!(
        get(&mut tasks, at(320), &task)["inputRequests"]
            .as_object()
            .unwrap()
            .len(),
        1,
        "b still waits"
    );
    assert_eq!(
        t["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        vec!["b"]
    );
    // `a` again is ignored: answered already.
    update(
        &mut tasks,
        at(350),
        &task,
        json!({"a": {"action": "decline"}}),
    );
    assert_eq!(tasks.poll_event(), None);
    // A key is never reused in a task's life.
    assert_eq!(
        tasks.ask(at(360), &task, "a", raw(elicit)),
        Err(TaskError::KeyReused)
    );
    update(
        &mut tasks,
        at(400),
        &task,
        json!({"b": {"action": "accept"}}),
    );
    assert!(matches!(tasks.poll_event(), Some(TaskEvent::Input { key, .. }) if key == "b"));
    assert_eq!(get(&mut tasks, at(400), &task)["status"], "working");

    tasks
        .complete(
            at(500),
            &task,
            raw(r#"{"content":[{"type":"text","text":"ok"}],"isError":true}"#),
        )
        .unwrap();
    let t = get(&mut tasks, at(600), &task);
    assert_eq!(t["status"], "completed", "a tool error is still completed");
    assert_eq!(t["result"]["isError"], true);
    assert!(t.get("error").is_none() && t.get("inputRequests").is_none());
    // Terminal: nothing changes it any more, and cancel is an idempotent acknowledgement.
    assert_eq!(tasks.cancel(at(700), &task), Err(TaskError::Terminal));
    assert_eq!(
        tasks.fail(at(700), &task, -32603, "late", None),
        Err(TaskError::Terminal)
    );
    assert_eq!(
        tasks.ask(at(700), &task, "c", raw(elicit)),
        Err(TaskError::Terminal)
    );
    assert_eq!(cancel(&mut tasks, at(700), &task), Some(Ok("{}".into())));
    assert_eq!(tasks.poll_event(), None);
    assert_eq!(get(&mut tasks, at(800), &task)["status"], "completed");
}

#[test]
fn failed_carries_the_json_rpc_error_and_cancel_is_cooperative() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut random = ids();
    let failing = tasks.create(T0, &mut random).unwrap();
    tasks
        .fail(
            at(10),
            &failing,
            -32603,
            "the backend crashed",
            Some(raw(r#"{"n":1}"#)),
        )
        .unwrap();
    let t = get(&mut tasks, at(20), &failing);
    assert_eq!(t["status"], "failed");
    assert_eq!(
        t["error"],
        json!({"code": -32603, "message": "the backend crashed", "data": {"n": 1}})
    );
    assert_eq!(t["statusMessage"], "the backend crashed");
    assert!(t.get("result").is_none());

    let slow = tasks.create(T0, &mut random).unwrap();
    assert_eq!(cancel(&mut tasks, at(30), &slow), Some(Ok("{}".into())));
    assert_eq!(
        tasks.poll_event(),
        Some(TaskEvent::CancelRequested { task: slow.clone() })
    );
    assert!(tasks.cancel_requested(&slow));
    // Asked twice, reported once.
    cancel(&mut tasks, at(31), &slow);
    assert_eq!(tasks.poll_event(), None);
    // Still working until the application stops the work.
    assert_eq!(get(&mut tasks, at(40), &slow)["status"], "working");
    tasks.cancel(at(50), &slow).unwrap();
    assert_eq!(get(&mut tasks, at(60), &slow)["status"], "cancelled");

    // Unknown tasks and malformed params get -32602.
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let r = tasks.answer(
            at(70),
            all_input(),
            method,
            Some(raw(r#"{"taskId":"nope","inputResponses":{}}"#)),
        );
        assert!(matches!(r, Some(Err((-32602, _, _)))), "{method}: {r:?}");
        let r = tasks.answer(at(70), all_input(), method, Some(raw(r#"{"taskId":7}"#)));
        assert!(matches!(r, Some(Err((-32602, _, _)))), "{method}: {r:?}");
    }
    let r = tasks.answer(
        at(70),
        all_input(),
        "tasks/update",
        Some(raw(&json!({"taskId": slow}).to_string())),
    );
    assert!(
        matches!(r, Some(Err((-32602, _, _)))),
        "inputResponses is required"
    );
    assert_eq!(tasks.answer(at(70), all_input(), "tools/call", None), None);
}

/// A random source that repeats itself gets an error, not a loop that never ends.
#[test]
fn a_random_source_that_repeats_itself_is_refused() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut stuck = |b: &mut [u8]| b.fill(7);
    tasks.create(T0, &mut stuck).unwrap();
    assert_eq!(tasks.create(T0, &mut stuck), Err(TaskError::RandomRepeats));
    assert_eq!(tasks.len(), 1);
    // A working source goes on.
    tasks.create(T0, &mut ids()).unwrap();
}

/// A source that writes nothing (a failed `getrandom`: the buffer stays zero) is refused
/// from its first id: it gave the guessable id 000…0, and the same one again once that
/// task was gone, so that an old handle named a new client's task. And a refused creation
/// changes nothing: the requestor's terminal task it would have made room by stays.
#[test]
fn a_random_source_that_writes_nothing_is_refused_at_once() {
    let config = TaskConfig {
        max_tasks_per_owner: 1,
        ..TaskConfig::default()
    };
    let mut tasks = Tasks::new(config, T0, WALL);
    let mut nothing = |_: &mut [u8]| {};
    assert_eq!(
        tasks.create(T0, &mut nothing),
        Err(TaskError::RandomRepeats)
    );
    assert_eq!(tasks.len(), 0);
    let old = tasks.create_legacy(T0, &mut ids(), 1).unwrap();
    tasks.cancel(T0, &old).unwrap();
    assert_eq!(
        tasks.create_legacy(T0, &mut nothing, 1),
        Err(TaskError::RandomRepeats)
    );
    assert_eq!(tasks.len(), 1, "the cancelled task stays");
    assert!(tasks.status(&old).is_some());
}

#[test]
fn tasks_live_for_their_ttl_through_the_timer_and_the_table_is_bounded() {
    let config = TaskConfig {
        max_tasks: 2,
        ttl: Some(Duration::from_secs(10)),
        ..TaskConfig::default()
    };
    let mut tasks = Tasks::new(config, T0, WALL);
    let mut random = ids();
    let first = tasks.create(T0, &mut random).unwrap();
    let second = tasks.create(at(1000), &mut random).unwrap();
    // Full, and neither is terminal.
    assert_eq!(tasks.create(at(2000), &mut random), Err(TaskError::Full));
    tasks
        .complete(at(2000), &second, raw(r#"{"content":[]}"#))
        .unwrap();
    // A terminal task whose result no client has fetched keeps its place for its whole
    // TTL, as its handle promised: it went at once, and a client polling within the TTL got
    // "Task not found".
    assert_eq!(tasks.create(at(3000), &mut random), Err(TaskError::Full));
    assert_eq!(get(&mut tasks, at(3000), &second)["status"], "completed");
    // Once fetched, the oldest such task makes room.
    let third = tasks.create(at(3000), &mut random).unwrap();
    assert_eq!(tasks.status(&second), None);
    assert_eq!(tasks.len(), 2);

    assert_eq!(tasks.poll_timeout(), Some(at(10_000)));
    tasks.handle_timeout(at(9_999));
    assert_eq!(
        get(&mut tasks, at(9_999), &first)["status"],
        "working",
        "alive for its TTL"
    );
    tasks.handle_timeout(at(10_000));
    assert_eq!(tasks.status(&first), None);
    assert_eq!(
        tasks.poll_event(),
        Some(TaskEvent::Expired {
            task: first.clone()
        }),
        "the application hears that a live task went"
    );
    assert!(matches!(
        tasks.answer(
            at(10_000),
            all_input(),
            "tasks/get",
            Some(raw(&json!({"taskId": first}).to_string()))
        ),
        Some(Err((-32602, _, _)))
    ));
    assert_eq!(
        tasks.complete(at(10_001), &first, raw("{}")),
        Err(TaskError::UnknownTask)
    );
    assert_eq!(tasks.poll_timeout(), Some(at(13_000)));
    tasks.handle_timeout(at(13_000));
    assert!(tasks.is_empty() && tasks.poll_timeout().is_none());
    assert_eq!(tasks.status(&third), None);

    // No TTL: `ttlMs` is null and nothing expires.
    let mut forever = Tasks::new(
        TaskConfig {
            ttl: None,
            ..TaskConfig::default()
        },
        T0,
        WALL,
    );
    let t = forever.create(T0, &mut random).unwrap();
    assert_eq!(get(&mut forever, T0, &t)["ttlMs"], Value::Null);
    assert_eq!(forever.poll_timeout(), None);
}

/// A cancelled task has no result to lose (and may never have been handed out: a task whose
/// handle `respond_task` refused is cancelled), so it makes room unfetched; and without a
/// TTL the cap is the only bound, so any terminal task may. Both kept their places, the
/// second for good.
#[test]
fn a_cancelled_task_and_any_task_without_a_ttl_make_room() {
    let mut random = ids();
    let mut tasks = Tasks::new(
        TaskConfig {
            max_tasks: 1,
            ..TaskConfig::default()
        },
        T0,
        WALL,
    );
    let refused = tasks.create(T0, &mut random).unwrap();
    tasks.cancel(T0, &refused).unwrap();
    tasks.create(at(1), &mut random).unwrap();
    assert_eq!(tasks.status(&refused), None);

    let mut forever = Tasks::new(
        TaskConfig {
            max_tasks: 1,
            ttl: None,
            ..TaskConfig::default()
        },
        T0,
        WALL,
    );
    let done = forever.create(T0, &mut random).unwrap();
    assert_eq!(forever.create(T0, &mut random), Err(TaskError::Full));
    forever.complete(T0, &done, raw("{}")).unwrap();
    forever.create(at(1), &mut random).unwrap();
    assert_eq!(forever.status(&done), None);
}

/// One requestor cannot take every slot of the table ("Enforce limits on concurrent tasks per
/// requestor"): at its own cap (256 by default) its oldest terminal task whose end it fetched
/// makes room, or it gets `Full`, while the others still get tasks.
#[test]
fn one_requestor_cannot_take_every_task_slot() {
    let (a, b) = (1, 2);
    let config = TaskConfig {
        max_tasks: 400,
        ..TaskConfig::default()
    };
    let mut tasks = Tasks::new(config, T0, WALL);
    let mut random = ids_wide();
    // B's terminal task is the oldest in the table; A's cap must not take it.
    let b_done = tasks.create_legacy(T0, &mut random, b).unwrap();
    tasks.complete(T0, &b_done, raw("{}")).unwrap();
    let mine: Vec<String> = (0..256)
        .map(|i| tasks.create_legacy(at(1 + i), &mut random, a).unwrap())
        .collect();
    assert_eq!(
        tasks.create_legacy(at(300), &mut random, a),
        Err(TaskError::Full),
        "A holds 256 tasks, none terminal"
    );
    assert_eq!(tasks.len(), 257);
    assert_eq!(tasks.status(&b_done), Some(TaskStatus::Completed));
    // Others still get tasks: another session, and 2026-07-28 tasks (no owner).
    let b_live = tasks.create_legacy(at(300), &mut random, b).unwrap();
    tasks.create(at(300), &mut random).unwrap();
    // A's oldest terminal task whose end A fetched makes room for A, and only A's.
    tasks.complete(at(301), &mine[20], raw("{}")).unwrap();
    tasks.complete(at(301), &mine[10], raw("{}")).unwrap();
    assert_eq!(
        tasks.create_legacy(at(302), &mut random, a),
        Err(TaskError::Full),
        "ended, but nobody fetched how: they stay for their TTL"
    );
    for task in [&mine[20], &mine[10]] {
        let params = json!({ "taskId": task }).to_string();
        let answer =
            tasks.answer_legacy(at(302), a, Id::Int(9), "tasks/result", Some(raw(&params)));
        assert!(
            matches!(
                answer,
                Some(LegacyAnswer::Result(_) | LegacyAnswer::Error { .. })
            ),
            "{answer:?}"
        );
    }
    tasks.create_legacy(at(302), &mut random, a).unwrap();
    assert_eq!(
        tasks.status(&mine[10]),
        None,
        "A's oldest terminal task went"
    );
    assert_eq!(tasks.status(&mine[20]), Some(TaskStatus::Completed));
    assert_eq!(tasks.status(&b_done), Some(TaskStatus::Completed));
    assert_eq!(tasks.status(&b_live), Some(TaskStatus::Working));
    tasks.create_legacy(at(303), &mut random, a).unwrap();
    assert_eq!(tasks.status(&mine[20]), None);
    assert_eq!(
        tasks.create_legacy(at(304), &mut random, a),
        Err(TaskError::Full)
    );
    assert_eq!(tasks.len(), 259);

    // The cap is the table's to set.
    let mut small = Tasks::new(
        TaskConfig {
            max_tasks_per_owner: 1,
            ..TaskConfig::default()
        },
        T0,
        WALL,
    );
    small.create_legacy(T0, &mut random, a).unwrap();
    assert_eq!(
        small.create_legacy(T0, &mut random, a),
        Err(TaskError::Full)
    );
    small.create_legacy(T0, &mut random, b).unwrap();
}

/// Ids from a counter wider than [`ids`]'s byte, for tables of hundreds of tasks.
fn ids_wide() -> impl FnMut(&mut [u8]) {
    let mut n = 0u64;
    move |buf: &mut [u8]| {
        n += 1;
        buf.fill(0);
        buf[..8].copy_from_slice(&n.to_be_bytes());
    }
}

#[test]
fn numbers_a_task_writes_stay_in_the_range_json_readers_keep_exact() {
    // A TTL or polling interval of u64::MAX milliseconds (a C caller's UINT64_MAX) goes out
    // as 2^53 - 1, which JavaScript still reads exactly.
    let most = mcpwire::tasks::MAX_WIRE_MILLIS;
    assert_eq!(most, 9_007_199_254_740_991);
    let mut tasks = Tasks::new(
        TaskConfig {
            ttl: Some(Duration::from_millis(u64::MAX)),
            poll_interval: Duration::MAX,
            ..TaskConfig::default()
        },
        T0,
        WALL,
    );
    let mut random = ids();
    let task = tasks.create(T0, &mut random).unwrap();
    let handle: Value = serde_json::from_str(&tasks.create_result(&task).unwrap()).unwrap();
    assert_eq!(handle["ttlMs"], most);
    assert_eq!(handle["pollIntervalMs"], most);
    let legacy = tasks.create_legacy(T0, &mut random, 1).unwrap();
    let handle: Value = serde_json::from_str(&tasks.create_result(&legacy).unwrap()).unwrap();
    assert_eq!(handle["task"]["ttl"], most);
    assert_eq!(handle["task"]["pollInterval"], most);
    assert_eq!(
        tasks.poll_timeout(),
        Some(T0.after(Duration::from_millis(most)))
    );

    // Error codes follow respond_error's rules for the task's version: -32002 is written as
    // 2026-07-28's -32602; a code the version does not define is refused (a 2025-11-25
    // tasks/result would otherwise fail to write it and leave its waiter unanswered).
    tasks.fail(T0, &task, -32002, "no such file", None).unwrap();
    assert_eq!(get(&mut tasks, T0, &task)["error"]["code"], -32602);
    assert_eq!(
        tasks.fail(
            T0,
            &legacy,
            mcpwire::mcp::UNSUPPORTED_PROTOCOL_VERSION,
            "m",
            None
        ),
        Err(TaskError::InvalidPayload)
    );
    assert_eq!(tasks.status(&legacy), Some(TaskStatus::Working));
    // Any other integer goes out as given: JSON-RPC asks only for an integer.
    tasks.fail(T0, &legacy, i64::MIN, "m", None).unwrap();
    match tasks.answer_legacy(
        T0,
        1,
        mcpwire::jsonrpc::Id::Int(1),
        "tasks/result",
        Some(raw(&json!({ "taskId": legacy }).to_string())),
    ) {
        Some(mcpwire::tasks::LegacyAnswer::Error { code, .. }) => assert_eq!(code, i64::MIN),
        other => panic!("{other:?}"),
    }
}

#[test]
fn input_requests_are_bounded_and_must_be_input_requests() {
    let config = TaskConfig {
        max_input_requests: 1,
        max_payload: 64,
        ..TaskConfig::default()
    };
    let mut tasks = Tasks::new(config, T0, WALL);
    let task = tasks.create(T0, &mut ids()).unwrap();
    assert_eq!(
        tasks.ask(T0, &task, "a", raw("[1]")),
        Err(TaskError::InvalidPayload)
    );
    let big = format!(r#"{{"method":"x","params":{{"p":"{}"}}}}"#, "y".repeat(64));
    assert_eq!(
        tasks.ask(T0, &task, "a", raw(&big)),
        Err(TaskError::InvalidPayload)
    );
    // Only the input requests of Multi Round-Trip Requests: an object with another method, or
    // elicitation without its params, is no input request (the schema's InputRequest).
    for not_input in [
        r#"{"method":"x"}"#,
        r#"{}"#,
        r#"{"method":"tools/call","params":{}}"#,
        r#"{"method":"elicitation/create"}"#,
        r#"{"method":"roots/list","params":3}"#,
    ] {
        assert_eq!(
            tasks.ask(T0, &task, "a", raw(not_input)),
            Err(TaskError::InvalidPayload),
            "{not_input}"
        );
    }
    tasks
        .ask(T0, &task, "a", raw(r#"{"method":"roots/list"}"#))
        .unwrap();
    assert_eq!(
        tasks.ask(T0, &task, "b", raw(r#"{"method":"roots/list"}"#)),
        Err(TaskError::TooManyInputRequests)
    );
    assert_eq!(tasks.status(&task), Some(TaskStatus::InputRequired));
    assert_eq!(
        tasks.complete(T0, &task, raw("[]")),
        Err(TaskError::InvalidPayload)
    );
    // A result with `_meta` twice: the related-task metadata could not be merged into it,
    // and `tasks/result` sent it as it was, without that metadata.
    assert_eq!(
        tasks.complete(
            T0,
            &task,
            raw(r#"{"_meta":{},"_meta":{"a":1},"content":[]}"#)
        ),
        Err(TaskError::InvalidPayload)
    );
    // Params the capability rules cannot read: tasks/get could not tell what the requestor
    // must have declared (the first went out to a client that declared only form mode).
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let task = tasks.create(T0, &mut ids()).unwrap();
    for malformed in [
        r#"{"method":"elicitation/create","params":{"mode":"form","mode":"url"}}"#,
        r#"{"method":"elicitation/create","params":{"mode":"carrier-pigeon"}}"#,
    ] {
        assert_eq!(
            tasks.ask(T0, &task, "a", raw(malformed)),
            Err(TaskError::InvalidPayload),
            "{malformed}"
        );
    }
    let form = r#"{"method":"elicitation/create","params":{"mode":"form","message":"m","requestedSchema":{"type":"object","properties":{}}}}"#;
    tasks.ask(T0, &task, "a", raw(form)).unwrap();
}

/// Multi Round-Trip Requests: "Servers MUST NOT send an inputRequests that the client has not
/// declared support for in its capabilities". A task's input requests went out in `tasks/get`
/// to a requestor that declared only the extension; it now gets -32021 naming what is missing,
/// and one that declared elicitation gets the task.
#[test]
fn tasks_get_sends_input_requests_only_to_a_requestor_that_declared_them() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let task = tasks.create(T0, &mut ids()).unwrap();
    let ask = r#"{"method":"elicitation/create","params":{"message":"Deploy?","requestedSchema":{"type":"object","properties":{}}}}"#;
    tasks.ask(T0, &task, "e", raw(ask)).unwrap();
    let mut s = server(true);
    let with_elicitation =
        r#"{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#;
    for (n, caps) in [(1, WITH), (2, with_elicitation)] {
        let evs = request(
            &mut s,
            n,
            "tasks/get",
            &format!(r#""taskId":"{task}""#),
            caps,
        );
        let Some(Ev::Request { id, method, params }) =
            evs.into_iter().find(|e| matches!(e, Ev::Request { .. }))
        else {
            panic!()
        };
        let served = tasks.serve(T0, &mut s, id.as_id(), &method, params.as_deref().map(raw));
        assert_eq!(served, Ok(true));
        let out = output(&mut s);
        if caps == WITH {
            assert_eq!(out[0]["error"]["code"], -32021, "{out:?}");
            assert_eq!(
                out[0]["error"]["data"],
                json!({"requiredCapabilities": {"elicitation": {}}})
            );
        } else {
            assert_eq!(out[0]["result"]["status"], "input_required", "{out:?}");
            assert_eq!(
                out[0]["result"]["inputRequests"]["e"]["method"],
                "elicitation/create"
            );
        }
    }
}

#[test]
fn serve_answers_on_the_connection_with_result_type_complete() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let task = tasks.create(T0, &mut ids()).unwrap();
    let mut s = server(true);
    let evs = request(
        &mut s,
        5,
        "tasks/get",
        &format!(r#""taskId":"{task}""#),
        WITH,
    );
    let Some(Ev::Request { id, method, params }) =
        evs.into_iter().find(|e| matches!(e, Ev::Request { .. }))
    else {
        panic!()
    };
    let served = tasks
        .serve(T0, &mut s, id.as_id(), &method, params.as_deref().map(raw))
        .unwrap();
    assert!(served);
    let out = output(&mut s);
    assert_eq!(out[0]["result"]["resultType"], "complete");
    assert_eq!(out[0]["result"]["taskId"], task.as_str());
    assert_eq!(out[0]["result"]["status"], "working");
    // Not a tasks method: left alone.
    request(&mut s, 6, "tools/list", "", WITH);
    assert!(
        !tasks
            .serve(T0, &mut s, mcpwire::jsonrpc::Id::Int(6), "tools/list", None)
            .unwrap()
    );
    assert!(output(&mut s).is_empty());
}

/// A 2026-07-28 client and server, both declaring the extension unless `client_ext` is off.
fn modern_pair(client_ext: bool) -> common::pair::Pair {
    let caps = if client_ext {
        r#"{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#
    } else {
        "{}"
    };
    let client = common::pair::modern(Config::client("c", "1").with_capabilities(caps).unwrap());
    let server = Config::server("s", "1")
        .with_capabilities(
            r#"{"tools":{},"prompts":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#,
        )
        .unwrap();
    let mut p = common::pair::Pair::new(client, server);
    p.step();
    p.take_client_events();
    p.take_server_events();
    p
}

/// A 2026-07-28 client that did not declare the extension cannot send its requests, even to
/// a server that declared it: the server must refuse them (-32021, "for non-declaring
/// clients issuing tasks/get, tasks/update, and tasks/cancel requests"). They went out.
#[test]
fn a_client_that_did_not_declare_the_extension_cannot_send_its_requests() {
    let mut p = modern_pair(false);
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        assert_eq!(
            p.client
                .request(p.now, method, Some(raw(r#"{"taskId":"x"}"#))),
            Err(Error::NotNegotiated(Caps::TASKS_EXTENSION)),
            "{method}"
        );
    }
    let mut p = modern_pair(true);
    p.client
        .request(p.now, "tasks/get", Some(raw(r#"{"taskId":"x"}"#)))
        .unwrap();
}

#[test]
fn a_client_that_declared_the_extension_gets_the_handle_as_its_event_and_polls() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut p = modern_pair(true);
    let call = p
        .client
        .request(p.now, "tools/call", Some(raw(r#"{"name":"slow"}"#)))
        .unwrap();
    p.step();
    let Some(Ev::Request { id, .. }) = p.take_server_events().into_iter().next() else {
        panic!()
    };
    let task = tasks.create(p.now, &mut ids()).unwrap();
    p.server
        .respond_task(id.as_id(), raw(&tasks.create_result(&task).unwrap()))
        .unwrap();
    p.step();
    let evs = p.take_client_events();
    let [
        Ev::TaskCreated {
            request,
            task: handle,
        },
    ] = &evs[..]
    else {
        panic!("{evs:?}")
    };
    assert_eq!(*request, call);
    let handle: Value = serde_json::from_str(handle).unwrap();
    assert_eq!(handle["taskId"], task.as_str());

    // Polling is an ordinary request; the server answers it from the table.
    tasks
        .complete(
            p.now,
            &task,
            raw(r#"{"content":[{"type":"text","text":"done"}]}"#),
        )
        .unwrap();
    let get = p
        .client
        .request(
            p.now,
            "tasks/get",
            Some(raw(&json!({ "taskId": task }).to_string())),
        )
        .unwrap();
    p.step();
    let Some(Ev::Request { id, method, params }) = p.take_server_events().into_iter().next() else {
        panic!()
    };
    assert!(
        tasks
            .serve(
                p.now,
                &mut p.server,
                id.as_id(),
                &method,
                params.as_deref().map(raw)
            )
            .unwrap()
    );
    p.step();
    let evs = p.take_client_events();
    let [Ev::Response { request, result }] = &evs[..] else {
        panic!("{evs:?}")
    };
    assert_eq!(*request, get);
    let result: Value = serde_json::from_str(result).unwrap();
    assert_eq!(result["status"], "completed");
    assert_eq!(result["result"]["content"][0]["text"], "done");
}

#[test]
fn dual_era_peers_do_not_advertise_the_legacy_tasks_capability_in_2026_07_28() {
    // Both sides declare 2025-11-25's `tasks` and the extension, and speak both eras: in
    // 2026-07-28 the legacy capability is not part of the schema, and SEP-2663 forbids
    // advertising it "under any protocol version that includes this extension".
    let legacy_tasks = r#""tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}"#;
    let ext = r#""extensions":{"io.modelcontextprotocol/tasks":{}}"#;
    let client = Config::client("c", "1")
        .with_capabilities(&format!(r#"{{"sampling":{{}},{legacy_tasks},{ext}}}"#))
        .unwrap();
    let server = Config::server("s", "1")
        .with_capabilities(&format!(r#"{{"tools":{{}},{legacy_tasks},{ext}}}"#))
        .unwrap();
    let mut p = common::pair::Pair::new(client, server);
    p.step();
    p.client
        .request(p.now, "tools/call", Some(raw(r#"{"name":"slow"}"#)))
        .unwrap();
    p.step();
    let lines = |from_client| -> Vec<Value> {
        p.lines(from_client)
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let sent = lines(true);
    assert_eq!(sent.len(), 2, "server/discover, tools/call: {sent:?}");
    assert_eq!(sent[0]["method"], "server/discover");
    for request in &sent {
        let caps = &request["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
        assert_eq!(
            *caps,
            json!({ "sampling": {}, "extensions": { "io.modelcontextprotocol/tasks": {} } }),
            "{request}"
        );
    }
    let discovered = &lines(false)[0]["result"];
    assert_eq!(
        discovered["capabilities"],
        json!({ "tools": {}, "extensions": { "io.modelcontextprotocol/tasks": {} } })
    );
    // The server still sees the extension and the call.
    let evs = p.take_server_events();
    assert!(
        matches!(&evs[..], [Ev::Ready { .. }, Ev::Request { method, .. }] if method == "tools/call"),
        "{evs:?}"
    );
}

#[test]
fn a_task_handle_the_client_could_not_expect_is_an_invalid_response() {
    // The client did not declare the extension: a handle is invalid, whatever the server does.
    let mut p = modern_pair(false);
    let call = p
        .client
        .request(p.now, "tools/call", Some(raw(r#"{"name":"slow"}"#)))
        .unwrap();
    p.step();
    let Some(Ev::Request { id, .. }) = p.take_server_events().into_iter().next() else {
        panic!()
    };
    // A server that ignores the rules writes the handle by hand.
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"resultType":"task","taskId":"t","status":"working"}}}}"#,
        match id {
            mcpwire::jsonrpc::OwnedId::Int(n) => n,
            _ => panic!(),
        }
    );
    p.client.handle_input(p.now, format!("{line}\n").as_bytes());
    assert_eq!(
        drain(&mut p.client),
        vec![Ev::InvalidResponse { request: call }]
    );
}

/// The client sends `method` with `params`; the server's answer is `result`, written by hand.
/// Returns the client's events.
fn answered_by_hand(
    p: &mut common::pair::Pair,
    method: &str,
    params: &str,
    result: &str,
) -> Vec<Ev> {
    p.client.request(p.now, method, Some(raw(params))).unwrap();
    p.step();
    let Some(Ev::Request { id, .. }) = p.take_server_events().into_iter().next() else {
        panic!()
    };
    let mcpwire::jsonrpc::OwnedId::Int(id) = id else {
        panic!()
    };
    let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
    p.client.handle_input(p.now, format!("{line}\n").as_bytes());
    drain(&mut p.client)
}

/// A task handle must be a well-formed `CreateTaskResult` (`Result & Task`): a string
/// `taskId`, a known `status`, `createdAt`, `lastUpdatedAt` and `ttlMs` (a number or null),
/// with the optional members of their types. Anything less is an invalid response, not a
/// `TaskCreated` the application would have to second-guess.
#[test]
fn a_malformed_task_handle_is_an_invalid_response() {
    let mut p = modern_pair(true);
    let times = r#""createdAt":"2026-11-24T12:00:00Z","lastUpdatedAt":"2026-11-24T12:00:00Z""#;
    let task = |members: &str| format!(r#"{{"resultType":"task",{members}}}"#);
    let good = format!(r#""taskId":"abc","status":"working",{times},"ttlMs":60000"#);
    for bad in [
        r#""taskId":"abc""#.to_owned(),
        format!(r#""taskId":5,"status":"working",{times},"ttlMs":60000"#),
        format!(r#""status":"working",{times},"ttlMs":60000"#),
        format!(r#""taskId":"abc",{times},"ttlMs":60000"#),
        format!(r#""taskId":"abc","status":"bogus",{times},"ttlMs":60000"#),
        format!(r#""taskId":"abc","status":"working",{times},"ttlMs":"x""#),
        format!(r#""taskId":"abc","status":"working",{times}"#),
        r#""taskId":"abc","status":"working","createdAt":"2026-11-24T12:00:00Z","ttlMs":1"#
            .to_owned(),
        r#""taskId":"abc","status":"working","createdAt":7,"lastUpdatedAt":"x","ttlMs":1"#
            .to_owned(),
        format!(r#"{good},"pollIntervalMs":"soon""#),
        format!(r#"{good},"statusMessage":{{}}"#),
        format!(r#"{good},"status":"working""#),
        format!(r#""ttl":60000,"taskId":"abc","status":"working",{times}"#),
    ] {
        let evs = answered_by_hand(&mut p, "tools/call", r#"{"name":"slow"}"#, &task(&bad));
        assert!(
            matches!(&evs[..], [Ev::InvalidResponse { .. }]),
            "{bad}: {evs:?}"
        );
    }
    // Well-formed handles still pass: the least one, an unlimited TTL, every member.
    for fine in [
        good.clone(),
        format!(r#""taskId":"abc","status":"input_required",{times},"ttlMs":null"#),
        format!(r#"{good},"pollIntervalMs":5000,"statusMessage":"on it","_meta":{{"app/x":1}}"#),
    ] {
        let evs = answered_by_hand(&mut p, "tools/call", r#"{"name":"slow"}"#, &task(&fine));
        assert!(
            matches!(&evs[..], [Ev::TaskCreated { .. }]),
            "{fine}: {evs:?}"
        );
    }
}

// ---- 2025-11-25: the experimental tasks of that version ----------------------------------

const D: mcpwire::mcp::ProtocolVersion = mcpwire::mcp::ProtocolVersion::V2025_11_25;

/// Sends a task-augmented `tools/call` (tool `slow`, a minute's ttl) from `p`'s client with
/// `options` and delivers it: the client's request and the id the server got it under.
fn task_call(
    p: &mut common::pair::Pair,
    options: mcpwire::conn::RequestOptions,
) -> (mcpwire::conn::RequestId, mcpwire::jsonrpc::OwnedId) {
    let call = p
        .client
        .request_with(
            p.now,
            "tools/call",
            Some(raw(r#"{"name":"slow","task":{"ttl":60000}}"#)),
            options,
        )
        .unwrap();
    p.step();
    let Some(Ev::Request { id, .. }) = p.take_server_events().into_iter().next() else {
        panic!("the server got no request")
    };
    (call, id)
}

fn legacy_pair() -> common::pair::Pair {
    let server = Config::server("s", "1")
        .with_capabilities(
            r#"{"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}"#,
        )
        .unwrap();
    let client = Config::client("c", "1")
        .with_capabilities(r#"{"sampling":{}}"#)
        .unwrap();
    common::pair::Pair::ready(D, client, server)
}

/// The client sends `method`; the server hands it to `tasks`, as a dual-era server does
/// with every request: first to `serve` (the extension's), which must leave a 2025-11-25
/// session's request alone (it answered `tasks/get` with the extension's rules: "not found"
/// for the requestor's own task; and a `tasks/cancel` of any task with `{}`), then to
/// `serve_legacy`; returns the client's events.
fn legacy_round(
    p: &mut common::pair::Pair,
    tasks: &mut Tasks,
    owner: u64,
    method: &str,
    params: Value,
) -> (mcpwire::conn::RequestId, Vec<Ev>) {
    let request = p
        .client
        .request(p.now, method, Some(raw(&params.to_string())))
        .unwrap();
    p.step();
    let Some(Ev::Request { id, method, params }) = p.take_server_events().into_iter().next() else {
        panic!()
    };
    let extension = tasks.serve(
        p.now,
        &mut p.server,
        id.as_id(),
        &method,
        params.as_deref().map(raw),
    );
    assert_eq!(extension, Ok(false), "{method}");
    tasks
        .serve_legacy(
            p.now,
            owner,
            &mut p.server,
            id.as_id(),
            &method,
            params.as_deref().map(raw),
        )
        .unwrap();
    p.step();
    (request, p.take_client_events())
}

fn result_of(evs: &[Ev]) -> Value {
    match evs {
        [Ev::Response { result, .. }] => serde_json::from_str(result).unwrap(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn task_augmented_requests_of_2025_11_25_from_creation_to_tasks_result() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut p = legacy_pair();
    // A task-augmented tools/call.
    let (call, call_id) = task_call(&mut p, Default::default());
    let task = tasks.create_legacy(p.now, &mut ids(), 1).unwrap();
    p.server
        .respond_task(call_id.as_id(), raw(&tasks.create_result(&task).unwrap()))
        .unwrap();
    p.step();
    let evs = p.take_client_events();
    let [
        Ev::TaskCreated {
            request,
            task: handle,
        },
    ] = &evs[..]
    else {
        panic!("{evs:?}")
    };
    assert_eq!(*request, call);
    let handle: Value = serde_json::from_str(handle).unwrap();
    assert_eq!(handle["task"]["taskId"], task.as_str());
    assert_eq!(handle["task"]["status"], "working");
    assert_eq!(handle["task"]["ttl"], 3_600_000, "2025-11-25 names it ttl");
    assert!(handle["task"].get("ttlMs").is_none() && handle.get("resultType").is_none());

    // tasks/get: the flat Task.
    let (_, evs) = legacy_round(
        &mut p,
        &mut tasks,
        1,
        "tasks/get",
        json!({ "taskId": task }),
    );
    let t = result_of(&evs);
    assert_eq!(t["status"], "working");
    assert_eq!(t["pollInterval"], 1000);
    // Another session does not see it.
    let (_, evs) = legacy_round(
        &mut p,
        &mut tasks,
        2,
        "tasks/get",
        json!({ "taskId": task }),
    );
    assert!(
        matches!(&evs[..], [Ev::Error { code: -32602, .. }]),
        "{evs:?}"
    );
    // tasks/list: its owner's tasks.
    let (_, evs) = legacy_round(&mut p, &mut tasks, 1, "tasks/list", json!({}));
    assert_eq!(result_of(&evs)["tasks"][0]["taskId"], task.as_str());
    let (_, evs) = legacy_round(&mut p, &mut tasks, 2, "tasks/list", json!({}));
    assert_eq!(result_of(&evs)["tasks"], json!([]));

    // tasks/result blocks until the task ends.
    let (waiting, evs) = legacy_round(
        &mut p,
        &mut tasks,
        1,
        "tasks/result",
        json!({ "taskId": task }),
    );
    assert!(evs.is_empty(), "no answer yet: {evs:?}");
    assert_eq!(tasks.poll_result(), None);
    tasks
        .complete(
            p.now,
            &task,
            raw(r#"{"content":[{"type":"text","text":"done"}]}"#),
        )
        .unwrap();
    let ready = tasks.poll_result().expect("the waiting tasks/result");
    assert_eq!((ready.owner, ready.task.as_str()), (1, task.as_str()));
    tasks.write_ready(&mut p.server, &ready).unwrap();
    p.step();
    let evs = p.take_client_events();
    let [Ev::Response { request, result }] = &evs[..] else {
        panic!("{evs:?}")
    };
    assert_eq!(*request, waiting);
    let result: Value = serde_json::from_str(result).unwrap();
    assert_eq!(result["content"][0]["text"], "done");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task.as_str()
    );
    // Once ended, tasks/result answers at once; cancelling is refused.
    let (_, evs) = legacy_round(
        &mut p,
        &mut tasks,
        1,
        "tasks/result",
        json!({ "taskId": task }),
    );
    assert_eq!(result_of(&evs)["content"][0]["text"], "done");
    let (_, evs) = legacy_round(
        &mut p,
        &mut tasks,
        1,
        "tasks/cancel",
        json!({ "taskId": task }),
    );
    assert!(
        matches!(&evs[..], [Ev::Error { code: -32602, .. }]),
        "{evs:?}"
    );
}

/// The answer of a 2025-11-25 `tasks/result` (or other tasks method) from `owner`, at once.
fn legacy_answer(tasks: &mut Tasks, owner: u64, method: &str, task: &str) -> Value {
    match tasks.answer_legacy(
        T0,
        owner,
        mcpwire::jsonrpc::Id::Int(1),
        method,
        Some(raw(&json!({ "taskId": task }).to_string())),
    ) {
        Some(mcpwire::tasks::LegacyAnswer::Result(r)) => serde_json::from_str(&r).unwrap(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_2025_11_25_tasks_result_merges_the_related_task_into_the_results_own_meta() {
    // "The tasks/result operation MUST include this metadata in its response", also when the
    // result has a `_meta` of its own, whose members stay.
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut random = ids();
    let task = tasks.create_legacy(T0, &mut random, 1).unwrap();
    tasks
        .complete(
            T0,
            &task,
            raw(r#"{"content":[],"_meta":{"app/x":1,"io.modelcontextprotocol/related-task":{"taskId":"other"}},"structuredContent":{"a":"\u0041"}}"#),
        )
        .unwrap();
    let result = legacy_answer(&mut tasks, 1, "tasks/result", &task);
    assert_eq!(
        result,
        json!({
            "_meta": {
                "io.modelcontextprotocol/related-task": { "taskId": task },
                "app/x": 1
            },
            "content": [],
            "structuredContent": { "a": "A" }
        })
    );
    // An empty result gets the `_meta` alone.
    let empty = tasks.create_legacy(T0, &mut random, 1).unwrap();
    tasks.complete(T0, &empty, raw(" { } ")).unwrap();
    assert_eq!(
        legacy_answer(&mut tasks, 1, "tasks/result", &empty),
        json!({ "_meta": { "io.modelcontextprotocol/related-task": { "taskId": empty } } })
    );
}

#[test]
fn cancelling_a_2025_11_25_task_ends_it_before_the_answer_and_failures_come_back_as_errors() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut p = legacy_pair();
    let mut random = ids();
    let running = tasks.create_legacy(p.now, &mut random, 1).unwrap();
    let (_, evs) = legacy_round(
        &mut p,
        &mut tasks,
        1,
        "tasks/cancel",
        json!({ "taskId": running }),
    );
    assert_eq!(
        result_of(&evs)["status"],
        "cancelled",
        "cancelled before the answer"
    );
    assert_eq!(
        tasks.poll_event(),
        Some(TaskEvent::CancelRequested {
            task: running.clone()
        })
    );
    assert_eq!(
        tasks.complete(p.now, &running, raw("{}")),
        Err(TaskError::Terminal)
    );

    let failing = tasks.create_legacy(p.now, &mut random, 1).unwrap();
    let (_, evs) = legacy_round(
        &mut p,
        &mut tasks,
        1,
        "tasks/result",
        json!({ "taskId": failing }),
    );
    assert!(evs.is_empty());
    tasks
        .fail(p.now, &failing, -32603, "the backend crashed", None)
        .unwrap();
    let ready = tasks.poll_result().unwrap();
    ready.answer.write(&mut p.server, ready.id.as_id()).unwrap();
    p.step();
    assert!(
        matches!(&p.take_client_events()[..], [Ev::Error { code: -32603, message, .. }] if message == "the backend crashed")
    );

    // A task that expires while a tasks/result waits: the waiter gets -32602.
    let mut short = Tasks::new(
        TaskConfig {
            ttl: Some(std::time::Duration::from_secs(5)),
            ..TaskConfig::default()
        },
        T0,
        WALL,
    );
    let t = short.create_legacy(T0, &mut random, 9).unwrap();
    assert_eq!(
        short.answer_legacy(
            T0,
            9,
            mcpwire::jsonrpc::Id::Int(5),
            "tasks/result",
            Some(raw(&json!({ "taskId": t }).to_string()))
        ),
        Some(mcpwire::tasks::LegacyAnswer::Wait)
    );
    short.handle_timeout(at(5000));
    let ready = short.poll_result().unwrap();
    assert_eq!(ready.owner, 9);
    assert!(matches!(
        ready.answer,
        mcpwire::tasks::LegacyAnswer::Error { code: -32602, .. }
    ));
    // The two flavours do not mix: the extension's methods do not see a 2025-11-25 task.
    let t = short.create_legacy(at(5000), &mut random, 9).unwrap();
    assert!(matches!(
        short.answer(
            at(5000),
            all_input(),
            "tasks/get",
            Some(raw(&json!({ "taskId": t }).to_string()))
        ),
        Some(Err((-32602, _, _)))
    ));
}

#[test]
fn a_2025_11_25_task_cancelled_by_request_drops_its_progress_message() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let task = tasks.create_legacy(T0, &mut ids(), 1).unwrap();
    tasks
        .set_message(T0, &task, Some("Gathering sources..."))
        .unwrap();
    let cancelled = legacy_answer(&mut tasks, 1, "tasks/cancel", &task);
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(
        cancelled["statusMessage"],
        "The task was cancelled by request."
    );
    assert_eq!(
        legacy_answer(&mut tasks, 1, "tasks/get", &task)["statusMessage"],
        "The task was cancelled by request."
    );
    // The client asked: `cancel_requested` says so in this era too (it said false).
    assert!(tasks.cancel_requested(&task));
}

/// A failed task's `statusMessage` is its failure, not the progress message left from the
/// work ("SHOULD include a statusMessage field with diagnostic information about the
/// failure"): it kept the progress message.
#[test]
fn a_failed_task_drops_its_progress_message() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    for legacy in [false, true] {
        let task = if legacy {
            tasks.create_legacy(T0, &mut ids(), 1).unwrap()
        } else {
            tasks.create(T0, &mut ids()).unwrap()
        };
        tasks.set_message(T0, &task, Some("50% done")).unwrap();
        tasks
            .fail(at(10), &task, -32603, "the backend went away", None)
            .unwrap();
        let t = if legacy {
            legacy_answer(&mut tasks, 1, "tasks/get", &task)
        } else {
            get(&mut tasks, at(20), &task)
        };
        assert_eq!(t["status"], "failed", "{t}");
        assert_eq!(t["statusMessage"], "the backend went away", "{t}");
    }
}

/// A hand-built 2025-11-25 answer whose JSON is not valid is refused, and nothing goes out:
/// it was written as given, a frame no peer could read.
#[test]
fn a_hand_built_legacy_answer_with_invalid_json_is_refused() {
    let mut p = legacy_pair();
    p.client.request(p.now, "tools/list", None).unwrap();
    p.step();
    let Some(Ev::Request { id, .. }) = p.take_server_events().into_iter().next() else {
        panic!("no request")
    };
    let bad = [
        LegacyAnswer::Result(r#"{"a":"#.into()),
        LegacyAnswer::Error {
            code: -32603,
            message: "x".into(),
            data: Some("nope".into()),
        },
    ];
    for answer in bad {
        assert_eq!(
            answer.write(&mut p.server, id.as_id()),
            Err(Error::InvalidParams),
            "{answer:?}"
        );
    }
    assert!(take_output(&mut p.server).is_empty());
    LegacyAnswer::Result("{}".into())
        .write(&mut p.server, id.as_id())
        .unwrap();
    assert!(!take_output(&mut p.server).is_empty());
}

/// A progress notification for the token of our request `call` (a number) reaches the
/// client: it is dropped and counted, the token being forgotten.
fn assert_progress_dropped(p: &mut common::pair::Pair, call: &mcpwire::jsonrpc::OwnedId) {
    let dropped = p.client.stats().dropped_progress;
    let mcpwire::jsonrpc::OwnedId::Int(token) = call else {
        panic!("a numeric token")
    };
    let line = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{token},"progress":1000}}}}"#
    );
    p.client.handle_input(p.now, format!("{line}\n").as_bytes());
    assert_eq!(drain(&mut p.client), vec![], "the token is forgotten");
    assert_eq!(p.client.stats().dropped_progress, dropped + 1);
}

#[test]
fn a_2025_11_25_tasks_progress_token_lives_until_its_end_is_answered() {
    // "For task-augmented requests, the progressToken provided in the original request MUST
    // continue to be used for progress notifications throughout the task's lifetime, even
    // after the CreateTaskResult has been returned."
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut p = legacy_pair();
    let options = mcpwire::conn::RequestOptions {
        progress: true,
        ..Default::default()
    };
    let (call, call_id) = task_call(&mut p, options);
    p.server
        .progress(call_id.as_id(), 1.0, None, Some("starting"))
        .unwrap();
    let task = tasks.create_legacy(p.now, &mut ids(), 1).unwrap();
    p.server
        .respond_task(call_id.as_id(), raw(&tasks.create_result(&task).unwrap()))
        .unwrap();
    // After the handle: the server can still report, and the client still gets it.
    p.server
        .progress(call_id.as_id(), 50.0, Some(100.0), Some("half"))
        .unwrap();
    assert_eq!(
        p.server.progress(call_id.as_id(), 50.0, None, None),
        Err(Error::NonIncreasingProgress),
        "still increasing across the handle"
    );
    p.step();
    // "All requests, notifications, and responses related to a task MUST include the
    // io.modelcontextprotocol/related-task key in their _meta": the progress after the
    // handle carries it (it went without), the progress before the task existed cannot.
    let progress: Vec<Value> = p
        .lines(false)
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 2, "{progress:?}");
    assert!(progress[0]["params"].get("_meta").is_none(), "{progress:?}");
    assert_eq!(
        progress[1]["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task.as_str(),
        "{progress:?}"
    );
    let evs = p.take_client_events();
    assert!(
        matches!(&evs[0], Ev::Progress { request, progress, .. } if *request == call && *progress == 1.0),
        "{evs:?}"
    );
    assert!(
        matches!(&evs[1], Ev::TaskCreated { request, .. } if *request == call),
        "{evs:?}"
    );
    assert!(
        matches!(&evs[2], Ev::Progress { request, progress, total: Some(t), .. } if *request == call && *progress == 50.0 && *t == 100.0),
        "{evs:?}"
    );
    // tasks/get does not end it; the answer to tasks/result does (the task is terminal).
    legacy_round(
        &mut p,
        &mut tasks,
        1,
        "tasks/get",
        json!({ "taskId": task }),
    );
    p.server
        .progress(call_id.as_id(), 60.0, None, None)
        .unwrap();
    tasks
        .complete(p.now, &task, raw(r#"{"content":[]}"#))
        .unwrap();
    let (_, evs) = legacy_round(
        &mut p,
        &mut tasks,
        1,
        "tasks/result",
        json!({ "taskId": task }),
    );
    assert!(
        matches!(&evs[..], [Ev::Progress { progress, .. }, Ev::Response { .. }] if *progress == 60.0),
        "{evs:?}"
    );
    assert_eq!(
        p.server.progress(call_id.as_id(), 70.0, None, None),
        Err(Error::UnknownRequest)
    );
    // The client forgot the token too: a late notification is dropped and counted.
    assert_progress_dropped(&mut p, &call_id);
}

#[test]
fn tasks_results_that_end_unanswered_do_not_keep_the_token_past_the_answer_that_ends_it() {
    // "Progress notifications for tasks MUST stop after the task reaches a terminal status":
    // each side watched at most 16 tasks/result requests per task and kept those that were
    // cancelled, so after 16 of them the one that was answered no longer ended the token.
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut p = legacy_pair();
    let options = mcpwire::conn::RequestOptions {
        progress: true,
        ..Default::default()
    };
    let (call, call_id) = task_call(&mut p, options);
    let task = tasks.create_legacy(p.now, &mut ids(), 1).unwrap();
    p.server
        .respond_task(call_id.as_id(), raw(&tasks.create_result(&task).unwrap()))
        .unwrap();
    p.step();
    assert!(
        matches!(&p.take_client_events()[..], [Ev::TaskCreated { request, .. }] if *request == call)
    );
    for _ in 0..20 {
        let asked = p
            .client
            .request(
                p.now,
                "tasks/result",
                Some(raw(&json!({ "taskId": task }).to_string())),
            )
            .unwrap();
        p.step();
        p.client.cancel(p.now, asked, Some("gave up")).unwrap();
        p.step();
        let evs = p.take_server_events();
        assert!(
            matches!(&evs[..], [Ev::Request { .. }, Ev::PeerCancelled { .. }]),
            "{evs:?}"
        );
    }
    // Still running: progress goes on.
    p.server
        .progress(call_id.as_id(), 10.0, None, None)
        .unwrap();
    p.step();
    assert!(
        matches!(&p.take_client_events()[..], [Ev::Progress { request, .. }] if *request == call)
    );
    tasks
        .complete(p.now, &task, raw(r#"{"content":[]}"#))
        .unwrap();
    let (_, evs) = legacy_round(
        &mut p,
        &mut tasks,
        1,
        "tasks/result",
        json!({ "taskId": task }),
    );
    assert!(matches!(&evs[..], [Ev::Response { .. }]), "{evs:?}");
    assert_eq!(
        p.server.progress(call_id.as_id(), 20.0, None, None),
        Err(Error::UnknownRequest),
        "the server forgot the token"
    );
    assert_progress_dropped(&mut p, &call_id);
}

#[test]
fn task_progress_tokens_kept_past_their_handles_are_bounded_in_bytes() {
    // The peer's tokens are as long as its frames allow: kept past the request, they are held
    // to a megabyte in all, the oldest task's forgotten first.
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut p = legacy_pair();
    let long = |c: char| c.to_string().repeat(600 << 10);
    let mut calls = Vec::new();
    for (n, c) in [(101, 'a'), (102, 'b')] {
        let line = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
            "name": "slow", "task": {"ttl": 60000}, "_meta": {"progressToken": long(c)}}});
        p.server.handle_input(p.now, format!("{line}\n").as_bytes());
        let evs = drain(&mut p.server);
        let Some(Ev::Request { id, .. }) = evs.into_iter().next() else {
            panic!("no request")
        };
        let task = tasks.create_legacy(p.now, &mut ids(), 1).unwrap();
        p.server
            .respond_task(id.as_id(), raw(&tasks.create_result(&task).unwrap()))
            .unwrap();
        calls.push(id);
    }
    assert_eq!(
        p.server.progress(calls[0].as_id(), 1.0, None, None),
        Err(Error::UnknownRequest),
        "the older task's token was forgotten"
    );
    p.server
        .progress(calls[1].as_id(), 1.0, None, None)
        .unwrap();
}

#[test]
fn a_2025_11_25_tool_result_with_is_error_fails_the_task_and_is_its_result() {
    // 2025-11-25: "failed: ... this includes cases where the tool call result has isError set
    // to true", and tasks/result "MUST return exactly what the underlying request would have
    // returned".
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut random = ids();
    let legacy = tasks.create_legacy(T0, &mut random, 1).unwrap();
    let result = r#"{"content":[{"type":"text","text":"no such city"}],"isError":true}"#;
    tasks.set_message(T0, &legacy, Some("fetching")).unwrap();
    tasks.complete(T0, &legacy, raw(result)).unwrap();
    assert_eq!(tasks.status(&legacy), Some(TaskStatus::Failed));
    // "The tasks/get response SHOULD include a statusMessage field with diagnostic
    // information about the failure" (it had none).
    let got = legacy_answer(&mut tasks, 1, "tasks/get", &legacy);
    assert_eq!(got["status"], "failed");
    assert!(
        got["statusMessage"]
            .as_str()
            .is_some_and(|m| !m.is_empty() && m != "fetching"),
        "{got}"
    );
    let answer = legacy_answer(&mut tasks, 1, "tasks/result", &legacy);
    assert_eq!(answer["isError"], true);
    assert_eq!(answer["content"][0]["text"], "no such city");
    // `isError: false` completes; and SEP-2663 keeps a tool error `completed`.
    let fine = tasks.create_legacy(T0, &mut random, 1).unwrap();
    tasks
        .complete(T0, &fine, raw(r#"{"content":[],"isError":false}"#))
        .unwrap();
    assert_eq!(tasks.status(&fine), Some(TaskStatus::Completed));
    let modern = tasks.create(T0, &mut random).unwrap();
    tasks.complete(T0, &modern, raw(result)).unwrap();
    assert_eq!(tasks.status(&modern), Some(TaskStatus::Completed));
    assert_eq!(get(&mut tasks, T0, &modern)["result"]["isError"], true);
}

#[test]
fn a_2025_11_25_task_handle_needs_a_request_that_asked_for_one() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut p = legacy_pair();
    // No `task` member: the request runs normally and cannot get a handle.
    p.client
        .request(p.now, "tools/call", Some(raw(r#"{"name":"slow"}"#)))
        .unwrap();
    p.step();
    let Some(Ev::Request { id, .. }) = p.take_server_events().into_iter().next() else {
        panic!()
    };
    let task = tasks.create_legacy(p.now, &mut ids(), 1).unwrap();
    assert_eq!(
        p.server
            .respond_task(id.as_id(), raw(&tasks.create_result(&task).unwrap())),
        Err(Error::NotEligible)
    );
    // The params are read in one pass for `_meta` and `task`: a `task` after a progress token
    // and a long `arguments` still asks for a task; a duplicated `task` counts as absent.
    let args = format!(r#"{{"text":"{}"}}"#, "x".repeat(300));
    for (n, params, eligible) in [
        (
            901,
            format!(
                r#"{{"_meta":{{"progressToken":7}},"name":"slow","arguments":{args},"task":{{}}}}"#
            ),
            true,
        ),
        (
            902,
            format!(r#"{{"name":"slow","task":{{}},"arguments":{args},"task":{{}}}}"#),
            false,
        ),
    ] {
        let line =
            format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{params}}}"#);
        p.server.handle_input(p.now, format!("{line}\n").as_bytes());
        let ev = p.server.poll_event();
        assert!(
            matches!(ev, Some(mcpwire::conn::Event::Request { .. })),
            "{ev:?}"
        );
        let task = tasks.create_legacy(p.now, &mut ids(), 1).unwrap();
        let got = p.server.respond_task(
            mcpwire::jsonrpc::Id::Int(n),
            raw(&tasks.create_result(&task).unwrap()),
        );
        assert_eq!(got.is_ok(), eligible, "{params}: {got:?}");
        if !eligible {
            p.server
                .respond(mcpwire::jsonrpc::Id::Int(n), raw(r#"{"content":[]}"#))
                .unwrap();
        }
    }
    // The answers to these injected requests are not for the client.
    while let Some(t) = p.server.poll_transmit() {
        let n = t.bytes.len();
        p.server.consume_transmit(n);
    }
    // Nor may a server ask a client for a task the client did not declare (sampling here).
    assert_eq!(
        p.server.request(
            p.now,
            "sampling/createMessage",
            Some(raw(r#"{"messages":[],"maxTokens":1,"task":{}}"#))
        ),
        Err(Error::NotNegotiated(Caps::TASKS_SAMPLING))
    );
}

/// 2025-11-25: an answer with a `task` member to a task-augmented request is a
/// `CreateTaskResult`, and a malformed one (the schema's `Task` needs a string `taskId`, a
/// known `status`, `createdAt`, `lastUpdatedAt` and `ttl`, a number or null) is an invalid
/// response, as in 2026-07-28. An answer without `task` is the request's own result.
#[test]
fn a_malformed_2025_11_25_task_handle_is_an_invalid_response() {
    let mut p = legacy_pair();
    let call = r#"{"name":"slow","task":{}}"#;
    let times = r#""createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:30:00Z""#;
    let good = format!(r#""taskId":"abc","status":"working",{times},"ttl":60000"#);
    for bad in [
        format!(r#"{{"task":{{"taskId":5,"status":"working",{times},"ttl":60000}}}}"#),
        r#"{"task":{"taskId":"abc"}}"#.to_owned(),
        format!(r#"{{"task":{{"taskId":"abc","status":"bogus",{times},"ttl":60000}}}}"#),
        format!(r#"{{"task":{{"taskId":"abc","status":"working",{times},"ttl":"x"}}}}"#),
        format!(r#"{{"task":{{"taskId":"abc","status":"working",{times},"ttlMs":60000}}}}"#),
        format!(r#"{{"task":{{{good},"pollInterval":"soon"}}}}"#),
        r#"{"task":"abc"}"#.to_owned(),
        format!(r#"{{"task":{{{good}}},"task":{{{good}}}}}"#),
    ] {
        let evs = answered_by_hand(&mut p, "tools/call", call, &bad);
        assert!(
            matches!(&evs[..], [Ev::InvalidResponse { .. }]),
            "{bad}: {evs:?}"
        );
    }
    for fine in [
        format!(r#"{{"task":{{{good}}}}}"#),
        format!(
            r#"{{"task":{{"taskId":"abc","status":"completed",{times},"ttl":null,"pollInterval":500,"statusMessage":"done"}},"_meta":{{"app/x":1}}}}"#
        ),
    ] {
        let evs = answered_by_hand(&mut p, "tools/call", call, &fine);
        assert!(
            matches!(&evs[..], [Ev::TaskCreated { .. }]),
            "{fine}: {evs:?}"
        );
    }
    // The receiver ran the request without a task.
    let evs = answered_by_hand(&mut p, "tools/call", call, r#"{"content":[]}"#);
    assert!(matches!(&evs[..], [Ev::Response { .. }]), "{evs:?}");
}

/// A 2025-11-25 pair whose client declared tasks for the server's `sampling/createMessage`.
fn sampling_task_pair() -> common::pair::Pair {
    let server = Config::server("s", "1")
        .with_capabilities(r#"{"tools":{}}"#)
        .unwrap();
    let client = Config::client("c", "1")
        .with_capabilities(
            r#"{"sampling":{},"tasks":{"requests":{"sampling":{"createMessage":{}}}}}"#,
        )
        .unwrap();
    common::pair::Pair::ready(D, client, server)
}

/// A task-augmented `sampling/createMessage` with `includeContext` (a SHOULD NOT, tolerated
/// from a server) can still be answered with a task handle by a client that declared tasks for
/// it: the task check read `includeContext` as a sub-capability we lacked, so `respond_task`
/// was refused (`NotEligible`) for a request the spec says "MUST" get one.
#[test]
fn a_2025_11_25_sampling_request_with_include_context_may_get_a_task() {
    let mut p = sampling_task_pair();
    let line = r#"{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5,"includeContext":"thisServer","task":{"ttl":60000}}}"#;
    p.client.handle_input(p.now, format!("{line}\n").as_bytes());
    let evs = drain(&mut p.client);
    let Some(Ev::Request { id, .. }) = evs.into_iter().find(|e| matches!(e, Ev::Request { .. }))
    else {
        panic!("no request")
    };
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let task = tasks.create_legacy(p.now, &mut ids(), 0).unwrap();
    assert_eq!(
        p.client
            .respond_task(id.as_id(), raw(&tasks.create_result(&task).unwrap())),
        Ok(())
    );
}

#[test]
fn a_2025_11_25_client_hosts_a_task_for_the_servers_sampling_request() {
    let mut p = sampling_task_pair();
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let ask = p
        .server
        .request(
            p.now,
            "sampling/createMessage",
            Some(raw(r#"{"messages":[],"maxTokens":5,"task":{}}"#)),
        )
        .unwrap();
    p.step();
    let Some(Ev::Request { id, .. }) = p.take_client_events().into_iter().next() else {
        panic!()
    };
    let task = tasks.create_legacy(p.now, &mut ids(), 0).unwrap();
    p.client
        .respond_task(id.as_id(), raw(&tasks.create_result(&task).unwrap()))
        .unwrap();
    p.step();
    let evs = p.take_server_events();
    assert!(
        matches!(&evs[..], [Ev::TaskCreated { request, .. }] if *request == ask),
        "{evs:?}"
    );
    // The server polls the client.
    p.server
        .request(
            p.now,
            "tasks/get",
            Some(raw(&json!({ "taskId": task }).to_string())),
        )
        .unwrap();
    p.step();
    let Some(Ev::Request { id, method, params }) = p.take_client_events().into_iter().next() else {
        panic!()
    };
    tasks
        .serve_legacy(
            p.now,
            0,
            &mut p.client,
            id.as_id(),
            &method,
            params.as_deref().map(raw),
        )
        .unwrap();
    p.step();
    assert_eq!(result_of(&p.take_server_events())["status"], "working");
}

/// Random operations, both flavours, hostile params: no panic, the bounds hold, a terminal task
/// never changes, every answer is well-formed JSON or a -32602.
#[test]
fn tasks_under_random_operations_keep_their_invariants() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n.max(1)
    };
    for round in 0..40 {
        let config = TaskConfig {
            max_tasks: 1 + next(6) as usize,
            ttl: (next(3) > 0).then(|| Duration::from_millis(1 + next(3000))),
            max_input_requests: 1 + next(3) as usize,
            max_payload: 16 + next(200) as usize,
            ..TaskConfig::default()
        };
        let max = config.max_tasks;
        let mut tasks = Tasks::new(config, T0, WALL);
        let mut ids_seen: Vec<String> = Vec::new();
        let mut terminal: std::collections::HashMap<String, TaskStatus> = Default::default();
        let mut now = 0u64;
        let mut random = ids();
        for _ in 0..300 {
            now += next(50);
            let t = at(now);
            let pick = |k: u64, seen: &Vec<String>| -> String {
                match seen.get(k as usize) {
                    Some(id) => id.clone(),
                    None => "no-such-task".to_owned(),
                }
            };
            let task = pick(next(ids_seen.len() as u64 + 1), &ids_seen);
            match next(12) {
                0 | 1 => {
                    let made = if next(2) == 0 {
                        tasks.create(t, &mut random)
                    } else {
                        tasks.create_legacy(t, &mut random, next(3))
                    };
                    if let Ok(id) = made {
                        ids_seen.push(id);
                    }
                }
                2 => {
                    let key = format!("k{}", next(4));
                    let _ = tasks.ask(t, &task, &key, raw(r#"{"method":"elicitation/create"}"#));
                }
                3 => {
                    let _ = tasks.complete(t, &task, raw(r#"{"content":[]}"#));
                }
                4 => {
                    let _ = tasks.fail(t, &task, -32603, "boom", None);
                }
                5 => {
                    let _ = tasks.cancel(t, &task);
                }
                6 => {
                    let _ = tasks.resume(t, &task);
                }
                7 => tasks.handle_timeout(t),
                _ => {
                    let method = [
                        "tasks/get",
                        "tasks/update",
                        "tasks/cancel",
                        "tasks/result",
                        "tasks/list",
                    ][next(5) as usize];
                    let params = [
                        json!({ "taskId": task, "inputResponses": {"k0": {}, "k1": 5} })
                            .to_string(),
                        json!({ "taskId": 12 }).to_string(),
                        r#"{"taskId":"a","taskId":"b"}"#.to_owned(),
                        json!({ "taskId": task, "inputResponses": [] }).to_string(),
                        json!({ "cursor": "x" }).to_string(),
                    ][next(5) as usize]
                        .clone();
                    let params = RawJson::new(&params).ok();
                    if let Some(Ok(r)) = tasks.answer(t, all_input(), method, params) {
                        serde_json::from_str::<Value>(&r).expect("well-formed JSON");
                    }
                    if let Some(mcpwire::tasks::LegacyAnswer::Result(r)) = tasks.answer_legacy(
                        t,
                        next(3),
                        mcpwire::jsonrpc::Id::Int(next(100) as i64),
                        method,
                        params,
                    ) {
                        serde_json::from_str::<Value>(&r).expect("well-formed JSON");
                    }
                }
            }
            while tasks.poll_event().is_some() {}
            while let Some(ready) = tasks.poll_result() {
                assert!(!matches!(ready.answer, mcpwire::tasks::LegacyAnswer::Wait));
            }
            assert!(tasks.len() <= max, "round {round}: the cap holds");
            if let Some(deadline) = tasks.poll_timeout() {
                assert!(deadline > T0);
            }
            for id in &ids_seen {
                match (terminal.get(id), tasks.status(id)) {
                    (Some(was), Some(now)) => {
                        assert_eq!(*was, now, "round {round}: a terminal task never changes")
                    }
                    (None, Some(s)) if s.is_terminal() => {
                        terminal.insert(id.clone(), s);
                    }
                    _ => {}
                }
            }
        }
    }
}

#[test]
fn status_notifications_reach_the_listen_streams_that_asked_for_the_task() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut p = modern_pair(true);
    let task = tasks.create(p.now, &mut ids()).unwrap();
    let other = tasks.create(p.now, &mut ids()).unwrap();
    let filter = json!({ "notifications": { "taskIds": [task] } }).to_string();
    p.client
        .request(p.now, "subscriptions/listen", Some(raw(&filter)))
        .unwrap();
    p.step();
    let evs = p.take_client_events();
    let Some(Ev::Notification {
        method,
        params: Some(ack),
    }) = evs.first()
    else {
        panic!("{evs:?}")
    };
    assert_eq!(method, "notifications/subscriptions/acknowledged");
    let ack: Value = serde_json::from_str(ack).unwrap();
    assert_eq!(ack["notifications"]["taskIds"], json!([task]), "granted");

    tasks
        .complete(
            p.now,
            &task,
            raw(r#"{"content":[{"type":"text","text":"ok"}]}"#),
        )
        .unwrap();
    for t in [&task, &other] {
        let (method, params) = tasks.status_notification(t).unwrap();
        assert_eq!(method, "notifications/tasks");
        p.server.notify(method, Some(raw(&params))).unwrap();
    }
    p.step();
    let evs = p.take_client_events();
    assert_eq!(evs.len(), 1, "only the task asked for: {evs:?}");
    let Ev::Notification {
        method,
        params: Some(params),
    } = &evs[0]
    else {
        panic!()
    };
    assert_eq!(method, "notifications/tasks");
    let params: Value = serde_json::from_str(params).unwrap();
    assert_eq!(params["taskId"], task.as_str());
    assert_eq!(params["status"], "completed");
    assert_eq!(
        params["result"]["content"][0]["text"], "ok",
        "the full DetailedTask"
    );
}

/// SEP-2663: "Servers MUST perform authentication and authorization checks on each
/// task-related request". Under `Policy::review_listens` the application sees the listen and
/// grants only the tasks the caller may access; the other task's status never reaches it.
#[test]
fn a_reviewed_listen_follows_only_the_tasks_the_application_grants() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let client = common::pair::modern(
        Config::client("c", "1")
            .with_capabilities(r#"{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#)
            .unwrap(),
    );
    let mut server = Config::server("s", "1")
        .with_capabilities(r#"{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#)
        .unwrap();
    server.policy.review_listens = true;
    let mut p = common::pair::Pair::new(client, server);
    p.step();
    p.take_client_events();
    p.take_server_events();
    let mine = tasks.create(p.now, &mut ids()).unwrap();
    let theirs = tasks.create(p.now, &mut ids()).unwrap();
    let filter = json!({ "notifications": { "taskIds": [mine, theirs] } }).to_string();
    p.client
        .request(p.now, "subscriptions/listen", Some(raw(&filter)))
        .unwrap();
    p.step();
    assert!(p.take_client_events().is_empty(), "acknowledged unchecked");
    let evs = p.take_server_events();
    let Some(Ev::Request { id, method, .. }) = evs.last() else {
        panic!("{evs:?}")
    };
    assert_eq!(method, "subscriptions/listen");
    p.server
        .grant_listen(id.as_id(), |item| {
            item == mcpwire::conn::ListenItem::Task(mine.as_str())
        })
        .unwrap();
    p.step();
    let evs = p.take_client_events();
    let Some(Ev::Notification {
        params: Some(ack), ..
    }) = evs.first()
    else {
        panic!("{evs:?}")
    };
    let ack: Value = serde_json::from_str(ack).unwrap();
    assert_eq!(ack["notifications"], json!({ "taskIds": [mine] }));
    for t in [&theirs, &mine] {
        tasks.cancel(p.now, t).unwrap();
        let (method, params) = tasks.status_notification(t).unwrap();
        p.server.notify(method, Some(raw(&params))).unwrap();
    }
    p.step();
    let evs = p.take_client_events();
    assert_eq!(evs.len(), 1, "{evs:?}");
    let Ev::Notification {
        params: Some(params),
        ..
    } = &evs[0]
    else {
        panic!()
    };
    let params: Value = serde_json::from_str(params).unwrap();
    assert_eq!(params["taskId"], mine.as_str());
}

/// `notifications/tasks` carries the full DetailedTask, input requests included: it goes only to
/// a listener that declared what they need, as `tasks/get` answers only such a requestor
/// (-32021 otherwise). A listener with only the extension got the elicitation.
#[test]
fn a_task_status_with_input_requests_goes_only_to_listeners_that_declared_them() {
    for elicitation in [false, true] {
        let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
        let caps = if elicitation {
            r#"{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#
        } else {
            r#"{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#
        };
        let client =
            common::pair::modern(Config::client("c", "1").with_capabilities(caps).unwrap());
        let server = Config::server("s", "1")
            .with_capabilities(r#"{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#)
            .unwrap();
        let mut p = common::pair::Pair::new(client, server);
        p.step();
        p.take_client_events();
        let task = tasks.create(p.now, &mut ids()).unwrap();
        let filter = json!({ "notifications": { "taskIds": [task] } }).to_string();
        p.client
            .request(p.now, "subscriptions/listen", Some(raw(&filter)))
            .unwrap();
        p.step();
        p.take_client_events(); // the acknowledgement
        let ask = r#"{"method":"elicitation/create","params":{"message":"Deploy?","requestedSchema":{"type":"object","properties":{}}}}"#;
        tasks.ask(p.now, &task, "e", raw(ask)).unwrap();
        let (method, params) = tasks.status_notification(&task).unwrap();
        p.server.notify(method, Some(raw(&params))).unwrap();
        p.step();
        let evs = p.take_client_events();
        assert_eq!(
            evs.len(),
            usize::from(elicitation),
            "elicitation {elicitation}: {evs:?}"
        );
    }
}

#[test]
fn a_2025_11_25_task_status_notification_is_the_flat_task() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut p = legacy_pair();
    let task = tasks.create_legacy(p.now, &mut ids(), 1).unwrap();
    tasks.set_message(p.now, &task, Some("half way")).unwrap();
    let (method, params) = tasks.status_notification(&task).unwrap();
    assert_eq!(method, "notifications/tasks/status");
    p.server.notify(method, Some(raw(&params))).unwrap();
    p.step();
    let evs = p.take_client_events();
    let [
        Ev::Notification {
            params: Some(params),
            ..
        },
    ] = &evs[..]
    else {
        panic!("{evs:?}")
    };
    let params: Value = serde_json::from_str(params).unwrap();
    assert_eq!(params["taskId"], task.as_str());
    assert_eq!(params["statusMessage"], "half way");
    assert_eq!(params["ttl"], 3_600_000);
    assert!(
        params.get("_meta").is_none(),
        "no related-task metadata here"
    );
}

/// A task handle that comes after its request ended (here: timed out) names a task nobody
/// waits for: the client engine cancels it with `tasks/cancel` where the server declared
/// `tasks.cancel`, and drops that answer. Before, the handle was dropped as late and the
/// task ran until its TTL (an hour by default).
#[test]
fn a_task_handle_that_comes_after_its_request_ended_gets_tasks_cancel() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let short = mcpwire::conn::RequestOptions {
        timeout: Some(Duration::from_secs(1)),
        ..Default::default()
    };
    // Sends a task-augmented call that times out, then answers it with a task handle; the
    // server's events after that, and the task.
    let late_handle = |p: &mut common::pair::Pair, tasks: &mut Tasks, owner: u64| {
        let (call, id) = task_call(p, short);
        p.advance(Duration::from_secs(2));
        let evs = p.take_client_events();
        assert!(
            matches!(&evs[..], [Ev::TimedOut { request }] if *request == call),
            "{evs:?}"
        );
        let task = tasks.create_legacy(p.now, &mut ids(), owner).unwrap();
        p.server
            .respond_task(id.as_id(), raw(&tasks.create_result(&task).unwrap()))
            .unwrap();
        p.step();
        (p.take_server_events(), task)
    };

    let mut p = legacy_pair();
    let (evs, task) = late_handle(&mut p, &mut tasks, 1);
    let [Ev::Request { id, method, params }] = &evs[..] else {
        panic!("{evs:?}")
    };
    assert_eq!(method, "tasks/cancel");
    let params: Value = serde_json::from_str(params.as_deref().unwrap()).unwrap();
    assert_eq!(params, json!({ "taskId": task }));
    assert_eq!(p.client.requests_in_flight(), 1, "the engine's own request");
    tasks
        .serve_legacy(
            p.now,
            1,
            &mut p.server,
            id.as_id(),
            method,
            Some(raw(&params.to_string())),
        )
        .unwrap();
    p.step();
    assert!(
        p.take_client_events().is_empty(),
        "its answer is nobody's event"
    );
    assert_eq!(p.client.requests_in_flight(), 0);
    assert_eq!(
        legacy_answer(&mut tasks, 1, "tasks/get", &task)["status"],
        "cancelled"
    );
    // The handle itself counted as a late answer.
    assert_eq!(p.client.stats().late_responses, 1);

    // A tasks/cancel that is never answered ends by its timeout, without an event and
    // without a notification of its own.
    let (evs, _) = late_handle(&mut p, &mut tasks, 1);
    assert!(matches!(&evs[..], [Ev::Request { method, .. }] if method == "tasks/cancel"));
    p.advance(Duration::from_secs(120));
    assert!(p.take_client_events().is_empty());
    assert!(
        p.take_server_events().is_empty(),
        "no notifications/cancelled for it"
    );
    assert_eq!(p.client.requests_in_flight(), 0);

    // Where requests have no default timeout, the engine's own still ends (nobody could
    // cancel it, and a graceful close would wait for it).
    let server = Config::server("s", "1")
        .with_capabilities(
            r#"{"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}"#,
        )
        .unwrap();
    let mut client = Config::client("c", "1")
        .with_capabilities(r#"{"sampling":{}}"#)
        .unwrap();
    client.request_timeout = Duration::MAX;
    let mut unbounded = common::pair::Pair::ready(D, client, server);
    let (evs, _) = late_handle(&mut unbounded, &mut tasks, 3);
    assert!(matches!(&evs[..], [Ev::Request { method, .. }] if method == "tasks/cancel"));
    assert_eq!(unbounded.client.requests_in_flight(), 1);
    unbounded.advance(Duration::from_secs(31));
    assert_eq!(unbounded.client.requests_in_flight(), 0);
    assert!(unbounded.take_client_events().is_empty());

    // A server that did not declare `tasks.cancel` is not sent one.
    let server = Config::server("s", "1")
        .with_capabilities(r#"{"tools":{},"tasks":{"requests":{"tools":{"call":{}}}}}"#)
        .unwrap();
    let client = Config::client("c", "1")
        .with_capabilities(r#"{"sampling":{}}"#)
        .unwrap();
    let mut p = common::pair::Pair::ready(D, client, server);
    let (evs, _) = late_handle(&mut p, &mut tasks, 2);
    assert!(evs.is_empty(), "{evs:?}");
    assert_eq!(p.client.requests_in_flight(), 0);
}

/// A task handle that comes after its request timed out, while a graceful close runs, still
/// gets the engine's `tasks/cancel`, and the close waits for its answer as for our other
/// requests. It got none: the close refused the engine's own request, and the task ran for
/// nobody until its ttl (found by a review of the connection core).
#[test]
fn a_late_task_handle_during_a_graceful_close_still_gets_tasks_cancel() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut p = legacy_pair();
    let short = mcpwire::conn::RequestOptions {
        timeout: Some(Duration::from_secs(1)),
        ..Default::default()
    };
    let (call, id) = task_call(&mut p, short);
    p.advance(Duration::from_secs(2));
    assert!(matches!(&p.take_client_events()[..], [Ev::TimedOut { request }] if *request == call));
    // The server asks the client something, which keeps the client's close open.
    p.server
        .request(
            p.now,
            "sampling/createMessage",
            Some(raw(r#"{"messages":[],"maxTokens":1}"#)),
        )
        .unwrap();
    p.step();
    assert!(matches!(&p.take_client_events()[..], [Ev::Request { .. }]));
    p.client.close(p.now, Duration::from_secs(10));
    assert_eq!(p.client.state(), State::Closing);
    let task = tasks.create_legacy(p.now, &mut ids(), 1).unwrap();
    p.server
        .respond_task(id.as_id(), raw(&tasks.create_result(&task).unwrap()))
        .unwrap();
    p.step();
    let evs = p.take_server_events();
    let cancel = evs.iter().find_map(|e| match e {
        Ev::Request { method, params, .. } if method == "tasks/cancel" => params.clone(),
        _ => None,
    });
    let params: Value = serde_json::from_str(&cancel.expect("tasks/cancel")).unwrap();
    assert_eq!(params, json!({ "taskId": task }));
    assert_eq!(p.client.requests_in_flight(), 1, "the close waits for it");
}

#[test]
fn a_2025_11_25_task_augmented_request_before_its_handle_is_never_cancelled_by_notification() {
    // "For task-augmented requests, the `tasks/cancel` request MUST be used instead of the
    // `notifications/cancelled` notification." Before the handle there is no task id, so a
    // timeout, a cancel and a close end such a request here without a word to the server;
    // plain requests are still cancelled by notification beside them.
    let mut p = legacy_pair();
    let short = mcpwire::conn::RequestOptions {
        timeout: Some(Duration::from_secs(1)),
        ..Default::default()
    };
    let task_call = raw(r#"{"name":"slow","task":{"ttl":60000}}"#);
    let plain_call = raw(r#"{"name":"slow"}"#);
    let timed_task = p
        .client
        .request_with(p.now, "tools/call", Some(task_call), short)
        .unwrap();
    let timed_plain = p
        .client
        .request_with(p.now, "tools/call", Some(plain_call), short)
        .unwrap();
    p.step();
    assert_eq!(p.take_server_events().len(), 2);
    p.advance(Duration::from_secs(2));
    let evs = p.take_client_events();
    assert!(
        evs.iter()
            .any(|e| matches!(e, Ev::TimedOut { request } if *request == timed_task)),
        "{evs:?}"
    );
    assert!(
        evs.iter()
            .any(|e| matches!(e, Ev::TimedOut { request } if *request == timed_plain)),
        "{evs:?}"
    );
    let cancelled = |p: &common::pair::Pair| -> Vec<Value> {
        p.lines(true)
            .iter()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|m| m["method"] == "notifications/cancelled")
            .map(|m| m["params"]["requestId"].clone())
            .collect()
    };
    let plain_id = |r: mcpwire::conn::RequestId| json!(r.0);
    assert_eq!(cancelled(&p), vec![plain_id(timed_plain)], "the timeouts");

    // An explicit cancel.
    let task = p
        .client
        .request(p.now, "tools/call", Some(task_call))
        .unwrap();
    let plain = p
        .client
        .request(p.now, "tools/call", Some(plain_call))
        .unwrap();
    p.step();
    p.client.cancel(p.now, task, Some("no")).unwrap();
    p.client.cancel(p.now, plain, Some("no")).unwrap();
    p.step();
    assert_eq!(
        cancelled(&p),
        vec![plain_id(timed_plain), plain_id(plain)],
        "the cancels"
    );

    // A close whose grace runs out.
    let _task = p
        .client
        .request(p.now, "tools/call", Some(task_call))
        .unwrap();
    let plain = p
        .client
        .request(p.now, "tools/call", Some(plain_call))
        .unwrap();
    p.step();
    p.client.close(p.now, Duration::from_secs(1));
    p.advance(Duration::from_secs(2));
    let seen = cancelled(&p);
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[2], plain_id(plain), "the close");
}

/// 2025-11-25: a `tasks/result` the client cancels no longer waits for the task. The client
/// can ask, cancel and ask again while the task runs (each request frees its place among the
/// connection's `max_inbound_in_flight` as it is cancelled): every cancelled one stayed among
/// the task's waiters until the task ended, so that the table grew without bound for as long
/// as the task lived (an hour by default), and each was then answered for nothing.
#[test]
fn a_cancelled_tasks_result_stops_waiting() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut p = legacy_pair();
    let task = tasks.create_legacy(p.now, &mut ids(), 1).unwrap();
    let params = json!({ "taskId": task });
    for _ in 0..2000 {
        let (request, evs) = legacy_round(&mut p, &mut tasks, 1, "tasks/result", params.clone());
        assert!(evs.is_empty(), "{evs:?}");
        p.client
            .cancel(p.now, request, Some("changed my mind"))
            .unwrap();
        p.step();
        let evs = p.take_server_events();
        assert!(matches!(&evs[..], [Ev::PeerCancelled { .. }]), "{evs:?}");
    }
    let (live, evs) = legacy_round(&mut p, &mut tasks, 1, "tasks/result", params);
    assert!(evs.is_empty(), "{evs:?}");
    tasks
        .complete(p.now, &task, raw(r#"{"content":[]}"#))
        .unwrap();
    let ready: Vec<_> = std::iter::from_fn(|| tasks.poll_result()).collect();
    assert_eq!(ready.len(), 1, "answers for cancelled requests");
    ready[0]
        .answer
        .write(&mut p.server, ready[0].id.as_id())
        .unwrap();
    p.step();
    let evs = p.take_client_events();
    assert!(
        matches!(&evs[..], [Ev::Response { request, .. }] if *request == live),
        "{evs:?}"
    );
}

/// 2025-11-25, through `answer_legacy` (which has no connection to tell it what the client
/// cancelled): at most `MAX_RESULT_WAITERS` `tasks/result` requests wait for one task; the
/// next is answered at once with an internal error, and the waiting ones keep their places.
#[test]
fn waiting_tasks_results_are_bounded_per_task() {
    use mcpwire::jsonrpc::Id;
    use mcpwire::tasks::{LegacyAnswer, MAX_RESULT_WAITERS};
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let task = tasks.create_legacy(T0, &mut ids(), 1).unwrap();
    let params = json!({ "taskId": task }).to_string();
    let ask = |tasks: &mut Tasks, n: usize| {
        tasks.answer_legacy(T0, 1, Id::Int(n as i64), "tasks/result", Some(raw(&params)))
    };
    for n in 0..MAX_RESULT_WAITERS {
        assert_eq!(ask(&mut tasks, n), Some(LegacyAnswer::Wait));
    }
    let refused = ask(&mut tasks, MAX_RESULT_WAITERS);
    assert!(
        matches!(&refused, Some(LegacyAnswer::Error { code: -32603, .. })),
        "{refused:?}"
    );
    tasks.complete(T0, &task, raw(r#"{"content":[]}"#)).unwrap();
    assert_eq!(
        std::iter::from_fn(|| tasks.poll_result()).count(),
        MAX_RESULT_WAITERS
    );
}

/// 2025-11-25: a task failed with -32042 (URL elicitation required) needs the elicitations
/// in its data, as `respond_error` does; and its `tasks/result` is answered even on a
/// connection that cannot carry -32042 (the client did not declare URL elicitation): as an
/// internal error. Before, `fail` took any data, and writing the answer failed, so the
/// waiting `tasks/result` was never answered.
#[test]
fn a_task_failed_with_url_elicitation_required_still_answers_its_result() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut p = legacy_pair();
    let task = tasks.create_legacy(p.now, &mut ids(), 1).unwrap();
    let code = mcpwire::mcp::URL_ELICITATION_REQUIRED;
    for data in [
        None,
        Some(r#"{"x":1}"#),
        Some(r#"{"elicitations":[{"mode":"form"}]}"#),
    ] {
        assert_eq!(
            tasks.fail(p.now, &task, code, "go", data.map(raw)),
            Err(TaskError::InvalidPayload),
            "{data:?}"
        );
    }
    let (waiting, evs) = legacy_round(
        &mut p,
        &mut tasks,
        1,
        "tasks/result",
        json!({ "taskId": task }),
    );
    assert!(evs.is_empty(), "{evs:?}");
    let data = r#"{"elicitations":[{"mode":"url","elicitationId":"e1","url":"https://example.com/auth","message":"Sign in"}]}"#;
    tasks
        .fail(p.now, &task, code, "Sign in first", Some(raw(data)))
        .unwrap();
    // The waiting tasks/result, and one asked now.
    let ready = tasks.poll_result().expect("the waiting tasks/result");
    ready.answer.write(&mut p.server, ready.id.as_id()).unwrap();
    p.step();
    let (now_asked, mut evs) = legacy_round(
        &mut p,
        &mut tasks,
        1,
        "tasks/result",
        json!({ "taskId": task }),
    );
    evs.extend(p.take_client_events());
    for request in [waiting, now_asked] {
        assert!(
            evs.iter()
                .any(|e| matches!(e, Ev::Error { request: r, code: -32603, .. } if *r == request)),
            "{request:?} unanswered: {evs:?}"
        );
    }
}

#[test]
fn a_task_fails_with_32021_or_32022_only_with_their_data() {
    // As `Connection::respond_error`: the schema requires their data.
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut random = ids();
    let task = tasks.create(T0, &mut random).unwrap();
    for (code, data) in [
        (-32021, None),
        (-32021, Some(r#"{"requiredCapabilities":[]}"#)),
        (-32022, Some(r#"{"supported":["2026-07-28"]}"#)),
    ] {
        assert_eq!(
            tasks.fail(at(1), &task, code, "no", data.map(raw)),
            Err(TaskError::InvalidPayload),
            "{code} {data:?}"
        );
    }
    tasks
        .fail(
            at(2),
            &task,
            -32021,
            "needs sampling",
            Some(raw(r#"{"requiredCapabilities":{"sampling":{}}}"#)),
        )
        .unwrap();
    assert_eq!(get(&mut tasks, at(3), &task)["error"]["code"], -32021);
}

/// A method name is compared as decoded text: `tools\/call` asking for a task is a
/// task-augmented `tools/call`, answered with its task like the plain spelling.
#[test]
fn an_escaped_method_name_is_task_augmented_too() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let mut p = legacy_pair();
    p.server.handle_input(
        p.now,
        b"{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools\\/call\",\"params\":{\"name\":\"x\",\"task\":{\"ttl\":1000}}}\n",
    );
    p.step();
    let evs = p.take_server_events();
    let [Ev::Request { id, method, .. }] = &evs[..] else {
        panic!("{evs:?}")
    };
    assert_eq!(method, "tools/call");
    let task = tasks.create_legacy(p.now, &mut ids(), 1).unwrap();
    p.server
        .respond_task(id.as_id(), raw(&tasks.create_result(&task).unwrap()))
        .unwrap();
}

/// A 2025-11-25 task's progress token is held on both sides after the handle, and both sides
/// number their requests from 1: the entry of a task we run for the peer's request 2 and that
/// of a task the peer runs for our request 2 are different things. Progress, answers and
/// `tasks/result` of one direction never touch the other's.
#[test]
fn task_progress_tokens_of_the_two_directions_stay_apart() {
    let mut p = legacy_pair();
    let options = mcpwire::conn::RequestOptions {
        progress: true,
        ..Default::default()
    };
    let (call, call_id) = task_call(&mut p, options);
    assert_eq!(call, mcpwire::conn::RequestId(2));
    let handle = r#"{"task":{"taskId":"t1","status":"working","createdAt":"2025-01-01T00:00:00Z","lastUpdatedAt":"2025-01-01T00:00:00Z","ttl":60000}}"#;
    p.server.respond_task(call_id.as_id(), raw(handle)).unwrap();
    p.step();
    assert!(
        matches!(&p.take_client_events()[..], [Ev::TaskCreated { .. }]),
        "the handle"
    );
    // The client has no request of the server's to report progress on.
    assert_eq!(
        p.client.progress(Id::Int(2), 1.0, None, None),
        Err(Error::UnknownRequest)
    );
    // Progress naming token 2 from the client is not for the server: it has sent no request.
    let before = p.server.stats().dropped_progress;
    p.server.handle_input(
        p.now,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":2,\"progress\":5}}\n",
    );
    let evs = p.take_server_events();
    assert!(
        !evs.iter().any(|e| matches!(e, Ev::Progress { .. })),
        "{evs:?}"
    );
    assert_eq!(p.server.stats().dropped_progress, before + 1);
    // The task the server runs keeps its own count.
    p.server.progress(Id::Int(2), 1.0, None, None).unwrap();
    p.step();
    let evs = p.take_client_events();
    assert!(
        matches!(&evs[..], [Ev::Progress { request, .. }] if *request == call),
        "{evs:?}"
    );
    // The client's `tasks/result` for the task (its id 3) waits; the server's own ping 3 is
    // answered meanwhile: that answer is not the end of the task.
    let waiting = p
        .client
        .request(p.now, "tasks/result", Some(raw(r#"{"taskId":"t1"}"#)))
        .unwrap();
    assert_eq!(waiting, mcpwire::conn::RequestId(3));
    for _ in 0..3 {
        p.server.request(p.now, "ping", None).unwrap();
    }
    p.step();
    p.take_server_events();
    p.server.progress(Id::Int(2), 2.0, None, None).unwrap();
    // A new request that takes the task's token (the client deems the task over) gets it:
    // the task's later progress is refused, the request's own goes out.
    take_output(&mut p.server);
    p.server.handle_input(
        p.now,
        b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"_meta\":{\"progressToken\":2}}}\n",
    );
    let out = String::from_utf8(take_output(&mut p.server)).unwrap();
    assert!(!out.contains("error"), "{out}");
    assert_eq!(
        p.server.progress(Id::Int(2), 3.0, None, None),
        Err(Error::UnknownRequest)
    );
    p.server.progress(Id::Int(9), 1.0, None, None).unwrap();
}

/// `Tasks::answer` sees what the request declared: a `tasks/get` of a task whose input
/// requests need elicitation, from a requestor that did not declare it, is -32021 with the
/// `requiredCapabilities` ("Servers MUST NOT send an inputRequests that the client has not
/// declared support for in its capabilities"); with it declared, the task and its requests.
#[test]
fn answer_gives_input_requests_only_to_a_requestor_that_declared_them() {
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let task = tasks.create(T0, &mut ids()).unwrap();
    let ask = r#"{"method":"elicitation/create","params":{"message":"Deploy?","requestedSchema":{"type":"object","properties":{}}}}"#;
    tasks.ask(T0, &task, "e", raw(ask)).unwrap();
    let params = json!({ "taskId": task }).to_string();
    let refused = tasks.answer(T0, Caps::SAMPLING, "tasks/get", Some(raw(&params)));
    let Some(Err((code, _, Some(data)))) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(code, -32021);
    assert_eq!(
        serde_json::from_str::<Value>(&data).unwrap(),
        json!({"requiredCapabilities": {"elicitation": {}}})
    );
    let declared = Caps::ELICITATION | Caps::ELICITATION_FORM;
    let given = tasks.answer(T0, declared, "tasks/get", Some(raw(&params)));
    let Some(Ok(detailed)) = given else {
        panic!("{given:?}")
    };
    let detailed: Value = serde_json::from_str(&detailed).unwrap();
    assert_eq!(
        detailed["inputRequests"]["e"]["method"],
        "elicitation/create"
    );
}

/// A table of two tasks at most, holding two completed ones made by `create`: one whose
/// result (5,000 bytes) fills a 4 KiB output, and one whose result says "done".
fn big_and_small(
    random: &mut impl FnMut(&mut [u8]),
    create: impl Fn(&mut Tasks, &mut dyn FnMut(&mut [u8])) -> Result<String, TaskError>,
) -> (Tasks, String, String) {
    let mut tasks = Tasks::new(
        TaskConfig {
            max_tasks: 2,
            ..TaskConfig::default()
        },
        T0,
        WALL,
    );
    let big = create(&mut tasks, random).unwrap();
    let small = create(&mut tasks, random).unwrap();
    let text = json!({"content":[{"type":"text","text": "x".repeat(5000)}]}).to_string();
    tasks.complete(T0, &big, raw(&text)).unwrap();
    tasks
        .complete(
            T0,
            &small,
            raw(r#"{"content":[{"type":"text","text":"done"}]}"#),
        )
        .unwrap();
    (tasks, big, small)
}

/// A completed task whose `tasks/get` answer `serve` could not write (the output full) is not
/// fetched: it keeps its place at the `max_tasks` cap until a client got its result, where it
/// used to make room for the next task and its client's retry found "Task not found".
#[test]
fn a_task_whose_answer_could_not_be_written_is_not_fetched() {
    let mut config = Config::server("tasks-test", "1")
        .with_capabilities(r#"{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#)
        .unwrap();
    config.limits.max_buffered_output = 4096;
    let mut s = Connection::new(config, T0).unwrap();
    let mut random = ids();
    let (mut tasks, big, small) = big_and_small(&mut random, |t, r| t.create(T0, r));
    // Both requests arrive; the big result fills the output, and the small one's answer is
    // refused for now.
    let arrive = |s: &mut Connection, n: u64, task: &str| {
        let evs = request(s, n, "tasks/get", &format!(r#""taskId":"{task}""#), WITH);
        let Some(Ev::Request { id, method, params }) =
            evs.into_iter().find(|e| matches!(e, Ev::Request { .. }))
        else {
            panic!("no request")
        };
        (id, method, params)
    };
    let first = arrive(&mut s, 1, &big);
    let second = arrive(&mut s, 2, &small);
    let serve = |s: &mut Connection, tasks: &mut Tasks, (id, method, params): &(_, String, _)| {
        let params: &Option<String> = params;
        let id: &mcpwire::jsonrpc::OwnedId = id;
        tasks.serve(T0, s, id.as_id(), method, params.as_deref().map(raw))
    };
    assert_eq!(serve(&mut s, &mut tasks, &first), Ok(true));
    assert_eq!(serve(&mut s, &mut tasks, &second), Err(Error::OutputFull));
    // The fetched one makes room; the other stays.
    tasks.create(T0, &mut random).unwrap();
    assert_eq!(tasks.create(T0, &mut random), Err(TaskError::Full));
    assert_eq!(tasks.status(&small), Some(TaskStatus::Completed));
    // Once the client reads, the retry gets the result, and the task is fetched.
    let out = output(&mut s);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(serve(&mut s, &mut tasks, &second), Ok(true));
    let out = output(&mut s);
    assert_eq!(
        out[0]["result"]["result"]["content"][0]["text"], "done",
        "{out:?}"
    );
    tasks.create(T0, &mut random).unwrap();
    assert_eq!(tasks.status(&small), None);
}

/// 2025-11-25: a waiting `tasks/result` the client cancelled gets no answer when its task
/// ends, and the task is then not fetched: it keeps its place at the `max_tasks` cap, and
/// the client's retry within the TTL gets the result. (The task counted as fetched, was
/// dropped for the next task, and the retry found "Task not found".)
#[test]
fn a_result_whose_waiting_request_was_cancelled_is_kept_for_the_retry() {
    let mut tasks = Tasks::new(
        TaskConfig {
            max_tasks: 1,
            ..TaskConfig::default()
        },
        T0,
        WALL,
    );
    let mut p = legacy_pair();
    let task = tasks.create_legacy(p.now, &mut ids(), 1).unwrap();
    let (waiting, evs) = legacy_round(
        &mut p,
        &mut tasks,
        1,
        "tasks/result",
        json!({ "taskId": task }),
    );
    assert!(evs.is_empty(), "{evs:?}");
    p.client.cancel(p.now, waiting, Some("gave up")).unwrap();
    p.step();
    p.take_server_events();
    tasks
        .complete(p.now, &task, raw(r#"{"content":[]}"#))
        .unwrap();
    let ready = tasks.poll_result().expect("the cancelled waiter's answer");
    assert_eq!(ready.task, task);
    assert_eq!(tasks.write_ready(&mut p.server, &ready), Ok(()));
    p.step();
    let evs = p.take_client_events();
    assert!(
        evs.is_empty(),
        "nothing answers a cancelled request: {evs:?}"
    );
    // Not fetched: no room for another task, and the retry gets the result.
    assert_eq!(
        tasks.create_legacy(p.now, &mut ids(), 1),
        Err(TaskError::Full)
    );
    let (_, evs) = legacy_round(
        &mut p,
        &mut tasks,
        1,
        "tasks/result",
        json!({ "taskId": task }),
    );
    assert_eq!(result_of(&evs)["content"], json!([]));
    // Now fetched: it makes room.
    tasks.create_legacy(p.now, &mut ids(), 1).unwrap();
    assert_eq!(tasks.status(&task), None);
}

/// `tasks.serve_legacy` of the request event `e`, from owner 1, on `p`'s server.
fn serve_legacy_from_1(
    p: &mut common::pair::Pair,
    tasks: &mut Tasks,
    e: &Ev,
) -> Result<bool, Error> {
    let Ev::Request { id, method, params } = e else {
        panic!("not a request: {e:?}")
    };
    tasks.serve_legacy(
        p.now,
        1,
        &mut p.server,
        id.as_id(),
        method,
        params.as_deref().map(raw),
    )
}

/// A 2025-11-25 pair whose server declares tasks and holds at most 4 KiB of output.
fn small_output_legacy_pair() -> common::pair::Pair {
    let mut server = Config::server("s", "1")
        .with_capabilities(
            r#"{"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}"#,
        )
        .unwrap();
    server.limits.max_buffered_output = 4096;
    let client = Config::client("c", "1")
        .with_capabilities(r#"{"sampling":{}}"#)
        .unwrap();
    common::pair::Pair::ready(D, client, server)
}

/// 2025-11-25: a `tasks/result` whose answer `serve_legacy` could not write (the output full)
/// leaves its task unfetched, so it keeps its place at the cap until the client got it.
#[test]
fn a_2025_11_25_task_whose_result_could_not_be_written_is_not_fetched() {
    let mut p = small_output_legacy_pair();
    let mut random = ids();
    let (mut tasks, big, small) = big_and_small(&mut random, |t, r| t.create_legacy(T0, r, 1));
    // Both requests arrive; the big result fills the output, the small one is refused.
    for task in [&big, &small] {
        p.client
            .request(
                p.now,
                "tasks/result",
                Some(raw(&json!({ "taskId": task }).to_string())),
            )
            .unwrap();
    }
    p.step();
    let requests: Vec<Ev> = p.take_server_events();
    let served: Vec<_> = requests
        .iter()
        .map(|e| serve_legacy_from_1(&mut p, &mut tasks, e))
        .collect();
    assert_eq!(served, [Ok(true), Err(Error::OutputFull)]);
    tasks.create_legacy(T0, &mut random, 2).unwrap();
    assert_eq!(
        tasks.create_legacy(T0, &mut random, 2),
        Err(TaskError::Full)
    );
    assert_eq!(tasks.status(&small), Some(TaskStatus::Completed));
    // Once the client read, the retry gives the result, and the task is fetched.
    p.step();
    let again = serve_legacy_from_1(&mut p, &mut tasks, &requests[1]);
    assert_eq!(again, Ok(true));
    p.step();
    let evs = p.take_client_events();
    assert!(
        evs.iter()
            .any(|e| matches!(e, Ev::Response { result, .. } if result.contains("done"))),
        "{evs:?}"
    );
    tasks.create_legacy(T0, &mut random, 2).unwrap();
    assert_eq!(tasks.status(&small), None);
}

/// 2025-11-25: a `tasks/cancel` that `serve_legacy` cannot answer (the output full) is refused
/// before it cancels anything, and the retry once the output drained cancels the task and
/// says so. It took effect first: the task ended, its event was queued, and the retry found
/// the task terminal and told the client its cancel had failed (-32602).
#[test]
fn a_2025_11_25_cancel_refused_for_a_full_output_takes_effect_on_its_retry() {
    let mut p = small_output_legacy_pair();
    let mut random = ids();
    let mut tasks = Tasks::new(TaskConfig::default(), T0, WALL);
    let task = tasks.create_legacy(T0, &mut random, 1).unwrap();
    p.client
        .request(
            p.now,
            "tasks/cancel",
            Some(raw(&json!({ "taskId": task }).to_string())),
        )
        .unwrap();
    p.step();
    let requests = p.take_server_events();
    // The output fills up (nobody reads it for now).
    let pad = json!({ "pad": "x".repeat(5000) }).to_string();
    p.server.notify("x/pad", Some(raw(&pad))).unwrap();
    let serve =
        |p: &mut common::pair::Pair, tasks: &mut Tasks| serve_legacy_from_1(p, tasks, &requests[0]);
    assert_eq!(serve(&mut p, &mut tasks), Err(Error::OutputFull));
    assert_eq!(tasks.status(&task), Some(TaskStatus::Working));
    assert!(tasks.poll_event().is_none());
    // The client reads; the retry cancels, and the client hears it.
    p.step();
    p.take_client_events();
    assert_eq!(serve(&mut p, &mut tasks), Ok(true));
    assert_eq!(tasks.status(&task), Some(TaskStatus::Cancelled));
    p.step();
    let evs = p.take_client_events();
    assert!(
        evs.iter().any(
            |e| matches!(e, Ev::Response { result, .. } if result.contains(r#""status":"cancelled""#))
        ),
        "{evs:?}"
    );
}
