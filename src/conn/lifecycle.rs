//! The lifecycle: the one place where the connection's phase changes, and the rules about what
//! may be sent or received in each phase.
//!
//! Rules enforced here (quotes paraphrase the spec; see shared/spec/NOTES.md §3):
//!
//! 1. The client's first message is `initialize`; the engine sends it, and it can never be
//!    cancelled. The client answers a successful result with `notifications/initialized`.
//! 2. Until the server has answered `initialize`, a client sends only pings. Until it has
//!    received `notifications/initialized`, a server sends only pings and logging.
//! 3. With `strict_lifecycle` (the default), the same rules hold for what we accept: a request
//!    that arrives too early is answered with -32600, a notification is dropped. Pings are
//!    always answered.
//! 4. `initialize` is accepted once per connection; a second one is answered with -32600.
//! 5. `close` stops new requests and notifications at once, lets answers and cancellations
//!    through, and waits for our requests in flight until the grace deadline; then the
//!    connection is closed. End of input closes it at once.
//! 6. Once closed, the connection accepts nothing and sends nothing.
//! 7. In the stateless era (2026-07-28) there is no handshake: a client is operating once its
//!    `server/discover` probe succeeds, a server as soon as the first stateless request arrives.

use super::Error;
use super::config::Role;
use super::time::Timestamp;
use crate::mcp::MethodKind;

/// The externally visible state of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// The handshake is under way.
    Initializing,
    /// The handshake is done; anything negotiated may flow.
    Operating,
    /// [`close`](super::Connection::close) was called; waiting for requests in flight.
    Closing,
    /// Ended; see the [`Closed`](super::Event::Closed) event for why.
    Closed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Client: `initialize` sent, no answer yet.
    AwaitingInitResult,
    /// Server: nothing received yet.
    AwaitingInitialize,
    /// Server: `initialize` answered, `notifications/initialized` not yet received.
    AwaitingInitialized,
    Operating,
    Closing {
        deadline: Timestamp,
    },
    Closed,
}

/// Whether an incoming message may be processed now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    Yes,
    /// Too early: requests get -32600, notifications are dropped.
    TooEarly,
    /// The connection is closed: ignore.
    Ignore,
}

#[derive(Debug)]
pub(crate) struct Lifecycle {
    phase: Phase,
    role: Role,
    strict: bool,
}

impl Lifecycle {
    pub(crate) fn new(role: Role, strict: bool) -> Self {
        let phase = match role {
            Role::Client => Phase::AwaitingInitResult,
            Role::Server => Phase::AwaitingInitialize,
        };
        Lifecycle {
            phase,
            role,
            strict,
        }
    }

    pub(crate) fn state(&self) -> State {
        match self.phase {
            Phase::AwaitingInitResult | Phase::AwaitingInitialize | Phase::AwaitingInitialized => {
                State::Initializing
            }
            Phase::Operating => State::Operating,
            Phase::Closing { .. } => State::Closing,
            Phase::Closed => State::Closed,
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    pub(crate) fn closing_deadline(&self) -> Option<Timestamp> {
        match self.phase {
            Phase::Closing { deadline } => Some(deadline),
            _ => None,
        }
    }

    /// Server: whether `initialize` is expected now.
    pub(crate) fn awaiting_initialize(&self) -> bool {
        self.phase == Phase::AwaitingInitialize
    }

    /// Server: whether `notifications/initialized` is expected now.
    pub(crate) fn awaiting_initialized(&self) -> bool {
        self.phase == Phase::AwaitingInitialized
    }

    // ---- transitions ----

    /// Server: `initialize` was answered successfully.
    pub(crate) fn initialize_answered(&mut self) {
        if self.phase == Phase::AwaitingInitialize {
            self.phase = Phase::AwaitingInitialized;
        }
    }

    /// Server: `notifications/initialized` arrived. Client: the initialize result was accepted.
    pub(crate) fn handshake_done(&mut self) {
        if matches!(
            self.phase,
            Phase::AwaitingInitialized | Phase::AwaitingInitResult
        ) {
            self.phase = Phase::Operating;
        }
    }

    /// Server: a stateless-era (2026-07-28) request arrived first: there is no handshake.
    pub(crate) fn stateless_started(&mut self) {
        if matches!(
            self.phase,
            Phase::AwaitingInitialize | Phase::AwaitingInitialized
        ) {
            self.phase = Phase::Operating;
        }
    }

    pub(crate) fn begin_close(&mut self, deadline: Timestamp) {
        if self.phase != Phase::Closed && !matches!(self.phase, Phase::Closing { .. }) {
            self.phase = Phase::Closing { deadline };
        }
    }

    pub(crate) fn closed(&mut self) {
        self.phase = Phase::Closed;
    }

    // ---- rules ----

    /// May we send a new request or notification `method` now? Answers, cancellations and
    /// progress are not "new" and are checked by their own commands.
    pub(crate) fn check_send(&self, kind: MethodKind, method: &str) -> Result<(), Error> {
        match self.phase {
            Phase::Closed => return Err(Error::Closed),
            Phase::Closing { .. } => return Err(Error::Closing),
            Phase::Operating => return Ok(()),
            _ => {}
        }
        if !self.strict {
            return Ok(());
        }
        let allowed = match (self.role, kind) {
            (_, MethodKind::Request) => method == "ping",
            (Role::Server, MethodKind::Notification) => method == "notifications/message",
            (Role::Client, MethodKind::Notification) => false,
        };
        if allowed {
            Ok(())
        } else {
            Err(Error::NotInitialized)
        }
    }

    /// May an incoming request or notification `method` be processed now?
    pub(crate) fn admit(&self, kind: MethodKind, method: &str) -> Admit {
        match self.phase {
            Phase::Closed => return Admit::Ignore,
            Phase::Operating | Phase::Closing { .. } => return Admit::Yes,
            _ => {}
        }
        if kind == MethodKind::Request && (method == "ping" || method == "initialize") {
            return Admit::Yes;
        }
        if method == "notifications/initialized" || method == "notifications/cancelled" {
            return Admit::Yes;
        }
        if !self.strict {
            return Admit::Yes;
        }
        let allowed = match (self.role, self.phase) {
            // A client may use the session once it has our answer; its requests can then
            // arrive before `notifications/initialized` only by reordering, which stdio rules
            // out, so accept them.
            (Role::Server, Phase::AwaitingInitialized) => true,
            // Before our answer the client sends nothing else.
            (Role::Server, _) => false,
            // A server may log before the handshake is done.
            (Role::Client, _) => {
                kind == MethodKind::Notification && method == "notifications/message"
            }
        };
        if allowed { Admit::Yes } else { Admit::TooEarly }
    }
}
