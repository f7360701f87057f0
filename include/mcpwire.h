/*
 * mcpwire: a zero-copy, sans-IO engine for the Model Context Protocol (MCP), C ABI.
 *
 * The engine owns no sockets, threads, timers or clock. Bytes and the current time go in;
 * bytes to write, events and the next deadline come out. After EVERY input or command, drain
 * the outputs in this order: mcpw_conn_poll_event until MCPW_EVENT_NONE (acting on events may
 * issue commands), then mcpw_conn_transmit / mcpw_conn_consume until nothing is lent (or the
 * transport would block), then re-arm your timer from mcpw_conn_poll_timeout.
 *
 * The header is C99 (stdbool.h, stdint.h, // comments) and C++11 or later; the C++ wrapper,
 * bindings/cpp/mcpwire.hpp, needs C++17.
 *
 * Conventions
 *
 * - Handles. mcpw_config, mcpw_conn and mcpw_tasks are opaque. The caller owns every
 *   handle a _new function returns and frees it exactly once with the matching _free;
 *   _free(NULL) does nothing. A handle may move between threads but must not be used by two
 *   at once. A const handle argument means the call does not change the handle.
 *
 * - Results. Every fallible function returns an mcpw_result: MCPW_OK (0) or an error code
 *   from a documented range; mcpw_result_message() describes any code. "Nothing to do" is
 *   MCPW_OK with an empty answer, never an error. Outputs (out_* parameters, always last)
 *   are written only when the call returns MCPW_OK; every out_* pointer is required unless
 *   its function says it may be NULL. A
 *   command refused by the engine (codes 300-399) leaves the connection (or task table)
 *   unchanged. JSON-RPC error codes from the peer are event data (mcpw_event.code), never
 *   results.
 *
 * - Text and bytes travel as a pointer and a length, never NUL-terminated. A NULL pointer
 *   with length 0 is the empty string; for an optional argument (params, data, message,
 *   reason, instructions) NULL means "absent". Text is UTF-8; JSON is one complete value.
 *   The library reads what you pass during the call only and keeps no pointer to it.
 *
 * - Borrowed views. Everything the library lends (mcpw_str views in events and getters, the
 *   bytes from mcpw_conn_transmit) points into memory owned by the connection handle. It
 *   stays valid until the next call that takes that handle non-const (an input, a command,
 *   mcpw_conn_poll_event, mcpw_conn_consume, mcpw_conn_free); copy what you need to keep.
 *   Views may be passed straight back into a call on the same handle (answering a request
 *   with its id): the call copies them before they die. Not so the transport inputs
 *   (mcpw_conn_handle_input, mcpw_http_server_handle_request, mcpw_http_client_handle_*),
 *   which are read in place while the handle changes: copy a view before passing it there
 *   (a session id from mcpw_http_server_session_id as a header, say). Static strings (mcpw_version,
 *   mcpw_result_message, mcpw_conn_protocol_version) live as long as the program.
 *
 * - HTTP. mcpw_http_server (answers the requests your HTTP library parsed) and
 *   mcpw_http_client (says which requests your HTTP client library makes) are handles too.
 *   They lend views of their MCP connections as mcpw_conn* (mcpw_http_server_poll_event,
 *   mcpw_http_server_conn, mcpw_http_client_conn) for every mcpw_conn_* command and getter,
 *   so a session is answered exactly like stdio. A view belongs to its lender: never free
 *   it. It stays valid until the next other non-const call on the lender; after that, while
 *   its connection lives, it refuses every call with MCPW_ERR_STALE_VIEW (a view of an ended
 *   session or finished request may be freed by then: do not use it). What a getter gives
 *   through a view (peer info, capabilities, instructions) lives in the lender's memory and
 *   goes with the view, at the lender's next other non-const call. A view always
 *   belongs to the one connection it was lent for. The transport calls (handle_input,
 *   transmit, consume, ...) and mcpw_conn_poll_event refuse a view with MCPW_ERR_NOT_OWNER:
 *   the lender moves its bytes and hands out its events. For threads, a lender and its views
 *   are one handle: no call on a view may overlap a call on its lender, const ones included
 *   (both reach the same connection), and the event store's and random callbacks run on
 *   the thread that made the call. The C HTTP loop, with libmicrohttpd and libcurl, is
 *   in bindings/c/example_http_server.c and
 *   bindings/c/example_http_client.c.
 *
 * - Tasks (the io.modelcontextprotocol/tasks extension of 2026-07-28). mcpw_tasks is a
 *   server's task table, apart from any connection because a task outlives its request: one
 *   per server. On a tools/call that declared the extension (MCPW_CAP_TASKS_EXTENSION in
 *   mcpw_conn_request_context), mcpw_tasks_create a task and answer with
 *   mcpw_conn_respond_task. Pass every request to mcpw_tasks_serve first: it answers
 *   tasks/get, tasks/update and tasks/cancel. Move the task along with mcpw_tasks_ask,
 *   _set_message, _complete, _fail and _cancel; drain mcpw_tasks_poll_event (input answers,
 *   cancel requests, expiries) after _serve and _handle_timeout, and arm a timer from
 *   mcpw_tasks_poll_timeout. The table lends its views (a new task id, an event) until the
 *   next non-const call on it; the calls that take a connection as well use both handles.
 *
 * - Safety. Every entry point catches internal panics: the call returns MCPW_ERR_PANIC and
 *   the handle (both, for a call on two) is poisoned (every later call returns
 *   MCPW_ERR_POISONED; free it). A panic in a call on a connection view poisons its lender
 *   too, and one in a call on a lender makes the views it lent stale. NULL
 *   arguments are reported as MCPW_ERR_NULL_ARGUMENT, never dereferenced.
 *
 * - Decoding alone. mcpw_decode applies the engine's JSON-RPC rules to one frame without a
 *   connection (for a proxy or a router); its views point into the caller's frame.
 *
 * - Time. Every now_ns is the caller's monotonic clock in nanoseconds (any origin, never going
 *   backwards); deadlines come back on the same clock.
 */

#ifndef MCPWIRE_H
#define MCPWIRE_H

/* Generated by cbindgen from bindings/c/src (see cbindgen.toml). Do not edit by hand. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** The version of the library this header describes; mcpw_version() returns the version
 *  of the library actually linked. */
#define MCPWIRE_VERSION_MAJOR 0
#define MCPWIRE_VERSION_MINOR 1
#define MCPWIRE_VERSION_PATCH 0
#define MCPWIRE_VERSION "0.1.0"


/**
 * JSON-RPC "Parse error" (the engine sends it itself for frames that are not JSON).
 */
#define MCPW_JSONRPC_PARSE_ERROR -32700

/**
 * JSON-RPC "Invalid Request" (the engine sends it itself for invalid messages).
 */
#define MCPW_JSONRPC_INVALID_REQUEST -32600

/**
 * JSON-RPC "Method not found".
 */
#define MCPW_JSONRPC_METHOD_NOT_FOUND -32601

/**
 * JSON-RPC "Invalid params".
 */
#define MCPW_JSONRPC_INVALID_PARAMS -32602

/**
 * JSON-RPC "Internal error".
 */
#define MCPW_JSONRPC_INTERNAL_ERROR -32603

/**
 * MCP "Resource not found" (2024-11-05 to 2025-11-25). Answer with it in any version:
 * `mcpw_conn_respond_error` sends -32602 in its place from 2026-07-28 on.
 */
#define MCPW_MCP_RESOURCE_NOT_FOUND -32002

/**
 * Policy flag: enforce what may be sent before initialization completes, both ways (the
 * spec's rule). On by default.
 */
#define MCPW_POLICY_STRICT_LIFECYCLE (1 << 0)

/**
 * Policy flag: answer the peer's `ping` without involving the application. On by default.
 */
#define MCPW_POLICY_ANSWER_PINGS (1 << 1)

/**
 * Policy flag: deliver progress whose value does not increase (dropped and counted by
 * default, as the spec says progress must increase). Off by default.
 */
#define MCPW_POLICY_DELIVER_NON_INCREASING_PROGRESS (1 << 2)

/**
 * Policy flag: restart a request's timeout whenever progress arrives for it (bounded by the
 * maximum total timeout). Off by default; per request with `mcpw_request_options`.
 */
#define MCPW_POLICY_RESET_TIMEOUT_ON_PROGRESS (1 << 3)

/**
 * Policy flag, server, 2026-07-28: hand each `subscriptions/listen` request to the application as
 * `MCPW_EVENT_REQUEST`, to check access before granting it with `mcpw_conn_grant_listen` (or
 * refusing it with `mcpw_conn_respond_error`). Off by default: the engine grants every item
 * it can honour and the application never sees the listen.
 */
#define MCPW_POLICY_REVIEW_LISTENS (1 << 4)

/**
 * The policy flags of a new config.
 */
#define MCPW_POLICY_DEFAULT (MCPW_POLICY_STRICT_LIFECYCLE | MCPW_POLICY_ANSWER_PINGS)

/**
 * Capability flag: server `tools`.
 */
#define MCPW_CAP_TOOLS (1 << 0)

/**
 * Capability flag: server `tools.listChanged`.
 */
#define MCPW_CAP_TOOLS_LIST_CHANGED (1 << 1)

/**
 * Capability flag: server `resources`.
 */
#define MCPW_CAP_RESOURCES (1 << 2)

/**
 * Capability flag: server `resources.subscribe`.
 */
#define MCPW_CAP_RESOURCES_SUBSCRIBE (1 << 3)

/**
 * Capability flag: server `resources.listChanged`.
 */
#define MCPW_CAP_RESOURCES_LIST_CHANGED (1 << 4)

/**
 * Capability flag: server `prompts`.
 */
#define MCPW_CAP_PROMPTS (1 << 5)

/**
 * Capability flag: server `prompts.listChanged`.
 */
#define MCPW_CAP_PROMPTS_LIST_CHANGED (1 << 6)

/**
 * Capability flag: server `logging`.
 */
#define MCPW_CAP_LOGGING (1 << 7)

/**
 * Capability flag: server `completions`.
 */
#define MCPW_CAP_COMPLETIONS (1 << 8)

/**
 * Capability flag: client `roots`.
 */
#define MCPW_CAP_ROOTS (1 << 9)

/**
 * Capability flag: client `roots.listChanged`.
 */
#define MCPW_CAP_ROOTS_LIST_CHANGED (1 << 10)

/**
 * Capability flag: client `sampling`.
 */
#define MCPW_CAP_SAMPLING (1 << 11)

/**
 * Capability flag: client `sampling.tools`.
 */
#define MCPW_CAP_SAMPLING_TOOLS (1 << 12)

/**
 * Capability flag: client `sampling.context`.
 */
#define MCPW_CAP_SAMPLING_CONTEXT (1 << 13)

/**
 * Capability flag: client `elicitation`.
 */
#define MCPW_CAP_ELICITATION (1 << 14)

/**
 * Capability flag: client form-mode elicitation.
 */
#define MCPW_CAP_ELICITATION_FORM (1 << 15)

/**
 * Capability flag: client `elicitation.url`.
 */
#define MCPW_CAP_ELICITATION_URL (1 << 16)

/**
 * Capability flag: `tasks`.
 */
#define MCPW_CAP_TASKS (1 << 17)

/**
 * Capability flag: `tasks.list`.
 */
#define MCPW_CAP_TASKS_LIST (1 << 18)

/**
 * Capability flag: `tasks.cancel`.
 */
#define MCPW_CAP_TASKS_CANCEL (1 << 19)

/**
 * Capability flag: `experimental`.
 */
#define MCPW_CAP_EXPERIMENTAL (1 << 20)

/**
 * Capability flag: `extensions`.
 */
#define MCPW_CAP_EXTENSIONS (1 << 21)

/**
 * Capability flag: the tasks extension (2026-07-28), `extensions` has
 * `io.modelcontextprotocol/tasks`.
 */
#define MCPW_CAP_TASKS_EXTENSION (1 << 22)

/**
 * Capability flag: server, 2025-11-25, `tasks.requests.tools.call` (`tools/call` may be
 * task-augmented).
 */
#define MCPW_CAP_TASKS_TOOLS_CALL (1 << 23)

/**
 * Capability flag: client, 2025-11-25, `tasks.requests.sampling.createMessage`.
 */
#define MCPW_CAP_TASKS_SAMPLING (1 << 24)

/**
 * Capability flag: client, 2025-11-25, `tasks.requests.elicitation.create`.
 */
#define MCPW_CAP_TASKS_ELICITATION (1 << 25)

/**
 * What every fallible `mcpw_*` function returns.
 *
 * Codes are grouped in ranges and never reused: 0 is success; 100-199 reject the caller's
 * arguments; 200-299 reject a configuration; 300-399 are commands the engine refused (the
 * connection, or the task table, is unchanged); 900-999 concern the library itself. Gaps in each range are kept
 * for codes added later, so test ranges with `>=` / `<` rather than listing codes.
 *
 * "Nothing to do" is never an error: a poll with nothing to report returns `MCPW_OK` with an
 * empty answer. JSON-RPC error codes sent by the peer are event data (`mcpw_event.code`),
 * never results.
 */
typedef enum mcpw_result {
    /**
     * Success.
     */
    MCPW_OK = 0,
    /**
     * 100-199, the caller's arguments: a required pointer was NULL (or a NULL pointer came
     * with a non-zero length).
     */
    MCPW_ERR_NULL_ARGUMENT = 100,
    /**
     * Text that must be UTF-8 is not.
     */
    MCPW_ERR_INVALID_UTF8 = 101,
    /**
     * Text that must be one JSON value is not, or nests arrays and objects deeper than 124
     * levels: the decoder's limit on a whole message (128, which frames from the peer obey
     * too) less room for the message around a payload, so that whatever is sent can be read.
     */
    MCPW_ERR_INVALID_JSON = 102,
    /**
     * A JSON value has the wrong type (an object or array was expected).
     */
    MCPW_ERR_JSON_WRONG_TYPE = 103,
    /**
     * A JSON object holds the same key twice where it is read.
     */
    MCPW_ERR_DUPLICATE_KEY = 104,
    /**
     * An `mcpw_id` has an unknown kind, or its string is not the text of a JSON string
     * (unescaped quotes or control characters, a bad escape).
     */
    MCPW_ERR_INVALID_ID = 105,
    /**
     * A protocol version string that this build does not know.
     */
    MCPW_ERR_UNKNOWN_VERSION = 106,
    /**
     * A number or flag set out of its documented range.
     */
    MCPW_ERR_INVALID_ARGUMENT = 107,
    /**
     * `mcpw_conn_consume` was told more bytes than `mcpw_conn_transmit` lent.
     */
    MCPW_ERR_CONSUME_TOO_MUCH = 108,
    /**
     * A connection view lent by an HTTP server or client is no longer valid: the lender was
     * called since. Ask it for the view again.
     */
    MCPW_ERR_STALE_VIEW = 109,
    /**
     * A transport call (`mcpw_conn_handle_input`, `_transmit`, …) on a connection view: its
     * HTTP server or client moves the bytes; feed that handle instead.
     */
    MCPW_ERR_NOT_OWNER = 110,
    /**
     * No such HTTP stream (it ended, or its client went away), or no response waits to be
     * settled for it.
     */
    MCPW_ERR_UNKNOWN_STREAM = 111,
    /**
     * No such connection in the HTTP server (its session ended or expired, or its stateless
     * request is done).
     */
    MCPW_ERR_UNKNOWN_CONNECTION = 112,
    /**
     * Called from inside one of your callbacks that the library was running (a random
     * source, an event store's `append`, `replay` or `forget`): a callback may call no
     * function that takes a handle. Nothing was done.
     */
    MCPW_ERR_REENTRANT = 113,
    /**
     * 200-299, configuration: `mcpw_conn_new` refused the configuration (no protocol
     * versions, for example).
     */
    MCPW_ERR_CONFIG_REFUSED = 200,
    /**
     * 300-399, commands the engine refused; the connection (or, for the `mcpw_tasks_*`
     * calls, the task table) is unchanged. The connection is closed.
     */
    MCPW_ERR_CLOSED = 300,
    /**
     * `mcpw_conn_close` was called: no new requests or notifications.
     */
    MCPW_ERR_CLOSING = 301,
    /**
     * The handshake is not finished: until it is, only pings (and, from a server that has
     * answered `initialize`, logging) may be sent; before `initialize` arrives, or while a
     * client's `server/discover` probe is out, nothing.
     */
    MCPW_ERR_NOT_INITIALIZED = 302,
    /**
     * The engine sends this method itself (`initialize`, `notifications/initialized`,
     * `notifications/cancelled`, `notifications/progress`): use the handshake,
     * `mcpw_conn_cancel` or `mcpw_conn_progress`.
     */
    MCPW_ERR_ENGINE_OWNED = 303,
    /**
     * The method does not exist in the negotiated protocol version.
     */
    MCPW_ERR_NOT_IN_VERSION = 304,
    /**
     * This role may not send this method.
     */
    MCPW_ERR_WRONG_DIRECTION = 305,
    /**
     * The capability that gates the method was not negotiated (the peer's for a request,
     * ours for a notification).
     */
    MCPW_ERR_NOT_NEGOTIATED = 306,
    /**
     * Params must be a JSON object, without a `_meta.progressToken` of their own (ask for
     * progress instead: the engine adds the token) or a `_meta` written twice, and without a
     * member the sub-capability rules read written twice (an elicitation `mode`, sampling
     * `tools` or `toolChoice`, and in 2025-11-25 `task`).
     */
    MCPW_ERR_INVALID_PARAMS = 307,
    /**
     * The JSON-RPC error code does not exist in the negotiated protocol version (before one
     * is negotiated: in any configured version).
     */
    MCPW_ERR_CODE_NOT_IN_VERSION = 308,
    /**
     * Too many of our requests are waiting for an answer (`mcpw_limits.max_outbound_in_flight`).
     */
    MCPW_ERR_TOO_MANY_IN_FLIGHT = 309,
    /**
     * Too many bytes wait for the transport (`mcpw_limits.max_buffered_output`): write
     * some, then retry.
     */
    MCPW_ERR_OUTPUT_FULL = 310,
    /**
     * No request with this id is in flight (never received, already answered, or, for
     * `mcpw_conn_cancel`, never sent or already finished).
     */
    MCPW_ERR_UNKNOWN_REQUEST = 311,
    /**
     * `initialize` cannot be cancelled.
     */
    MCPW_ERR_CANNOT_CANCEL_INITIALIZE = 312,
    /**
     * The request carried no progress token, so no progress can be reported for it.
     */
    MCPW_ERR_NO_PROGRESS_TOKEN = 313,
    /**
     * Progress must increase with every notification (and be finite, as must a total).
     */
    MCPW_ERR_NON_INCREASING_PROGRESS = 314,
    /**
     * 2026-07-28: this must be tied to one of the peer's requests (log with `mcpw_conn_log`;
     * list changes go to `subscriptions/listen` streams).
     */
    MCPW_ERR_REQUEST_SCOPED = 315,
    /**
     * 2026-07-28: "input required" answers only `tools/call`, `prompts/get` and
     * `resources/read`, and each input request needs a capability the request declared.
     */
    MCPW_ERR_NOT_ELIGIBLE = 316,
    /**
     * Tasks (`mcpw_tasks`): the table holds `mcpw_task_config.max_tasks` tasks and none is
     * terminal, or the owner holds `max_tasks_per_owner` and none of its tasks is terminal,
     * so no task was created. Answer the request without a task (or with an error).
     */
    MCPW_ERR_TASKS_FULL = 317,
    /**
     * Tasks: no such task (never created, expired at its TTL, or dropped to make room).
     */
    MCPW_ERR_UNKNOWN_TASK = 318,
    /**
     * Tasks: the task is terminal (completed, failed or cancelled) and never changes again.
     */
    MCPW_ERR_TASK_TERMINAL = 319,
    /**
     * Tasks: this input-request key was used before in the task (keys are unique over a
     * task's life).
     */
    MCPW_ERR_TASK_KEY_REUSED = 320,
    /**
     * Tasks: the task has `mcpw_task_config.max_input_requests` input requests outstanding
     * already.
     */
    MCPW_ERR_TOO_MANY_INPUT_REQUESTS = 321,
    /**
     * Tasks: the JSON is not what the call takes (a result is an object, an input request one
     * of Multi Round-Trip Requests), or it is over `mcpw_task_config.max_payload`.
     */
    MCPW_ERR_INVALID_TASK_PAYLOAD = 322,
    /**
     * Tasks: the random source gave ids already in use eight times running, so it is not
     * random (a failed `getrandom` that left the buffer as it was, a fixed seed). No task
     * was created; fix the source.
     */
    MCPW_ERR_RANDOM_REPEATS = 323,
    /**
     * The engine refused the command for a reason this version of the C ABI has no code
     * for yet.
     */
    MCPW_ERR_COMMAND_REFUSED = 399,
    /**
     * 900-999, the library itself: a bug in mcpwire panicked inside this call. The handle
     * is poisoned; free it.
     */
    MCPW_ERR_PANIC = 900,
    /**
     * An earlier call on this handle panicked; every later call fails with this code
     * (`_free` still works).
     */
    MCPW_ERR_POISONED = 901,
} mcpw_result;

/**
 * Exactly what was wrong with a frame (`MCPW_VIOLATION_PARSE`: 1-99,
 * `MCPW_VIOLATION_INVALID_MESSAGE`: 100-199).
 */
typedef enum mcpw_decode_reason {
    /**
     * Not a decoding violation.
     */
    MCPW_DECODE_NONE = 0,
    /**
     * Bytes that are not UTF-8 (or encode a surrogate, or an overlong form).
     */
    MCPW_DECODE_INVALID_UTF8 = 1,
    /**
     * The frame ended in the middle of a value.
     */
    MCPW_DECODE_UNEXPECTED_END = 2,
    /**
     * A byte the JSON grammar does not allow where it stands.
     */
    MCPW_DECODE_UNEXPECTED_BYTE = 3,
    /**
     * A raw control character inside a string.
     */
    MCPW_DECODE_CONTROL_CHARACTER = 4,
    /**
     * A malformed escape sequence.
     */
    MCPW_DECODE_INVALID_ESCAPE = 5,
    /**
     * A `\u` escape of an unpaired UTF-16 surrogate.
     */
    MCPW_DECODE_LONE_SURROGATE = 6,
    /**
     * A malformed number.
     */
    MCPW_DECODE_INVALID_NUMBER = 7,
    /**
     * More than one value, or other bytes after the value.
     */
    MCPW_DECODE_TRAILING_CHARACTERS = 8,
    /**
     * Nesting deeper than the decoder's limit.
     */
    MCPW_DECODE_TOO_DEEP = 9,
    /**
     * The frame (or a batch member) is not a JSON object.
     */
    MCPW_DECODE_NOT_AN_OBJECT = 100,
    /**
     * An empty batch `[]`.
     */
    MCPW_DECODE_EMPTY_BATCH = 101,
    /**
     * A member the engine reads appears twice.
     */
    MCPW_DECODE_DUPLICATE_KEY = 102,
    /**
     * A member name differing from a JSON-RPC member only in letter case.
     */
    MCPW_DECODE_CASE_VARIANT_KEY = 103,
    /**
     * No `jsonrpc` member.
     */
    MCPW_DECODE_MISSING_VERSION = 104,
    /**
     * `jsonrpc` is not exactly `"2.0"`.
     */
    MCPW_DECODE_WRONG_VERSION = 105,
    /**
     * An id that is neither an integer nor a string.
     */
    MCPW_DECODE_INVALID_ID = 106,
    /**
     * A numeric id with a fraction or exponent.
     */
    MCPW_DECODE_FRACTIONAL_ID = 107,
    /**
     * An integer id outside the 64-bit range.
     */
    MCPW_DECODE_ID_OUT_OF_RANGE = 108,
    /**
     * A `null` id on anything but an error response.
     */
    MCPW_DECODE_NULL_ID = 109,
    /**
     * A response without an id.
     */
    MCPW_DECODE_MISSING_ID = 110,
    /**
     * `method` is not a string.
     */
    MCPW_DECODE_METHOD_NOT_STRING = 111,
    /**
     * `params` is present but not an object.
     */
    MCPW_DECODE_PARAMS_NOT_OBJECT = 112,
    /**
     * Both `result` and `error`.
     */
    MCPW_DECODE_RESULT_AND_ERROR = 113,
    /**
     * A mixture of request and response members.
     */
    MCPW_DECODE_AMBIGUOUS_KIND = 114,
    /**
     * None of `method`, `result` or `error`.
     */
    MCPW_DECODE_NOT_A_MESSAGE = 115,
    /**
     * `error` is not an object.
     */
    MCPW_DECODE_ERROR_NOT_OBJECT = 116,
    /**
     * `error.code` is missing or not an integer.
     */
    MCPW_DECODE_ERROR_CODE_NOT_INTEGER = 117,
    /**
     * `error.message` is missing or not a string.
     */
    MCPW_DECODE_ERROR_MESSAGE_NOT_STRING = 118,
    /**
     * A batch with more members than the decoder takes (1024 by default).
     */
    MCPW_DECODE_BATCH_TOO_LARGE = 119,
    /**
     * A reason this version of the C ABI has no code for yet.
     */
    MCPW_DECODE_OTHER = 999,
} mcpw_decode_reason;

/**
 * What an `mcpw_event` reports. Numbers are grouped (lifecycle 1-19, from the peer 20-39,
 * our requests 40-59, the peer's mistakes 60-79) with room for kinds added later; treat a
 * kind you do not know as informational and carry on.
 */
typedef enum mcpw_event_kind {
    /**
     * Nothing happened: the queue is empty. Stop polling.
     */
    MCPW_EVENT_NONE = 0,
    /**
     * Lifecycle: the handshake finished; requests may flow both ways. Fields: `version`.
     * Fires at most once.
     */
    MCPW_EVENT_READY = 1,
    /**
     * Lifecycle: the connection ended. Fields: `close_reason`, plus `code` and `version` as
     * each `mcpw_close_reason` says (`MCPW_CLOSE_INITIALIZE_REJECTED`,
     * `MCPW_CLOSE_UNSUPPORTED_VERSION`, `MCPW_CLOSE_TRANSPORT_FAILED`).
     * Always the last event; every command fails with `MCPW_ERR_CLOSED` afterwards.
     */
    MCPW_EVENT_CLOSED = 2,
    /**
     * From the peer: a request. Fields: `id`, `method`, `params` (or absent). Answer it with
     * `mcpw_conn_respond` or `mcpw_conn_respond_error`, now or later (keep a copy of the id).
     */
    MCPW_EVENT_REQUEST = 20,
    /**
     * From the peer: a notification the engine does not consume itself. Fields: `method`,
     * `params` (or absent).
     */
    MCPW_EVENT_NOTIFICATION = 21,
    /**
     * From the peer: it cancelled one of its requests. Fields: `id`, `reason` (or absent).
     * Stop working on it; an answer given afterwards is not sent.
     */
    MCPW_EVENT_PEER_CANCELLED = 22,
    /**
     * From the peer, 2025-11-25: the out-of-band interaction of a URL-mode elicitation we
     * know of (from an `elicitation/create` in URL mode, or `MCPW_EVENT_URL_ELICITATION_REQUIRED`)
     * finished. Fields: `message`, the `elicitationId` (decoded text). Once per elicitation id;
     * completions of unknown or already-completed ids are dropped
     * (`mcpw_stats.ignored_elicitation_completions`).
     */
    MCPW_EVENT_ELICITATION_COMPLETE = 23,
    /**
     * Our request: its result. Fields: `request`, `result`. Ends the request.
     */
    MCPW_EVENT_RESPONSE = 40,
    /**
     * Our request: its error answer. Fields: `request`, `code`, `message`, `data` (or
     * absent). Ends the request.
     */
    MCPW_EVENT_ERROR = 41,
    /**
     * Our request: progress (only for requests sent with progress). Fields: `request`,
     * `progress`, `total` when `has_total`, `message` (or absent). Repeats.
     */
    MCPW_EVENT_PROGRESS = 42,
    /**
     * Our request: no answer in time; the peer has been told it is cancelled. Fields:
     * `request`. Ends the request.
     */
    MCPW_EVENT_TIMED_OUT = 43,
    /**
     * Our request: the connection ended (or began its graceful close, for our own
     * `subscriptions/listen`, which the close cancels) before it was answered, or (2026-07-28,
     * stdio) the server tore down our listen with `notifications/cancelled` (then listen again
     * if still wanted). Fields: `request`. Ends the request.
     */
    MCPW_EVENT_ABANDONED = 44,
    /**
     * Our request, 2026-07-28: the server needs more input first. Fields: `request`,
     * `input_requests` (or absent), `request_state` (or absent). Fulfil the input requests
     * (elicitation, sampling, roots), then `mcpw_conn_retry` with the responses; the engine
     * echoes `request_state` itself. Ends the request (the retry is a new one).
     */
    MCPW_EVENT_INPUT_REQUIRED = 45,
    /**
     * Our request: the peer answered with something invalid (a 2026-07-28 result with an
     * unknown `resultType`, a malformed "input required"). Fields: `request`. Ends the
     * request.
     */
    MCPW_EVENT_INVALID_RESPONSE = 46,
    /**
     * Our request, over HTTP: the transport could not carry it or its answer (an HTTP error
     * status without a JSON-RPC answer, a failed connection, a stream that ended early and
     * could not be resumed). Fields: `request`, `code` (the HTTP status, or 0), `message`
     * (what went wrong, in English). Ends the request.
     */
    MCPW_EVENT_FAILED = 47,
    /**
     * Our request: the server answered it with a task handle instead of its result (2026-07-28
     * with the tasks extension declared, or a 2025-11-25 task-augmented request). Fields:
     * `request`, `result` (the `CreateTaskResult`, raw JSON: `{"resultType":"task","taskId":…}`
     * in 2026-07-28, `{"task":{"taskId":…}}` in 2025-11-25). Poll `tasks/get` with the task's
     * id (in 2025-11-25, `tasks/result` waits for its end). Ends the request.
     */
    MCPW_EVENT_TASK_CREATED = 48,
    /**
     * Our request, 2025-11-25: the server answered -32042, it needs the user to complete
     * URL-mode elicitations first. Fields: `request`, `data` (the `elicitations` array, raw
     * JSON: objects with `mode` `"url"`, `elicitationId`, `url` and `message`, checked). Show
     * each URL to the user (open it only with their consent), then send the request again;
     * each end may come as `MCPW_EVENT_ELICITATION_COMPLETE`. Ends the request.
     */
    MCPW_EVENT_URL_ELICITATION_REQUIRED = 49,
    /**
     * The peer broke a rule; the engine already answered as the spec says. Fields:
     * `violation`, `decode_reason` (for `MCPW_VIOLATION_PARSE` and
     * `MCPW_VIOLATION_INVALID_MESSAGE`), `id` and `method` when the message had them.
     */
    MCPW_EVENT_VIOLATION = 60,
    /**
     * Something this version of the C ABI has no kind for yet. No fields. Ignore it.
     */
    MCPW_EVENT_OTHER = 999,
} mcpw_event_kind;

/**
 * Why the connection ended (`MCPW_EVENT_CLOSED`).
 */
typedef enum mcpw_close_reason {
    /**
     * Not a `MCPW_EVENT_CLOSED` event.
     */
    MCPW_CLOSE_NONE = 0,
    /**
     * `mcpw_conn_close` finished: every request answered, or the grace period ran out.
     */
    MCPW_CLOSE_LOCAL = 1,
    /**
     * `mcpw_conn_handle_eof`: the transport ended.
     */
    MCPW_CLOSE_EOF = 2,
    /**
     * Client: the server chose a protocol version we do not speak (in `version`).
     */
    MCPW_CLOSE_UNSUPPORTED_VERSION = 3,
    /**
     * Client: the server answered `initialize` (or `server/discover`) with an error (its code
     * in `code`). For -32022 (unsupported protocol version), `version` holds the versions the
     * server named, as a JSON array; for any other code, the error's message (up to
     * 1,024 bytes, UTF-8, possibly empty), which says why: show it to the user.
     */
    MCPW_CLOSE_INITIALIZE_REJECTED = 4,
    /**
     * Client: the `initialize` result was malformed.
     */
    MCPW_CLOSE_INVALID_INITIALIZE_RESULT = 5,
    /**
     * Client: no answer to `initialize` in time.
     */
    MCPW_CLOSE_INITIALIZE_TIMED_OUT = 6,
    /**
     * The peer kept sending traffic that needs replies while not reading ours.
     */
    MCPW_CLOSE_PEER_NOT_READING = 7,
    /**
     * Client over HTTP: the transport failed during the handshake (`initialize` or the
     * `server/discover` probe could not be carried). `code` holds the HTTP status, or 0;
     * `version` the reason in English.
     */
    MCPW_CLOSE_TRANSPORT_FAILED = 8,
    /**
     * A reason this version of the C ABI has no code for yet.
     */
    MCPW_CLOSE_OTHER = 999,
} mcpw_close_reason;

/**
 * What rule the peer broke (`MCPW_EVENT_VIOLATION`).
 */
typedef enum mcpw_violation {
    /**
     * Not a `MCPW_EVENT_VIOLATION` event.
     */
    MCPW_VIOLATION_NONE = 0,
    /**
     * A frame that is not JSON; answered with -32700. See `decode_reason`.
     */
    MCPW_VIOLATION_PARSE = 1,
    /**
     * JSON that is not a valid message; answered with -32600 when it could be a request.
     * See `decode_reason`.
     */
    MCPW_VIOLATION_INVALID_MESSAGE = 2,
    /**
     * A frame over `mcpw_limits.max_frame`; skipped.
     */
    MCPW_VIOLATION_FRAME_TOO_LONG = 3,
    /**
     * A response whose id matches no request of ours in flight; dropped.
     */
    MCPW_VIOLATION_UNKNOWN_RESPONSE = 4,
    /**
     * A request reusing the id of one of the peer's requests still in flight; answered
     * with -32600.
     */
    MCPW_VIOLATION_DUPLICATE_REQUEST_ID = 5,
    /**
     * A message not allowed before initialization completes; requests answered with -32600,
     * notifications dropped.
     */
    MCPW_VIOLATION_BEFORE_INITIALIZATION = 6,
    /**
     * `initialize` on a connection already initialized; answered with -32600.
     */
    MCPW_VIOLATION_ALREADY_INITIALIZED = 7,
    /**
     * A request for a method that does not exist in the negotiated version, goes the wrong
     * way, or needs a capability we did not declare; answered with -32601.
     */
    MCPW_VIOLATION_METHOD_NOT_AVAILABLE = 8,
    /**
     * A notification the sender was not entitled to send; dropped.
     */
    MCPW_VIOLATION_NOTIFICATION_NOT_ALLOWED = 9,
    /**
     * Parameters the engine reads were malformed; requests answered with -32602.
     */
    MCPW_VIOLATION_INVALID_PARAMS = 10,
    /**
     * A batch where the protocol version has none; answered with -32600.
     */
    MCPW_VIOLATION_BATCH_NOT_ALLOWED = 11,
    /**
     * More of the peer's requests in flight than `mcpw_limits.max_inbound_in_flight`;
     * answered with an error.
     */
    MCPW_VIOLATION_TOO_MANY_REQUESTS = 12,
    /**
     * A 2026-07-28 request for a protocol version we do not support; answered with -32022.
     */
    MCPW_VIOLATION_UNSUPPORTED_VERSION = 13,
    /**
     * A message that does not belong to the connection's era; answered where a request,
     * dropped otherwise.
     */
    MCPW_VIOLATION_WRONG_ERA = 14,
    /**
     * A 2026-07-28 request that needs a client capability its `_meta` did not declare (the
     * tasks methods without the tasks extension); answered with -32021.
     */
    MCPW_VIOLATION_MISSING_CLIENT_CAPABILITY = 15,
    /**
     * A violation this version of the C ABI has no code for yet.
     */
    MCPW_VIOLATION_OTHER = 999,
} mcpw_violation;

/**
 * Where a connection's lifecycle stands (`mcpw_conn_state`).
 */
typedef enum mcpw_state {
    /**
     * The handshake is under way.
     */
    MCPW_STATE_INITIALIZING = 1,
    /**
     * The handshake is done; anything negotiated may flow.
     */
    MCPW_STATE_OPERATING = 2,
    /**
     * `mcpw_conn_close` was called; waiting for the requests in flight either way.
     */
    MCPW_STATE_CLOSING = 3,
    /**
     * Ended; the `MCPW_EVENT_CLOSED` event says why.
     */
    MCPW_STATE_CLOSED = 4,
    /**
     * A state this version of the C ABI has no code for yet.
     */
    MCPW_STATE_OTHER = 999,
} mcpw_state;

/**
 * Which end of a connection to be (the `role` argument of `mcpw_config_new`).
 */
typedef enum mcpw_role {
    /**
     * The host side: sends `initialize`, calls tools.
     */
    MCPW_ROLE_CLIENT = 1,
    /**
     * The side offering tools, resources and prompts.
     */
    MCPW_ROLE_SERVER = 2,
} mcpw_role;

/**
 * The protocol era in force (`mcpw_conn_era`).
 */
typedef enum mcpw_era {
    /**
     * Not decided yet: a client still probing, or a dual-era server before its first request.
     */
    MCPW_ERA_UNDECIDED = 0,
    /**
     * The `initialize` handshake era (2024-11-05 to 2025-11-25).
     */
    MCPW_ERA_LEGACY = 1,
    /**
     * The stateless era (2026-07-28).
     */
    MCPW_ERA_MODERN = 2,
    /**
     * An era this version of the C ABI has no code for yet.
     */
    MCPW_ERA_OTHER = 999,
} mcpw_era;

/**
 * What `mcpw_http_client_poll_action` asks of the host.
 */
typedef enum mcpw_http_action_kind {
    /**
     * Nothing to do now.
     */
    MCPW_HTTP_ACTION_NONE = 0,
    /**
     * Make the HTTP request `method` with `headers` and `body` to the MCP endpoint, then
     * report its outcome for `exchange`.
     */
    MCPW_HTTP_ACTION_SEND = 1,
    /**
     * Stop reading the response of `exchange` and close it; report nothing more for it. It
     * comes for a cancelled 2026-07-28 request, for the exchanges of an expired session, for
     * the session's GET stream when the session ends or the connection closes, for an
     * exchange with nothing to wait for that got no response head within 10 s, and for a
     * stream the server keeps open two seconds after every request it carried ended.
     */
    MCPW_HTTP_ACTION_ABORT = 2,
} mcpw_http_action_kind;

/**
 * Where a task is (`mcpw_tasks_status`). The last three are terminal: a task in them never
 * changes again.
 */
typedef enum mcpw_task_status {
    /**
     * `working`: the work is going on.
     */
    MCPW_TASK_STATUS_WORKING = 1,
    /**
     * `input_required`: the work waits for the client's answers to the task's input
     * requests (`mcpw_tasks_ask`).
     */
    MCPW_TASK_STATUS_INPUT_REQUIRED = 2,
    /**
     * `completed`: the work finished with a result (a tool result with `isError: true`
     * included, but for a 2025-11-25 task). Terminal.
     */
    MCPW_TASK_STATUS_COMPLETED = 3,
    /**
     * `failed`: the work failed with a JSON-RPC error, or (a 2025-11-25 task) completed with
     * a tool result that has `isError: true`, which its `tasks/result` returns. Terminal.
     */
    MCPW_TASK_STATUS_FAILED = 4,
    /**
     * `cancelled`: the work was cancelled. Terminal.
     */
    MCPW_TASK_STATUS_CANCELLED = 5,
    /**
     * A status this version of the C ABI has no code for yet.
     */
    MCPW_TASK_STATUS_OTHER = 999,
} mcpw_task_status;

/**
 * What an `mcpw_task_event` reports.
 */
typedef enum mcpw_task_event_kind {
    /**
     * Nothing happened: the queue is empty. Stop polling.
     */
    MCPW_TASK_EVENT_NONE = 0,
    /**
     * The client answered the input request `key` of `task` (with `tasks/update`);
     * `response` is its answer, raw JSON (an elicitation or sampling result, say). Once
     * every outstanding request is answered the task is `working` again.
     */
    MCPW_TASK_EVENT_INPUT = 1,
    /**
     * The client asked to cancel `task` (`tasks/cancel`). Cancellation is cooperative: call
     * `mcpw_tasks_cancel` once the work stopped, or finish the task normally. (A 2025-11-25
     * task is cancelled already: just stop the work; a later cancel, complete or fail gets
     * `MCPW_ERR_TASK_TERMINAL`.)
     */
    MCPW_TASK_EVENT_CANCEL_REQUESTED = 2,
    /**
     * `task` reached its TTL and was deleted: stop any work left for it.
     */
    MCPW_TASK_EVENT_EXPIRED = 3,
    /**
     * Something this version of the C ABI has no kind for yet. Ignore it.
     */
    MCPW_TASK_EVENT_OTHER = 999,
} mcpw_task_event_kind;

/**
 * The kinds of `mcpw_id`.
 */
typedef enum mcpw_id_kind {
    /**
     * No id (an event that carries none).
     */
    MCPW_ID_NONE = 0,
    /**
     * An integer id, in `integer`.
     */
    MCPW_ID_INT = 1,
    /**
     * A string id, in `string`.
     */
    MCPW_ID_STRING = 2,
} mcpw_id_kind;

/**
 * Whether a request's timeout restarts when progress arrives for it
 * (`mcpw_request_options.reset_on_progress`).
 */
typedef enum mcpw_progress_reset {
    /**
     * As the config's `MCPW_POLICY_RESET_TIMEOUT_ON_PROGRESS` says.
     */
    MCPW_PROGRESS_RESET_DEFAULT = 0,
    /**
     * Restart the timeout on progress (bounded by the maximum total timeout).
     */
    MCPW_PROGRESS_RESET_ON = 1,
    /**
     * Never restart it.
     */
    MCPW_PROGRESS_RESET_OFF = 2,
} mcpw_progress_reset;

/**
 * How a client picks the protocol era (`mcpw_config_set_client_era`).
 */
typedef enum mcpw_client_era {
    /**
     * Probe with `server/discover`; adopt 2026-07-28 on a valid result, fall back to the
     * `initialize` handshake on any error or after the discover timeout. The default.
     */
    MCPW_CLIENT_ERA_AUTO = 1,
    /**
     * Only the `initialize` handshake (2024-11-05 to 2025-11-25).
     */
    MCPW_CLIENT_ERA_LEGACY = 2,
    /**
     * Only the stateless era: `server/discover`, then per-request metadata.
     */
    MCPW_CLIENT_ERA_MODERN = 3,
} mcpw_client_era;

/**
 * Who may cache a server's 2026-07-28 results (`mcpw_config_set_discover_cache`).
 */
typedef enum mcpw_cache_scope {
    /**
     * Shareable across authorization contexts.
     */
    MCPW_CACHE_PUBLIC = 1,
    /**
     * Only within the same authorization context. The default.
     */
    MCPW_CACHE_PRIVATE = 2,
} mcpw_cache_scope;

/**
 * Log severities for `mcpw_conn_log` and `mcpw_request_context.log_level`, numbered as
 * syslog's (`LOG_EMERG` 0 to `LOG_DEBUG` 7): a lower number is more severe.
 */
typedef enum mcpw_log_level {
    /**
     * `emergency`
     */
    MCPW_LOG_EMERGENCY = 0,
    /**
     * `alert`
     */
    MCPW_LOG_ALERT = 1,
    /**
     * `critical`
     */
    MCPW_LOG_CRITICAL = 2,
    /**
     * `error`
     */
    MCPW_LOG_ERROR = 3,
    /**
     * `warning`
     */
    MCPW_LOG_WARNING = 4,
    /**
     * `notice`
     */
    MCPW_LOG_NOTICE = 5,
    /**
     * `info`
     */
    MCPW_LOG_INFO = 6,
    /**
     * `debug`
     */
    MCPW_LOG_DEBUG = 7,
} mcpw_log_level;

/**
 * What an `mcpw_message` holds.
 */
typedef enum mcpw_message_kind {
    /**
     * A request. Fields: `id`, `method`, `params` (or absent).
     */
    MCPW_MESSAGE_REQUEST = 1,
    /**
     * A notification. Fields: `method`, `params` (or absent).
     */
    MCPW_MESSAGE_NOTIFICATION = 2,
    /**
     * A success response. Fields: `id`, `result`.
     */
    MCPW_MESSAGE_RESPONSE = 3,
    /**
     * An error response. Fields: `id` (`MCPW_ID_NONE` when the peer sent `null` or none),
     * `code`, `message`, `data` (or absent).
     */
    MCPW_MESSAGE_ERROR = 4,
    /**
     * Not JSON (JSON-RPC's parse error): the whole frame is refused. Fields: `code`
     * (-32700, the code to answer with), `reason`, `offset`.
     */
    MCPW_MESSAGE_PARSE_ERROR = 5,
    /**
     * JSON, but not a valid JSON-RPC message (JSON-RPC's invalid request), a whole frame or
     * one member of a batch. Fields: `code` (-32600, the code to answer with), `reason`,
     * `offset`, and `id` when the message's id could be read (answer with it; else with
     * `null`). A frame shaped like a response is `MCPW_MESSAGE_INVALID_RESPONSE` instead.
     */
    MCPW_MESSAGE_INVALID = 6,
    /**
     * JSON shaped like a response (a `result` or `error` member and no `method`) that is not
     * a valid one (a duplicated member, no `"jsonrpc":"2.0"`, both `result` and `error`, …).
     * Never answer it: its `id` is one of *your* request ids, and an error sent back with it
     * would be taken by the peer for the answer to its own request of that id. Fields:
     * `code` (-32600, for logs), `reason`, `offset`, and `id` when it could be read (the
     * request of yours it claims to answer).
     */
    MCPW_MESSAGE_INVALID_RESPONSE = 7,
    /**
     * A valid JSON-RPC notification that only MCP's rules refuse (its `params` an array,
     * where MCP wants an object, or a member named as a JSON-RPC one but for its case, such
     * as `"Id"`). Never answer it: JSON-RPC forbids replying to a notification;
     * log it, as the connection reports it as a violation. Fields: `code` (-32600, for
     * logs), `reason`, `offset`.
     */
    MCPW_MESSAGE_INVALID_NOTIFICATION = 8,
} mcpw_message_kind;

/**
 * What one item of a `subscriptions/listen` request asks to hear (`mcpw_listen_item.kind`).
 */
typedef enum mcpw_listen_item_kind {
    /**
     * `notifications/tools/list_changed`.
     */
    MCPW_LISTEN_TOOLS_LIST_CHANGED = 1,
    /**
     * `notifications/prompts/list_changed`.
     */
    MCPW_LISTEN_PROMPTS_LIST_CHANGED = 2,
    /**
     * `notifications/resources/list_changed`.
     */
    MCPW_LISTEN_RESOURCES_LIST_CHANGED = 3,
    /**
     * `notifications/resources/updated` for the resource URI in `text`.
     */
    MCPW_LISTEN_RESOURCE = 4,
    /**
     * `notifications/tasks` for the task id in `text` (the tasks extension).
     */
    MCPW_LISTEN_TASK = 5,
} mcpw_listen_item_kind;

/**
 * A connection's settings: role, protocol versions, identity, capabilities, timeouts,
 * bounds and policies. Create it with `mcpw_config_new`, adjust it with the setters, pass it
 * to `mcpw_conn_new` (which copies it; one config can make many connections), and free it
 * with `mcpw_config_free`.
 */
typedef struct mcpw_config mcpw_config;

/**
 * One MCP connection, client or server. Create it with `mcpw_conn_new` and free it with
 * `mcpw_conn_free`. A handle may move between threads but must not be used by two at once.
 *
 * An HTTP server or client also lends views of its connections (`mcpw_http_server_conn`,
 * `mcpw_http_client_conn`): the same handle type, for every command and getter, but the
 * HTTP handle moves its bytes, so the transport calls refuse a view, and freeing one does
 * nothing.
 */
typedef struct mcpw_conn mcpw_conn;

/**
 * An MCP client over Streamable HTTP, both eras: it says which HTTP requests to make and
 * reads their responses (JSON or SSE, with resumption). Create it with
 * `mcpw_http_client_new`, free it with `mcpw_http_client_free`. One thread at a time.
 */
typedef struct mcpw_http_client mcpw_http_client;

/**
 * The server side of Streamable HTTP: sessions (handshake era) and stateless requests
 * (2026-07-28), behind one endpoint. Create it with `mcpw_http_server_new`, free it with
 * `mcpw_http_server_free`. One thread at a time.
 */
typedef struct mcpw_http_server mcpw_http_server;

/**
 * A server's task table (the tasks extension of 2026-07-28). Create it with
 * `mcpw_tasks_new` and free it with `mcpw_tasks_free`. A handle may move between threads but
 * must not be used by two at once, and the calls that take a connection too
 * (`mcpw_conn_respond_task`, `mcpw_tasks_serve`) use both handles for the call.
 */
typedef struct mcpw_tasks mcpw_tasks;

/**
 * A view of text owned by someone else: `len` bytes at `ptr`, UTF-8, not NUL-terminated.
 *
 * `ptr == NULL` (with `len == 0`) means "absent"; text that is present but empty has a
 * non-NULL `ptr`. When the library fills one in, the text belongs to the library and lives
 * as long as the call that produced it says (for events: until the next call that takes the
 * connection handle non-`const`). When you pass one in, it is read during the call only.
 */
typedef struct mcpw_str {
    /**
     * The first byte, or NULL when absent.
     */
    const char *ptr;
    /**
     * The number of bytes.
     */
    size_t len;
} mcpw_str;

/**
 * A JSON-RPC request id of the peer's: an integer or a string, which are never equal to each
 * other (`7` is not `"7"`).
 *
 * A string id is given in its wire form: the exact bytes between the quotes, escapes and
 * all. Pass it back unchanged to answer the request; an id you build yourself must be valid
 * JSON string text (no raw `"`, `\` only as an escape, no control characters).
 */
typedef struct mcpw_id {
    /**
     * One of `mcpw_id_kind` (kept as a plain integer because C writes it).
     */
    uint32_t kind;
    /**
     * The id when `kind` is `MCPW_ID_INT` (not read otherwise: it may be left unset).
     */
    int64_t integer;
    /**
     * The id when `kind` is `MCPW_ID_STRING` (not read otherwise: it may be left unset).
     */
    struct mcpw_str string;
} mcpw_id;

/**
 * One JSON-RPC message decoded by `mcpw_decode`, or why it was refused.
 *
 * `kind` says which fields mean something; the others are zero, absent or `MCPW_ID_NONE`.
 * Every non-empty view points into the frame given to `mcpw_decode` and lives as long as that
 * frame does (an empty one, such as the method `""`, points to a static empty string). `method` and `message` are the wire text between the quotes: when the matching
 * `*_escaped` flag is set it still holds JSON escapes (`\"`, `\u00e9`), which a host that
 * compares method names should treat as no match or decode first.
 */
typedef struct mcpw_message {
    /**
     * One of `mcpw_message_kind` (a plain integer, so that a kind added later is not
     * undefined behaviour in C).
     */
    uint32_t kind;
    /**
     * The id of a request or response, or the readable id of an invalid message.
     */
    struct mcpw_id id;
    /**
     * The method of a request or notification, wire text.
     */
    struct mcpw_str method;
    /**
     * Whether `method` holds escapes.
     */
    bool method_escaped;
    /**
     * The params object, raw JSON text, or absent.
     */
    struct mcpw_str params;
    /**
     * The result, raw JSON text.
     */
    struct mcpw_str result;
    /**
     * The error code of an error response; -32700 or -32600 for a refused message.
     */
    int64_t code;
    /**
     * The error message of an error response, wire text.
     */
    struct mcpw_str message;
    /**
     * Whether `message` holds escapes.
     */
    bool message_escaped;
    /**
     * The error data, raw JSON text, or absent.
     */
    struct mcpw_str data;
    /**
     * Why a message was refused (`MCPW_DECODE_NONE` otherwise).
     */
    enum mcpw_decode_reason reason;
    /**
     * Where in the frame the refusal was found, in bytes.
     */
    size_t offset;
} mcpw_message;

/**
 * Resource bounds, for `mcpw_config_get_limits` / `mcpw_config_set_limits`. Every field must
 * be at least 1. Read the defaults with `mcpw_config_get_limits`, change what you need, and
 * set them back.
 */
typedef struct mcpw_limits {
    /**
     * The largest frame accepted, in bytes. Default 16 MiB.
     */
    size_t max_frame;
    /**
     * Our requests awaiting an answer at once; more are refused with
     * `MCPW_ERR_TOO_MANY_IN_FLIGHT`. Default 1024.
     */
    size_t max_outbound_in_flight;
    /**
     * The peer's requests held unanswered at once; more get a JSON-RPC error. Default 256.
     */
    size_t max_inbound_in_flight;
    /**
     * Bytes of output waiting for the transport; past it commands fail with
     * `MCPW_ERR_OUTPUT_FULL`. Default 16 MiB.
     */
    size_t max_buffered_output;
    /**
     * How many cancelled or timed-out ids are remembered. Default 1024.
     */
    size_t max_remembered_ids;
    /**
     * Events waiting for `mcpw_conn_poll_event`; past it, or once the waiting events hold
     * more bytes of frames than `max_buffered_output` (or `max_frame`, if larger), the peer's
     * further notifications are dropped (and counted). Default 4096.
     */
    size_t max_queued_events;
} mcpw_limits;

/**
 * One thing that happened, filled in by `mcpw_conn_poll_event`.
 *
 * `kind` says which fields mean something (see `mcpw_event_kind`); the others are zero,
 * NULL or `*_NONE`. Every view (`mcpw_str`, and the string of `id`) points into memory owned
 * by the connection handle and stays valid until the next call that takes that handle
 * non-`const` (another poll, an input, a command, `mcpw_conn_consume`, `mcpw_conn_free`);
 * copy what you need to keep. Passing a view straight back into a call on the same handle
 * (answering a request with its `id`, say) is fine: the call copies it before the view dies.
 */
typedef struct mcpw_event {
    /**
     * What happened.
     */
    enum mcpw_event_kind kind;
    /**
     * Our request this is about (the id `mcpw_conn_request` returned).
     */
    int64_t request;
    /**
     * The peer's request id (`MCPW_ID_NONE` when there is none).
     */
    struct mcpw_id id;
    /**
     * The method, decoded text.
     */
    struct mcpw_str method;
    /**
     * The params object, raw JSON text.
     */
    struct mcpw_str params;
    /**
     * The result, raw JSON text.
     */
    struct mcpw_str result;
    /**
     * The JSON-RPC error code of an error answer, or the code that rejected `initialize`.
     */
    int64_t code;
    /**
     * The error or progress message, decoded text.
     */
    struct mcpw_str message;
    /**
     * The error data, raw JSON text.
     */
    struct mcpw_str data;
    /**
     * The peer's reason for cancelling, decoded text.
     */
    struct mcpw_str reason;
    /**
     * Progress so far.
     */
    double progress;
    /**
     * The total, when `has_total`.
     */
    double total;
    /**
     * Whether `total` is known.
     */
    bool has_total;
    /**
     * A protocol version: the negotiated one (`MCPW_EVENT_READY`) or the one the server
     * chose and we do not speak (`MCPW_CLOSE_UNSUPPORTED_VERSION`). On other
     * `MCPW_EVENT_CLOSED` reasons, the text that reason names (a refusal's message, a
     * transport failure in words).
     */
    struct mcpw_str version;
    /**
     * Why the connection ended (`MCPW_EVENT_CLOSED`).
     */
    enum mcpw_close_reason close_reason;
    /**
     * What rule the peer broke (`MCPW_EVENT_VIOLATION`).
     */
    enum mcpw_violation violation;
    /**
     * What was wrong with the frame, for parse and invalid-message violations.
     */
    enum mcpw_decode_reason decode_reason;
    /**
     * The `inputRequests` object of `MCPW_EVENT_INPUT_REQUIRED`, raw JSON text.
     */
    struct mcpw_str input_requests;
    /**
     * The opaque `requestState` of `MCPW_EVENT_INPUT_REQUIRED`, decoded text.
     */
    struct mcpw_str request_state;
} mcpw_event;

/**
 * Per-request options for `mcpw_conn_request`. All zeroes (or passing NULL) means the
 * defaults.
 */
typedef struct mcpw_request_options {
    /**
     * The timeout in milliseconds; 0 uses the config's request timeout, except for
     * `subscriptions/listen`, which then has none: its stream lasts until it is cancelled or
     * the connection closes.
     */
    uint64_t timeout_ms;
    /**
     * 1 to ask for progress: the engine adds `_meta.progressToken` (the request's id) to
     * the params and reports progress as `MCPW_EVENT_PROGRESS`; 0 not to.
     */
    uint32_t progress;
    /**
     * One of `mcpw_progress_reset`.
     */
    uint32_t reset_on_progress;
} mcpw_request_options;

/**
 * One item of a `subscriptions/listen` request, as `mcpw_conn_listen_items` lists it.
 */
typedef struct mcpw_listen_item {
    /**
     * One of `mcpw_listen_item_kind` (a plain integer, as in `mcpw_id`).
     */
    uint32_t kind;
    /**
     * The resource URI or task id, decoded UTF-8 (not NUL-terminated); absent for the list
     * changes. A view into the connection, valid until the next call that changes it.
     */
    struct mcpw_str text;
} mcpw_listen_item;

/**
 * What a 2026-07-28 request declared about itself in `_meta` (`mcpw_conn_request_context`).
 */
typedef struct mcpw_request_context {
    /**
     * False for an unknown id or a handshake-era request (every other field is then empty).
     */
    bool known;
    /**
     * The request's protocol version (a static string).
     */
    struct mcpw_str version;
    /**
     * The client capabilities the request declared, for this request only: `MCPW_CAP_*`
     * flags.
     */
    uint32_t client_capabilities;
    /**
     * Whether the request asked for log messages (`logLevel`).
     */
    bool has_log_level;
    /**
     * The least severe level it wants, one of `mcpw_log_level`.
     */
    uint32_t log_level;
} mcpw_request_context;

/**
 * Counters of what the engine dropped quietly, as the spec asks (`mcpw_conn_stats`).
 */
typedef struct mcpw_stats {
    /**
     * Responses to our requests that arrived after a timeout or cancel.
     */
    uint64_t late_responses;
    /**
     * Progress notifications for unknown or finished requests.
     */
    uint64_t dropped_progress;
    /**
     * Progress notifications whose value did not increase.
     */
    uint64_t non_increasing_progress;
    /**
     * Cancellations for requests not in flight.
     */
    uint64_t ignored_cancellations;
    /**
     * Answers not sent: to requests the peer had cancelled, and (HTTP client) answers a
     * server asking faster than it takes them left waiting past 1,024.
     */
    uint64_t suppressed_responses;
    /**
     * Peer notifications dropped because the event queue was full.
     */
    uint64_t dropped_events;
} mcpw_stats;

/**
 * Where `replay` hands each stored event back: call it with the event's bytes, in order.
 */
typedef void (*mcpw_replay_sink)(void *sink_ctx,
                                 const uint8_t *bytes,
                                 size_t len);

/**
 * An event store of the host's own (shared by several server processes, say), as three
 * callbacks with one `user` pointer. The server calls them during its own calls only, from
 * the thread making that call, `mcpw_http_server_free` included (it forgets the sessions
 * still live): keep `user` valid until the server is freed. Set every member (`user` NULL
 * when unused; a member left unset is read all the same). The server is in the middle of a
 * change while they run: a call they make to any function that takes a handle (the server,
 * a view it lent, any other) returns `MCPW_ERR_REENTRANT` and does nothing (a free leaves
 * the handle be). They must return normally: a C++ exception or a `longjmp` out of one is
 * undefined behaviour. The guarantees a store must give (order, durability before
 * delivery, bounds, cleanup) are those of the Rust `mcpwire::http::EventStore` trait:
 * `replay` hands out, in increasing number, every stored event of `stream` in `session`
 * numbered above `after`, byte for byte as appended.
 */
typedef struct mcpw_event_store {
    /**
     * Passed to every callback.
     */
    void *user;
    /**
     * Stores one SSE event (`bytes`, complete with its `id:` line), numbered `event`, of
     * `session`'s `stream`. Return only once it is stored. The views die after the call.
     */
    void (*append)(void *user,
                   const char *session,
                   size_t session_len,
                   uint64_t stream,
                   uint64_t event,
                   const uint8_t *bytes,
                   size_t len);
    /**
     * Calls `sink(sink_ctx, bytes, len)` for each stored event of `session`'s `stream`
     * numbered above `after`, in order, before it returns; then returns 0. Returns nonzero
     * when the store could not be read (it timed out, or cannot be reached): the client
     * then gets 503 with `Retry-After` and comes back, where an empty replay would end its
     * resumed stream without the answer stored for it (events given to `sink` before a
     * nonzero return are dropped). An event given to `sink` as NULL with a nonzero length
     * fails the replay the same way.
     */
    int (*replay)(void *user,
                  const char *session,
                  size_t session_len,
                  uint64_t stream,
                  uint64_t after,
                  mcpw_replay_sink sink,
                  void *sink_ctx);
    /**
     * Drops everything stored for `session` (it ended, expired or was evicted, or the
     * server is being freed with it: `mcpw_http_server_free` calls this for each live one).
     */
    void (*forget)(void *user,
                   const char *session,
                   size_t session_len);
} mcpw_event_store;

/**
 * Settings for `mcpw_http_server_new`. Zero-initialize it, set `random`, and change what you
 * need: every zero or NULL field means its default.
 */
typedef struct mcpw_http_server_options {
    /**
     * Required: fills `len` bytes at `buf` from a cryptographically secure source
     * (`getrandom(2)`, say); session ids are drawn from it. Called during server calls only,
     * in the middle of a change: a call it makes to a function that takes a handle returns
     * `MCPW_ERR_REENTRANT`, as from the event store's callbacks.
     */
    void (*random)(void *user,
                   uint8_t *buf,
                   size_t len);
    /**
     * Passed to `random`.
     */
    void *random_user;
    /**
     * The MCP endpoint's path (`"/mcp"`, say): a request to another path gets 404. NULL:
     * the path is not checked (route before calling, then).
     */
    struct mcpw_str endpoint;
    /**
     * Host names (with or without a port) accepted besides loopback in `Host` and in the
     * authority of `Origin` (DNS rebinding protection); anything else gets 403. NULL with 0:
     * loopback names only (`localhost`, 127.0.0.0/8, `[::1]`, `::1`); a request without
     * `Host` or `Origin`, or with `Origin: null`, passes either way. Copied by the call.
     */
    const struct mcpw_str *allowed_hosts;
    /**
     * How many entries `allowed_hosts` has.
     */
    size_t allowed_hosts_len;
    /**
     * How long a session may sit idle before it expires. 0: 10 minutes.
     */
    uint64_t session_idle_timeout_ms;
    /**
     * Sessions alive at once (the least recently used idle one is evicted beyond). 0: 1024.
     */
    size_t max_sessions;
    /**
     * The largest POST body accepted (413 beyond); stop reading there too. 0: 4 MiB.
     */
    size_t max_body;
    /**
     * Events each session keeps for resumption in the built-in store. 0: 256.
     */
    size_t event_store;
    /**
     * The `retry` (ms) sent to 2025-11-25 clients before they resume a stream. 0: 1000.
     */
    uint64_t retry_ms;
    /**
     * The server's tools (a `tools/list` result or its `tools` array, JSON text), so that
     * 2026-07-28 `tools/call` requests are checked against their `x-mcp-header`
     * annotations. Text that is not JSON is `MCPW_ERR_INVALID_JSON` (or
     * `MCPW_ERR_INVALID_UTF8`), JSON without such an array `MCPW_ERR_JSON_WRONG_TYPE`, and a
     * tool whose annotations are invalid (clients drop such a tool: fix its schema)
     * `MCPW_ERR_CONFIG_REFUSED`. NULL: none declared.
     */
    struct mcpw_str tools;
    /**
     * A store of the host's own for resumable events (copied; every callback required, else
     * `MCPW_ERR_NULL_ARGUMENT`). NULL: in this process's memory.
     */
    const struct mcpw_event_store *events;
    /**
     * Bytes of events each session keeps for resumption in the built-in store, and bytes of
     * messages waiting for a session's GET stream while none is open: the oldest go (the
     * newest always stays). Lower it to bound memory per session. 0: 4 MiB.
     */
    size_t event_store_bytes;
    /**
     * How often every open SSE stream with nothing waiting gets an SSE comment line, so that
     * proxies and idle timeouts do not cut a quiet stream: the stream is woken
     * (`mcpw_http_server_poll_woken`) with the comment to write. 0: 15 s; `UINT64_MAX`:
     * never.
     */
    uint64_t keepalive_ms;
} mcpw_http_server_options;

/**
 * One HTTP header, name and value, as pointer + length pairs (not NUL-terminated). Used for
 * the headers the host passes in (read during the call only) and the headers the library
 * lends out (valid until the next call that takes the lending handle non-`const`).
 */
typedef struct mcpw_http_header {
    /**
     * The header's name; compared ignoring ASCII case.
     */
    struct mcpw_str name;
    /**
     * The header's value.
     */
    struct mcpw_str value;
} mcpw_http_header;

/**
 * The answer to one HTTP request, lent by `mcpw_http_server_handle_request` and
 * `mcpw_http_server_settle`; its views stay valid until the next call that takes the server
 * non-`const`, so copy the headers into your HTTP library's response first.
 */
typedef struct mcpw_http_response {
    /**
     * The status code.
     */
    uint16_t status;
    /**
     * The headers to send (content type included).
     */
    const struct mcpw_http_header *headers;
    /**
     * How many headers.
     */
    size_t headers_len;
    /**
     * The complete body (NULL with length 0 for none); meaningless when `has_stream`.
     */
    const uint8_t *body;
    /**
     * The body's length.
     */
    size_t body_len;
    /**
     * The body is an SSE stream: settle the response, then drain `stream` with
     * `mcpw_http_server_poll_stream`.
     */
    bool has_stream;
    /**
     * The stream, when `has_stream`.
     */
    uint64_t stream;
} mcpw_http_response;

/**
 * Settings for `mcpw_http_client_new`; zero-initialize it (or pass NULL) for the defaults.
 */
typedef struct mcpw_http_client_options {
    /**
     * The first delay before resuming a broken stream when the server sent no `retry`.
     * 0: 500 ms.
     */
    uint64_t initial_delay_ms;
    /**
     * The longest resumption delay (each attempt doubles the last). 0: 30 s.
     */
    uint64_t max_delay_ms;
    /**
     * Resumptions tried per stream before its requests fail. 0: 5. The session's GET
     * stream, which carries no request, is then still opened again once per longest delay
     * while the session lasts.
     */
    uint32_t max_attempts;
    /**
     * Open the session's standalone GET stream once a handshake-era session is ready, for
     * server messages that belong to no request.
     */
    bool open_get_stream;
} mcpw_http_client_options;

/**
 * One action for the host; the views are valid until the next non-`const` call on the
 * client, so hand them to your HTTP library (which copies them) at once.
 */
typedef struct mcpw_http_action {
    /**
     * What to do.
     */
    enum mcpw_http_action_kind kind;
    /**
     * The exchange the outcome is reported for.
     */
    uint64_t exchange;
    /**
     * `POST`, `GET` or `DELETE` (SEND only).
     */
    struct mcpw_str method;
    /**
     * Every header to send (SEND only).
     */
    const struct mcpw_http_header *headers;
    /**
     * How many headers.
     */
    size_t headers_len;
    /**
     * The body (SEND only; NULL with length 0 for none).
     */
    const uint8_t *body;
    /**
     * The body's length.
     */
    size_t body_len;
} mcpw_http_action;

/**
 * The bounds and timing of a task table, for `mcpw_tasks_new`. Start from
 * `mcpw_task_config_default()` and change what you need.
 */
typedef struct mcpw_task_config {
    /**
     * Tasks kept at once. At the cap, creating a task drops the oldest terminal one whose end a
     * client was given (2026-07-28: its `tasks/get` of the ended task; 2025-11-25: its
     * `tasks/result` or `tasks/cancel`), or that was cancelled; with none, `mcpw_tasks_create`
     * fails with `MCPW_ERR_TASKS_FULL`: a completed or failed task nobody fetched stays for its
     * whole TTL (with `ttl_ms` 0, any terminal task may make room). At least 1; default 1024.
     */
    size_t max_tasks;
    /**
     * How long a task lives from its creation, in milliseconds (the `ttlMs` clients see);
     * 0 for no limit (then only `max_tasks` bounds the table). Default one hour. Above
     * 2^53 - 1 (the largest integer JSON readers keep exact) it is taken as 2^53 - 1.
     */
    uint64_t ttl_ms;
    /**
     * The polling interval suggested to clients (`pollIntervalMs`), in milliseconds. At
     * least 1; default 1000. Above 2^53 - 1 it is taken as 2^53 - 1.
     */
    uint64_t poll_interval_ms;
    /**
     * Input requests a task may have outstanding at once (`mcpw_tasks_ask`). At least 1;
     * default 16.
     */
    size_t max_input_requests;
    /**
     * The largest result, error or input request a task keeps, in bytes of JSON. At least
     * 1; default 1 MiB.
     */
    size_t max_payload;
    /**
     * Tasks one requestor (the `owner` of `mcpw_tasks_create_legacy`) may hold at once,
     * terminal ones included, so that one session cannot take every slot of `max_tasks`. At
     * the cap, creating a task for that owner drops its oldest terminal task that may go (as
     * for `max_tasks`); with none, the call fails with `MCPW_ERR_TASKS_FULL` for that owner
     * only.
     * 2026-07-28 tasks (`mcpw_tasks_create`) have no owner: only `max_tasks` bounds them. At
     * least 1; default 256.
     */
    size_t max_tasks_per_owner;
} mcpw_task_config;

/**
 * What the client did to a task, filled in by `mcpw_tasks_poll_event`.
 *
 * `kind` says which fields mean something; the others are absent views (NULL). Every view
 * points into memory owned by the task table and stays valid until the next call that takes
 * the table non-`const`; copy what you need to keep. Passing `task` straight back into a
 * call on the table (`mcpw_tasks_complete`, say) is fine.
 */
typedef struct mcpw_task_event {
    /**
     * What happened.
     */
    enum mcpw_task_event_kind kind;
    /**
     * The task's id (every kind but `MCPW_TASK_EVENT_NONE`).
     */
    struct mcpw_str task;
    /**
     * The input request's key, as given to `mcpw_tasks_ask` (`MCPW_TASK_EVENT_INPUT`).
     */
    struct mcpw_str key;
    /**
     * The client's answer, raw JSON text (`MCPW_TASK_EVENT_INPUT`).
     */
    struct mcpw_str response;
} mcpw_task_event;

/**
 * A 2025-11-25 `tasks/result` request that can be answered now (its task ended or
 * expired), filled in by `mcpw_tasks_poll_result`.
 *
 * When `ready` is false every other field is empty. The views point into memory owned by the
 * task table and stay valid until the next call that takes the table non-`const`. Answer the
 * request with `mcpw_tasks_write_result` on the connection of `owner`, or yourself from the
 * fields (`mcpw_conn_respond` with `result`, or `mcpw_conn_respond_error` with `code`,
 * `message` and `data`).
 */
typedef struct mcpw_task_result {
    /**
     * Whether there was a result to answer; false when the queue is empty (stop polling).
     */
    bool ready;
    /**
     * Whose task it was: the `owner` given to `mcpw_tasks_create_legacy` (pick the
     * connection or session to answer on by it).
     */
    uint64_t owner;
    /**
     * The waiting `tasks/result` request's id.
     */
    struct mcpw_id id;
    /**
     * Whether the answer is a JSON-RPC error (`code`, `message`, `data`) rather than
     * `result`.
     */
    bool is_error;
    /**
     * The result, raw JSON text: what the task's request would have returned, with the
     * related-task `_meta` (when not `is_error`).
     */
    struct mcpw_str result;
    /**
     * The error code (when `is_error`).
     */
    int64_t code;
    /**
     * The error message, text (when `is_error`).
     */
    struct mcpw_str message;
    /**
     * The error data, raw JSON text, or absent (when `is_error`).
     */
    struct mcpw_str data;
} mcpw_task_result;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/**
 * The library's version (`"0.1.0"`), as a static NUL-terminated string that lives as long as
 * the program. Compare it with `MCPWIRE_VERSION` to check that the header matches the
 * library linked.
 */
const char *mcpw_version(void);

/**
 * Decodes one frame (a line of stdio without its newline, or an HTTP body) with the same
 * rules a connection applies, without a connection: use it to route or inspect messages
 * (a proxy that picks a backend by method, a log that records ids) where `mcpw_conn_*` would
 * also run the protocol.
 *
 * Writes the frame's messages to `out_messages[0 .. min(count, capacity)]` and their number
 * to `*out_count`: 1 for a single message, the number of members for a batch (then
 * `*out_is_batch` is true). When the count is larger than `capacity`, only the first
 * `capacity` were written: call again with room for all (a batch is rare; most hosts pass
 * room for one, or a few). A batch has at most 1024 members: a longer one is refused whole
 * (`MCPW_DECODE_BATCH_TOO_LARGE`).
 * A frame that is refused as a whole is one message of kind `MCPW_MESSAGE_PARSE_ERROR`,
 * `MCPW_MESSAGE_INVALID`, `MCPW_MESSAGE_INVALID_RESPONSE` or
 * `MCPW_MESSAGE_INVALID_NOTIFICATION`; a batch member that is invalid is one of those last
 * three kinds among the others (answer the first of them, never the other two). Either way the call returns `MCPW_OK`: a refusal
 * is an answer, not a failure of the call. Non-empty views point into `frame`.
 *
 * Fails with `MCPW_ERR_NULL_ARGUMENT`, writing nothing, when `out_count` or `out_is_batch`
 * is NULL, or `out_messages` is NULL with a non-zero `capacity`, or `frame` is NULL with a
 * non-zero `len`.
 *
 * # Safety
 * `frame` points to `len` readable bytes (or is NULL with `len` 0) that stay unchanged while
 * the views are used; `out_messages` points to `capacity` writable `mcpw_message` (or is
 * NULL with `capacity` 0); `out_count` and `out_is_batch` are writable.
 */
enum mcpw_result mcpw_decode(const uint8_t *frame,
                             size_t len,
                             struct mcpw_message *out_messages,
                             size_t capacity,
                             size_t *out_count,
                             bool *out_is_batch);

/**
 * Creates a config for a client or a server named `name`, version `version` (the
 * `clientInfo` / `serverInfo` it sends), with no capabilities, a 60 s request timeout, a
 * 10 min maximum total timeout, the default limits and `MCPW_POLICY_DEFAULT`. It speaks every
 * protocol version of both eras: a server answers `initialize` and `server/discover` alike,
 * and a client probes with `server/discover` and falls back to `initialize`
 * (`MCPW_CLIENT_ERA_AUTO`); `mcpw_config_set_versions` narrows that.
 *
 * `role` is `MCPW_ROLE_CLIENT` or `MCPW_ROLE_SERVER`. `name` and `version` are UTF-8, read
 * during the call only. On success `*out_config` receives a new handle that the caller owns
 * and must free exactly once with `mcpw_config_free`.
 *
 * # Safety
 * `name` and `version` point to their lengths in readable bytes (or are NULL with length 0);
 * `out_config` is NULL or writable.
 */
enum mcpw_result mcpw_config_new(uint32_t role,
                                 const char *name,
                                 size_t name_len,
                                 const char *version,
                                 size_t version_len,
                                 struct mcpw_config **out_config);

/**
 * Frees a config, exactly once. NULL does nothing. Connections made from it are unaffected.
 *
 * # Safety
 * `config` is NULL or a handle from `mcpw_config_new` not freed before.
 */
void mcpw_config_free(struct mcpw_config *config);

/**
 * Sets the protocol versions spoken, as wire strings (`"2025-06-18"`, `"2026-07-28"`), in
 * any order. Only handshake-era versions make a legacy-only endpoint, only `"2026-07-28"` a
 * stateless one. A client's `initialize` offers the newest handshake-era version listed; a
 * server accepts any listed version and otherwise answers with its newest. `count` may be 0 (with `versions` NULL), which `mcpw_conn_new` then refuses with
 * `MCPW_ERR_CONFIG_REFUSED`. All or nothing: on error the config is unchanged. The strings
 * are read during the call only.
 *
 * # Safety
 * `config` is NULL or a live config handle; `versions` points to `count` readable `mcpw_str`
 * (or is NULL with count 0), each pointing to its length in readable bytes.
 */
enum mcpw_result mcpw_config_set_versions(struct mcpw_config *config,
                                          const struct mcpw_str *versions,
                                          size_t count);

/**
 * Replaces the whole `clientInfo` / `serverInfo` object (to add `title`, `icons`, ...): a JSON
 * object with string `name` and `version` (else `MCPW_ERR_JSON_WRONG_TYPE`), UTF-8, read
 * during the call only.
 *
 * # Safety
 * `config` is NULL or a live config handle; `json_text` points to `json_len` readable bytes (or
 * is NULL with length 0).
 */
enum mcpw_result mcpw_config_set_info(struct mcpw_config *config,
                                      const char *json_text,
                                      size_t json_len);

/**
 * Sets our capabilities from a JSON object (`{"tools":{},"resources":{"subscribe":true}}`),
 * read during the call only. Each capability the specification defines must be an object,
 * and its members of the schema's types (`"tools":true` or `"listChanged":"yes"` is
 * `MCPW_ERR_JSON_WRONG_TYPE`). The engine answers the peer's requests for anything not
 * declared with -32601, and refuses to send notifications that need an undeclared one.
 *
 * # Safety
 * `config` is NULL or a live config handle; `json_text` points to `json_len` readable bytes (or
 * is NULL with length 0).
 */
enum mcpw_result mcpw_config_set_capabilities(struct mcpw_config *config,
                                              const char *json_text,
                                              size_t json_len);

/**
 * Server: sets the `instructions` sent in the initialize result (UTF-8, read during the call
 * only). NULL (with length 0) removes them.
 *
 * # Safety
 * `config` is NULL or a live config handle; `text` points to `text_len` readable bytes (or
 * is NULL with length 0).
 */
enum mcpw_result mcpw_config_set_instructions(struct mcpw_config *config,
                                              const char *text,
                                              size_t text_len);

/**
 * Sets how long each request waits for its answer unless it says otherwise
 * (`request_timeout_ms`, default 60 000) and the longest a request may run when progress
 * keeps resetting its timeout (`max_total_timeout_ms`, default 600 000). Both must be at
 * least 1.
 *
 * # Safety
 * `config` is NULL or a live config handle.
 */
enum mcpw_result mcpw_config_set_timeouts(struct mcpw_config *config,
                                          uint64_t request_timeout_ms,
                                          uint64_t max_total_timeout_ms);

/**
 * Reads the config's limits into `*out_limits`.
 *
 * # Safety
 * `config` is NULL or a live config handle; `out_limits` is NULL or writable.
 */
enum mcpw_result mcpw_config_get_limits(const struct mcpw_config *config,
                                        struct mcpw_limits *out_limits);

/**
 * Sets every limit from `*limits` (read during the call only). Every field must be at
 * least 1; on error the config is unchanged.
 *
 * # Safety
 * `config` is NULL or a live config handle; `limits` is NULL or readable.
 */
enum mcpw_result mcpw_config_set_limits(struct mcpw_config *config,
                                        const struct mcpw_limits *limits);

/**
 * Reads the policy flags (`MCPW_POLICY_*`) into `*out_flags`: to change one flag with
 * `mcpw_config_set_policy` and keep the others.
 *
 * # Safety
 * `config` is NULL or a live config handle; `out_flags` is NULL or writable.
 */
enum mcpw_result mcpw_config_get_policy(const struct mcpw_config *config,
                                        uint32_t *out_flags);

/**
 * Sets the policy flags: any combination of `MCPW_POLICY_*` (start from
 * `MCPW_POLICY_DEFAULT`). Unknown bits are refused with `MCPW_ERR_INVALID_ARGUMENT`.
 *
 * # Safety
 * `config` is NULL or a live config handle.
 */
enum mcpw_result mcpw_config_set_policy(struct mcpw_config *config,
                                        uint32_t flags);

/**
 * Client: sets how the protocol era is chosen, one of `mcpw_client_era` (default
 * `MCPW_CLIENT_ERA_AUTO`). Ignored when the versions hold only one era.
 *
 * # Safety
 * `config` is NULL or a live config handle.
 */
enum mcpw_result mcpw_config_set_client_era(struct mcpw_config *config,
                                            uint32_t era);

/**
 * Client: sets how long the `server/discover` probe may take before `MCPW_CLIENT_ERA_AUTO`
 * falls back to `initialize` (default 5000 ms; at least 1).
 *
 * # Safety
 * `config` is NULL or a live config handle.
 */
enum mcpw_result mcpw_config_set_discover_timeout(struct mcpw_config *config,
                                                  uint64_t timeout_ms);

/**
 * Server, 2026-07-28: sets the `ttlMs` of `server/discover` results and of cacheable results
 * (lists, `resources/read`) that do not set their own (`ttl_ms`, default 0: do not cache),
 * and the `cacheScope` that goes with it, one of `mcpw_cache_scope` (default
 * `MCPW_CACHE_PRIVATE`).
 *
 * # Safety
 * `config` is NULL or a live config handle.
 */
enum mcpw_result mcpw_config_set_discover_cache(struct mcpw_config *config,
                                                uint64_t ttl_ms,
                                                uint32_t scope);

/**
 * Creates a connection from `config` (copied: the config may be freed or changed
 * afterwards). `now_ns` is the current time on your monotonic clock, in nanoseconds; every
 * later timestamp must be on the same clock. A client queues its first request at once
 * (`server/discover` or `initialize`, by era): drain `mcpw_conn_transmit` next.
 *
 * On success `*out_conn` receives a new handle that the caller owns and must free exactly
 * once with `mcpw_conn_free`. Returns `MCPW_ERR_CONFIG_REFUSED` when the config has no
 * protocol versions.
 *
 * # Safety
 * `config` is NULL or a live config handle; `out_conn` is NULL or writable.
 */
enum mcpw_result mcpw_conn_new(const struct mcpw_config *config,
                               uint64_t now_ns,
                               struct mcpw_conn **out_conn);

/**
 * Frees a connection, exactly once, with everything it lent (event views, transmit bytes).
 * NULL does nothing. It does not close anything: it owns no transport.
 *
 * # Safety
 * `conn` is NULL or a handle from `mcpw_conn_new` not freed before.
 */
void mcpw_conn_free(struct mcpw_conn *conn);

/**
 * Feeds bytes read from the transport (stdio, a socket), in any chunking, with the time
 * they arrived. Consumes all of them and keeps no pointer into them (an incomplete last line
 * is copied, up to the frame cap). Then drain events, transmit and the timeout.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `bytes` points to `len` readable bytes (or is
 * NULL with length 0) that are not memory this handle lent.
 */
enum mcpw_result mcpw_conn_handle_input(struct mcpw_conn *conn,
                                        uint64_t now_ns,
                                        const uint8_t *bytes,
                                        size_t len);

/**
 * Feeds one whole message from a message-oriented transport (an HTTP body), tagged with
 * `stream`, the stream that answers to it must go to (`mcpw_conn_transmit` reports it).
 * The bytes are one frame, without a trailing newline, and are not kept.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `frame` points to `len` readable bytes (or is
 * NULL with length 0) that are not memory this handle lent.
 */
enum mcpw_result mcpw_conn_handle_frame(struct mcpw_conn *conn,
                                        uint64_t now_ns,
                                        uint64_t stream,
                                        const uint8_t *frame,
                                        size_t len);

/**
 * The transport reached end of input: a last unterminated line is processed, our requests in
 * flight are abandoned, and the connection closes (`MCPW_EVENT_CLOSED`).
 *
 * # Safety
 * `conn` is NULL or a live connection handle.
 */
enum mcpw_result mcpw_conn_handle_eof(struct mcpw_conn *conn,
                                      uint64_t now_ns);

/**
 * Fires every timer due at `now_ns`: request timeouts and the end of a graceful close.
 * Calling it early does nothing. A view lent by an HTTP server or client refuses it
 * (`MCPW_ERR_NOT_OWNER`): its lender's `handle_timeout` fires its timers, with the
 * lender's own (resumptions, sessions' idle time).
 *
 * # Safety
 * `conn` is NULL or a live connection handle.
 */
enum mcpw_result mcpw_conn_handle_timeout(struct mcpw_conn *conn,
                                          uint64_t now_ns);

/**
 * Takes the next event into `*out_event`. When there is none, returns `MCPW_OK` with
 * `kind == MCPW_EVENT_NONE`. Call it until then after every input and command.
 *
 * The event's views point into this handle and stay valid until the next call that takes
 * the handle non-`const` (including the next `mcpw_conn_poll_event`). They may be passed
 * straight back into a command on this handle.
 *
 * A view lent by an HTTP server or client gets its events from its lender
 * (`mcpw_http_server_poll_event`, `mcpw_http_client_poll_event`): this call refuses it with
 * `MCPW_ERR_NOT_OWNER` (`MCPW_ERR_STALE_VIEW` once stale).
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `out_event` is NULL or writable.
 */
enum mcpw_result mcpw_conn_poll_event(struct mcpw_conn *conn,
                                      struct mcpw_event *out_event);

/**
 * Lends the next bytes to write to the transport: `*out_len` bytes at `*out_bytes`, for the
 * stream `*out_stream` (0 for stdio and other byte streams). When nothing is pending,
 * returns `MCPW_OK` with `*out_bytes == NULL` and `*out_len == 0`.
 *
 * The bytes belong to the handle and stay valid until the next call that takes it
 * non-`const`. Write what the transport takes, then report it with `mcpw_conn_consume`, and
 * ask again.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; each `out_*` is NULL or writable.
 */
enum mcpw_result mcpw_conn_transmit(const struct mcpw_conn *conn,
                                    const uint8_t **out_bytes,
                                    size_t *out_len,
                                    uint64_t *out_stream);

/**
 * Reports that the first `n` bytes lent by `mcpw_conn_transmit` were written (a partial
 * write is fine; 0 is allowed). More than was lent is refused with
 * `MCPW_ERR_CONSUME_TOO_MUCH`, consuming nothing.
 *
 * # Safety
 * `conn` is NULL or a live connection handle.
 */
enum mcpw_result mcpw_conn_consume(struct mcpw_conn *conn,
                                   size_t n);

/**
 * Reads the earliest deadline at which `mcpw_conn_handle_timeout` has work: `*out_has` is
 * true and `*out_deadline_ns` holds it (on the clock of `now_ns`), or `*out_has` is false
 * and `*out_deadline_ns` is 0 when no timer is armed. It changes after inputs and commands;
 * re-arm your timer from it every time round the loop. A view lent by an HTTP server or
 * client refuses it (`MCPW_ERR_NOT_OWNER`): arm the timer from its lender's `poll_timeout`.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; each `out_*` is NULL or writable.
 */
enum mcpw_result mcpw_conn_poll_timeout(const struct mcpw_conn *conn,
                                        bool *out_has,
                                        uint64_t *out_deadline_ns);

/**
 * Sends a request: `method` (UTF-8) with `params` (a JSON object as text, or NULL for none),
 * and `options` (NULL for the defaults). On success `*out_request_id` receives its id, which
 * the answer's event carries in `request`. Inputs are read during the call only.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `method` and `params` point to their lengths in
 * readable bytes (or are NULL with length 0); `options` is NULL or readable;
 * `out_request_id` is NULL or writable.
 */
enum mcpw_result mcpw_conn_request(struct mcpw_conn *conn,
                                   uint64_t now_ns,
                                   const char *method,
                                   size_t method_len,
                                   const char *params,
                                   size_t params_len,
                                   const struct mcpw_request_options *options,
                                   int64_t *out_request_id);

/**
 * Sends a request on behalf of the peer's request `*parent`, still in flight (a server asking
 * the client to sample or elicit while a tool runs). It travels on the stream of `parent`
 * (on stdio, that is the only stream). Otherwise as `mcpw_conn_request`; an unknown parent
 * is `MCPW_ERR_UNKNOWN_REQUEST`.
 *
 * # Safety
 * As `mcpw_conn_request`; `parent` is NULL or readable (its string readable for its length).
 */
enum mcpw_result mcpw_conn_request_related(struct mcpw_conn *conn,
                                           uint64_t now_ns,
                                           const struct mcpw_id *parent,
                                           const char *method,
                                           size_t method_len,
                                           const char *params,
                                           size_t params_len,
                                           const struct mcpw_request_options *options,
                                           int64_t *out_request_id);

/**
 * Sends a notification: `method` (UTF-8) with `params` (a JSON object as text, or NULL for
 * none). Inputs are read during the call only.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `method` and `params` point to their lengths in
 * readable bytes (or are NULL with length 0).
 */
enum mcpw_result mcpw_conn_notify(struct mcpw_conn *conn,
                                  const char *method,
                                  size_t method_len,
                                  const char *params,
                                  size_t params_len);

/**
 * Answers the peer's request `*id` with `result`: a JSON object as text, as every MCP result
 * is (any other value gets `MCPW_ERR_INVALID_PARAMS`). Answering a request the peer has
 * cancelled succeeds and sends nothing. Answering a 2026-07-28 `subscriptions/listen`
 * request ends that subscription: its result goes out with the subscription id in `_meta`
 * and nothing else, whatever object `result` holds (the schema's
 * listen result is otherwise empty). In 2026-07-28 it sends complete results only: a
 * `resultType` other than `"complete"` gets `MCPW_ERR_INVALID_PARAMS` (use
 * `mcpw_conn_respond_input_required`, or `mcpw_conn_respond_task` for a task handle), and so
 * do cache hints of your own that are not valid (a `ttlMs` that is not a number `>= 0`, or
 * in a cacheable result such as `tools/list` not an integer `>= 0`; null only outside
 * cacheable results, as a task's `ttlMs`; a `cacheScope` other than `"public"` or
 * `"private"`). Inputs are read during the
 * call only, and may be views from this handle's current event.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
 * for its length); `result` points to `result_len` readable bytes (or is NULL with length 0).
 */
enum mcpw_result mcpw_conn_respond(struct mcpw_conn *conn,
                                   const struct mcpw_id *id,
                                   const char *result,
                                   size_t result_len);

/**
 * Answers the peer's request `*id` with a JSON-RPC error: `code`, `message` (UTF-8) and
 * `data` (any JSON value as text, or NULL for none). Codes that the negotiated version does
 * not define (before one is negotiated: that no configured version defines) are refused
 * with `MCPW_ERR_CODE_NOT_IN_VERSION`, except
 * `MCPW_MCP_RESOURCE_NOT_FOUND`, which is sent as the version's "resource not found" code
 * (-32602 from 2026-07-28 on, which replaced -32002). -32021 and -32022 need the `data` the
 * schema requires (`requiredCapabilities`; `supported` and `requested`), else
 * `MCPW_ERR_INVALID_PARAMS`. Inputs are read during the call only, and may be views from this
 * handle's current event.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
 * for its length); `message` and `data` point to their lengths in readable bytes (or are
 * NULL with length 0).
 */
enum mcpw_result mcpw_conn_respond_error(struct mcpw_conn *conn,
                                         const struct mcpw_id *id,
                                         int64_t code,
                                         const char *message,
                                         size_t message_len,
                                         const char *data,
                                         size_t data_len);

/**
 * Server, 2026-07-28: lists what the `subscriptions/listen` request `*id` asks to hear and we
 * can honour, while it waits for `mcpw_conn_grant_listen`. Such a request comes as
 * `MCPW_EVENT_REQUEST` only when the config has `MCPW_POLICY_REVIEW_LISTENS`: check each item
 * (the tasks extension requires an access check on every task-related request), then grant.
 * The order is fixed: the list changes, then at most 256 resource URIs, then at most 256 task
 * ids.
 *
 * Writes the first `min(count, capacity)` items to `out_items` and their number to
 * `*out_count` (a call with capacity 0 asks for the count). `MCPW_ERR_UNKNOWN_REQUEST` when
 * `*id` is not a listen waiting for its grant; nothing is written unless the call succeeds.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
 * for its length); `out_items` points to `capacity` writable items (or is NULL with
 * `capacity` 0); `out_count` is NULL or writable.
 */
enum mcpw_result mcpw_conn_listen_items(const struct mcpw_conn *conn,
                                        const struct mcpw_id *id,
                                        struct mcpw_listen_item *out_items,
                                        size_t capacity,
                                        size_t *out_count);

/**
 * Server, 2026-07-28: grants the `subscriptions/listen` request `*id` and sends its
 * acknowledgement. `keep` holds one flag per item of `mcpw_conn_listen_items`, in its order
 * (`keep_len` must be that count); the stream carries the items flagged `true`. To refuse the
 * whole listen, answer it with `mcpw_conn_respond_error` instead. Granting a listen the peer
 * has cancelled succeeds and sends nothing.
 *
 * Refused, with nothing sent: `MCPW_ERR_UNKNOWN_REQUEST` when `*id` is not a listen waiting
 * for its grant, `MCPW_ERR_INVALID_ARGUMENT` when `keep_len` is not its number of items,
 * `MCPW_ERR_OUTPUT_FULL` when the output is past its limit, `MCPW_ERR_CLOSED` after
 * `MCPW_EVENT_CLOSED`, `MCPW_ERR_NULL_ARGUMENT` for a NULL `conn`, `id` or `keep` (with a
 * length).
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
 * for its length); `keep` points to `keep_len` readable flags (or is NULL with length 0).
 */
enum mcpw_result mcpw_conn_grant_listen(struct mcpw_conn *conn,
                                        const struct mcpw_id *id,
                                        const bool *keep,
                                        size_t keep_len);

/**
 * Server, 2025-11-25: answers the peer's request `*id` with the error -32042 (URL elicitation
 * required): the user must complete the URL-mode elicitations `elicitations` (a JSON array of
 * objects with `mode` `"url"`, `elicitationId`, `url` and `message`) before the request can
 * succeed. The client gets `MCPW_EVENT_URL_ELICITATION_REQUIRED`; announce each one's end
 * with `mcpw_conn_notify` of `notifications/elicitation/complete`.
 *
 * Refused, with nothing sent: `MCPW_ERR_NOT_IN_VERSION` outside 2025-11-25,
 * `MCPW_ERR_NOT_NEGOTIATED` when the client did not declare `elicitation.url`,
 * `MCPW_ERR_INVALID_PARAMS` for elicitations that are not such an array (an empty one
 * included), `MCPW_ERR_INVALID_JSON` for text that is not JSON. Inputs are read during the
 * call only, and may be views from this handle's current event.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
 * for its length); `elicitations` points to `elicitations_len` readable bytes (or is NULL
 * with length 0).
 */
enum mcpw_result mcpw_conn_respond_url_elicitation_required(struct mcpw_conn *conn,
                                                            const struct mcpw_id *id,
                                                            const char *elicitations,
                                                            size_t elicitations_len);

/**
 * Reports progress on the peer's request `*id`, which must have carried a progress token
 * (else `MCPW_ERR_NO_PROGRESS_TOKEN`): `progress` must be finite and increase with every
 * call, and `total`, sent when `has_total`, be finite (else
 * `MCPW_ERR_NON_INCREASING_PROGRESS`); `message` (UTF-8, or NULL for none) is sent where
 * the protocol version has it. Inputs are read during the call only.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
 * for its length); `message` points to `message_len` readable bytes (or is NULL with length
 * 0).
 */
enum mcpw_result mcpw_conn_progress(struct mcpw_conn *conn,
                                    const struct mcpw_id *id,
                                    double progress,
                                    double total,
                                    bool has_total,
                                    const char *message,
                                    size_t message_len);

/**
 * Server: sends a log message (`notifications/message`) about the peer's request `*id`, at
 * `level` (one of `mcpw_log_level`), from `logger` (UTF-8, or NULL for none), with `data`
 * (any JSON value as text). In 2026-07-28 it goes out only if the request asked for this
 * level or a more verbose one; in the handshake era, always. Either way we must have
 * declared `logging` (else `MCPW_ERR_NOT_NEGOTIATED`).
 * `*out_sent` says whether it was sent; a client gets `MCPW_ERR_WRONG_DIRECTION`. Inputs are
 * read during the call only.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
 * for its length); `logger` and `data` point to their lengths in readable bytes (or are NULL
 * with length 0); `out_sent` is NULL or writable.
 */
enum mcpw_result mcpw_conn_log(struct mcpw_conn *conn,
                               const struct mcpw_id *id,
                               uint32_t level,
                               const char *logger,
                               size_t logger_len,
                               const char *data,
                               size_t data_len,
                               bool *out_sent);

/**
 * Server, 2026-07-28: answers the peer's `tools/call`, `prompts/get` or `resources/read`
 * `*id` with "input required": `input_requests` (a JSON object of input requests, each
 * needing a capability the request declared, or NULL for none) and/or `request_state` (UTF-8
 * text the client echoes back on its retry, or NULL for none). Other requests are
 * `MCPW_ERR_NOT_ELIGIBLE`. Inputs are read during the call only.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
 * for its length); `input_requests` and `request_state` point to their lengths in readable
 * bytes (or are NULL with length 0).
 */
enum mcpw_result mcpw_conn_respond_input_required(struct mcpw_conn *conn,
                                                  const struct mcpw_id *id,
                                                  const char *input_requests,
                                                  size_t input_requests_len,
                                                  const char *request_state,
                                                  size_t request_state_len);

/**
 * Client, 2026-07-28: re-sends our request `request_id`, which ended with
 * `MCPW_EVENT_INPUT_REQUIRED`, as a new request with the original params, `input_responses`
 * (a JSON object, or NULL for none) and the server's `requestState` echoed byte for byte. On
 * success `*out_request_id` receives the new request's id.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `input_responses` points to its length in
 * readable bytes (or is NULL with length 0); `out_request_id` is NULL or writable.
 */
enum mcpw_result mcpw_conn_retry(struct mcpw_conn *conn,
                                 uint64_t now_ns,
                                 int64_t request_id,
                                 const char *input_responses,
                                 size_t input_responses_len,
                                 int64_t *out_request_id);

/**
 * Cancels our request `request_id`: the peer is told (with `reason`, UTF-8, or NULL for
 * none) and the request ends here, with no event; an answer arriving later is dropped. A
 * 2025-11-25 task-augmented request whose task handle has not come ends without a word to
 * the peer (tasks are cancelled with `tasks/cancel`, and there is no task id yet); if the
 * handle still comes, the engine sends `tasks/cancel` for that task itself (where the peer
 * declared `tasks.cancel`), and its answer is no event.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `reason` points to `reason_len` readable bytes
 * (or is NULL with length 0).
 */
enum mcpw_result mcpw_conn_cancel(struct mcpw_conn *conn,
                                  uint64_t now_ns,
                                  int64_t request_id,
                                  const char *reason,
                                  size_t reason_len);

/**
 * Begins a graceful close: no new requests or notifications; the requests in flight either
 * way get until `now_ns + grace_ms` to be answered (ours by the peer, the peer's by you: go
 * on answering them), and the close ends as soon as none is left. When the grace runs out
 * first, the peer is sent a cancellation for each of ours still unanswered, the peer's own
 * still unanswered get an error (-32603), and the connection closes (`MCPW_EVENT_CLOSED`
 * with `MCPW_CLOSE_LOCAL`): write out what it holds before you drop it. A 2026-07-28 server
 * first ends the peer's `subscriptions/listen` requests with their results; a client's own,
 * which nothing else ends, are cancelled at once (`MCPW_EVENT_ABANDONED`). Called again while
 * closing, it can only bring the end sooner (a later deadline changes nothing). Closing a
 * closed connection does nothing.
 *
 * # Safety
 * `conn` is NULL or a live connection handle.
 */
enum mcpw_result mcpw_conn_close(struct mcpw_conn *conn,
                                 uint64_t now_ns,
                                 uint64_t grace_ms);

/**
 * Answers every request of the peer's still in flight with an internal error (-32603)
 * carrying `message` (UTF-8, `message_len` bytes), all but 2026-07-28 listens (a graceful
 * close ends those with their results), and writes how many it answered to `*out_count`
 * (may be NULL). Use
 * it when nothing will answer them any more, a host that stops, before `mcpw_conn_close`:
 * the close waits for the answers to the peer's requests too, and would otherwise wait its
 * whole grace. One the output has no room for is not answered (its peer is not reading).
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `message` is readable for `message_len`
 * bytes (NULL with 0 for none); `out_count` is NULL or writable.
 */
enum mcpw_result mcpw_conn_refuse_peer_requests(struct mcpw_conn *conn,
                                                const char *message,
                                                size_t message_len,
                                                size_t *out_count);

/**
 * Reads where the lifecycle stands into `*out_state`. Use it to decide whether commands
 * can be given yet (`MCPW_STATE_OPERATING`) or any more (`MCPW_STATE_CLOSED`: free it).
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `out_state` is NULL or writable.
 */
enum mcpw_result mcpw_conn_state(const struct mcpw_conn *conn,
                                 enum mcpw_state *out_state);

/**
 * Reads the connection's role into `*out_role`: for code handed a connection it did not
 * create (a view from an HTTP handle, a generic event loop) that acts by role.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `out_role` is NULL or writable.
 */
enum mcpw_result mcpw_conn_role(const struct mcpw_conn *conn,
                                enum mcpw_role *out_role);

/**
 * Reads into `*out_bytes` how much input to give `mcpw_conn_handle_input` at a time, handing
 * out every event (and answering) between pieces, when a read brought more: 4 KiB, less
 * when the config lowered `max_inbound_in_flight`, `max_buffered_output` or
 * `max_queued_events`. Use it in a
 * loop of your own that reads large chunks, so that a peer that pipelines thousands of
 * requests in one write gets every one answered, instead of "too many requests" errors.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `out_bytes` is NULL or writable.
 */
enum mcpw_result mcpw_conn_input_piece(const struct mcpw_conn *conn,
                                       size_t *out_bytes);

/**
 * Reads the protocol era in force into `*out_era`: after `MCPW_EVENT_READY`, to know
 * whether the peer speaks sessions (handshake era) or stateless requests (2026-07-28).
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `out_era` is NULL or writable.
 */
enum mcpw_result mcpw_conn_era(const struct mcpw_conn *conn,
                               enum mcpw_era *out_era);

/**
 * Server: reads what the peer's 2026-07-28 request `*id`, still in flight, declared in its
 * `_meta` into `*out_context` (`known` is false for an unknown id or a handshake-era
 * request). The id is read during the call only.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
 * for its length); `out_context` is NULL or writable.
 */
enum mcpw_result mcpw_conn_request_context(const struct mcpw_conn *conn,
                                           const struct mcpw_id *id,
                                           struct mcpw_request_context *out_context);

/**
 * Reads the negotiated protocol version (`"2025-11-25"`) into `*out_version`: a static string
 * that lives as long as the program, or an absent view (NULL) before negotiation.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `out_version` is NULL or writable.
 */
enum mcpw_result mcpw_conn_protocol_version(const struct mcpw_conn *conn,
                                            struct mcpw_str *out_version);

/**
 * Reads the peer's `clientInfo` / `serverInfo` object (raw JSON) into `*out_json`, or an
 * absent view (NULL) before the handshake. The view belongs to the handle and stays valid
 * until the next call that takes it non-`const`.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `out_json` is NULL or writable.
 */
enum mcpw_result mcpw_conn_peer_info(const struct mcpw_conn *conn,
                                     struct mcpw_str *out_json);

/**
 * Reads the peer's capabilities object (raw JSON, as the peer declared it) into `*out_json`,
 * or an absent view (NULL) before the handshake. The view belongs to the handle and stays
 * valid until the next call that takes it non-`const`.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `out_json` is NULL or writable.
 */
enum mcpw_result mcpw_conn_peer_capabilities(const struct mcpw_conn *conn,
                                             struct mcpw_str *out_json);

/**
 * Client: reads the server's `instructions` (decoded text) into `*out_text`, or an absent
 * view (NULL) when it sent none. The view belongs to the handle and stays valid until the
 * next call that takes it non-`const`.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `out_text` is NULL or writable.
 */
enum mcpw_result mcpw_conn_peer_instructions(const struct mcpw_conn *conn,
                                             struct mcpw_str *out_text);

/**
 * Reads the counters of what the engine dropped quietly into `*out_stats`: for logs and
 * metrics, and to find out why an expected message never became an event.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `out_stats` is NULL or writable.
 */
enum mcpw_result mcpw_conn_stats(const struct mcpw_conn *conn,
                                 struct mcpw_stats *out_stats);

/**
 * Reads how many `notifications/elicitation/complete` the engine dropped for unknown or
 * already-completed elicitation ids (2025-11-25, URL mode) into `*out_count`. A getter of its
 * own: `mcpw_stats` keeps its size within 0.1.x, since callers allocate it.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `out_count` is NULL or writable.
 */
enum mcpw_result mcpw_conn_ignored_elicitation_completions(const struct mcpw_conn *conn,
                                                           uint64_t *out_count);

/**
 * Reads how many of our requests await an answer (`*out_ours`) and how many of the peer's
 * await ours (`*out_peers`): to wait for both to reach 0 before a shutdown, or to throttle
 * before `MCPW_ERR_TOO_MANY_IN_FLIGHT`.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `out_ours` and `out_peers` are NULL or
 * writable.
 */
enum mcpw_result mcpw_conn_in_flight(const struct mcpw_conn *conn,
                                     size_t *out_ours,
                                     size_t *out_peers);

/**
 * Creates an HTTP server for the MCP server `config` (server role; its versions decide which
 * eras are served: 2026-07-28 for stateless requests, the others for sessions), with
 * `options` (read during the call; `random` is required, else `MCPW_ERR_NULL_ARGUMENT`).
 * Use it when you serve MCP over HTTP; for stdio, `mcpw_conn_new` is enough. A client
 * config, or one `mcpw_conn_new` refuses (no protocol versions), is
 * `MCPW_ERR_CONFIG_REFUSED`.
 *
 * On success `*out_server` receives a handle that the caller owns and frees exactly once
 * with `mcpw_http_server_free`.
 *
 * # Safety
 * `config` is NULL or a live config handle; `options` is NULL or readable, with its pointers
 * readable for their lengths; `out_server` is NULL or writable.
 */
enum mcpw_result mcpw_http_server_new(const struct mcpw_config *config,
                                      const struct mcpw_http_server_options *options,
                                      struct mcpw_http_server **out_server);

/**
 * Frees a server, exactly once, with all its sessions, streams and lent views (the
 * connection view included). NULL does nothing. Close your HTTP library's responses first.
 *
 * # Safety
 * `server` is NULL or a handle from `mcpw_http_server_new` not freed before.
 */
void mcpw_http_server_free(struct mcpw_http_server *server);

/**
 * Handles one HTTP request to the MCP endpoint: `method` (`"POST"`, `"GET"`, `"DELETE"`, …),
 * `path` (NULL: not checked; a query string is ignored), every header, and the whole body.
 * `*out_response` receives the answer (its views valid until the next non-`const` call on
 * the server).
 *
 * When `has_stream` is set, the request produced events: drain `mcpw_http_server_poll_event`
 * and answer what you can at once, then call `mcpw_http_server_settle` for the final form
 * of the response (a JSON body when the whole answer is ready), send it, and drain the
 * stream, if it still is one, with `mcpw_http_server_poll_stream`. Inputs are read during
 * the call only.
 *
 * # Safety
 * `server` is NULL or a live server handle; `method`, `path` and `body` point to their
 * lengths in readable bytes (or are NULL with length 0); `headers` points to `headers_len`
 * readable headers (or is NULL with 0), none of them (nor `body`) memory this server lent
 * (copy a session id from `mcpw_http_server_session_id` before sending it back as a header:
 * a DELETE frees it); `out_response` is NULL or writable.
 */
enum mcpw_result mcpw_http_server_handle_request(struct mcpw_http_server *server,
                                                 uint64_t now_ns,
                                                 const char *method,
                                                 size_t method_len,
                                                 const char *path,
                                                 size_t path_len,
                                                 const struct mcpw_http_header *headers,
                                                 size_t headers_len,
                                                 const uint8_t *body,
                                                 size_t body_len,
                                                 struct mcpw_http_response *out_response);

/**
 * Gives the final form of the stream response that `mcpw_http_server_handle_request` just
 * returned for `stream`, once you answered what its events allow at once: a plain JSON body
 * when the whole answer is there (with the status a 2026-07-28 error maps to), else the SSE
 * response unchanged. Call it once per stream response, before the next request.
 * `MCPW_ERR_UNKNOWN_STREAM` when no response of `stream` waits.
 *
 * # Safety
 * `server` is NULL or a live server handle; `out_response` is NULL or writable.
 */
enum mcpw_result mcpw_http_server_settle(struct mcpw_http_server *server,
                                         uint64_t stream,
                                         struct mcpw_http_response *out_response);

/**
 * Lends the bytes waiting on SSE `stream`: write them to the response body, report how many
 * were written with `mcpw_http_server_consume_stream`, and end the response once
 * `*out_finished` is set and nothing is left. A poll that finds a stream finished with
 * nothing left (`*out_len` 0) lets it go at once: end the response; there is nothing to
 * consume, and later calls for `stream` find it gone. `*out_open` is false (and nothing is lent)
 * for a stream the host no longer holds: it ended, its client went away, it was closed for
 * polling, or a `Last-Event-ID` GET took it over (that response got a new stream id). With
 * no bytes yet, wait (suspend the response) until the next input, command
 * or timer, then ask again. The bytes stay valid until the next non-`const` call on the
 * server.
 *
 * # Safety
 * `server` is NULL or a live server handle; each `out_*` is NULL or writable.
 */
enum mcpw_result mcpw_http_server_poll_stream(struct mcpw_http_server *server,
                                              uint64_t stream,
                                              const uint8_t **out_bytes,
                                              size_t *out_len,
                                              bool *out_finished,
                                              bool *out_open);

/**
 * The next stream whose output may have changed since it was last named here: it got bytes,
 * finished, was closed for polling, ended with its session, or was taken over by a
 * `Last-Event-ID` GET (its old response ends). `*out_has` is false when
 * there is none. Use it in a host that suspends one response per SSE stream (a suspended
 * libmicrohttpd connection, a goroutine, a coroutine): after each call into the server (and
 * after answering on lent views), resume just the streams this names, which then ask
 * `mcpw_http_server_poll_stream`, instead of resuming every open stream after every request
 * (with a thousand clients listening on their GET streams, that made each request 18 times
 * dearer). Drain it to the end each time, also after a stream's own poll: a stream is named
 * once until taken, so one left untaken is not named again. Answers given on lent views are
 * moved to their streams first. A host that never calls it loses nothing.
 *
 * # Safety
 * `server` is NULL or a live server handle; each `out_*` is NULL or writable.
 */
enum mcpw_result mcpw_http_server_poll_woken(struct mcpw_http_server *server,
                                             bool *out_has,
                                             uint64_t *out_stream);

/**
 * Reports that the first `n` bytes lent by `mcpw_http_server_poll_stream` for `stream` were
 * written (the bytes lent by its last poll; a write in parts may report each part, in
 * order, as long as the bytes are not read after the first report). More
 * than was lent and not yet reported is `MCPW_ERR_CONSUME_TOO_MUCH`, consuming nothing;
 * zero does nothing.
 *
 * # Safety
 * `server` is NULL or a live server handle.
 */
enum mcpw_result mcpw_http_server_consume_stream(struct mcpw_http_server *server,
                                                 uint64_t stream,
                                                 size_t n);

/**
 * Reports that the client went away from `stream` (the connection closed before the stream
 * finished). 2026-07-28: that cancels its request. In a session, its events stay stored for
 * a `Last-Event-ID` resumption, and what the stream held back for the session's other
 * streams moves on at once: resume those `mcpw_http_server_poll_woken` names. An unknown
 * stream does nothing.
 *
 * # Safety
 * `server` is NULL or a live server handle.
 */
enum mcpw_result mcpw_http_server_stream_closed(struct mcpw_http_server *server,
                                                uint64_t now_ns,
                                                uint64_t stream);

/**
 * Gives up on every stream for good, for a host whose shutdown grace is over and that is
 * about to end all its responses: every request still awaited on a stream gets an error
 * answer (-32603) there, so that its client learns at once that no answer will come (a
 * stateless request's client cannot resume it). Write what the streams then hold
 * (`mcpw_http_server_poll_woken` names them; each finishes with its answer) before ending
 * the responses. `*out_answered` (may be NULL) is how many requests were answered.
 *
 * # Safety
 * `server` is NULL or a live server handle; `out_answered` is NULL or writable.
 */
enum mcpw_result mcpw_http_server_abandon_streams(struct mcpw_http_server *server,
                                                  size_t *out_answered);

/**
 * Fires every timer due at `now_ns`: request timeouts of every connection and the expiry of
 * idle sessions. Call it when the deadline of `mcpw_http_server_poll_timeout` passes.
 *
 * # Safety
 * `server` is NULL or a live server handle.
 */
enum mcpw_result mcpw_http_server_handle_timeout(struct mcpw_http_server *server,
                                                 uint64_t now_ns);

/**
 * Reads the earliest deadline of the server (any connection's timer, any session's
 * expiry): as `mcpw_conn_poll_timeout`. Use it as your event loop's poll timeout.
 *
 * # Safety
 * `server` is NULL or a live server handle; each `out_*` is NULL or writable.
 */
enum mcpw_result mcpw_http_server_poll_timeout(const struct mcpw_http_server *server,
                                               bool *out_has,
                                               uint64_t *out_deadline_ns);

/**
 * The next event of any connection: `*out_event` as `mcpw_conn_poll_event` gives it (kind
 * `MCPW_EVENT_NONE` when there is none), `*out_key` the connection it came from (keep it to
 * address that session later), and `*out_conn` a view of that connection for answering it
 * with the `mcpw_conn_*` commands. The event's views and the connection view stay valid
 * until the next non-`const` call on the server; `mcpw_http_server_conn` lends the view
 * again later. Poll until `MCPW_EVENT_NONE` after every request, command and timer.
 *
 * # Safety
 * `server` is NULL or a live server handle; each `out_*` is NULL or writable.
 */
enum mcpw_result mcpw_http_server_poll_event(struct mcpw_http_server *server,
                                             struct mcpw_event *out_event,
                                             uint64_t *out_key,
                                             struct mcpw_conn **out_conn);

/**
 * Lends a view of connection `key` (from `mcpw_http_server_poll_event`) for the
 * `mcpw_conn_*` commands and getters: answer a request later, send progress, a log or a
 * request of your own to that session. `MCPW_ERR_UNKNOWN_CONNECTION` when it is gone.
 *
 * This call keeps the server's other views valid, even when it is refused (the current
 * event's, and the views of other connections lent since the last other call: each
 * connection has a view of its own).
 * The view stays valid until the next other non-`const` call on the server; after using it,
 * drain `mcpw_http_server_poll_stream` on the streams you hold. Never free it.
 *
 * # Safety
 * `server` is NULL or a live server handle; `out_conn` is NULL or writable.
 */
enum mcpw_result mcpw_http_server_conn(struct mcpw_http_server *server,
                                       uint64_t key,
                                       struct mcpw_conn **out_conn);

/**
 * Reads the session id of connection `key` into `*out_session`: NULL (length 0) for a
 * stateless 2026-07-28 request. The view is valid until the next non-`const` call on the
 * server. `MCPW_ERR_UNKNOWN_CONNECTION` when it is gone.
 *
 * # Safety
 * `server` is NULL or a live server handle; `out_session` is NULL or writable.
 */
enum mcpw_result mcpw_http_server_session_id(const struct mcpw_http_server *server,
                                             uint64_t key,
                                             struct mcpw_str *out_session);

/**
 * Reads how many sessions are alive and how many streams are open: for metrics, and to
 * see that a shutdown has let every stream go.
 *
 * # Safety
 * `server` is NULL or a live server handle; each `out_*` is NULL or writable.
 */
enum mcpw_result mcpw_http_server_counts(const struct mcpw_http_server *server,
                                         size_t *out_sessions,
                                         size_t *out_streams);

/**
 * 2025-11-25 sessions (SEP-1699): closes the SSE stream carrying the peer's request `*id`
 * on connection `key` before its answer, so a long-running request holds no HTTP connection;
 * the client resumes it with `Last-Event-ID` and gets the answer then. `*out_closed` is
 * false (nothing changed) when no such stream is open or its client cannot resume
 * (stateless requests, older versions). Drain the stream to its end afterwards.
 *
 * # Safety
 * `server` is NULL or a live server handle; `id` is NULL or readable (its string readable for
 * its length); `out_closed` is NULL or writable.
 */
enum mcpw_result mcpw_http_server_close_stream_for_polling(struct mcpw_http_server *server,
                                                           uint64_t key,
                                                           const struct mcpw_id *id,
                                                           bool *out_closed);

/**
 * Says which tools of `tools` (a `tools/list` result or its `tools` array, as JSON text) an
 * HTTP server would refuse, and why: call it after `mcpw_http_server_new` or
 * `mcpw_http_server_declare_tools` returned `MCPW_ERR_CONFIG_REFUSED` for the same tools, to
 * log or show what to fix, or before declaring them, as a check. It changes nothing.
 *
 * Writes a JSON array with one object per refused tool, `{"name": ..., "reason": ...}` (the reason
 * is English text), or `[]` when every tool would be accepted. The length in bytes goes to
 * `*out_len`; the text is written to `out_text` only when it fits in `capacity`, followed by a NUL
 * when there is room: otherwise call again with room for `*out_len + 1` bytes.
 * `MCPW_ERR_INVALID_UTF8`, `MCPW_ERR_INVALID_JSON` or `MCPW_ERR_JSON_WRONG_TYPE` for what is not a
 * tools list. `[]` after a refusal means the refusal had another cause (the config is not a
 * server's).
 *
 * # Safety
 * `tools` points to `tools_len` readable bytes (or is NULL with length 0); `out_text` points
 * to `capacity` writable bytes (or is NULL with `capacity` 0); `out_len` is NULL or
 * writable.
 */
enum mcpw_result mcpw_tools_refusals(const char *tools,
                                     size_t tools_len,
                                     char *out_text,
                                     size_t capacity,
                                     size_t *out_len);

/**
 * Declares the server's tools anew while it runs, as `tools` in `mcpw_http_server_options`
 * does at its start (a `tools/list` result or its `tools` array, as JSON text): call it when
 * they change, before sending `notifications/tools/list_changed`, so that 2026-07-28
 * `tools/call` requests are checked against the `x-mcp-header` annotations of the tools as
 * they now are. The tools declared before are replaced. `MCPW_ERR_CONFIG_REFUSED` when a
 * tool's annotations are invalid (clients drop such a tool: fix its schema); the others are
 * declared all the same. `MCPW_ERR_INVALID_UTF8`, `MCPW_ERR_INVALID_JSON` or
 * `MCPW_ERR_JSON_WRONG_TYPE` for what is not a tools list, and nothing changes. Inputs are
 * read during the call only.
 *
 * # Safety
 * `server` is NULL or a live server handle; `tools` points to `tools_len` readable bytes (or
 * is NULL with length 0).
 */
enum mcpw_result mcpw_http_server_declare_tools(struct mcpw_http_server *server,
                                                const char *tools,
                                                size_t tools_len);

/**
 * Ends every stream that only waits for server messages, gracefully (at shutdown): each
 * 2026-07-28 `subscriptions/listen` stream gets its result, and each handshake-era
 * session's GET stream is finished; both end once drained (they are woken). `*out_count`
 * says how many were ended.
 *
 * # Safety
 * `server` is NULL or a live server handle; `out_count` is NULL or writable.
 */
enum mcpw_result mcpw_http_server_end_listen_streams(struct mcpw_http_server *server,
                                                     size_t *out_count);

/**
 * Creates an HTTP client for `config` (client role; its era setting decides between a
 * 2026-07-28 probe and `initialize`). Its first POST is ready at once: drain
 * `mcpw_http_client_poll_action` next. `options` may be NULL for the defaults.
 *
 * On success `*out_client` receives a handle that the caller owns and frees exactly once
 * with `mcpw_http_client_free`.
 *
 * # Safety
 * `config` is NULL or a live config handle; `options` is NULL or readable; `out_client` is
 * NULL or writable.
 */
enum mcpw_result mcpw_http_client_new(const struct mcpw_config *config,
                                      uint64_t now_ns,
                                      const struct mcpw_http_client_options *options,
                                      struct mcpw_http_client **out_client);

/**
 * Frees a client, exactly once, with its connection view. NULL does nothing.
 *
 * # Safety
 * `client` is NULL or a handle from `mcpw_http_client_new` not freed before.
 */
void mcpw_http_client_free(struct mcpw_http_client *client);

/**
 * The next HTTP request to make (or response to abandon): kind `MCPW_HTTP_ACTION_NONE` when
 * there is none. Call it after every input, command and timer, until NONE.
 *
 * # Safety
 * `client` is NULL or a live client handle; `out_action` is NULL or writable.
 */
enum mcpw_result mcpw_http_client_poll_action(struct mcpw_http_client *client,
                                              struct mcpw_http_action *out_action);

/**
 * Reports the status and headers of the response to `exchange`, as soon as your HTTP
 * client has them (before the body): the engine decides from them how to read the body.
 * Report the final head only: a 1xx status here (a `101 Switching Protocols` your HTTP
 * library handed over as the response, say) fails the exchange's requests with that status
 * and queues `MCPW_HTTP_ACTION_ABORT` for it.
 *
 * # Safety
 * `client` is NULL or a live client handle; `headers` points to `headers_len` readable
 * headers (or is NULL with 0) that are not memory this client lent.
 */
enum mcpw_result mcpw_http_client_handle_response(struct mcpw_http_client *client,
                                                  uint64_t now_ns,
                                                  uint64_t exchange,
                                                  uint16_t status,
                                                  const struct mcpw_http_header *headers,
                                                  size_t headers_len);

/**
 * Reports bytes of the response body of `exchange` as they arrive, in any chunking (SSE is
 * decoded across chunks, with the last event id kept for resumption); after
 * `mcpw_http_client_handle_response`, and before `mcpw_http_client_handle_end`.
 *
 * # Safety
 * `client` is NULL or a live client handle; `bytes` points to `len` readable bytes (or is
 * NULL with length 0) that are not memory this client lent.
 */
enum mcpw_result mcpw_http_client_handle_body(struct mcpw_http_client *client,
                                              uint64_t now_ns,
                                              uint64_t exchange,
                                              const uint8_t *bytes,
                                              size_t len);

/**
 * Reports that the response body of `exchange` ended normally. Requests it should have
 * answered are resumed (SSE with an event id, after a delay: see the timeout) or fail.
 * `jitter` is a random number for that delay.
 *
 * # Safety
 * `client` is NULL or a live client handle.
 */
enum mcpw_result mcpw_http_client_handle_end(struct mcpw_http_client *client,
                                             uint64_t now_ns,
                                             uint64_t exchange,
                                             uint32_t jitter);

/**
 * Reports that `exchange` failed (no connection, or it broke): its stream is resumed if it
 * can be, else its requests end at once with a failure event.
 *
 * # Safety
 * `client` is NULL or a live client handle.
 */
enum mcpw_result mcpw_http_client_handle_error(struct mcpw_http_client *client,
                                               uint64_t now_ns,
                                               uint64_t exchange,
                                               uint32_t jitter);

/**
 * The next event of the client's connection, as `mcpw_conn_poll_event` gives it; after a
 * session expired, the old connection's events come first, then a new session starts
 * (unless the connection was closed, the session ended, or this is the second session in a
 * row to expire before the server took anything of it: the connection then closes).
 *
 * # Safety
 * `client` is NULL or a live client handle; `out_event` is NULL or writable.
 */
enum mcpw_result mcpw_http_client_poll_event(struct mcpw_http_client *client,
                                             struct mcpw_event *out_event);

/**
 * Lends a view of the client's connection for the `mcpw_conn_*` commands and getters
 * (`mcpw_conn_request`, `mcpw_conn_respond`, `mcpw_conn_protocol_version`, …); its output is
 * sent through `mcpw_http_client_poll_action`. This call keeps the client's other views
 * valid, even when it is refused; the view stays valid until the next other non-`const` call on the client. Never
 * free it.
 *
 * # Safety
 * `client` is NULL or a live client handle; `out_conn` is NULL or writable.
 */
enum mcpw_result mcpw_http_client_conn(struct mcpw_http_client *client,
                                       struct mcpw_conn **out_conn);

/**
 * Reads the earliest deadline of the client (the connection's timers, resumptions
 * waiting), as `mcpw_conn_poll_timeout`. It is the last time given while work waits that no
 * input or command brought: a new session's `initialize` after a 404, made when the old
 * session's last event was handed out, or the failures of requests made after the session
 * ended. Call `mcpw_http_client_handle_timeout`, then take events and actions as usual.
 *
 * # Safety
 * `client` is NULL or a live client handle; each `out_*` is NULL or writable.
 */
enum mcpw_result mcpw_http_client_poll_timeout(const struct mcpw_http_client *client,
                                               bool *out_has,
                                               uint64_t *out_deadline_ns);

/**
 * Fires what is due at `now_ns`: request timeouts and stream resumptions.
 *
 * # Safety
 * `client` is NULL or a live client handle.
 */
enum mcpw_result mcpw_http_client_handle_timeout(struct mcpw_http_client *client,
                                                 uint64_t now_ns);

/**
 * Reads the handshake-era session id into `*out_session` (NULL with length 0 before the
 * server gave one, and in 2026-07-28; an id that is not all visible ASCII is never taken).
 * Valid until the next non-`const` call on the client.
 *
 * # Safety
 * `client` is NULL or a live client handle; `out_session` is NULL or writable.
 */
enum mcpw_result mcpw_http_client_session_id(const struct mcpw_http_client *client,
                                             struct mcpw_str *out_session);

/**
 * Reads the start of the last error response whose body held no JSON-RPC answer (an HTML
 * page from a proxy, a framework's text) into `*out_text`: up to 512 bytes of UTF-8
 * (invalid bytes replaced), trimmed; NULL with length 0 when none came. A request such a
 * response failed reports only its HTTP status (`MCPW_EVENT_FAILED`); show this next to it
 * when telling a person why, escaping control characters (it is the server's text). Valid
 * until the next non-`const` call on the client.
 *
 * # Safety
 * `client` is NULL or a live client handle; `out_text` is NULL or writable.
 */
enum mcpw_result mcpw_http_client_failure_text(const struct mcpw_http_client *client,
                                               struct mcpw_str *out_text);

/**
 * Ends the handshake-era session: queues a `DELETE` (drain `mcpw_http_client_poll_action`)
 * so the server frees it at once. `*out_queued` is false without a session, and while
 * `initialize` has no answer yet: the DELETE is then owed, and goes out once that answer
 * brings the session id (`mcpw_http_client_is_ending_session` is true meanwhile). Called
 * before any `initialize` went out (an auto-era `server/discover` probe under way, or no
 * `mcpw_http_client_poll_action` yet), it is false too and no session starts: the
 * `initialize` made later fails unsent and the connection closes
 * (`MCPW_CLOSE_TRANSPORT_FAILED`), unless the server answers the probe in the 2026-07-28
 * era, which has no sessions. Close the connection first (`mcpw_conn_close`) for a clean
 * end. The DELETE's `SEND` comes once the
 * notifications and answers POSTed before it (the close's cancellations) have their
 * response heads, or were let go: keep driving the client while
 * `mcpw_http_client_is_ending_session` says so.
 *
 * # Safety
 * `client` is NULL or a live client handle; `out_queued` is NULL or writable.
 */
enum mcpw_result mcpw_http_client_end_session(struct mcpw_http_client *client,
                                              bool *out_queued);

/**
 * Writes whether a notification or answer has not reached the server yet (it went out and
 * has no response head, it is an answer to the server waiting for a place among the 64
 * that run at once, or the connection still holds it while messages wait for the session's
 * GET stream or `initialized` to get its response head, about a second at most), so that
 * what it carries (the close's cancellations, say) may be lost. Before the host exits or
 * frees the client, it keeps driving the client while this is true, timers included,
 * within a bound of its own (a second or two): with a session the DELETE waits for these
 * anyway, but a server without sessions has no DELETE to wait for.
 *
 * # Safety
 * `client` is NULL or a live client handle; `out_unheard` is NULL or writable.
 */
enum mcpw_result mcpw_http_client_has_unheard(const struct mcpw_http_client *client,
                                              bool *out_unheard);

/**
 * Writes whether the session's DELETE (`mcpw_http_client_end_session`) is still to go out
 * or under way: owed to the session that an unanswered `initialize` is about to make,
 * held back for the POSTs sent before it, queued, or sent and not yet ended. False once it
 * ended, failed or was given up (its `ABORT`), and when the session turned
 * out to be gone before it went out (a 404 to another exchange): that DELETE is never
 * sent, so no `SEND` or `ABORT` of it ever comes. A host that ends the session keeps
 * driving the client while this is true, within a bound of its own.
 *
 * # Safety
 * `client` is NULL or a live client handle; `out_ending` is NULL or writable.
 */
enum mcpw_result mcpw_http_client_is_ending_session(const struct mcpw_http_client *client,
                                                    bool *out_ending);

/**
 * Looks up member `key` (UTF-8, compared after decoding escapes) of the JSON object `json`.
 * On success `*out_value` views the member's raw JSON text inside `json` (so it lives as long
 * as `json` does), or is absent (NULL) when there is no such member. A key that appears twice
 * is `MCPW_ERR_DUPLICATE_KEY`; a value that is not an object is `MCPW_ERR_JSON_WRONG_TYPE`.
 * The whole text is validated on every call.
 *
 * # Safety
 * `json_text` and `key` point to their lengths in readable bytes (or are NULL with length 0);
 * `out_value` is NULL or writable.
 */
enum mcpw_result mcpw_json_get(const char *json_text,
                               size_t json_len,
                               const char *key,
                               size_t key_len,
                               struct mcpw_str *out_value);

/**
 * Looks up several members of the JSON object `json` at once: `keys` points to `keys_len`
 * keys (UTF-8, compared after decoding escapes, at most 64), and `out_values` to as many
 * views, written in the same order. Use it instead of several `mcpw_json_get` calls when a
 * handler needs more than one member of the same object (`name` and `arguments` of a
 * `tools/call`, say): the text is validated and read once, not once per key. Each view is
 * the member's raw JSON text inside `json`, or absent (NULL) when there is no such member.
 * A key asked for that appears twice in `json` is `MCPW_ERR_DUPLICATE_KEY`; more than 64
 * keys is `MCPW_ERR_INVALID_ARGUMENT`. Nothing is written unless the call succeeds.
 * `out_values` may be `keys` itself: the keys are read before any answer is written.
 *
 * # Safety
 * `json_text` points to `json_len` readable bytes (or is NULL with length 0); `keys` points
 * to `keys_len` readable views, each readable for its length (or NULL with `keys_len` 0);
 * `out_values` is NULL or points to `keys_len` writable views.
 */
enum mcpw_result mcpw_json_get_each(const char *json_text,
                                    size_t json_len,
                                    const struct mcpw_str *keys,
                                    size_t keys_len,
                                    struct mcpw_str *out_values);

/**
 * Looks up element `index` (from 0) of the JSON array `json`. On success `*out_value` views
 * the element's raw JSON text inside `json` (so it lives as long as `json` does), or is
 * absent (NULL) past the end. A value that is not an array is `MCPW_ERR_JSON_WRONG_TYPE`. The
 * whole text is validated on every call: to walk an array, use `mcpw_json_items`.
 *
 * # Safety
 * `json_text` points to `json_len` readable bytes (or is NULL with length 0); `out_value`
 * is NULL or writable.
 */
enum mcpw_result mcpw_json_at(const char *json_text,
                              size_t json_len,
                              size_t index,
                              struct mcpw_str *out_value);

/**
 * Reads every element of the JSON array `json` in one pass: use it to walk an array (a
 * `tools/list` result's `tools`, a result's `content`), where calling `mcpw_json_at` for
 * each index would validate and walk the whole text again each time (1,000 elements then
 * cost 500 times one pass; 16,000, 8,000 times).
 *
 * Writes views of the first `min(count, capacity)` elements to `out_items` (each the
 * element's raw JSON text inside `json`, living as long as `json` does) and the number of
 * elements to `*out_count`. When the count is larger than `capacity`, call again with room
 * for all (a call with capacity 0 asks for the count). A value that is not an array is
 * `MCPW_ERR_JSON_WRONG_TYPE`; nothing is written unless the call succeeds.
 *
 * # Safety
 * `json_text` points to `json_len` readable bytes (or is NULL with length 0);
 * `out_items` points to `capacity` writable views (or is NULL with `capacity` 0);
 * `out_count` is NULL or writable.
 */
enum mcpw_result mcpw_json_items(const char *json_text,
                                 size_t json_len,
                                 struct mcpw_str *out_items,
                                 size_t capacity,
                                 size_t *out_count);

/**
 * Decodes the JSON string `json` (one value with its quotes, such as `mcpw_json_get` finds)
 * into its text, escapes decoded, as UTF-8. Use it where a handler needs the text itself (a
 * path to open, a name to compare, text to print); to copy a string into an answer, the raw
 * view is already JSON.
 *
 * Writes the text's length in bytes to `*out_len`. When it fits in `capacity`, the text is
 * written to `out_text`, followed by a NUL when there is room for one; when it does not fit,
 * nothing is written to `out_text`: call again with room for `*out_len + 1` bytes. The text
 * holds a NUL byte wherever the string has a `\u0000` escape: use `*out_len`, not
 * `strlen`, where that matters. A value that is not a string is `MCPW_ERR_JSON_WRONG_TYPE`.
 * `out_text` may overlap `json_text` (decoding in place: the text is never longer).
 *
 * # Safety
 * `json_text` points to `json_len` readable bytes (or is NULL with length 0); `out_text`
 * points to `capacity` writable bytes (or is NULL with `capacity` 0); `out_len` is NULL or
 * writable.
 */
enum mcpw_result mcpw_json_string(const char *json_text,
                                  size_t json_len,
                                  char *out_text,
                                  size_t capacity,
                                  size_t *out_len);

/**
 * Reads the JSON number `json` (one value, such as `mcpw_json_get` finds) as a double, the
 * nearest to its decimal value: use it for a tool's numeric arguments instead of `strtod`,
 * which needs a NUL-terminated copy and follows the C locale's decimal point (`2.5` reads as
 * 2 under a locale that writes `2,5`). A value that is not a number, or one beyond a double's
 * range (`1e400`), is `MCPW_ERR_JSON_WRONG_TYPE`; nothing is written unless the call
 * succeeds.
 *
 * # Safety
 * `json_text` points to `json_len` readable bytes (or is NULL with length 0); `out_value` is
 * NULL or writable.
 */
enum mcpw_result mcpw_json_number(const char *json_text,
                                  size_t json_len,
                                  double *out_value);

/**
 * Describes a result code in English.
 *
 * Returns a static, NUL-terminated string owned by the library: never free it; it lives as
 * long as the program. Any number is accepted; one that is not a result code gets
 * "unknown result code".
 */
const char *mcpw_result_message(int code);

/**
 * The default task configuration (1024 tasks, 256 of them per owner, a TTL of one hour,
 * polling every second, 16 input requests per task, payloads up to 1 MiB), to change before
 * `mcpw_tasks_new`.
 */
struct mcpw_task_config mcpw_task_config_default(void);

/**
 * Creates an empty task table with `config` (read during the call; NULL for
 * `mcpw_task_config_default()`). `now_ns` and `unix_ms` are the same instant on your
 * monotonic clock (nanoseconds, the clock of every later `now_ns`) and on the wall clock
 * (milliseconds since 1970-01-01 UTC): the times a task carries (`createdAt`,
 * `lastUpdatedAt`) are counted from them, so they never jump with the system clock. A bound
 * of 0 in `config` is `MCPW_ERR_INVALID_ARGUMENT`.
 *
 * On success `*out_tasks` receives a new handle that the caller owns and must free exactly
 * once with `mcpw_tasks_free`.
 *
 * # Safety
 * `config` is NULL or readable; `out_tasks` is NULL or writable.
 */
enum mcpw_result mcpw_tasks_new(const struct mcpw_task_config *config,
                                uint64_t now_ns,
                                uint64_t unix_ms,
                                struct mcpw_tasks **out_tasks);

/**
 * Frees a task table, exactly once, with every task and everything it lent. NULL does
 * nothing. The tasks simply end: clients polling them get "task not found" from whoever
 * answers them next.
 *
 * # Safety
 * `tasks` is NULL or a handle from `mcpw_tasks_new` not freed before.
 */
void mcpw_tasks_free(struct mcpw_tasks *tasks);

/**
 * Creates a `working` task and lends its id in `*out_task_id`: 128 bits from `random` (your
 * cryptographically secure source, `getrandom(2)` say, called with `random_user` during this
 * call only: task ids are bearer handles), as 32 hex digits. The view belongs to the table
 * and stays valid until the next call that takes it non-`const`; copy it to keep it.
 *
 * Use it on a `tools/call` whose request declared the extension (`MCPW_CAP_TASKS_EXTENSION` in
 * `mcpw_conn_request_context`) when the work is long, then answer the request with
 * `mcpw_conn_respond_task`: the task is already visible to `tasks/get`. At `max_tasks`, the
 * oldest terminal task that may go (see there) is dropped to make room, or, with none, the
 * call fails with `MCPW_ERR_TASKS_FULL` (answer without a task, then). `random` NULL is
 * `MCPW_ERR_NULL_ARGUMENT`. A call `random` makes to a function that takes a handle returns
 * `MCPW_ERR_REENTRANT`.
 *
 * # Safety
 * `tasks` is NULL or a live task table; `random`, when not NULL, fills `len` bytes at `buf`;
 * `out_task_id` is NULL or writable.
 */
enum mcpw_result mcpw_tasks_create(struct mcpw_tasks *tasks,
                                   uint64_t now_ns,
                                   void (*random)(void *user,
                                                  uint8_t *buf,
                                                  size_t len),
                                   void *random_user,
                                   struct mcpw_str *out_task_id);

/**
 * `mcpw_tasks_create` for a 2025-11-25 task-augmented request (the experimental tasks of that
 * version: a `tools/call` whose params have a `task` member, which the engine lets through
 * only where the server declared `tasks.requests.tools.call`; or, on a client, a server's
 * `sampling/createMessage` or `elicitation/create`). The task belongs to `owner`, a number of
 * your choosing for the session or connection that asked: `mcpw_tasks_serve_legacy` shows a
 * requestor its own tasks only. Its wire shapes are that version's (`{"task":{…}}`, `ttl`,
 * `pollInterval`). Answer the request with `mcpw_conn_respond_task`. An owner holding
 * `max_tasks_per_owner` tasks has its oldest terminal one that may go (see `max_tasks`)
 * dropped to make room, or, with none, gets `MCPW_ERR_TASKS_FULL` (others still get tasks).
 * Errors and the lent id as for `mcpw_tasks_create`.
 *
 * # Safety
 * As for `mcpw_tasks_create`.
 */
enum mcpw_result mcpw_tasks_create_legacy(struct mcpw_tasks *tasks,
                                          uint64_t now_ns,
                                          void (*random)(void *user,
                                                         uint8_t *buf,
                                                         size_t len),
                                          void *random_user,
                                          uint64_t owner,
                                          struct mcpw_str *out_task_id);

/**
 * Answers the peer's request `*id` on `conn` with the handle of task `task` (UTF-8) instead
 * of its result: the `CreateTaskResult`. In 2026-07-28 (a `tools/call`, task from
 * `mcpw_tasks_create`) that is `resultType: "task"` with the task's id, status and times, and
 * the client polls the task with `tasks/get` (answer it with `mcpw_tasks_serve`). In
 * 2025-11-25 (a task-augmented request, task from `mcpw_tasks_create_legacy`) it is
 * `{"task":{…}}`, and the client polls with `tasks/get` and `tasks/result` (answer them with
 * `mcpw_tasks_serve_legacy`). The client gets `MCPW_EVENT_TASK_CREATED`.
 *
 * Refused, with the connection and the table unchanged: `MCPW_ERR_NOT_NEGOTIATED` when a
 * 2026-07-28 request, or the server's own capabilities, did not declare the tasks extension (a
 * task never goes to a client that cannot poll it: answer normally, and cancel the task),
 * `MCPW_ERR_NOT_ELIGIBLE` for a 2026-07-28 request but `tools/call` and for a 2025-11-25
 * request that did not ask for a task (no `task` member, or a method we did not declare under
 * `tasks.requests`), `MCPW_ERR_INVALID_PARAMS` for a task of the other version's shape,
 * `MCPW_ERR_NOT_IN_VERSION` in the versions before 2025-11-25, `MCPW_ERR_UNKNOWN_REQUEST` when
 * `*id` is not in flight, `MCPW_ERR_UNKNOWN_TASK` for an unknown task, `MCPW_ERR_CLOSED` after
 * `MCPW_EVENT_CLOSED`. The table is only read. Inputs are read during the call only, and may
 * be views from this connection's current event or from the table.
 *
 * # Safety
 * `conn` is NULL or a live connection handle; `id` is NULL or readable (its string readable
 * for its length); `tasks` is NULL or a live task table; `task` points to `task_len`
 * readable bytes (or is NULL with length 0).
 */
enum mcpw_result mcpw_conn_respond_task(struct mcpw_conn *conn,
                                        const struct mcpw_id *id,
                                        const struct mcpw_tasks *tasks,
                                        const char *task,
                                        size_t task_len);

/**
 * The status notification of task `task` (UTF-8) as it stands: `*out_method` is
 * `notifications/tasks` for an extension task (its params the full DetailedTask; send it with
 * `mcpw_conn_notify` on every connection, and the engine delivers it only on the
 * `subscriptions/listen` streams granted this task's id) or
 * `notifications/tasks/status` for a 2025-11-25 task (the flat Task; send it on its owner's
 * connection). Both are optional in the spec: clients keep polling. The views stay valid
 * until the next non-const call on the table. `MCPW_ERR_UNKNOWN_TASK` for an unknown task.
 *
 * # Safety
 * `tasks` is NULL or a live task table; `task` points to `task_len` readable bytes (or is
 * NULL with length 0); `out_method` and `out_params` are NULL or writable.
 */
enum mcpw_result mcpw_tasks_status_notification(struct mcpw_tasks *tasks,
                                                const char *task,
                                                size_t task_len,
                                                struct mcpw_str *out_method,
                                                struct mcpw_str *out_params);

/**
 * Reads the status of task `task` (UTF-8) into `*out_status`. `MCPW_ERR_UNKNOWN_TASK` for a
 * task never created, expired or dropped.
 *
 * # Safety
 * `tasks` is NULL or a live task table; `task` points to `task_len` readable bytes (or is
 * NULL with length 0); `out_status` is NULL or writable.
 */
enum mcpw_result mcpw_tasks_status(const struct mcpw_tasks *tasks,
                                   const char *task,
                                   size_t task_len,
                                   enum mcpw_task_status *out_status);

/**
 * Reads whether the client asked to cancel task `task` (UTF-8) into `*out_requested`: it
 * stays asked while the table holds the task (after it ends too); false for an unknown task. The same news comes once as
 * `MCPW_TASK_EVENT_CANCEL_REQUESTED`; this lets long work check between steps.
 *
 * # Safety
 * `tasks` is NULL or a live task table; `task` points to `task_len` readable bytes (or is
 * NULL with length 0); `out_requested` is NULL or writable.
 */
enum mcpw_result mcpw_tasks_cancel_requested(const struct mcpw_tasks *tasks,
                                             const char *task,
                                             size_t task_len,
                                             bool *out_requested);

/**
 * Sets the `statusMessage` of task `task` to `message` (UTF-8, a progress description for
 * example), or clears it when `message` is NULL.
 *
 * An unknown task is `MCPW_ERR_UNKNOWN_TASK` and a terminal one `MCPW_ERR_TASK_TERMINAL`
 * (nothing changes). Inputs are read during the call only, and may be views the table lent.
 *
 * # Safety
 * `tasks` is NULL or a live task table; `task` and `message` point to their lengths in
 * readable bytes (or are NULL with length 0).
 */
enum mcpw_result mcpw_tasks_set_message(struct mcpw_tasks *tasks,
                                        uint64_t now_ns,
                                        const char *task,
                                        size_t task_len,
                                        const char *message,
                                        size_t message_len);

/**
 * Puts task `task` back to `working` after `input_required`, dropping its outstanding input
 * requests: the 2025-11-25 flow, where the server sends its input requests itself (related to
 * the task) and resumes the task when their answers came. (In the 2026-07-28 flow the last
 * `MCPW_TASK_EVENT_INPUT` does this.) A task already `working` stays so.
 *
 * An unknown task is `MCPW_ERR_UNKNOWN_TASK` and a terminal one `MCPW_ERR_TASK_TERMINAL`
 * (nothing changes). Inputs are read during the call only, and may be views the table lent.
 *
 * # Safety
 * `tasks` is NULL or a live task table; `task` points to `task_len` readable bytes (or is
 * NULL with length 0).
 */
enum mcpw_result mcpw_tasks_resume(struct mcpw_tasks *tasks,
                                   uint64_t now_ns,
                                   const char *task,
                                   size_t task_len);

/**
 * Asks the client for input for task `task`: `request` (a JSON object such as
 * `{"method":"elicitation/create","params":{…}}`) goes out under `key` (UTF-8) in the
 * task's `inputRequests`, and the task is `input_required` until every outstanding request
 * has its answer (`MCPW_TASK_EVENT_INPUT`, from `tasks/update`). A key is used once in a
 * task's life (`MCPW_ERR_TASK_KEY_REUSED`); at `max_input_requests` outstanding,
 * `MCPW_ERR_TOO_MANY_INPUT_REQUESTS`; a request that is no input request of Multi
 * Round-Trip Requests (`elicitation/create` or `sampling/createMessage` with a params object,
 * or `roots/list`) or is over `max_payload`, `MCPW_ERR_INVALID_TASK_PAYLOAD` (text that is
 * not JSON: `MCPW_ERR_INVALID_JSON`). Ask only for what the client declared:
 * `mcpw_tasks_serve` answers a `tasks/get` from a client without it with -32021.
 *
 * An unknown task is `MCPW_ERR_UNKNOWN_TASK` and a terminal one `MCPW_ERR_TASK_TERMINAL`
 * (nothing changes). Inputs are read during the call only, and may be views the table lent.
 *
 * # Safety
 * `tasks` is NULL or a live task table; `task`, `key` and `request` point to their lengths in
 * readable bytes (or are NULL with length 0).
 */
enum mcpw_result mcpw_tasks_ask(struct mcpw_tasks *tasks,
                                uint64_t now_ns,
                                const char *task,
                                size_t task_len,
                                const char *key,
                                size_t key_len,
                                const char *request,
                                size_t request_len);

/**
 * Finishes task `task` as `completed` with `result` (a JSON object: what the request would
 * have returned, a `CallToolResult`, `isError: true` included). Outstanding input requests
 * are dropped. A result that is not an object or is over `max_payload` is
 * `MCPW_ERR_INVALID_TASK_PAYLOAD`.
 *
 * An unknown task is `MCPW_ERR_UNKNOWN_TASK` and a terminal one `MCPW_ERR_TASK_TERMINAL`
 * (nothing changes). Inputs are read during the call only, and may be views the table lent.
 *
 * # Safety
 * `tasks` is NULL or a live task table; `task` and `result` point to their lengths in
 * readable bytes (or are NULL with length 0).
 */
enum mcpw_result mcpw_tasks_complete(struct mcpw_tasks *tasks,
                                     uint64_t now_ns,
                                     const char *task,
                                     size_t task_len,
                                     const char *result,
                                     size_t result_len);

/**
 * Finishes task `task` as `failed` with a JSON-RPC error: `code`, `message` (UTF-8) and
 * `data` (any JSON value as text, or NULL for none). For a protocol-level fault; a tool that
 * ran and reported an error completes with `isError: true` instead. The message also becomes
 * the task's `statusMessage`, in place of any progress message (a failed task's
 * `statusMessage` says why it failed). An error over `max_payload` is
 * `MCPW_ERR_INVALID_TASK_PAYLOAD`, and so is a code the task's protocol version does not
 * define (2025-11-25 for a legacy task, 2026-07-28 otherwise; the rules of
 * `mcpw_conn_respond_error`, -32002 written as 2026-07-28's -32602), and -32042 without the
 * `elicitations` of URL elicitation in `data`. Any other integer goes out as given.
 *
 * An unknown task is `MCPW_ERR_UNKNOWN_TASK` and a terminal one `MCPW_ERR_TASK_TERMINAL`
 * (nothing changes). Inputs are read during the call only, and may be views the table lent.
 *
 * # Safety
 * `tasks` is NULL or a live task table; `task`, `message` and `data` point to their lengths
 * in readable bytes (or are NULL with length 0).
 */
enum mcpw_result mcpw_tasks_fail(struct mcpw_tasks *tasks,
                                 uint64_t now_ns,
                                 const char *task,
                                 size_t task_len,
                                 int64_t code,
                                 const char *message,
                                 size_t message_len,
                                 const char *data,
                                 size_t data_len);

/**
 * Ends task `task` as `cancelled`: the work stopped, after
 * `MCPW_TASK_EVENT_CANCEL_REQUESTED` or for the server's own reasons.
 *
 * An unknown task is `MCPW_ERR_UNKNOWN_TASK` and a terminal one `MCPW_ERR_TASK_TERMINAL`
 * (nothing changes). Inputs are read during the call only, and may be views the table lent.
 *
 * # Safety
 * `tasks` is NULL or a live task table; `task` points to `task_len` readable bytes (or is
 * NULL with length 0).
 */
enum mcpw_result mcpw_tasks_cancel(struct mcpw_tasks *tasks,
                                   uint64_t now_ns,
                                   const char *task,
                                   size_t task_len);

/**
 * Answers the peer's request `*id` on `conn` if `method` (UTF-8) is a tasks method of the
 * 2026-07-28 extension: `tasks/get` with the task's `DetailedTask` (its input requests, result or error
 * by status), `tasks/update` and `tasks/cancel` with an empty acknowledgement (their effects
 * come as `mcpw_tasks_poll_event` events), a missing or unknown task with -32602.
 * `*out_served` is true when it answered, and false (nothing answered, nothing changed) for
 * any other method, and for a request that is not a 2026-07-28 one (a 2025-11-25 session's
 * `tasks/get` goes on to `mcpw_tasks_serve_legacy`): answer that one yourself. `params` is the request's params object (JSON
 * text, or NULL when absent).
 *
 * Pass it every request of every connection of the server before your own dispatch (the
 * engine already refuses these methods, with -32021, to a client that did not declare the
 * extension), once you have checked that the caller may see the task: the table checks no
 * access, and the extension requires a check on every task-related request (set
 * `MCPW_POLICY_REVIEW_LISTENS` too, so that listens naming task ids are checked). Afterwards
 * drain `mcpw_tasks_poll_event`, then the connection as after any command. A refusal of the answer by the connection (`MCPW_ERR_UNKNOWN_REQUEST`, say) comes
 * after the table took the request in, as in the Rust API. Inputs are read during the call
 * only, and may be views from this connection's current event.
 *
 * # Safety
 * `tasks` is NULL or a live task table; `conn` is NULL or a live connection handle; `id` is
 * NULL or readable (its string readable for its length); `method` and `params` point to their
 * lengths in readable bytes (or are NULL with length 0); `out_served` is NULL or writable.
 */
enum mcpw_result mcpw_tasks_serve(struct mcpw_tasks *tasks,
                                  uint64_t now_ns,
                                  struct mcpw_conn *conn,
                                  const struct mcpw_id *id,
                                  const char *method,
                                  size_t method_len,
                                  const char *params,
                                  size_t params_len,
                                  bool *out_served);

/**
 * Takes the next thing the client did to a task (or a task's expiry) into `*out_event`,
 * oldest first. When there is none, returns `MCPW_OK` with `kind ==
 * MCPW_TASK_EVENT_NONE`. Call it until then after `mcpw_tasks_serve` and
 * `mcpw_tasks_handle_timeout`. The event's views stay valid until the next call that takes
 * the table non-`const`.
 *
 * # Safety
 * `tasks` is NULL or a live task table; `out_event` is NULL or writable.
 */
enum mcpw_result mcpw_tasks_poll_event(struct mcpw_tasks *tasks,
                                       struct mcpw_task_event *out_event);

/**
 * 2025-11-25: answers the peer's request `*id` on `conn` if `method` (UTF-8) is a tasks
 * method of that version, from `owner` (the session or connection that sent it, as given to
 * `mcpw_tasks_create_legacy`; it sees its own tasks only): `tasks/get` and `tasks/cancel`
 * with the task, `tasks/list` with the owner's tasks (one page), `tasks/result` with the
 * underlying request's result (with the related-task `_meta`) or error once the task has
 * ended. A `tasks/result` on a task still running is not answered now: it comes out of
 * `mcpw_tasks_poll_result` once the task ends (or expires); those the client cancelled meanwhile
 * stop waiting (`conn` is `owner`'s connection), and at most 1024 wait for one task (more get
 * -32603 at once). `tasks/cancel` ends the task as
 * `cancelled` at once and reports `MCPW_TASK_EVENT_CANCEL_REQUESTED` so that the work stops.
 * An unknown task, or cancelling a terminal one, gets -32602. `*out_served` is true when it
 * took the request (answered or waiting), and false (nothing answered, nothing changed) for
 * any other method: answer that one yourself. `params` is the request's params object (JSON
 * text, or NULL when absent).
 *
 * Afterwards drain `mcpw_tasks_poll_event` and `mcpw_tasks_poll_result`, then the connection
 * as after any command. Errors and inputs as for `mcpw_tasks_serve`: after
 * `MCPW_ERR_OUTPUT_FULL` nothing changed (a `tasks/cancel` has not cancelled its task yet);
 * drain the connection and call again.
 *
 * # Safety
 * As for `mcpw_tasks_serve`.
 */
enum mcpw_result mcpw_tasks_serve_legacy(struct mcpw_tasks *tasks,
                                         uint64_t now_ns,
                                         uint64_t owner,
                                         struct mcpw_conn *conn,
                                         const struct mcpw_id *id,
                                         const char *method,
                                         size_t method_len,
                                         const char *params,
                                         size_t params_len,
                                         bool *out_served);

/**
 * 2025-11-25: takes the next `tasks/result` request that can be answered now (its task ended
 * or expired) into `*out_result`, oldest first. When there is none, returns `MCPW_OK` with
 * `ready` false. Call it until then after the calls that end tasks (`mcpw_tasks_complete`,
 * `mcpw_tasks_fail`, `mcpw_tasks_cancel`, `mcpw_tasks_serve_legacy`) and after
 * `mcpw_tasks_handle_timeout`, and answer each with `mcpw_tasks_write_result` (or yourself,
 * from its fields). The views stay valid until the next call that takes the table
 * non-`const`. After a write refused with `MCPW_ERR_OUTPUT_FULL`, the next call returns the
 * same answer again (drain the connection's output first), so that it is not lost.
 *
 * # Safety
 * `tasks` is NULL or a live task table; `out_result` is NULL or writable.
 */
enum mcpw_result mcpw_tasks_poll_result(struct mcpw_tasks *tasks,
                                        struct mcpw_task_result *out_result);

/**
 * 2025-11-25: writes the answer `mcpw_tasks_poll_result` returned last to its request on `conn`
 * (the connection of its `owner`), then forgets it: calling again, or with nothing polled, is
 * `MCPW_ERR_UNKNOWN_REQUEST`. An error `conn` cannot carry (-32042 to a client that did not
 * declare URL elicitation) goes out as -32603 with its message. When the connection refuses it
 * (`MCPW_ERR_UNKNOWN_REQUEST` for a request not in flight there, `MCPW_ERR_CLOSED`, …) the answer
 * is kept, so another connection may be tried; the next poll replaces it, except after
 * `MCPW_ERR_OUTPUT_FULL`: then the next poll returns it again, for a write once the output is
 * drained. A `tasks/result` the client cancelled meanwhile gets nothing (`MCPW_OK`), and its task
 * then counts as not fetched: it is kept for the client's retry within its TTL. Drain the
 * connection afterwards as after any command.
 *
 * # Safety
 * `tasks` is NULL or a live task table; `conn` is NULL or a live connection handle.
 */
enum mcpw_result mcpw_tasks_write_result(struct mcpw_tasks *tasks,
                                         struct mcpw_conn *conn);

/**
 * Reads when the next task expires: `*out_has` is true and `*out_deadline_ns` holds it (on
 * the clock of `now_ns`), or `*out_has` is false and `*out_deadline_ns` is 0 when no task
 * can expire (none, or no TTL). Call `mcpw_tasks_handle_timeout` then; re-arm your timer
 * from it after creating tasks and after each timeout.
 *
 * # Safety
 * `tasks` is NULL or a live task table; each `out_*` is NULL or writable.
 */
enum mcpw_result mcpw_tasks_poll_timeout(const struct mcpw_tasks *tasks,
                                         bool *out_has,
                                         uint64_t *out_deadline_ns);

/**
 * Deletes every task whose TTL ran out by `now_ns` (counted from its creation); a task that
 * was not terminal yet also gets `MCPW_TASK_EVENT_EXPIRED`, so drain
 * `mcpw_tasks_poll_event` next. Calling it early does nothing.
 *
 * # Safety
 * `tasks` is NULL or a live task table.
 */
enum mcpw_result mcpw_tasks_handle_timeout(struct mcpw_tasks *tasks,
                                           uint64_t now_ns);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* MCPWIRE_H */
