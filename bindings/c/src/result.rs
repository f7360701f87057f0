//! The one result enum of the C ABI, and its messages.

use std::ffi::{CStr, c_char, c_int};

use mcpwire::conn::Error;
use mcpwire::tasks::TaskError;

/// What every fallible `mcpw_*` function returns.
///
/// Codes are grouped in ranges and never reused: 0 is success; 100-199 reject the caller's
/// arguments; 200-299 reject a configuration; 300-399 are commands the engine refused (the
/// connection, or the task table, is unchanged); 900-999 concern the library itself. Gaps in each range are kept
/// for codes added later, so test ranges with `>=` / `<` rather than listing codes.
///
/// "Nothing to do" is never an error: a poll with nothing to report returns `MCPW_OK` with an
/// empty answer. JSON-RPC error codes sent by the peer are event data (`mcpw_event.code`),
/// never results.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum mcpw_result {
    /// Success.
    MCPW_OK = 0,
    /// 100-199, the caller's arguments: a required pointer was NULL (or a NULL pointer came
    /// with a non-zero length).
    MCPW_ERR_NULL_ARGUMENT = 100,
    /// Text that must be UTF-8 is not.
    MCPW_ERR_INVALID_UTF8 = 101,
    /// Text that must be one JSON value is not, or nests arrays and objects deeper than 124
    /// levels: the decoder's limit on a whole message (128, which frames from the peer obey
    /// too) less room for the message around a payload, so that whatever is sent can be read.
    MCPW_ERR_INVALID_JSON = 102,
    /// A JSON value has the wrong type (an object or array was expected).
    MCPW_ERR_JSON_WRONG_TYPE = 103,
    /// A JSON object holds the same key twice where it is read.
    MCPW_ERR_DUPLICATE_KEY = 104,
    /// An `mcpw_id` has an unknown kind, or its string is not the text of a JSON string
    /// (unescaped quotes or control characters, a bad escape).
    MCPW_ERR_INVALID_ID = 105,
    /// A protocol version string that this build does not know.
    MCPW_ERR_UNKNOWN_VERSION = 106,
    /// A number or flag set out of its documented range.
    MCPW_ERR_INVALID_ARGUMENT = 107,
    /// `mcpw_conn_consume` was told more bytes than `mcpw_conn_transmit` lent.
    MCPW_ERR_CONSUME_TOO_MUCH = 108,
    /// A connection view lent by an HTTP server or client is no longer valid: the lender was
    /// called since. Ask it for the view again.
    MCPW_ERR_STALE_VIEW = 109,
    /// A transport call (`mcpw_conn_handle_input`, `_transmit`, …) on a connection view: its
    /// HTTP server or client moves the bytes; feed that handle instead.
    MCPW_ERR_NOT_OWNER = 110,
    /// No such HTTP stream (it ended, or its client went away), or no response waits to be
    /// settled for it.
    MCPW_ERR_UNKNOWN_STREAM = 111,
    /// No such connection in the HTTP server (its session ended or expired, or its stateless
    /// request is done).
    MCPW_ERR_UNKNOWN_CONNECTION = 112,
    /// Called from inside one of your callbacks that the library was running (a random
    /// source, an event store's `append`, `replay` or `forget`): a callback may call no
    /// function that takes a handle. Nothing was done.
    MCPW_ERR_REENTRANT = 113,
    /// 200-299, configuration: `mcpw_conn_new` refused the configuration (no protocol
    /// versions, for example).
    MCPW_ERR_CONFIG_REFUSED = 200,
    /// 300-399, commands the engine refused; the connection (or, for the `mcpw_tasks_*`
    /// calls, the task table) is unchanged. The connection is closed.
    MCPW_ERR_CLOSED = 300,
    /// `mcpw_conn_close` was called: no new requests or notifications.
    MCPW_ERR_CLOSING = 301,
    /// The handshake is not finished: until it is, only pings (and, from a server that has
    /// answered `initialize`, logging) may be sent; before `initialize` arrives, or while a
    /// client's `server/discover` probe is out, nothing.
    MCPW_ERR_NOT_INITIALIZED = 302,
    /// The engine sends this method itself (`initialize`, `notifications/initialized`,
    /// `notifications/cancelled`, `notifications/progress`): use the handshake,
    /// `mcpw_conn_cancel` or `mcpw_conn_progress`.
    MCPW_ERR_ENGINE_OWNED = 303,
    /// The method does not exist in the negotiated protocol version.
    MCPW_ERR_NOT_IN_VERSION = 304,
    /// This role may not send this method.
    MCPW_ERR_WRONG_DIRECTION = 305,
    /// The capability that gates the method was not negotiated (the peer's for a request,
    /// ours for a notification).
    MCPW_ERR_NOT_NEGOTIATED = 306,
    /// Params must be a JSON object, without a `_meta.progressToken` of their own (ask for
    /// progress instead: the engine adds the token) or a `_meta` written twice, and without a
    /// member the sub-capability rules read written twice (an elicitation `mode`, sampling
    /// `tools` or `toolChoice`, and in 2025-11-25 `task`).
    MCPW_ERR_INVALID_PARAMS = 307,
    /// The JSON-RPC error code does not exist in the negotiated protocol version (before one
    /// is negotiated: in any configured version).
    MCPW_ERR_CODE_NOT_IN_VERSION = 308,
    /// Too many of our requests are waiting for an answer (`mcpw_limits.max_outbound_in_flight`).
    MCPW_ERR_TOO_MANY_IN_FLIGHT = 309,
    /// Too many bytes wait for the transport (`mcpw_limits.max_buffered_output`): write
    /// some, then retry.
    MCPW_ERR_OUTPUT_FULL = 310,
    /// No request with this id is in flight (never received, already answered, or, for
    /// `mcpw_conn_cancel`, never sent or already finished).
    MCPW_ERR_UNKNOWN_REQUEST = 311,
    /// `initialize` cannot be cancelled.
    MCPW_ERR_CANNOT_CANCEL_INITIALIZE = 312,
    /// The request carried no progress token, so no progress can be reported for it.
    MCPW_ERR_NO_PROGRESS_TOKEN = 313,
    /// Progress must increase with every notification (and be finite, as must a total).
    MCPW_ERR_NON_INCREASING_PROGRESS = 314,
    /// 2026-07-28: this must be tied to one of the peer's requests (log with `mcpw_conn_log`;
    /// list changes go to `subscriptions/listen` streams).
    MCPW_ERR_REQUEST_SCOPED = 315,
    /// 2026-07-28: "input required" answers only `tools/call`, `prompts/get` and
    /// `resources/read`, and each input request needs a capability the request declared.
    MCPW_ERR_NOT_ELIGIBLE = 316,
    /// Tasks (`mcpw_tasks`): the table holds `mcpw_task_config.max_tasks` tasks and none is
    /// terminal, or the owner holds `max_tasks_per_owner` and none of its tasks is terminal,
    /// so no task was created. Answer the request without a task (or with an error).
    MCPW_ERR_TASKS_FULL = 317,
    /// Tasks: no such task (never created, expired at its TTL, or dropped to make room).
    MCPW_ERR_UNKNOWN_TASK = 318,
    /// Tasks: the task is terminal (completed, failed or cancelled) and never changes again.
    MCPW_ERR_TASK_TERMINAL = 319,
    /// Tasks: this input-request key was used before in the task (keys are unique over a
    /// task's life).
    MCPW_ERR_TASK_KEY_REUSED = 320,
    /// Tasks: the task has `mcpw_task_config.max_input_requests` input requests outstanding
    /// already.
    MCPW_ERR_TOO_MANY_INPUT_REQUESTS = 321,
    /// Tasks: the JSON is not what the call takes (a result is an object, an input request one
    /// of Multi Round-Trip Requests), or it is over `mcpw_task_config.max_payload`.
    MCPW_ERR_INVALID_TASK_PAYLOAD = 322,
    /// Tasks: the random source gave ids already in use eight times running, so it is not
    /// random (a failed `getrandom` that left the buffer as it was, a fixed seed). No task
    /// was created; fix the source.
    MCPW_ERR_RANDOM_REPEATS = 323,
    /// The engine refused the command for a reason this version of the C ABI has no code
    /// for yet.
    MCPW_ERR_COMMAND_REFUSED = 399,
    /// 900-999, the library itself: a bug in mcpwire panicked inside this call. The handle
    /// is poisoned; free it.
    MCPW_ERR_PANIC = 900,
    /// An earlier call on this handle panicked; every later call fails with this code
    /// (`_free` still works).
    MCPW_ERR_POISONED = 901,
}

use mcpw_result::*;

impl mcpw_result {
    /// Every code, for tests and for `mcpw_result_message`.
    pub(crate) const ALL: [mcpw_result; 43] = [
        MCPW_OK,
        MCPW_ERR_NULL_ARGUMENT,
        MCPW_ERR_INVALID_UTF8,
        MCPW_ERR_INVALID_JSON,
        MCPW_ERR_JSON_WRONG_TYPE,
        MCPW_ERR_DUPLICATE_KEY,
        MCPW_ERR_INVALID_ID,
        MCPW_ERR_UNKNOWN_VERSION,
        MCPW_ERR_INVALID_ARGUMENT,
        MCPW_ERR_CONSUME_TOO_MUCH,
        MCPW_ERR_STALE_VIEW,
        MCPW_ERR_NOT_OWNER,
        MCPW_ERR_UNKNOWN_STREAM,
        MCPW_ERR_UNKNOWN_CONNECTION,
        MCPW_ERR_REENTRANT,
        MCPW_ERR_CONFIG_REFUSED,
        MCPW_ERR_CLOSED,
        MCPW_ERR_CLOSING,
        MCPW_ERR_NOT_INITIALIZED,
        MCPW_ERR_ENGINE_OWNED,
        MCPW_ERR_NOT_IN_VERSION,
        MCPW_ERR_WRONG_DIRECTION,
        MCPW_ERR_NOT_NEGOTIATED,
        MCPW_ERR_INVALID_PARAMS,
        MCPW_ERR_CODE_NOT_IN_VERSION,
        MCPW_ERR_TOO_MANY_IN_FLIGHT,
        MCPW_ERR_OUTPUT_FULL,
        MCPW_ERR_UNKNOWN_REQUEST,
        MCPW_ERR_CANNOT_CANCEL_INITIALIZE,
        MCPW_ERR_NO_PROGRESS_TOKEN,
        MCPW_ERR_NON_INCREASING_PROGRESS,
        MCPW_ERR_REQUEST_SCOPED,
        MCPW_ERR_NOT_ELIGIBLE,
        MCPW_ERR_TASKS_FULL,
        MCPW_ERR_UNKNOWN_TASK,
        MCPW_ERR_TASK_TERMINAL,
        MCPW_ERR_TASK_KEY_REUSED,
        MCPW_ERR_TOO_MANY_INPUT_REQUESTS,
        MCPW_ERR_INVALID_TASK_PAYLOAD,
        MCPW_ERR_RANDOM_REPEATS,
        MCPW_ERR_COMMAND_REFUSED,
        MCPW_ERR_PANIC,
        MCPW_ERR_POISONED,
    ];

    /// A short English description, as a static NUL-terminated string.
    pub(crate) fn message(self) -> &'static CStr {
        match self {
            MCPW_OK => c"ok",
            MCPW_ERR_NULL_ARGUMENT => c"a required pointer argument is NULL",
            MCPW_ERR_INVALID_UTF8 => c"text is not valid UTF-8",
            MCPW_ERR_INVALID_JSON => c"text is not a single valid JSON value",
            MCPW_ERR_JSON_WRONG_TYPE => c"the JSON value has the wrong type",
            MCPW_ERR_DUPLICATE_KEY => c"a JSON object holds the same key twice",
            MCPW_ERR_INVALID_ID => c"invalid request id",
            MCPW_ERR_UNKNOWN_VERSION => c"unknown protocol version",
            MCPW_ERR_INVALID_ARGUMENT => c"argument out of range",
            MCPW_ERR_CONSUME_TOO_MUCH => c"consumed more bytes than were lent",
            MCPW_ERR_STALE_VIEW => c"the connection view is stale: ask its HTTP handle again",
            MCPW_ERR_NOT_OWNER => c"a connection view has no transport of its own",
            MCPW_ERR_UNKNOWN_STREAM => c"no such HTTP stream",
            MCPW_ERR_UNKNOWN_CONNECTION => c"no such connection in the HTTP server",
            MCPW_ERR_CONFIG_REFUSED => c"the configuration was refused",
            MCPW_ERR_CLOSED => c"the connection is closed",
            MCPW_ERR_CLOSING => c"the connection is closing",
            MCPW_ERR_NOT_INITIALIZED => c"not allowed before initialization completes",
            MCPW_ERR_ENGINE_OWNED => c"this method is sent by the engine itself",
            MCPW_ERR_NOT_IN_VERSION => c"method not in the negotiated protocol version",
            MCPW_ERR_WRONG_DIRECTION => c"this role may not send this method",
            MCPW_ERR_NOT_NEGOTIATED => c"the capability for this method was not negotiated",
            MCPW_ERR_INVALID_PARAMS => c"params must be a JSON object",
            MCPW_ERR_CODE_NOT_IN_VERSION => {
                c"error code not defined in the negotiated protocol version"
            }
            MCPW_ERR_TOO_MANY_IN_FLIGHT => c"too many requests in flight",
            MCPW_ERR_OUTPUT_FULL => c"output buffer full",
            MCPW_ERR_UNKNOWN_REQUEST => c"no such request in flight",
            MCPW_ERR_CANNOT_CANCEL_INITIALIZE => c"initialize cannot be cancelled",
            MCPW_ERR_NO_PROGRESS_TOKEN => c"the request carried no progress token",
            MCPW_ERR_NON_INCREASING_PROGRESS => c"progress must be finite and increase",
            MCPW_ERR_REQUEST_SCOPED => c"in the stateless era this must be tied to a request",
            MCPW_ERR_NOT_ELIGIBLE => c"input required is not allowed for this request",
            MCPW_ERR_TASKS_FULL => c"the task table is full",
            MCPW_ERR_UNKNOWN_TASK => c"no such task",
            MCPW_ERR_TASK_TERMINAL => c"the task is terminal",
            MCPW_ERR_TASK_KEY_REUSED => c"the input request key was used before in this task",
            MCPW_ERR_TOO_MANY_INPUT_REQUESTS => c"too many input requests outstanding",
            MCPW_ERR_INVALID_TASK_PAYLOAD => {
                c"the JSON is not what the call takes, or is too large"
            }
            MCPW_ERR_RANDOM_REPEATS => c"the random source repeats itself",
            MCPW_ERR_REENTRANT => c"called from inside a callback the library was running",
            MCPW_ERR_COMMAND_REFUSED => c"the engine refused the command",
            MCPW_ERR_PANIC => c"internal error: mcpwire panicked; the handle is poisoned",
            MCPW_ERR_POISONED => c"the handle is poisoned by an earlier internal error",
        }
    }

    /// The code for a raw number from C, if it is one.
    pub(crate) fn from_code(code: c_int) -> Option<mcpw_result> {
        Self::ALL.into_iter().find(|r| *r as c_int == code)
    }
}

impl From<Error> for mcpw_result {
    fn from(e: Error) -> Self {
        // `Error` grows with the protocol; a refusal without a code of its own yet is still
        // a refusal.
        #[allow(unreachable_patterns)]
        match e {
            Error::Closed => MCPW_ERR_CLOSED,
            Error::Closing => MCPW_ERR_CLOSING,
            Error::NotInitialized => MCPW_ERR_NOT_INITIALIZED,
            Error::EngineOwned => MCPW_ERR_ENGINE_OWNED,
            Error::NotInVersion => MCPW_ERR_NOT_IN_VERSION,
            Error::WrongDirection => MCPW_ERR_WRONG_DIRECTION,
            Error::NotNegotiated(_) => MCPW_ERR_NOT_NEGOTIATED,
            Error::InvalidParams => MCPW_ERR_INVALID_PARAMS,
            Error::CodeNotInVersion => MCPW_ERR_CODE_NOT_IN_VERSION,
            Error::TooManyInFlight => MCPW_ERR_TOO_MANY_IN_FLIGHT,
            Error::OutputFull => MCPW_ERR_OUTPUT_FULL,
            Error::UnknownRequest => MCPW_ERR_UNKNOWN_REQUEST,
            Error::CannotCancelInitialize => MCPW_ERR_CANNOT_CANCEL_INITIALIZE,
            Error::NoProgressToken => MCPW_ERR_NO_PROGRESS_TOKEN,
            Error::NonIncreasingProgress => MCPW_ERR_NON_INCREASING_PROGRESS,
            Error::RequestScoped => MCPW_ERR_REQUEST_SCOPED,
            Error::NotEligible => MCPW_ERR_NOT_ELIGIBLE,
            _ => MCPW_ERR_COMMAND_REFUSED,
        }
    }
}

impl From<TaskError> for mcpw_result {
    fn from(e: TaskError) -> Self {
        // `TaskError` may grow like `Error`: a refusal without a code of its own yet is still a
        // refusal.
        #[allow(unreachable_patterns)]
        match e {
            TaskError::Full => MCPW_ERR_TASKS_FULL,
            TaskError::UnknownTask => MCPW_ERR_UNKNOWN_TASK,
            TaskError::Terminal => MCPW_ERR_TASK_TERMINAL,
            TaskError::KeyReused => MCPW_ERR_TASK_KEY_REUSED,
            TaskError::TooManyInputRequests => MCPW_ERR_TOO_MANY_INPUT_REQUESTS,
            TaskError::InvalidPayload => MCPW_ERR_INVALID_TASK_PAYLOAD,
            TaskError::RandomRepeats => MCPW_ERR_RANDOM_REPEATS,
            _ => MCPW_ERR_COMMAND_REFUSED,
        }
    }
}

/// Describes a result code in English.
///
/// Returns a static, NUL-terminated string owned by the library: never free it; it lives as
/// long as the program. Any number is accepted; one that is not a result code gets
/// "unknown result code".
#[unsafe(no_mangle)]
pub extern "C" fn mcpw_result_message(code: c_int) -> *const c_char {
    super::boundary::catch(
        || c"internal error".as_ptr(),
        || {
            mcpw_result::from_code(code)
                .map_or(c"unknown result code", mcpw_result::message)
                .as_ptr()
        },
    )
}
