//! The conformance suite's "everything-server" fixture, as application logic over
//! [`HttpServer`]: tools, resources, prompts, completion and logging; sampling and elicitation
//! through `request_related` in handshake-era sessions; "input required" (MRTR) answers in
//! 2026-07-28. Sans-IO like the engine: the host feeds it the time, and it answers the events
//! the server hands out ([`Fixture::drive`]) and runs its own delayed steps
//! ([`Fixture::handle_timeout`] at [`Fixture::poll_timeout`]).
//!
//! Written from the scenario requirements the conformance bundles embed (what to expose), not
//! from any other implementation.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use mcpwire::Timestamp;
use mcpwire::conn::{Config, Connection, OwnedEvent, RequestId, RequestOptions};
use mcpwire::http::{ConnKey, HttpServer, HttpServerConfig};
use mcpwire::jsonrpc::{OwnedId, RawJson};
use mcpwire::mcp::{Caps, Era, LogLevel};
use mcpwire::tasks::{TaskConfig, TaskEvent, Tasks};
use serde_json::{Value, json};

/// A 1x1 PNG.
pub const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
/// A WAV header with no samples (8 kHz, mono, 16 bit).
pub const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=";

pub const SIMPLE_TEXT: &str = "This is a simple text response for testing.";
pub const SCHEMA_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// The server configuration: every capability the suite looks for.
pub fn server_config() -> Config {
    Config::server("mcpwire-conformance-fixture", env!("CARGO_PKG_VERSION"))
        .with_capabilities(
            r#"{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"prompts":{"listChanged":true},"logging":{},"completions":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#,
        )
        .expect("valid capabilities")
}

/// The HTTP server configuration around [`server_config`].
pub fn http_config() -> HttpServerConfig {
    let mut config = HttpServerConfig::new(server_config());
    // The tools' `x-mcp-header` annotations, for checking `Mcp-Param-*` headers.
    let tools = tools().to_string();
    let refused = config.declare_tools(RawJson::new(&tools).expect("JSON"));
    assert!(
        refused.is_empty(),
        "invalid x-mcp-header annotations: {refused:?}"
    );
    config
}

/// A step that runs later.
enum Step {
    /// `test_tool_with_progress`: report `progress` of 100; answer after 100.
    Progress(f64),
    /// `test_tool_with_logging`: the n-th log message; answer after the third.
    Log(u8),
    /// `test_reconnection`: the answer, after the stream was closed for polling.
    Reconnected,
    /// `slow_compute` run without a task (the request did not declare the extension).
    Computed(String, u64),
}

/// A task's work that finishes later.
enum TaskStep {
    /// `slow_compute`: completes with this text.
    Complete(String),
    /// `failing_job`: completes with a tool error.
    ToolError,
    /// `protocol_error_job`: fails with a JSON-RPC error.
    ProtocolError,
}

struct TaskJob {
    due: Timestamp,
    task: String,
    step: TaskStep,
}

/// A task waiting for the client's input: what it finishes with once every answer came.
struct Asking {
    task: String,
    tool: &'static str,
    answers: Vec<(String, Value)>,
    waiting: usize,
}

struct Job {
    due: Timestamp,
    key: ConnKey,
    id: OwnedId,
    step: Step,
}

/// What a server→client request (handshake era) was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asked {
    Sampling,
    Elicitation,
    Defaults,
    Enums,
}

struct Wait {
    key: ConnKey,
    request: RequestId,
    parent: OwnedId,
    asked: Asked,
}

/// A JSON text from an event, parsed (`null` when absent or unparsable).
fn parse(text: Option<&str>) -> Value {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(Value::Null)
}

/// Completes `task` with `result`, or fails it when the table refuses the result (over its
/// `max_payload`): left as it was, the task would stay working until it expired, and its
/// client would never get an answer.
fn complete_or_fail(tasks: &mut mcpwire::tasks::Tasks, now: Timestamp, task: &str, result: &str) {
    let Ok(result) = RawJson::new(result) else {
        return;
    };
    if tasks.complete(now, task, result).is_err() {
        let _ = tasks.fail(
            now,
            task,
            -32603,
            "the task's result could not be kept",
            None,
        );
    }
}

/// Resource subscriptions one session may hold.
const MAX_SUBSCRIPTIONS: usize = 256;

/// The bytes of subscribed URIs all sessions together may hold (256 URIs of 8 KiB in each of
/// 1,024 sessions would be 2 GiB).
const MAX_SUBSCRIPTION_BYTES: usize = 16 << 20;

/// The longest `slow_compute` label: it is kept until the computation's end (up to an hour).
const MAX_LABEL: usize = 1024;

/// What to answer a request with.
enum Answer {
    Result(Value),
    Error(i64, String, Option<Value>),
    InputRequired(Option<Value>, Option<String>),
    /// Nothing now: a job or a server→client request finishes it.
    Later,
}

fn text(t: &str) -> Value {
    json!({"content":[{"type":"text","text":t}]})
}

fn error_result(t: &str) -> Value {
    json!({"content":[{"type":"text","text":t}],"isError":true})
}

fn elicit(message: &str, properties: Value, required: &[&str]) -> Value {
    json!({"method":"elicitation/create","params":{"message":message,
        "requestedSchema":{"type":"object","properties":properties,"required":required}}})
}

fn sampling(prompt: &str, max_tokens: u32) -> Value {
    json!({"method":"sampling/createMessage","params":{
        "messages":[{"role":"user","content":{"type":"text","text":prompt}}],"maxTokens":max_tokens}})
}

fn roots() -> Value {
    json!({"method":"roots/list","params":{}})
}

/// The tools, in `tools/list` order.
pub fn tools() -> Value {
    let none = json!({"type":"object","properties":{}});
    let t = |name: &str, description: &str, schema: &Value| json!({"name":name,"description":description,"inputSchema":schema});
    json!([
        t("test_simple_text", "Returns a simple text response", &none),
        t(
            "test_header_param",
            "Echoes its region; the region travels in the Mcp-Param-Region header (2026-07-28)",
            &json!({"type":"object",
            "properties":{"region":{"type":"string","description":"Where to run","x-mcp-header":"Region"}},
            "required":["region"]})
        ),
        t(
            "test_reconnection",
            "Closes its SSE stream before answering; the answer comes after the client resumes (SEP-1699)",
            &none
        ),
        t("test_image_content", "Returns an image (1x1 PNG)", &none),
        t("test_audio_content", "Returns audio (WAV)", &none),
        t(
            "test_embedded_resource",
            "Returns an embedded text resource",
            &none
        ),
        t(
            "test_multiple_content_types",
            "Returns text, an image and a JSON resource",
            &none
        ),
        t(
            "test_tool_with_logging",
            "Sends three info log messages while it runs",
            &none
        ),
        t(
            "test_tool_with_progress",
            "Reports progress 0, 50 and 100 of 100",
            &none
        ),
        t(
            "test_error_handling",
            "Always fails with an isError result",
            &none
        ),
        t(
            "test_sampling",
            "Asks the client to sample an LLM",
            &json!({"type":"object",
            "properties":{"prompt":{"type":"string","description":"The prompt to send to the LLM"}},"required":["prompt"]})
        ),
        t(
            "test_elicitation",
            "Asks the user for input",
            &json!({"type":"object",
            "properties":{"message":{"type":"string","description":"The message to show the user"}},"required":["message"]})
        ),
        t(
            "test_elicitation_sep1034_defaults",
            "Elicitation with defaults for every primitive type",
            &none
        ),
        t(
            "test_elicitation_sep1330_enums",
            "Elicitation with the five enum shapes",
            &none
        ),
        json_schema_tool(),
        t(
            "test_missing_capability",
            "Needs the client's sampling capability",
            &none
        ),
        t(
            "test_streaming_elicitation",
            "Asks for input on the request's own stream",
            &none
        ),
        t("test_logging_tool", "Logs at info while it runs", &none),
        t(
            "test_trigger_tool_change",
            "Announces a tool list change",
            &none
        ),
        t(
            "test_trigger_prompt_change",
            "Announces a prompt list change",
            &none
        ),
        t(
            "test_input_required_result_elicitation",
            "Input required: elicitation",
            &none
        ),
        t(
            "test_input_required_result_sampling",
            "Input required: sampling",
            &none
        ),
        t(
            "test_input_required_result_list_roots",
            "Input required: roots",
            &none
        ),
        t(
            "test_input_required_result_request_state",
            "Input required with request state",
            &none
        ),
        t(
            "test_input_required_result_multiple_inputs",
            "Input required: three requests at once",
            &none
        ),
        t(
            "test_input_required_result_multi_round",
            "Input required over two rounds",
            &none
        ),
        t(
            "test_input_required_result_tampered_state",
            "Input required with integrity-checked state",
            &none
        ),
        t(
            "test_input_required_result_capabilities",
            "Input required for declared capabilities only",
            &none
        ),
        // SEP-2663 tasks: run as tasks for requests that declare the extension.
        t(
            "greet",
            "Greets by name (never a task)",
            &json!({"type":"object","properties":{"name":{"type":"string"}}})
        ),
        t(
            "slow_compute",
            "Computes for `seconds`; a task when the request allows one",
            &json!({"type":"object","properties":{"seconds":{"type":"integer","minimum":0},"label":{"type":"string"}}})
        ),
        t(
            "failing_job",
            "A task that ends with a tool error (needs the tasks extension)",
            &none
        ),
        t(
            "protocol_error_job",
            "A task that fails with a JSON-RPC error",
            &none
        ),
        t(
            "confirm_delete",
            "A task that asks for confirmation (needs the tasks extension)",
            &json!({"type":"object","properties":{"filename":{"type":"string"}}})
        ),
        t(
            "multi_input",
            "A task that asks two questions at once (needs the tasks extension)",
            &none
        ),
        t(
            "test_tool_with_task",
            "Asks for a name (input required), then greets in a task (needs the tasks extension)",
            &none
        ),
    ])
}

/// `json_schema_2020_12_tool`, whose input schema must come back verbatim.
pub fn json_schema_tool() -> Value {
    json!({
        "name": "json_schema_2020_12_tool",
        "description": "Tool with JSON Schema 2020-12 features",
        "inputSchema": {
            "$schema": SCHEMA_2020_12,
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "properties": {
                        "street": {"type": "string"},
                        "city": {"type": "string"}
                    }
                }
            },
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
                "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                "phone": {"type": "string"},
                "email": {"type": "string"}
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": false
        }
    })
}

pub fn resources() -> Value {
    json!([
        {"uri":"test://static-text","name":"static-text","description":"A static text resource","mimeType":"text/plain"},
        {"uri":"test://static-binary","name":"static-binary","description":"A static binary resource (PNG)","mimeType":"image/png"},
        {"uri":"test://watched-resource","name":"watched-resource","description":"A resource to subscribe to","mimeType":"text/plain"},
    ])
}

pub fn prompts() -> Value {
    json!([
        {"name":"test_simple_prompt","description":"A prompt without arguments"},
        {"name":"test_prompt_with_arguments","description":"A prompt with two arguments","arguments":[
            {"name":"arg1","description":"First test argument","required":true},
            {"name":"arg2","description":"Second test argument","required":true}]},
        {"name":"test_prompt_with_embedded_resource","description":"A prompt embedding a resource","arguments":[
            {"name":"resourceUri","description":"URI of the resource to embed","required":true}]},
        {"name":"test_prompt_with_image","description":"A prompt with an image"},
        {"name":"test_input_required_result_prompt","description":"A prompt that needs input first (2026-07-28)"},
    ])
}

/// `resources/read`: the contents, or `None` for an unknown URI.
pub fn read_resource(uri: &str) -> Option<Value> {
    let content = match uri {
        "test://static-text" => json!({"uri":uri,"mimeType":"text/plain",
            "text":"This is the content of the static text resource."}),
        "test://static-binary" => json!({"uri":uri,"mimeType":"image/png","blob":PNG}),
        "test://watched-resource" => json!({"uri":uri,"mimeType":"text/plain",
            "text":"Watched resource content."}),
        _ => {
            let id = uri
                .strip_prefix("test://template/")?
                .strip_suffix("/data")
                .filter(|id| !id.is_empty() && !id.contains('/'))?;
            let body = json!({"id":id,"templateTest":true,"data":format!("Data for ID: {id}")});
            json!({"uri":uri,"mimeType":"application/json","text":body.to_string()})
        }
    };
    Some(json!({ "contents": [content] }))
}

/// `prompts/get` for the fixed prompts.
pub fn get_prompt(name: &str, args: &Value) -> Option<Value> {
    let arg = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let user = |content: Value| json!({"role":"user","content":content});
    let messages = match name {
        "test_simple_prompt" => vec![user(
            json!({"type":"text","text":"This is a simple prompt for testing."}),
        )],
        "test_prompt_with_arguments" => vec![user(json!({"type":"text","text":format!(
            "Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2"))}))],
        "test_prompt_with_embedded_resource" => vec![
            user(
                json!({"type":"resource","resource":{"uri":arg("resourceUri"),
                "mimeType":"text/plain","text":"Embedded resource content for testing."}}),
            ),
            user(json!({"type":"text","text":"Please process the embedded resource above."})),
        ],
        "test_prompt_with_image" => vec![
            user(json!({"type":"image","data":PNG,"mimeType":"image/png"})),
            user(json!({"type":"text","text":"Please analyze the image above."})),
        ],
        _ => return None,
    };
    Some(json!({ "messages": messages }))
}

fn sep1034_schema() -> Value {
    json!({"type":"object","properties":{
        "name":{"type":"string","description":"User name","default":"John Doe"},
        "age":{"type":"integer","description":"User age","default":30},
        "score":{"type":"number","description":"User score","default":95.5},
        "status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},
        "verified":{"type":"boolean","description":"Verification status","default":true}
    }})
}

fn sep1330_schema() -> Value {
    json!({"type":"object","properties":{
        "untitledSingle":{"type":"string","description":"Untitled single-select","enum":["option1","option2","option3"]},
        "titledSingle":{"type":"string","description":"Titled single-select","oneOf":[
            {"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},
        "legacyEnum":{"type":"string","description":"Legacy titled enum","enum":["opt1","opt2","opt3"],
            "enumNames":["Option One","Option Two","Option Three"]},
        "untitledMulti":{"type":"array","description":"Untitled multi-select","items":{"type":"string","enum":["option1","option2","option3"]}},
        "titledMulti":{"type":"array","description":"Titled multi-select","items":{"anyOf":[
            {"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}
    }})
}

/// The fixture's state.
pub struct Fixture {
    jobs: Vec<Job>,
    /// SEP-2663 tasks (2026-07-28), shared by every connection.
    tasks: Tasks,
    task_jobs: Vec<TaskJob>,
    asking: Vec<Asking>,
    /// Task ids come from here: the host's secure random source ([`with_random`]), or in
    /// tests a generator seeded from `secret` (its ids can be predicted from one another).
    ///
    /// [`with_random`]: Fixture::with_random
    task_ids: TaskIds,
    waits: Vec<Wait>,
    /// Keys the `requestState` integrity tag.
    secret: [u8; 16],
    /// Resource subscriptions per session, and the bytes of their URIs over all sessions.
    subscriptions: HashMap<ConnKey, HashSet<String>>,
    subscription_bytes: usize,
    /// `logging/setLevel` per session (handshake era).
    levels: Vec<(ConnKey, LogLevel)>,
    /// Answers the engine refused for a full output (`OutputFull`: the client is behind in
    /// reading), given again from `retry_at` on: dropped, their requests waited for good.
    held: Vec<(ConnKey, OwnedId, Answer)>,
    retry_at: Option<Timestamp>,
}

/// Where task ids come from (they are bearer handles: "Servers MUST generate them with
/// sufficient entropy that a third party cannot enumerate or guess them").
enum TaskIds {
    /// A xorshift generator: for tests, which want the same ids every run.
    Seeded(u64),
    /// The host's secure random source.
    Random(Box<RandomSource>),
}

/// Fills a buffer with random bytes.
type RandomSource = dyn FnMut(&mut [u8]) + Send;

/// How long an answer refused for a full output waits before it is given again.
const RETRY_HELD: Duration = Duration::from_millis(50);

const STEP: Duration = Duration::from_millis(50);

/// The fixture's task table: TTL of ten minutes, polling every 200 ms.
fn task_config() -> TaskConfig {
    TaskConfig {
        ttl: Some(Duration::from_secs(600)),
        poll_interval: Duration::from_millis(200),
        ..TaskConfig::default()
    }
}

impl Fixture {
    /// A fixture whose `requestState` tags are keyed with `secret` (from the host's random
    /// source).
    pub fn new(secret: [u8; 16]) -> Self {
        Fixture {
            jobs: Vec::new(),
            tasks: Tasks::new(task_config(), Timestamp::ZERO, 0),
            task_jobs: Vec::new(),
            asking: Vec::new(),
            task_ids: TaskIds::Seeded(
                u64::from_le_bytes(secret[..8].try_into().unwrap_or([1; 8])) | 1,
            ),
            waits: Vec::new(),
            secret,
            subscriptions: HashMap::new(),
            subscription_bytes: 0,
            levels: Vec::new(),
            held: Vec::new(),
            retry_at: None,
        }
    }

    /// Gives `answer` to request `id` of connection `key`; holds it when the output is full.
    fn give(
        &mut self,
        now: Timestamp,
        server: &mut HttpServer,
        key: ConnKey,
        id: &OwnedId,
        answer: Answer,
    ) {
        let Some(conn) = server.connection(key) else {
            return;
        };
        if let Some(refused) = respond(conn, id, answer) {
            self.held.push((key, id.clone(), refused));
            self.retry_at.get_or_insert(now.after(RETRY_HELD));
        }
    }

    /// Gives the held answers again, once their time has come (those refused again wait on).
    fn give_held(&mut self, now: Timestamp, server: &mut HttpServer) {
        if self.retry_at.is_none_or(|at| at > now) {
            return;
        }
        self.retry_at = None;
        for (key, id, answer) in std::mem::take(&mut self.held) {
            self.give(now, server, key, &id, answer);
        }
    }

    /// Draws task ids from `random`, the host's secure random source (a server does: the
    /// seeded default lets one client that saw a task id predict the others').
    pub fn with_random(mut self, random: impl FnMut(&mut [u8]) + Send + 'static) -> Self {
        self.task_ids = TaskIds::Random(Box::new(random));
        self
    }

    /// Dates the tasks' `createdAt` and `lastUpdatedAt`: `now` on the host's clock is
    /// `unix_ms` on the wall clock. Without it they count from 1970.
    pub fn with_wall_clock(mut self, now: Timestamp, unix_ms: u64) -> Self {
        self.tasks = Tasks::new(task_config(), now, unix_ms);
        self
    }

    /// Work in progress (delayed steps and server→client requests); for bounds in tests.
    pub fn pending(&self) -> usize {
        self.jobs.len() + self.waits.len() + self.task_jobs.len() + self.asking.len()
    }

    /// A task for the request `id`, answered with its handle; `None` (and nothing created)
    /// when the request may not get one, so the caller runs the work synchronously.
    fn start_task(
        &mut self,
        now: Timestamp,
        conn: &mut Connection,
        id: &OwnedId,
    ) -> Option<String> {
        let modern = conn.era() == Some(Era::Modern);
        if !(modern && declared(conn, id, true).contains(Caps::TASKS_EXTENSION)) {
            return None;
        }
        let task = match &mut self.task_ids {
            TaskIds::Random(random) => self.tasks.create(now, random).ok(),
            TaskIds::Seeded(seed) => {
                let mut random = |buf: &mut [u8]| {
                    for b in buf {
                        *seed ^= *seed << 13;
                        *seed ^= *seed >> 7;
                        *seed ^= *seed << 17;
                        *b = *seed as u8;
                    }
                };
                self.tasks.create(now, &mut random).ok()
            }
        };
        let task = task?;
        let handle = self.tasks.create_result(&task)?;
        match conn.respond_task(id.as_id(), RawJson::new(&handle).expect("JSON")) {
            Ok(()) => Some(task),
            Err(_) => {
                let _ = self.tasks.cancel(now, &task);
                None
            }
        }
    }

    /// The client answered or cancelled a task.
    fn on_task_event(&mut self, now: Timestamp, event: TaskEvent) {
        match event {
            TaskEvent::Input {
                task,
                key,
                response,
            } => {
                let Some(at) = self.asking.iter().position(|a| a.task == task) else {
                    return;
                };
                let a = &mut self.asking[at];
                a.answers.push((key, parse(Some(&response))));
                a.waiting = a.waiting.saturating_sub(1);
                if a.waiting > 0 {
                    return;
                }
                let a = self.asking.remove(at);
                let summary: Vec<String> = a
                    .answers
                    .iter()
                    .map(|(k, v)| {
                        format!(
                            "{k}: action={}, content={}",
                            v["action"].as_str().unwrap_or(""),
                            v.get("content").unwrap_or(&json!({}))
                        )
                    })
                    .collect();
                let result = text(&format!("{} finished ({})", a.tool, summary.join("; ")));
                complete_or_fail(&mut self.tasks, now, &a.task, &result.to_string());
            }
            TaskEvent::CancelRequested { task } => {
                // Every fixture task stops at once when asked.
                self.task_jobs.retain(|j| j.task != task);
                self.asking.retain(|a| a.task != task);
                let _ = self.tasks.cancel(now, &task);
            }
            TaskEvent::Expired { task } => {
                self.task_jobs.retain(|j| j.task != task);
                self.asking.retain(|a| a.task != task);
            }
        }
    }

    /// Runs the task steps due at `now`.
    fn run_task_jobs(&mut self, now: Timestamp) {
        let (due, rest): (Vec<TaskJob>, Vec<TaskJob>) = std::mem::take(&mut self.task_jobs)
            .into_iter()
            .partition(|j| j.due <= now);
        self.task_jobs = rest;
        for job in due {
            match job.step {
                TaskStep::Complete(t) => {
                    complete_or_fail(&mut self.tasks, now, &job.task, &text(&t).to_string())
                }
                TaskStep::ToolError => {
                    let result = error_result("failing_job: the job failed").to_string();
                    complete_or_fail(&mut self.tasks, now, &job.task, &result)
                }
                TaskStep::ProtocolError => {
                    let _ = self.tasks.fail(
                        now,
                        &job.task,
                        -32603,
                        "protocol_error_job: internal error while running the job",
                        None,
                    );
                }
            }
        }
        self.tasks.handle_timeout(now);
        while let Some(e) = self.tasks.poll_event() {
            self.on_task_event(now, e);
        }
    }

    /// Answers every event the server has, then moves the output onto the streams.
    pub fn drive(&mut self, now: Timestamp, server: &mut HttpServer) {
        loop {
            let mut batch = Vec::new();
            while let Some((key, e)) = server.poll_event() {
                batch.push((key, e.to_owned_event()));
            }
            if batch.is_empty() {
                break;
            }
            for (key, e) in batch {
                self.on_event(now, server, key, e);
            }
            while let Some(e) = self.tasks.poll_event() {
                self.on_task_event(now, e);
            }
        }
        // Forget work for connections that are gone.
        let live: HashSet<ConnKey> = server.connections().into_iter().collect();
        self.jobs.retain(|j| live.contains(&j.key));
        self.waits.retain(|w| live.contains(&w.key));
        let mut freed = 0;
        self.subscriptions.retain(|k, uris| {
            let keep = live.contains(k);
            if !keep {
                freed += uris.iter().map(String::len).sum::<usize>();
            }
            keep
        });
        self.subscription_bytes -= freed;
        self.levels.retain(|(k, _)| live.contains(k));
        self.held.retain(|(k, ..)| live.contains(k));
        if self.held.is_empty() {
            self.retry_at = None;
        }
        server.pump();
    }

    /// The next time [`handle_timeout`](Self::handle_timeout) has work.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let jobs = self.jobs.iter().map(|j| j.due);
        let task_jobs = self.task_jobs.iter().map(|j| j.due);
        (jobs.chain(task_jobs).chain(self.tasks.poll_timeout()))
            .chain(self.retry_at)
            .min()
    }

    /// Runs the steps due at `now`.
    pub fn handle_timeout(&mut self, now: Timestamp, server: &mut HttpServer) {
        self.give_held(now, server);
        self.run_task_jobs(now);
        let (due, rest): (Vec<Job>, Vec<Job>) = std::mem::take(&mut self.jobs)
            .into_iter()
            .partition(|j| j.due <= now);
        self.jobs = rest;
        let mut answers = Vec::new();
        for job in due {
            let Some(conn) = server.connection(job.key) else {
                continue;
            };
            let id = job.id.as_id();
            match job.step {
                Step::Progress(p) => {
                    let _ = conn.progress(id, p, Some(100.0), None);
                    if p >= 100.0 {
                        let done = Answer::Result(text("Progress test completed"));
                        answers.push((job.key, job.id, done));
                    } else {
                        self.jobs.push(Job {
                            due: now.after(STEP),
                            step: Step::Progress(p + 50.0),
                            ..job
                        });
                    }
                }
                Step::Computed(label, seconds) => {
                    let done = Answer::Result(text(&format!("Computed {label} in {seconds}s")));
                    answers.push((job.key, job.id, done));
                }
                Step::Reconnected => {
                    let done = Answer::Result(text("Reconnection test completed"));
                    answers.push((job.key, job.id, done));
                }
                Step::Log(n) => {
                    let msg = match n {
                        1 => "Tool processing data",
                        _ => "Tool execution completed",
                    };
                    let level = self.level(job.key);
                    if level <= LogLevel::Info {
                        let _ = conn.log(
                            id,
                            LogLevel::Info,
                            Some("test_tool_with_logging"),
                            RawJson::new(&json!(msg).to_string()).expect("JSON"),
                        );
                    }
                    if n >= 2 {
                        let done = Answer::Result(text("Tool with logging executed successfully"));
                        answers.push((job.key, job.id, done));
                    } else {
                        self.jobs.push(Job {
                            due: now.after(STEP),
                            step: Step::Log(n + 1),
                            ..job
                        });
                    }
                }
            }
        }
        for (key, id, answer) in answers {
            self.give(now, server, key, &id, answer);
        }
        self.drive(now, server);
    }

    fn level(&self, key: ConnKey) -> LogLevel {
        self.levels
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, l)| *l)
            .unwrap_or(LogLevel::Debug)
    }

    fn on_event(&mut self, now: Timestamp, server: &mut HttpServer, key: ConnKey, e: OwnedEvent) {
        match e {
            OwnedEvent::Request { id, method, params } => {
                let params = parse(params.as_deref());
                let answer = self.request(now, server, key, &id, &method, &params);
                self.give(now, server, key, &id, answer);
            }
            OwnedEvent::Response { request, result } => {
                self.answered(now, server, key, request, Ok(parse(Some(&result))))
            }
            OwnedEvent::Error {
                request, message, ..
            } => self.answered(now, server, key, request, Err(message)),
            // A request of ours that ended without an answer: the tool call waiting for it
            // gets the same error result, rather than waiting for good.
            OwnedEvent::TimedOut { request } => {
                self.answered(now, server, key, request, Err("no answer in time".into()))
            }
            OwnedEvent::InvalidResponse { request } => {
                self.answered(now, server, key, request, Err("an invalid answer".into()))
            }
            OwnedEvent::Abandoned { request } | OwnedEvent::Failed { request, .. } => self
                .answered(
                    now,
                    server,
                    key,
                    request,
                    Err("no answer (abandoned)".into()),
                ),
            OwnedEvent::PeerCancelled { id, .. } => {
                self.jobs.retain(|j| !(j.key == key && j.id == id));
                self.waits.retain(|w| !(w.key == key && w.parent == id));
            }
            _ => {}
        }
    }

    /// A server→client request came back: finish the tool call that made it.
    fn answered(
        &mut self,
        now: Timestamp,
        server: &mut HttpServer,
        key: ConnKey,
        request: RequestId,
        outcome: Result<Value, String>,
    ) {
        let Some(at) = self
            .waits
            .iter()
            .position(|w| w.key == key && w.request == request)
        else {
            return;
        };
        let w = self.waits.remove(at);
        let answer = match (w.asked, outcome) {
            (_, Err(message)) => error_result(&format!("The client refused: {message}")),
            (Asked::Sampling, Ok(r)) => {
                let said = r["content"]["text"].as_str().unwrap_or("").to_owned();
                text(&format!("LLM response: {said}"))
            }
            (Asked::Elicitation, Ok(r)) => text(&format!(
                "User response: action={}, content={}",
                r["action"].as_str().unwrap_or(""),
                r.get("content").unwrap_or(&json!({}))
            )),
            (Asked::Defaults | Asked::Enums, Ok(r)) => text(&format!(
                "Elicitation completed: action={}, content={}",
                r["action"].as_str().unwrap_or(""),
                r.get("content").unwrap_or(&json!({}))
            )),
        };
        self.give(now, server, key, &w.parent, Answer::Result(answer));
    }

    fn request(
        &mut self,
        now: Timestamp,
        server: &mut HttpServer,
        key: ConnKey,
        id: &OwnedId,
        method: &str,
        params: &Value,
    ) -> Answer {
        let modern = server
            .connection(key)
            .is_some_and(|c| c.era() == Some(Era::Modern));
        if method.starts_with("tasks/") {
            let text = params.to_string();
            // (Params the engine took may still be deeper than a payload may be: refused,
            // not a panic that loses this request's answer and the drive's other events.)
            let Ok(params) = (!params.is_null()).then(|| RawJson::new(&text)).transpose() else {
                return Answer::Error(-32602, "Invalid params: nested too deeply".into(), None);
            };
            // (What this request declared: a task's input requests go only to a client that
            // declared what they need.)
            let declared = server
                .connection(key)
                .map(|c| declared(c, id, modern))
                .unwrap_or_default();
            return match self.tasks.answer(now, declared, method, params) {
                Some(Ok(result)) => Answer::Result(parse(Some(&result))),
                Some(Err((code, message, data))) => {
                    Answer::Error(code, message, data.map(|d| parse(Some(&d))))
                }
                None => Answer::Error(-32601, format!("Method not found: {method}"), None),
            };
        }
        match method {
            "tools/list" => Answer::Result(json!({ "tools": tools() })),
            "tools/call" => self.call(now, server, key, id, params, modern),
            "resources/list" => Answer::Result(json!({ "resources": resources() })),
            "resources/templates/list" => Answer::Result(json!({"resourceTemplates":[
                {"uriTemplate":"test://template/{id}/data","name":"template",
                 "description":"A resource template with an id","mimeType":"application/json"}]})),
            "resources/read" => {
                let uri = params["uri"].as_str().unwrap_or("");
                match read_resource(uri) {
                    Some(r) => Answer::Result(r),
                    // -32002 in the handshake era's resources page; 2026-07-28 (SEP-2164)
                    // makes it -32602 and forbids -32002.
                    None => Answer::Error(
                        if modern { -32602 } else { -32002 },
                        "Resource not found".into(),
                        Some(json!({"uri":uri})),
                    ),
                }
            }
            "resources/subscribe" => {
                let uri = params["uri"].as_str().unwrap_or("").to_owned();
                // Bounded per session and over all of them: a client subscribing to ever new
                // URIs would otherwise grow this set for as long as its session lives.
                if uri.len() > 8192 {
                    return Answer::Error(-32602, "URI too long".into(), None);
                }
                let total = self.subscription_bytes;
                let uris = self.subscriptions.entry(key).or_default();
                if !uris.contains(&uri) {
                    if uris.len() >= MAX_SUBSCRIPTIONS || total + uri.len() > MAX_SUBSCRIPTION_BYTES
                    {
                        return Answer::Error(-32602, "Too many subscriptions".into(), None);
                    }
                    self.subscription_bytes += uri.len();
                    uris.insert(uri);
                }
                Answer::Result(json!({}))
            }
            "resources/unsubscribe" => {
                let uri = params["uri"].as_str().unwrap_or("");
                if let Some(uris) = self.subscriptions.get_mut(&key)
                    && uris.remove(uri)
                {
                    self.subscription_bytes -= uri.len();
                }
                Answer::Result(json!({}))
            }
            "prompts/list" => Answer::Result(json!({ "prompts": prompts() })),
            "prompts/get" => {
                let name = params["name"].as_str().unwrap_or("");
                if name == "test_input_required_result_prompt" {
                    return self.prompt_input_required(params, modern);
                }
                match get_prompt(name, params.get("arguments").unwrap_or(&Value::Null)) {
                    Some(r) => Answer::Result(r),
                    None => Answer::Error(-32602, format!("Unknown prompt: {name}"), None),
                }
            }
            "completion/complete" => {
                Answer::Result(json!({"completion":{"values":[],"total":0,"hasMore":false}}))
            }
            "logging/setLevel" => match params["level"].as_str().and_then(LogLevel::parse) {
                Some(level) => {
                    self.levels.retain(|(k, _)| *k != key);
                    self.levels.push((key, level));
                    Answer::Result(json!({}))
                }
                None => Answer::Error(-32602, "Invalid log level".into(), None),
            },
            "ping" => Answer::Result(json!({})),
            _ => Answer::Error(-32601, format!("Method not found: {method}"), None),
        }
    }

    fn call(
        &mut self,
        now: Timestamp,
        server: &mut HttpServer,
        key: ConnKey,
        id: &OwnedId,
        params: &Value,
        modern: bool,
    ) -> Answer {
        let name = params["name"].as_str().unwrap_or("").to_owned();
        let args = params.get("arguments").cloned().unwrap_or(json!({}));
        if name == "test_reconnection" {
            // SEP-1699: close the call's stream now (the client has the priming event's id)
            // and answer a little later; the client resumes with GET and Last-Event-ID. Where
            // the stream cannot be resumed (stateless, older versions), answer at once.
            if server.close_stream_for_polling(key, id.as_id()) {
                self.jobs.push(Job {
                    due: now.after(STEP),
                    key,
                    id: id.clone(),
                    step: Step::Reconnected,
                });
                return Answer::Later;
            }
            return Answer::Result(text("Reconnection test completed"));
        }
        let Some(conn) = server.connection(key) else {
            return Answer::Later;
        };
        let caps = declared(conn, id, modern);
        let r = |v: Value| Answer::Result(v);
        let tasks_declared = modern && caps.contains(Caps::TASKS_EXTENSION);
        let needs_tasks = || {
            Answer::Error(
                -32021,
                format!(
                    "{name} runs as a task: declare the io.modelcontextprotocol/tasks extension"
                ),
                Some(
                    json!({"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}),
                ),
            )
        };
        let no_room = || Answer::Error(-32603, "cannot create a task now".into(), None);
        match name.as_str() {
            // ---- SEP-2663 tasks (2026-07-28) ----
            "greet" => r(text(&format!(
                "Hello, {}!",
                args["name"].as_str().unwrap_or("World")
            ))),
            "slow_compute" => {
                let seconds = args["seconds"].as_u64().unwrap_or(0).min(3600);
                let label = args["label"].as_str().unwrap_or("").to_owned();
                // (Kept until the end, an hour at most: bounded.)
                if label.len() > MAX_LABEL {
                    return Answer::Error(
                        -32602,
                        format!("Invalid params: label longer than {MAX_LABEL} bytes"),
                        None,
                    );
                }
                let done = format!("Computed {label} in {seconds}s");
                let delay = Duration::from_secs(seconds);
                match self.start_task(now, conn, id) {
                    Some(task) => {
                        self.task_jobs.push(TaskJob {
                            due: now.after(delay),
                            task,
                            step: TaskStep::Complete(done),
                        });
                        Answer::Later
                    }
                    None if seconds == 0 => r(text(&done)),
                    None => {
                        self.jobs.push(Job {
                            due: now.after(delay),
                            key,
                            id: id.clone(),
                            step: Step::Computed(label, seconds),
                        });
                        Answer::Later
                    }
                }
            }
            "failing_job" | "protocol_error_job" if !tasks_declared => match name.as_str() {
                "failing_job" => needs_tasks(),
                _ => Answer::Error(-32603, "protocol_error_job: internal error".into(), None),
            },
            "failing_job" | "protocol_error_job" => match self.start_task(now, conn, id) {
                Some(task) => {
                    self.task_jobs.push(TaskJob {
                        due: now.after(Duration::from_millis(500)),
                        task,
                        step: if name == "failing_job" {
                            TaskStep::ToolError
                        } else {
                            TaskStep::ProtocolError
                        },
                    });
                    Answer::Later
                }
                None => no_room(),
            },
            "confirm_delete" | "multi_input" if !tasks_declared => needs_tasks(),
            // (Their tasks ask the client through elicitation: "Servers MUST NOT send an
            // inputRequests that the client has not declared support for".)
            "confirm_delete" | "multi_input" if !caps.contains(Caps::ELICITATION_FORM) => {
                let needed = if caps.contains(Caps::ELICITATION) {
                    json!({"elicitation":{"form":{}}})
                } else {
                    json!({"elicitation":{}})
                };
                Answer::Error(
                    -32021,
                    "Missing required client capability: elicitation".into(),
                    Some(json!({ "requiredCapabilities": needed })),
                )
            }
            "confirm_delete" | "multi_input" => {
                let Some(task) = self.start_task(now, conn, id) else {
                    return no_room();
                };
                let (tool, keys): (&'static str, &[&str]) = if name == "confirm_delete" {
                    ("confirm_delete", &["confirm"])
                } else {
                    ("multi_input", &["first", "second"])
                };
                let file = args["filename"].as_str().unwrap_or("the file");
                for key in keys {
                    let request = elicit(
                        &format!("{tool} ({key}): go ahead with {file}?"),
                        json!({"confirm":{"type":"boolean"},"name":{"type":"string"}}),
                        &[],
                    );
                    let request = request.to_string();
                    let _ = self
                        .tasks
                        .ask(now, &task, key, RawJson::new(&request).expect("JSON"));
                }
                self.asking.push(Asking {
                    task,
                    tool,
                    answers: Vec::new(),
                    waiting: keys.len(),
                });
                Answer::Later
            }
            "test_tool_with_task" if !tasks_declared => needs_tasks(),
            "test_tool_with_task" => {
                // Round 1 gathers the name (MRTR); round 2 hands the greeting to a task.
                let answer = params_of(params, "inputResponses")
                    .get("user_name")
                    .cloned()
                    .filter(|a| a["action"] == "accept");
                let Some(answer) = answer else {
                    let ask = json!({"user_name": elicit(
                        "What is your name?",
                        json!({"name":{"type":"string"}}),
                        &["name"],
                    )});
                    return Answer::InputRequired(Some(ask), None);
                };
                let user = answer["content"]["name"].as_str().unwrap_or("").to_owned();
                match self.start_task(now, conn, id) {
                    Some(task) => {
                        self.task_jobs.push(TaskJob {
                            due: now.after(STEP),
                            task,
                            step: TaskStep::Complete(format!("Hello, {user}!")),
                        });
                        Answer::Later
                    }
                    None => no_room(),
                }
            }
            "test_simple_text" => r(text(SIMPLE_TEXT)),
            "test_header_param" => r(text(&format!(
                "Region: {}",
                args["region"].as_str().unwrap_or("")
            ))),
            "test_image_content" => {
                r(json!({"content":[{"type":"image","data":PNG,"mimeType":"image/png"}]}))
            }
            "test_audio_content" => {
                r(json!({"content":[{"type":"audio","data":WAV,"mimeType":"audio/wav"}]}))
            }
            "test_embedded_resource" => r(json!({"content":[{"type":"resource","resource":{
                "uri":"test://embedded-resource","mimeType":"text/plain",
                "text":"This is an embedded resource content."}}]})),
            "test_multiple_content_types" => r(json!({"content":[
                {"type":"text","text":"Multiple content types test:"},
                {"type":"image","data":PNG,"mimeType":"image/png"},
                {"type":"resource","resource":{"uri":"test://mixed-content-resource",
                    "mimeType":"application/json","text":"{\"test\":\"data\",\"value\":123}"}}]})),
            "test_error_handling" => r(error_result(
                "This tool intentionally returns an error for testing",
            )),
            "json_schema_2020_12_tool" => r(text(&format!(
                "json_schema_2020_12_tool called with {args}"
            ))),
            "test_tool_with_progress" => {
                let _ = conn.progress(id.as_id(), 0.0, Some(100.0), None);
                self.jobs.push(Job {
                    due: now.after(STEP),
                    key,
                    id: id.clone(),
                    step: Step::Progress(50.0),
                });
                Answer::Later
            }
            "test_tool_with_logging" => {
                if self.level(key) <= LogLevel::Info {
                    let _ = conn.log(
                        id.as_id(),
                        LogLevel::Info,
                        Some("test_tool_with_logging"),
                        RawJson::new("\"Tool execution started\"").expect("JSON"),
                    );
                }
                self.jobs.push(Job {
                    due: now.after(STEP),
                    key,
                    id: id.clone(),
                    step: Step::Log(1),
                });
                Answer::Later
            }
            "test_logging_tool" => {
                // Sent only if the request asked for logs (2026-07-28: `logLevel`).
                let _ = conn.log(
                    id.as_id(),
                    LogLevel::Info,
                    Some("test_logging_tool"),
                    RawJson::new("\"test_logging_tool ran\"").expect("JSON"),
                );
                r(text("Logging tool completed"))
            }
            "test_missing_capability" => {
                if caps.contains(Caps::SAMPLING) {
                    r(text("The client declared sampling"))
                } else {
                    Answer::Error(
                        -32021,
                        "Missing required client capability: sampling".into(),
                        Some(json!({"requiredCapabilities":{"sampling":{}}})),
                    )
                }
            }
            "test_trigger_tool_change" | "test_trigger_prompt_change" => {
                let what = if name == "test_trigger_tool_change" {
                    "notifications/tools/list_changed"
                } else {
                    "notifications/prompts/list_changed"
                };
                for k in server.connections() {
                    if let Some(c) = server.connection(k) {
                        let _ = c.notify(what, None);
                    }
                }
                r(text("List change announced"))
            }
            "test_sampling"
            | "test_elicitation"
            | "test_elicitation_sep1034_defaults"
            | "test_elicitation_sep1330_enums"
            | "test_streaming_elicitation" => {
                // 2026-07-28: a retry carries the client's answer in the request's own
                // `inputResponses` (read it before `params` names the question below).
                let answered = params_of(params, "inputResponses").get("input").cloned();
                let (method, params, asked) = match name.as_str() {
                    "test_sampling" => {
                        let prompt = args["prompt"].as_str().unwrap_or("");
                        let s = sampling(prompt, 100);
                        (s["method"].clone(), s["params"].clone(), Asked::Sampling)
                    }
                    "test_elicitation" | "test_streaming_elicitation" => {
                        let message = args["message"]
                            .as_str()
                            .unwrap_or("Please provide your details");
                        let e = elicit(
                            message,
                            json!({
                            "username":{"type":"string","description":"User's response"},
                            "email":{"type":"string","description":"User's email address"}}),
                            &["username", "email"],
                        );
                        (e["method"].clone(), e["params"].clone(), Asked::Elicitation)
                    }
                    "test_elicitation_sep1034_defaults" => (
                        json!("elicitation/create"),
                        json!({"message":"Please review and update the form fields with defaults",
                            "requestedSchema":sep1034_schema()}),
                        Asked::Defaults,
                    ),
                    _ => (
                        json!("elicitation/create"),
                        json!({"message":"Please select options from the enum fields",
                            "requestedSchema":sep1330_schema()}),
                        Asked::Enums,
                    ),
                };
                let method = method.as_str().unwrap_or("").to_owned();
                if modern {
                    // No server→client requests in 2026-07-28: ask through the answer.
                    if let Some(resp) = answered {
                        return r(text(&format!("Input received: {resp}")));
                    }
                    let need = if asked == Asked::Sampling {
                        Caps::SAMPLING
                    } else {
                        Caps::ELICITATION
                    };
                    if !caps.contains(need) {
                        return r(error_result(
                            "The client did not declare the capability this tool needs",
                        ));
                    }
                    return Answer::InputRequired(
                        Some(json!({"input":{"method":method,"params":params}})),
                        None,
                    );
                }
                let text_params = params.to_string();
                match conn.request_related(
                    now,
                    id.as_id(),
                    &method,
                    Some(RawJson::new(&text_params).expect("JSON")),
                    RequestOptions::default(),
                ) {
                    Ok(request) => {
                        self.waits.push(Wait {
                            key,
                            request,
                            parent: id.clone(),
                            asked,
                        });
                        Answer::Later
                    }
                    Err(e) => r(error_result(&format!("Cannot ask the client: {e}"))),
                }
            }
            n if n.starts_with("test_input_required_result_") => {
                if !modern {
                    return r(error_result(
                        "Input required results exist in 2026-07-28 only",
                    ));
                }
                self.input_required(n, params, caps)
            }
            // "Unknown tool" is a protocol error (the tools page: -32602), not a tool's.
            _ => Answer::Error(-32602, format!("Unknown tool: {name}"), None),
        }
    }

    /// The MRTR tools (2026-07-28).
    fn input_required(&self, name: &str, params: &Value, caps: Caps) -> Answer {
        let responses = params.get("inputResponses");
        let state = params.get("requestState").and_then(Value::as_str);
        // Present but not an object (null, a number): a protocol error.
        if let Some(v) = responses
            && !v.is_object()
        {
            return Answer::Error(-32602, "inputResponses must be an object".into(), None);
        }
        let got = |k: &str| responses.and_then(|r| r.get(k));
        // A response that is not a result object is invalid input.
        for v in responses
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|o| o.values())
        {
            if !v.is_object() {
                return Answer::Error(-32602, "each input response must be an object".into(), None);
            }
        }
        let name_q = || {
            elicit(
                "What is your name?",
                json!({"name":{"type":"string"}}),
                &["name"],
            )
        };
        let ir = |reqs: Value, state: Option<String>| Answer::InputRequired(Some(reqs), state);
        match name {
            "test_input_required_result_elicitation" => match got("user_name") {
                Some(v) => {
                    let who = v["content"]["name"].as_str().unwrap_or("stranger");
                    Answer::Result(text(&format!("Hello, {who}!")))
                }
                None => ir(json!({ "user_name": name_q() }), None),
            },
            "test_input_required_result_sampling" => match got("capital_question") {
                Some(v) => Answer::Result(text(&format!(
                    "Sampling said: {}",
                    v["content"]["text"].as_str().unwrap_or("")
                ))),
                None => ir(
                    json!({"capital_question":sampling("What is the capital of France?", 100)}),
                    None,
                ),
            },
            "test_input_required_result_list_roots" => match got("client_roots") {
                Some(v) => {
                    let uris: Vec<&str> = v["roots"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|r| r["uri"].as_str())
                        .collect();
                    Answer::Result(text(&format!("Client roots: {}", uris.join(", "))))
                }
                None => ir(json!({ "client_roots": roots() }), None),
            },
            "test_input_required_result_request_state"
            | "test_input_required_result_tampered_state" => {
                let confirm = || {
                    json!({"confirm":elicit("Please confirm",
                    json!({"ok":{"type":"boolean"}}), &["ok"])})
                };
                match (state, responses) {
                    (None, _) => ir(confirm(), Some(self.seal(name, "1"))),
                    (Some(s), _) if self.open(name, s).as_deref() != Some("1") => Answer::Error(
                        -32602,
                        "requestState failed its integrity check".into(),
                        None,
                    ),
                    (Some(_), Some(_)) if got("confirm").is_some() => {
                        Answer::Result(text("state-ok: the request state was verified"))
                    }
                    (Some(_), _) => ir(confirm(), Some(self.seal(name, "1"))),
                }
            }
            "test_input_required_result_multiple_inputs" => {
                let all = json!({
                    "user_name": name_q(),
                    "greeting": sampling("Generate a greeting", 50),
                    "client_roots": roots(),
                });
                let complete = ["user_name", "greeting", "client_roots"]
                    .iter()
                    .all(|k| got(k).is_some());
                match state.map(|s| self.open(name, s)) {
                    Some(None) => Answer::Error(
                        -32602,
                        "requestState failed its integrity check".into(),
                        None,
                    ),
                    Some(Some(_)) if complete => Answer::Result(text(&format!(
                        "All inputs received: name={}, greeting={}",
                        got("user_name")
                            .map(|v| v["content"]["name"].clone())
                            .unwrap_or_default(),
                        got("greeting")
                            .map(|v| v["content"]["text"].clone())
                            .unwrap_or_default()
                    ))),
                    _ => {
                        // Ask again for what is missing.
                        let mut missing = serde_json::Map::new();
                        for (k, v) in all.as_object().into_iter().flatten() {
                            if got(k).is_none() {
                                missing.insert(k.clone(), v.clone());
                            }
                        }
                        ir(Value::Object(missing), Some(self.seal(name, "1")))
                    }
                }
            }
            "test_input_required_result_multi_round" => {
                let step1 = || {
                    json!({"step1":elicit("Step 1: What is your name?",
                    json!({"name":{"type":"string"}}), &["name"])})
                };
                let step2 = || {
                    json!({"step2":elicit("Step 2: What is your favorite color?",
                    json!({"color":{"type":"string"}}), &["color"])})
                };
                match state.map(|s| self.open(name, s)) {
                    None => ir(step1(), Some(self.seal(name, "round-1"))),
                    Some(None) => Answer::Error(
                        -32602,
                        "requestState failed its integrity check".into(),
                        None,
                    ),
                    Some(Some(s)) if s == "round-1" => match got("step1") {
                        Some(v) => {
                            let who = v["content"]["name"].as_str().unwrap_or("");
                            ir(step2(), Some(self.seal(name, &format!("round-2:{who}"))))
                        }
                        None => ir(step1(), Some(self.seal(name, "round-1"))),
                    },
                    Some(Some(s)) => match (s.strip_prefix("round-2:"), got("step2")) {
                        (Some(who), Some(v)) => Answer::Result(text(&format!(
                            "{who} likes {}",
                            v["content"]["color"].as_str().unwrap_or("")
                        ))),
                        (Some(_), None) => {
                            ir(step2(), Some(s.clone()).map(|s| self.seal(name, &s)))
                        }
                        _ => Answer::Error(-32602, "requestState is not one of ours".into(), None),
                    },
                }
            }
            "test_input_required_result_capabilities" => {
                if responses.is_some() {
                    return Answer::Result(text("Inputs received"));
                }
                let mut reqs = serde_json::Map::new();
                if caps.contains(Caps::ELICITATION) {
                    reqs.insert("user_name".into(), name_q());
                }
                if caps.contains(Caps::SAMPLING) {
                    reqs.insert("greeting".into(), sampling("Generate a greeting", 50));
                }
                if caps.contains(Caps::ROOTS) {
                    reqs.insert("client_roots".into(), roots());
                }
                if reqs.is_empty() {
                    return Answer::Result(text("The client declared nothing to ask through"));
                }
                ir(Value::Object(reqs), None)
            }
            _ => Answer::Error(-32602, format!("Unknown tool: {name}"), None),
        }
    }

    fn prompt_input_required(&self, params: &Value, modern: bool) -> Answer {
        if !modern {
            return Answer::Error(-32602, "This prompt needs 2026-07-28".into(), None);
        }
        match params
            .get("inputResponses")
            .and_then(|r| r.get("user_context"))
        {
            Some(v) => {
                let ctx = v["content"]["context"].as_str().unwrap_or("");
                Answer::Result(json!({"messages":[{"role":"user","content":{"type":"text",
                    "text":format!("Prompt with context: {ctx}")}}]}))
            }
            None => Answer::InputRequired(
                Some(
                    json!({"user_context":elicit("What context should the prompt use?",
                    json!({"context":{"type":"string"}}), &["context"])}),
                ),
                None,
            ),
        }
    }

    /// `payload.tag`: the tag binds the payload to the tool and to this process's secret, so a
    /// client cannot forge or alter it.
    fn seal(&self, tool: &str, payload: &str) -> String {
        format!("{payload}.{:016x}", self.tag(tool, payload))
    }

    fn open(&self, tool: &str, sealed: &str) -> Option<String> {
        let (payload, tag) = sealed.rsplit_once('.')?;
        (u64::from_str_radix(tag, 16).ok()? == self.tag(tool, payload) && tag.len() == 16)
            .then(|| payload.to_owned())
    }

    fn tag(&self, tool: &str, payload: &str) -> u64 {
        let mut h = DefaultHasher::new();
        self.secret.hash(&mut h);
        tool.hash(&mut h);
        payload.hash(&mut h);
        self.secret.hash(&mut h);
        h.finish()
    }
}

fn params_of<'v>(params: &'v Value, key: &str) -> &'v Value {
    params.get(key).unwrap_or(&Value::Null)
}

/// The client capabilities in force for a request: its own `_meta` in 2026-07-28, the
/// session's otherwise.
fn declared(conn: &Connection, id: &OwnedId, modern: bool) -> Caps {
    if modern {
        conn.request_context(id.as_id())
            .map(|c| c.client_capabilities)
            .unwrap_or_default()
    } else {
        conn.peer_capabilities()
            .map(|c| c.flags())
            .unwrap_or_default()
    }
}

/// Gives `answer` to request `id`; hands it back when the engine refused it for a full output
/// (to be given again later), and answers an error where it cannot go as it is (a value
/// nested deeper than a payload may be, a code or an input request the request may not get).
fn respond(conn: &mut Connection, id: &OwnedId, answer: Answer) -> Option<Answer> {
    let full =
        |r: &Result<(), mcpwire::conn::Error>| matches!(r, Err(mcpwire::conn::Error::OutputFull));
    let id = id.as_id();
    let fallback = |conn: &mut Connection, message: &str| {
        let r = conn.respond_error(id, -32603, message, None);
        full(&r).then(|| Answer::Error(-32603, message.to_owned(), None))
    };
    match answer {
        Answer::Result(v) => {
            let text = v.to_string();
            let Ok(raw) = RawJson::new(&text) else {
                return fallback(conn, "the result could not be sent");
            };
            let r = conn.respond(id, raw);
            full(&r).then_some(Answer::Result(v))
        }
        Answer::Error(code, message, data) => {
            let text = data.as_ref().map(|d| d.to_string());
            let raw = text.as_deref().and_then(|d| RawJson::new(d).ok());
            let r = conn.respond_error(id, code, &message, raw);
            if full(&r) {
                return Some(Answer::Error(code, message, data));
            }
            if r.is_err() {
                return fallback(conn, &message);
            }
            None
        }
        Answer::InputRequired(reqs, state) => {
            let text = reqs.as_ref().map(|r| r.to_string());
            let raw = match text.as_deref().map(RawJson::new).transpose() {
                Ok(raw) => raw,
                Err(_) => return fallback(conn, "cannot ask for input"),
            };
            let r = conn.respond_input_required(id, raw, state.as_deref());
            if full(&r) {
                return Some(Answer::InputRequired(reqs, state));
            }
            if let Err(e) = r {
                return fallback(conn, &format!("cannot ask for input: {e}"));
            }
            None
        }
        Answer::Later => None,
    }
}
