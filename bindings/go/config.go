package mcpwire

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Role says which end of a connection to be.
type Role int

// The roles.
const (
	// Client is the host side: it sends initialize and calls tools.
	Client Role = 1
	// Server offers tools, resources and prompts.
	Server Role = 2
)

// String names the role ("client" or "server", else "role(N)"), for logs and messages.
func (r Role) String() string {
	switch r {
	case Client:
		return "client"
	case Server:
		return "server"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ClientEra says how a client chooses the protocol era.
type ClientEra int

// The choices for Config.ClientEra.
const (
	ClientEraDefault ClientEra = 0 // the library's default (auto)
	ClientEraAuto    ClientEra = 1 // probe with server/discover, fall back to initialize
	ClientEraLegacy  ClientEra = 2 // initialize only
	ClientEraModern  ClientEra = 3 // 2026-07-28 only
)

// Limits bounds what a connection holds. A zero field keeps the library's default.
type Limits struct {
	// MaxFrame is the largest frame accepted, in bytes (default 16 MiB).
	MaxFrame int
	// MaxOutboundInFlight is how many of our requests may await an answer at once; more
	// are refused with ErrTooManyInFlight (default 1024).
	MaxOutboundInFlight int
	// MaxInboundInFlight is how many of the peer's requests may be held unanswered at once;
	// more get a JSON-RPC error (default 256).
	MaxInboundInFlight int
	// MaxBufferedOutput is how many bytes of output may wait for the transport; once they
	// are past it, commands fail with ErrOutputFull (default 16 MiB). The command that
	// crosses it succeeds: one large answer is not refused for its size alone.
	MaxBufferedOutput int
	// MaxRememberedIDs is how many cancelled or timed-out ids are remembered (default 1024).
	MaxRememberedIDs int
	// MaxQueuedEvents is how many events may wait for NextEvent; past it, or once the
	// waiting events hold more bytes of frames than MaxBufferedOutput (or MaxFrame, if
	// larger), the peer's further notifications are dropped and counted (default 4096).
	MaxQueuedEvents int
}

// Config is everything a connection is made from. The zero value of each optional field
// means the library's default, so a Config literal names only what it changes:
//
//	cfg := &mcpwire.Config{Role: mcpwire.Server, Name: "demo", Version: "1.0",
//		Capabilities: json.RawMessage(`{"tools":{}}`)}
type Config struct {
	// Role is Client or Server.
	Role Role
	// Name and Version are sent as clientInfo / serverInfo in the handshake.
	Name    string
	Version string
	// Info, when set, replaces the whole clientInfo / serverInfo object (to add title,
	// icons, ...): an object with string name and version (else ErrJSONWrongType).
	Info json.RawMessage
	// Versions are the protocol versions spoken ("2025-06-18"); nil means every version the
	// library knows, 2026-07-28 (the stateless era) included. A client offers the newest of
	// the handshake era in initialize (ClientEra decides whether it probes with
	// server/discover first); a server accepts any it speaks and otherwise answers with its
	// newest.
	Versions []string
	// Capabilities is our capabilities object ({"tools":{}}); nil declares none.
	Capabilities json.RawMessage
	// Instructions (server) are sent in the initialize result; empty sends none.
	Instructions string
	// RequestTimeout is how long each request waits for its answer unless it says otherwise
	// (default 60 s); MaxTotalTimeout bounds a request whose timeout progress keeps
	// restarting (default 10 min). Both round up to whole milliseconds.
	RequestTimeout  time.Duration
	MaxTotalTimeout time.Duration
	// ShutdownGrace is how long the graceful close that Serve and HTTPClient.Run begin when
	// their ctx is cancelled gives the requests in flight either way to be answered (the
	// peer's by the handler, which goes on answering them) before ours are cancelled and the
	// peer's get -32603 (default 2 s; negative: no wait). Raise it for requests whose answers take
	// long and are worth waiting for; Conn.Shutdown takes its own grace.
	ShutdownGrace time.Duration
	// Limits bounds what the connection holds.
	Limits Limits
	// ClientEra (client) says how the era is chosen: ClientEraAuto (the default) probes
	// with server/discover and falls back to initialize. Ignored when Versions hold only
	// one era.
	ClientEra ClientEra

	// Policies. The zero value is the library's default (MCPW_POLICY_DEFAULT).

	// LaxLifecycle stops enforcing what may be sent before initialization completes.
	LaxLifecycle bool
	// ManualPings delivers the peer's ping requests as RequestEvents instead of answering
	// them in the engine.
	ManualPings bool
	// DeliverNonIncreasingProgress delivers progress whose value does not increase (dropped
	// and counted by default).
	DeliverNonIncreasingProgress bool
	// ResetTimeoutOnProgress restarts a request's timeout whenever progress arrives for it
	// (bounded by MaxTotalTimeout); RequestOptions can override it per request.
	ResetTimeoutOnProgress bool
	// ReviewListens (server, 2026-07-28) delivers each subscriptions/listen request as a
	// RequestEvent, to check access before granting it with Conn.GrantListen or refusing it
	// with Conn.RespondError. Unset, the engine grants every item it can honour and the
	// application never sees the listen.
	ReviewListens bool
}

// shutdownGrace is cfg.ShutdownGrace with its default.
func (cfg *Config) shutdownGrace() time.Duration {
	switch {
	case cfg.ShutdownGrace == 0:
		return 2 * time.Second
	case cfg.ShutdownGrace < 0:
		return 0
	}
	return cfg.ShutdownGrace
}

func (cfg *Config) policyFlags() uint32 {
	var flags uint32
	if !cfg.LaxLifecycle {
		flags |= C.MCPW_POLICY_STRICT_LIFECYCLE
	}
	if !cfg.ManualPings {
		flags |= C.MCPW_POLICY_ANSWER_PINGS
	}
	if cfg.DeliverNonIncreasingProgress {
		flags |= C.MCPW_POLICY_DELIVER_NON_INCREASING_PROGRESS
	}
	if cfg.ResetTimeoutOnProgress {
		flags |= C.MCPW_POLICY_RESET_TIMEOUT_ON_PROGRESS
	}
	if cfg.ReviewListens {
		flags |= C.MCPW_POLICY_REVIEW_LISTENS
	}
	return flags
}

// timeoutMillis is a request's Timeout for the engine: 0 for the default, 1 ms (due at
// once) for a negative one, a deadline already passed, which 0 would have turned into the
// default or, for a listen, into none.
func timeoutMillis(d time.Duration) uint64 {
	if d < 0 {
		return 1
	}
	return millisCeil(d)
}

// millisCeil is d in whole milliseconds, rounded up (0 for d <= 0). It divides before
// rounding, so a d near the largest Duration cannot wrap.
func millisCeil(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	ms := uint64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// build makes a C config handle from cfg; the caller frees it.
func (cfg *Config) build() (*C.mcpw_config, error) {
	if cfg == nil {
		return nil, errors.New("mcpwire: no Config (nil)")
	}
	made := C.mcpwgo_config_new(C.uint32_t(cfg.Role), cString(cfg.Name), C.size_t(len(cfg.Name)),
		cString(cfg.Version), C.size_t(len(cfg.Version)))
	if err := check("config", made.rc); err != nil {
		return nil, err
	}
	config := made.config
	if err := cfg.apply(config); err != nil {
		C.mcpw_config_free(config)
		return nil, err
	}
	return config, nil
}

func (cfg *Config) apply(config *C.mcpw_config) error {
	if cfg.Versions != nil {
		joined := make([]byte, 0, 16*len(cfg.Versions))
		lens := make([]C.size_t, len(cfg.Versions)+1) // never empty, so &lens[0] is valid
		for i, v := range cfg.Versions {
			joined = append(joined, v...)
			lens[i] = C.size_t(len(v))
		}
		rc := C.mcpwgo_config_set_versions(config, cBytes(joined), &lens[0], C.size_t(len(cfg.Versions)))
		if err := check("config versions", rc); err != nil {
			return err
		}
	}
	if cfg.Info != nil {
		if err := check("config info", C.mcpw_config_set_info(config, cBytes(cfg.Info), C.size_t(len(cfg.Info)))); err != nil {
			return err
		}
	}
	if cfg.Capabilities != nil {
		rc := C.mcpw_config_set_capabilities(config, cBytes(cfg.Capabilities), C.size_t(len(cfg.Capabilities)))
		if err := check("config capabilities", rc); err != nil {
			return err
		}
	}
	if cfg.Instructions != "" {
		rc := C.mcpw_config_set_instructions(config, cString(cfg.Instructions), C.size_t(len(cfg.Instructions)))
		if err := check("config instructions", rc); err != nil {
			return err
		}
	}
	if cfg.RequestTimeout > 0 || cfg.MaxTotalTimeout > 0 {
		request, total := millisCeil(cfg.RequestTimeout), millisCeil(cfg.MaxTotalTimeout)
		if request == 0 {
			request = 60_000
		}
		if total == 0 {
			total = 600_000
		}
		rc := C.mcpw_config_set_timeouts(config, C.uint64_t(request), C.uint64_t(total))
		if err := check("config timeouts", rc); err != nil {
			return err
		}
	}
	if cfg.Limits != (Limits{}) {
		got := C.mcpwgo_config_get_limits(config)
		if err := check("config limits", got.rc); err != nil {
			return err
		}
		l := got.limits
		set := func(field *C.size_t, v int) {
			if v > 0 {
				*field = C.size_t(v)
			}
		}
		set(&l.max_frame, cfg.Limits.MaxFrame)
		set(&l.max_outbound_in_flight, cfg.Limits.MaxOutboundInFlight)
		set(&l.max_inbound_in_flight, cfg.Limits.MaxInboundInFlight)
		set(&l.max_buffered_output, cfg.Limits.MaxBufferedOutput)
		set(&l.max_remembered_ids, cfg.Limits.MaxRememberedIDs)
		set(&l.max_queued_events, cfg.Limits.MaxQueuedEvents)
		if err := check("config limits", C.mcpw_config_set_limits(config, &l)); err != nil {
			return err
		}
	}
	if cfg.ClientEra != ClientEraDefault {
		if err := check("config client era", C.mcpw_config_set_client_era(config, C.uint32_t(cfg.ClientEra))); err != nil {
			return err
		}
	}
	return check("config policy", C.mcpw_config_set_policy(config, C.uint32_t(cfg.policyFlags())))
}
