package mcpwire

/*
#include "mcpwire.h"
*/
import "C"

import (
	"errors"
	"fmt"
)

// ResultCode is a result code of the mcpwire C ABI (mcpw_result). Codes are grouped in
// ranges: 100-199 reject the caller's arguments, 200-299 a configuration, 300-399 are
// commands the engine refused (the connection, or the Tasks table, is unchanged), 900-999
// concern the library.
type ResultCode int

// The result codes of the C ABI.
const (
	CodeNullArgument           ResultCode = 100
	CodeInvalidUTF8            ResultCode = 101
	CodeInvalidJSON            ResultCode = 102 // not one JSON value, or nested deeper than 124
	CodeJSONWrongType          ResultCode = 103
	CodeDuplicateKey           ResultCode = 104
	CodeInvalidID              ResultCode = 105
	CodeUnknownVersion         ResultCode = 106
	CodeInvalidArgument        ResultCode = 107
	CodeConsumeTooMuch         ResultCode = 108
	CodeStaleView              ResultCode = 109
	CodeNotOwner               ResultCode = 110
	CodeUnknownStream          ResultCode = 111
	CodeUnknownConnection      ResultCode = 112
	CodeReentrant              ResultCode = 113 // a C callback of the library's called back in (not from Go)
	CodeConfigRefused          ResultCode = 200
	CodeClosed                 ResultCode = 300
	CodeClosing                ResultCode = 301
	CodeNotInitialized         ResultCode = 302
	CodeEngineOwned            ResultCode = 303
	CodeNotInVersion           ResultCode = 304
	CodeWrongDirection         ResultCode = 305
	CodeNotNegotiated          ResultCode = 306
	CodeInvalidParams          ResultCode = 307
	CodeCodeNotInVersion       ResultCode = 308
	CodeTooManyInFlight        ResultCode = 309
	CodeOutputFull             ResultCode = 310
	CodeUnknownRequest         ResultCode = 311
	CodeCannotCancelInitialize ResultCode = 312
	CodeNoProgressToken        ResultCode = 313
	CodeNonIncreasingProgress  ResultCode = 314
	CodeRequestScoped          ResultCode = 315
	CodeNotEligible            ResultCode = 316
	CodeTasksFull              ResultCode = 317 // Tasks: the table is full and no task is terminal
	CodeUnknownTask            ResultCode = 318 // Tasks: no such task (never created, expired or dropped)
	CodeTaskTerminal           ResultCode = 319 // Tasks: the task is terminal and never changes again
	CodeTaskKeyReused          ResultCode = 320 // Tasks: the input request key was used before in the task
	CodeTooManyInputRequests   ResultCode = 321 // Tasks: TaskConfig.MaxInputRequests are outstanding
	CodeInvalidTaskPayload     ResultCode = 322 // Tasks: the JSON is not what the call takes, or is over MaxPayload
	CodeRandomRepeats          ResultCode = 323 // Tasks: the random source gave ids in use eight times running
	CodeCommandRefused         ResultCode = 399
	CodePanic                  ResultCode = 900
	CodePoisoned               ResultCode = 901
)

// Message describes the code in English, as the library does.
func (c ResultCode) Message() string {
	return C.GoString(C.mcpw_result_message(C.int(c)))
}

// IsArgument reports whether the code rejects the caller's arguments (100-199).
func (c ResultCode) IsArgument() bool { return c >= 100 && c < 200 }

// IsRefused reports whether the code is a command the engine refused, leaving the connection
// (or the Tasks table) unchanged (300-399).
func (c ResultCode) IsRefused() bool { return c >= 300 && c < 400 }

// IsFatal reports whether the code means the handle is poisoned and must be closed (900-999).
func (c ResultCode) IsFatal() bool { return c >= 900 && c < 1000 }

// ResultError is a failed C ABI call: which operation, and the code the library returned.
// Compare with the sentinels using errors.Is (errors.Is(err, mcpwire.ErrClosed)), which
// matches on the code alone; errors.As gives the code itself.
type ResultError struct {
	// Op is the Go method that failed ("request", "respond", ...); empty in the sentinels.
	Op string
	// Code is the library's result code.
	Code ResultCode
}

// Error gives the operation (when known), the library's message (mcpw_result_message) and the
// code.
func (e *ResultError) Error() string {
	if e.Op == "" {
		return fmt.Sprintf("mcpwire: %s (%d)", e.Code.Message(), int(e.Code))
	}
	return fmt.Sprintf("mcpwire: %s: %s (%d)", e.Op, e.Code.Message(), int(e.Code))
}

// Is matches any *ResultError with the same code, so the sentinels below work with errors.Is.
func (e *ResultError) Is(target error) bool {
	t, ok := target.(*ResultError)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is, one per result code.
var (
	ErrNullArgument           = &ResultError{Code: CodeNullArgument}
	ErrInvalidUTF8            = &ResultError{Code: CodeInvalidUTF8}
	ErrInvalidJSON            = &ResultError{Code: CodeInvalidJSON}
	ErrJSONWrongType          = &ResultError{Code: CodeJSONWrongType}
	ErrDuplicateKey           = &ResultError{Code: CodeDuplicateKey}
	ErrInvalidID              = &ResultError{Code: CodeInvalidID}
	ErrUnknownVersion         = &ResultError{Code: CodeUnknownVersion}
	ErrInvalidArgument        = &ResultError{Code: CodeInvalidArgument}
	ErrConsumeTooMuch         = &ResultError{Code: CodeConsumeTooMuch}
	ErrStaleView              = &ResultError{Code: CodeStaleView}
	ErrNotOwner               = &ResultError{Code: CodeNotOwner}
	ErrUnknownStream          = &ResultError{Code: CodeUnknownStream}
	ErrUnknownConnection      = &ResultError{Code: CodeUnknownConnection}
	ErrReentrant              = &ResultError{Code: CodeReentrant}
	ErrConfigRefused          = &ResultError{Code: CodeConfigRefused}
	ErrClosed                 = &ResultError{Code: CodeClosed}
	ErrClosing                = &ResultError{Code: CodeClosing}
	ErrNotInitialized         = &ResultError{Code: CodeNotInitialized}
	ErrEngineOwned            = &ResultError{Code: CodeEngineOwned}
	ErrNotInVersion           = &ResultError{Code: CodeNotInVersion}
	ErrWrongDirection         = &ResultError{Code: CodeWrongDirection}
	ErrNotNegotiated          = &ResultError{Code: CodeNotNegotiated}
	ErrInvalidParams          = &ResultError{Code: CodeInvalidParams}
	ErrCodeNotInVersion       = &ResultError{Code: CodeCodeNotInVersion}
	ErrTooManyInFlight        = &ResultError{Code: CodeTooManyInFlight}
	ErrOutputFull             = &ResultError{Code: CodeOutputFull}
	ErrUnknownRequest         = &ResultError{Code: CodeUnknownRequest}
	ErrCannotCancelInitialize = &ResultError{Code: CodeCannotCancelInitialize}
	ErrNoProgressToken        = &ResultError{Code: CodeNoProgressToken}
	ErrNonIncreasingProgress  = &ResultError{Code: CodeNonIncreasingProgress}
	ErrRequestScoped          = &ResultError{Code: CodeRequestScoped}
	ErrNotEligible            = &ResultError{Code: CodeNotEligible}
	ErrTasksFull              = &ResultError{Code: CodeTasksFull}
	ErrUnknownTask            = &ResultError{Code: CodeUnknownTask}
	ErrTaskTerminal           = &ResultError{Code: CodeTaskTerminal}
	ErrTaskKeyReused          = &ResultError{Code: CodeTaskKeyReused}
	ErrTooManyInputRequests   = &ResultError{Code: CodeTooManyInputRequests}
	ErrInvalidTaskPayload     = &ResultError{Code: CodeInvalidTaskPayload}
	ErrRandomRepeats          = &ResultError{Code: CodeRandomRepeats}
	ErrCommandRefused         = &ResultError{Code: CodeCommandRefused}
	ErrPanic                  = &ResultError{Code: CodePanic}
	ErrPoisoned               = &ResultError{Code: CodePoisoned}
)

// ErrFreed is returned by every method of a Conn (or a Tasks) after Close released its
// handle, and by a Conn an HTTPServer or HTTPClient lent once it is no longer valid.
var ErrFreed = errors.New("mcpwire: connection handle already closed")

// errServing reports a Serve on a Conn that another Serve (or an HTTPClient's Run) drives.
var errServing = errors.New("mcpwire: Serve is already running on this Conn")

// errNilHandler reports a nil Handler or HTTPApp.
var errNilHandler = errors.New("mcpwire: no handler (nil)")

// check turns a C result into nil or a *ResultError for op.
func check[T ~uint32 | ~int32](op string, rc T) error {
	if rc == 0 {
		return nil
	}
	return &ResultError{Op: op, Code: ResultCode(rc)}
}
