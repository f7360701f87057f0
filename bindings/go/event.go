package mcpwire

import (
	"encoding/json"
	"strconv"
)

// Event is one thing that happened on a connection, returned by Conn.NextEvent. It is one
// of the *Event types below; switch on the type:
//
//	switch ev := ev.(type) {
//	case *mcpwire.RequestEvent:   // answer with Respond / RespondError
//	case *mcpwire.ResponseEvent:  // ev.Request answered with ev.Result
//	case *mcpwire.ClosedEvent:    // always the last event
//	}
//
// Events own their data (strings and JSON are copied out of the library), so they may be
// kept for as long as needed. Treat a type you do not know as informational.
type Event interface {
	isEvent()
}

// ---- Lifecycle --------------------------------------------------------------------------

// ReadyEvent: the handshake finished; requests may flow both ways. Fires once per
// connection, but once per session on an HTTPClient: when a handshake-era session expires
// (the server answers 404), the client starts a new one, which is ready again.
type ReadyEvent struct {
	// Version is the negotiated protocol version ("2025-11-25").
	Version string
}

// ClosedEvent: the connection ended. Always the last event; every command fails with
// ErrClosed afterwards.
type ClosedEvent struct {
	Reason CloseReason
	// Code is the error code that rejected initialize (CloseInitializeRejected).
	Code int64
	// Version is the version the server chose that we do not speak
	// (CloseUnsupportedVersion); for CloseTransportFailed, what failed, in words ("the
	// connection failed", "HTTP status 404 without an answer"); for CloseInitializeRejected,
	// the error's message, which says why (up to 1,024 bytes), or, with Code -32022, the
	// JSON array of the versions the server supports.
	Version string
}

// ---- From the peer ----------------------------------------------------------------------

// RequestEvent: the peer sent a request. Answer it with Conn.Respond or Conn.RespondError,
// now or later.
type RequestEvent struct {
	ID     ID
	Method string
	// Params is the raw params object, or nil when absent.
	Params json.RawMessage
}

// NotificationEvent: the peer sent a notification the engine does not consume itself.
type NotificationEvent struct {
	Method string
	// Params is the raw params object, or nil when absent.
	Params json.RawMessage
}

// PeerCancelledEvent: the peer cancelled one of its requests. Stop working on it; an answer
// given afterwards is not sent.
type PeerCancelledEvent struct {
	ID ID
	// Reason is the peer's reason, if it gave one (HasReason).
	Reason    string
	HasReason bool
}

// ElicitationCompleteEvent (2025-11-25): the out-of-band interaction of a URL-mode
// elicitation we know of (from an elicitation/create in URL mode, or a
// URLElicitationRequiredEvent) finished. Once per elicitation id; completions of unknown or
// already-completed ids are dropped (Stats.IgnoredElicitationCompletions).
type ElicitationCompleteEvent struct {
	ElicitationID string
}

// ---- Our requests -----------------------------------------------------------------------

// ResponseEvent: our request got its result. Ends the request.
type ResponseEvent struct {
	Request RequestID
	Result  json.RawMessage
}

// ErrorEvent: our request got an error answer. Ends the request.
type ErrorEvent struct {
	Request RequestID
	// Code is the JSON-RPC error code.
	Code    int64
	Message string
	// Data is the raw error data, or nil when absent.
	Data json.RawMessage
}

// ProgressEvent: progress on our request (only for requests sent with progress). Repeats.
type ProgressEvent struct {
	Request  RequestID
	Progress float64
	// Total is meaningful when HasTotal.
	Total    float64
	HasTotal bool
	// Message is the progress message, if any (HasMessage).
	Message    string
	HasMessage bool
}

// TimedOutEvent: our request got no answer in time; the peer has been told it is cancelled.
// Ends the request.
type TimedOutEvent struct {
	Request RequestID
}

// AbandonedEvent: the connection ended (or began its graceful close, for our own
// subscriptions/listen, which the close cancels) before our request was answered, or
// (2026-07-28, stdio) the server tore down our listen with notifications/cancelled (then
// listen again if still wanted). Ends the request.
type AbandonedEvent struct {
	Request RequestID
}

// InputRequiredEvent (2026-07-28): the server needs more input before it can answer our
// request. Fulfil InputRequests (elicitation, sampling, roots), then call Conn.Retry with
// the responses; the engine echoes the request state itself. Ends the request (the retry
// is a new one).
type InputRequiredEvent struct {
	Request RequestID
	// InputRequests is the raw inputRequests object, or nil when absent.
	InputRequests json.RawMessage
	// RequestState is the opaque requestState, if any (HasRequestState).
	RequestState    string
	HasRequestState bool
}

// InvalidResponseEvent: the peer answered our request with something invalid (a 2026-07-28
// result with an unknown resultType, a malformed "input required"). Ends the request.
type InvalidResponseEvent struct {
	Request RequestID
}

// TaskCreatedEvent: the server answered our request with a task handle instead of its
// result (2026-07-28 with the tasks extension declared, or a 2025-11-25 task-augmented
// request). Poll tasks/get with the task's id (in 2025-11-25, tasks/result waits for its
// end). Ends the request.
type TaskCreatedEvent struct {
	Request RequestID
	// Task is the raw CreateTaskResult: {"resultType":"task","taskId":...} in 2026-07-28,
	// {"task":{"taskId":...}} in 2025-11-25.
	Task json.RawMessage
}

// URLElicitationRequiredEvent (2025-11-25): the server answered our request with -32042, it
// needs the user to complete URL-mode elicitations first. Show each URL to the user (open it
// only with their consent), then send the request again; each end may come as an
// ElicitationCompleteEvent. Ends the request.
type URLElicitationRequiredEvent struct {
	Request RequestID
	// Elicitations is the raw elicitations array: objects with mode "url", elicitationId, url
	// and message (checked).
	Elicitations json.RawMessage
}

// ---- The peer's mistakes ----------------------------------------------------------------

// ViolationEvent: the peer broke a rule; the engine already answered as the spec says.
type ViolationEvent struct {
	Violation Violation
	// DecodeReason says what was wrong with the frame, for ViolationParse and
	// ViolationInvalidMessage.
	DecodeReason DecodeReason
	// ID is the message's id, when it had one (else ID.IsZero()).
	ID ID
	// Method is the message's method, when it had one.
	Method string
}

// FailedEvent: our request, over HTTP, could not be carried (an HTTP error status without an
// answer, a failed connection, a stream that ended early and could not be resumed). Ends the
// request.
type FailedEvent struct {
	Request RequestID
	// Status is the HTTP status, or 0.
	Status int
	// Reason says what went wrong, in English.
	Reason string
}

// UnknownEvent: an event kind this version of the binding does not know. Ignore it.
type UnknownEvent struct {
	Kind int
}

func (*ReadyEvent) isEvent()                  {}
func (*FailedEvent) isEvent()                 {}
func (*ClosedEvent) isEvent()                 {}
func (*RequestEvent) isEvent()                {}
func (*NotificationEvent) isEvent()           {}
func (*PeerCancelledEvent) isEvent()          {}
func (*ResponseEvent) isEvent()               {}
func (*ErrorEvent) isEvent()                  {}
func (*ProgressEvent) isEvent()               {}
func (*TimedOutEvent) isEvent()               {}
func (*AbandonedEvent) isEvent()              {}
func (*InputRequiredEvent) isEvent()          {}
func (*InvalidResponseEvent) isEvent()        {}
func (*TaskCreatedEvent) isEvent()            {}
func (*URLElicitationRequiredEvent) isEvent() {}
func (*ElicitationCompleteEvent) isEvent()    {}
func (*ViolationEvent) isEvent()              {}
func (*UnknownEvent) isEvent()                {}

// ---- Codes carried by events ------------------------------------------------------------

// CloseReason says why the connection ended (ClosedEvent).
type CloseReason int

// The close reasons.
const (
	CloseLocal                   CloseReason = 1   // Shutdown finished
	CloseEOF                     CloseReason = 2   // FeedEOF: the transport ended
	CloseUnsupportedVersion      CloseReason = 3   // client: the server chose a version we do not speak
	CloseInitializeRejected      CloseReason = 4   // client: initialize got an error (Code)
	CloseInvalidInitializeResult CloseReason = 5   // client: the initialize result was malformed
	CloseInitializeTimedOut      CloseReason = 6   // client: no answer to initialize in time
	ClosePeerNotReading          CloseReason = 7   // the peer sent traffic needing replies without reading ours
	CloseTransportFailed         CloseReason = 8   // client over HTTP: the handshake could not be carried (Code: HTTP status or 0)
	CloseOther                   CloseReason = 999 // a reason this binding has no name for
)

var closeReasonNames = map[CloseReason]string{
	CloseLocal: "local", CloseEOF: "eof", CloseUnsupportedVersion: "unsupported-version",
	CloseInitializeRejected: "initialize-rejected", CloseInvalidInitializeResult: "invalid-initialize-result",
	CloseInitializeTimedOut: "initialize-timed-out", ClosePeerNotReading: "peer-not-reading", CloseTransportFailed: "transport-failed", CloseOther: "other",
}

// String names the reason ("peer-not-reading"), or gives its number for one this binding
// does not know ("close-reason(42)"): for logs and messages.
func (r CloseReason) String() string { return enumName(closeReasonNames, r, "close-reason") }

// Violation says what rule the peer broke (ViolationEvent).
type Violation int

// The violations.
const (
	ViolationParse                  Violation = 1
	ViolationInvalidMessage         Violation = 2
	ViolationFrameTooLong           Violation = 3
	ViolationUnknownResponse        Violation = 4
	ViolationDuplicateRequestID     Violation = 5
	ViolationBeforeInitialization   Violation = 6
	ViolationAlreadyInitialized     Violation = 7
	ViolationMethodNotAvailable     Violation = 8
	ViolationNotificationNotAllowed Violation = 9
	ViolationInvalidParams          Violation = 10
	ViolationBatchNotAllowed        Violation = 11
	ViolationTooManyRequests        Violation = 12
	ViolationUnsupportedVersion     Violation = 13 // a 2026-07-28 request for a version we do not speak
	ViolationWrongEra               Violation = 14 // a message that does not belong to the connection's era
	// ViolationMissingClientCapability: a 2026-07-28 request that needs a client capability
	// its _meta did not declare (the tasks methods without the tasks extension); answered
	// with -32021.
	ViolationMissingClientCapability Violation = 15
	ViolationOther                   Violation = 999
)

var violationNames = map[Violation]string{
	ViolationParse: "parse", ViolationInvalidMessage: "invalid-message", ViolationFrameTooLong: "frame-too-long",
	ViolationUnknownResponse: "unknown-response", ViolationDuplicateRequestID: "duplicate-request-id",
	ViolationBeforeInitialization: "before-initialization", ViolationAlreadyInitialized: "already-initialized",
	ViolationMethodNotAvailable: "method-not-available", ViolationNotificationNotAllowed: "notification-not-allowed",
	ViolationInvalidParams: "invalid-params", ViolationBatchNotAllowed: "batch-not-allowed",
	ViolationTooManyRequests: "too-many-requests", ViolationUnsupportedVersion: "unsupported-version",
	ViolationWrongEra: "wrong-era", ViolationMissingClientCapability: "missing-client-capability",
	ViolationOther: "other",
}

// String names the violation ("unknown-response"), or gives its number for one this binding
// does not know ("violation(42)"): for logs and messages.
func (v Violation) String() string { return enumName(violationNames, v, "violation") }

// DecodeReason says exactly what was wrong with a frame: 1-99 for ViolationParse, 100-199
// for ViolationInvalidMessage. See mcpw_decode_reason in mcpwire.h for each value.
type DecodeReason int

// The decode reasons.
const (
	DecodeNone                  DecodeReason = 0
	DecodeInvalidUTF8           DecodeReason = 1
	DecodeUnexpectedEnd         DecodeReason = 2
	DecodeUnexpectedByte        DecodeReason = 3
	DecodeControlCharacter      DecodeReason = 4
	DecodeInvalidEscape         DecodeReason = 5
	DecodeLoneSurrogate         DecodeReason = 6
	DecodeInvalidNumber         DecodeReason = 7
	DecodeTrailingCharacters    DecodeReason = 8
	DecodeTooDeep               DecodeReason = 9
	DecodeNotAnObject           DecodeReason = 100
	DecodeEmptyBatch            DecodeReason = 101
	DecodeDuplicateKey          DecodeReason = 102
	DecodeCaseVariantKey        DecodeReason = 103
	DecodeMissingVersion        DecodeReason = 104
	DecodeWrongVersion          DecodeReason = 105
	DecodeInvalidID             DecodeReason = 106
	DecodeFractionalID          DecodeReason = 107
	DecodeIDOutOfRange          DecodeReason = 108
	DecodeNullID                DecodeReason = 109
	DecodeMissingID             DecodeReason = 110
	DecodeMethodNotString       DecodeReason = 111
	DecodeParamsNotObject       DecodeReason = 112
	DecodeResultAndError        DecodeReason = 113
	DecodeAmbiguousKind         DecodeReason = 114
	DecodeNotAMessage           DecodeReason = 115
	DecodeErrorNotObject        DecodeReason = 116
	DecodeErrorCodeNotInteger   DecodeReason = 117
	DecodeErrorMessageNotString DecodeReason = 118
	DecodeBatchTooLarge         DecodeReason = 119
	DecodeOther                 DecodeReason = 999
)

var decodeReasonNames = map[DecodeReason]string{
	DecodeNone: "none", DecodeInvalidUTF8: "invalid-utf8", DecodeUnexpectedEnd: "unexpected-end",
	DecodeUnexpectedByte: "unexpected-byte", DecodeControlCharacter: "control-character",
	DecodeInvalidEscape: "invalid-escape", DecodeLoneSurrogate: "lone-surrogate",
	DecodeInvalidNumber: "invalid-number", DecodeTrailingCharacters: "trailing-characters",
	DecodeTooDeep: "too-deep", DecodeNotAnObject: "not-an-object", DecodeEmptyBatch: "empty-batch",
	DecodeDuplicateKey: "duplicate-key", DecodeCaseVariantKey: "case-variant-key",
	DecodeMissingVersion: "missing-version", DecodeWrongVersion: "wrong-version",
	DecodeInvalidID: "invalid-id", DecodeFractionalID: "fractional-id",
	DecodeIDOutOfRange: "id-out-of-range", DecodeNullID: "null-id", DecodeMissingID: "missing-id",
	DecodeMethodNotString: "method-not-string", DecodeParamsNotObject: "params-not-object",
	DecodeResultAndError: "result-and-error", DecodeAmbiguousKind: "ambiguous-kind",
	DecodeNotAMessage: "not-a-message", DecodeErrorNotObject: "error-not-object",
	DecodeErrorCodeNotInteger:   "error-code-not-integer",
	DecodeErrorMessageNotString: "error-message-not-string", DecodeBatchTooLarge: "batch-too-large",
	DecodeOther: "other",
}

// String names the reason ("wrong-version"), or gives its number for one this binding does
// not know ("decode-reason(42)").
func (d DecodeReason) String() string { return enumName(decodeReasonNames, d, "decode-reason") }

// State is where a connection's lifecycle stands (Conn.State).
type State int

// The states.
const (
	StateInitializing State = 1
	StateOperating    State = 2
	StateClosing      State = 3
	StateClosed       State = 4
	StateOther        State = 999
)

var stateNames = map[State]string{
	StateInitializing: "initializing", StateOperating: "operating", StateClosing: "closing",
	StateClosed: "closed", StateOther: "other",
}

// String names the state ("operating"), or gives its number for one this binding does not
// know ("state(42)"): for logs and messages.
func (s State) String() string { return enumName(stateNames, s, "state") }

// Era is the protocol era in force (Conn.Era).
type Era int

// The eras.
const (
	// EraUndecided: a client still probing which era the server speaks.
	EraUndecided Era = 0
	// EraLegacy: the initialize handshake (2024-11-05 to 2025-11-25).
	EraLegacy Era = 1
	// EraModern: 2026-07-28, stateless, discovered with server/discover.
	EraModern Era = 2
	EraOther  Era = 999
)

var eraNames = map[Era]string{EraUndecided: "undecided", EraLegacy: "legacy", EraModern: "modern", EraOther: "other"}

// String names the era ("modern"), or gives its number for one this binding does not know
// ("era(42)"): for logs and messages.
func (e Era) String() string { return enumName(eraNames, e, "era") }

// LogLevel is a log message's severity (Conn.Log), as syslog orders them.
type LogLevel int

// The log levels.
const (
	LogEmergency LogLevel = iota
	LogAlert
	LogCritical
	LogError
	LogWarning
	LogNotice
	LogInfo
	LogDebug
)

func enumName[T ~int](names map[T]string, v T, what string) string {
	if n, ok := names[v]; ok {
		return n
	}
	return what + "(" + strconv.Itoa(int(v)) + ")"
}
