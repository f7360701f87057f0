//! Where the events of handshake-era sessions wait for a client that reconnects with
//! `Last-Event-ID`.
//!
//! [`HttpServer`](super::HttpServer) writes every SSE event of a session's streams to an
//! [`EventStore`] before it lends the bytes to the host, and replays from it when a client
//! resumes a stream. The default, [`MemoryEventStore`], keeps a bounded number of events per
//! session in this process. A deployment with several server processes behind a load balancer
//! supplies a store they share (Redis, a database), so a stream dropped on one replica resumes
//! on another.

use std::collections::{HashMap, VecDeque};

use super::HttpStreamId;

/// Storage for resumable SSE events, keyed by session, stream and event number.
///
/// What an implementation must guarantee:
///
/// - **Order and exactness.** [`replay`](EventStore::replay) hands out the events of the
///   given stream whose number is greater than `after`, in increasing number, each once,
///   byte for byte as appended. Events of other streams are never mixed in.
/// - **Durability before delivery.** [`append`](EventStore::append) returns only once the
///   event is stored: the server lends the bytes to the client after it, so an event a client
///   saw can always be replayed to the next client that presents a later `Last-Event-ID`
///   (from any replica that shares the store).
/// - **Bounds.** A store may drop a session's oldest events to stay within its bounds; a
///   resumption from before them then replays only what is left. Say what your bound is.
/// - **Cleanup.** After [`forget`](EventStore::forget) the session's events are gone (the
///   session ended, expired or was evicted).
///
/// Event numbers increase per session; stream ids are unique per server (a shared store
/// serving several replicas needs each replica to draw stream ids from its own range).
pub trait EventStore: Send {
    /// Stores one SSE event (`bytes`, complete with its `id:` line) of `session`'s `stream`.
    fn append(&mut self, session: &str, stream: HttpStreamId, event: u64, bytes: &[u8]);

    /// Calls `out` with each stored event of `session`'s `stream` numbered above `after`, in
    /// order.
    fn replay(
        &mut self,
        session: &str,
        stream: HttpStreamId,
        after: u64,
        out: &mut dyn FnMut(&[u8]),
    );

    /// Drops everything stored for `session`.
    fn forget(&mut self, session: &str);
}

/// Storage for handshake-era sessions that several server processes share, so that a
/// session opened on one replica is served by any other.
///
/// Without one (the default), a session lives in the memory of the process that opened it,
/// and a request naming it on another process gets 404. With one, the process that opens a
/// session records the `initialize` request it was opened with; a process that gets a request
/// for a session it does not hold loads that request and replays it into a fresh connection
/// (the negotiation is deterministic for servers configured alike), then serves the session.
///
/// What an implementation must guarantee:
///
/// - **Visibility.** Once [`create`](SessionStore::create) returns, every process sharing the
///   store can [`load`](SessionStore::load) the session: the server hands out the session id
///   after it.
/// - **Deletion everywhere.** After [`forget`](SessionStore::forget) (the client's DELETE on
///   any replica), [`touch`](SessionStore::touch) and `load` report the session gone on every
///   replica, which then answer 404 as the specification requires.
/// - **Expiry.** A session no replica touched for the server's
///   [`session_idle_timeout`](super::HttpServerConfig::session_idle_timeout) may be dropped;
///   `touch` restarts that clock.
///
/// The server calls these methods synchronously, once per request for a session it serves:
/// an implementation over the network adds one round trip to each such request.
pub trait SessionStore: Send {
    /// Records a session that this process just opened, with the JSON text of the
    /// `initialize` request that opened it.
    fn create(&mut self, session: &str, initialize: &str);

    /// The `initialize` request of a live session that this process does not hold, or
    /// `None` when no replica knows it (never opened, deleted or expired). Counts as a touch.
    fn load(&mut self, session: &str) -> Option<String>;

    /// Whether the session is still alive (not deleted on any replica, not expired), marking
    /// it active now.
    fn touch(&mut self, session: &str) -> bool;

    /// Deletes the session for every replica (the client ended it).
    fn forget(&mut self, session: &str);
}

/// The default [`EventStore`]: the last `per_session` events of each session, and at most
/// `bytes_per_session` bytes of them, in this process's memory. Use it for a single server
/// process.
#[derive(Debug)]
pub struct MemoryEventStore {
    per_session: usize,
    bytes_per_session: usize,
    sessions: HashMap<String, Kept>,
}

/// One session's events, oldest first, and their total size.
#[derive(Debug, Default)]
struct Kept {
    bytes: usize,
    events: VecDeque<(u64, HttpStreamId, Vec<u8>)>,
}

impl MemoryEventStore {
    /// The default byte bound per session, 4 MiB (the default body limit).
    pub const DEFAULT_BYTES_PER_SESSION: usize = 4 * 1024 * 1024;

    /// Keeps at most `per_session` events per session (the oldest go first), and at most
    /// [`DEFAULT_BYTES_PER_SESSION`](Self::DEFAULT_BYTES_PER_SESSION) bytes of them.
    pub fn new(per_session: usize) -> Self {
        Self::with_bytes(per_session, Self::DEFAULT_BYTES_PER_SESSION)
    }

    /// Keeps at most `per_session` events and `bytes_per_session` bytes of them per session;
    /// the oldest go first. The newest event is always kept, so a session holds at most the
    /// larger of `bytes_per_session` and its largest event. Use it where the application's
    /// answers may be large (file contents): a count alone would let a session keep that many
    /// of them.
    pub fn with_bytes(per_session: usize, bytes_per_session: usize) -> Self {
        MemoryEventStore {
            per_session,
            bytes_per_session,
            sessions: HashMap::new(),
        }
    }

    /// How many events are stored, over all sessions.
    pub fn len(&self) -> usize {
        self.sessions.values().map(|k| k.events.len()).sum()
    }

    /// How many bytes of events are stored, over all sessions.
    pub fn bytes(&self) -> usize {
        self.sessions.values().map(|k| k.bytes).sum()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
}

impl EventStore for MemoryEventStore {
    fn append(&mut self, session: &str, stream: HttpStreamId, event: u64, bytes: &[u8]) {
        if self.per_session == 0 {
            return;
        }
        let kept = match self.sessions.get_mut(session) {
            Some(kept) => kept,
            None => self.sessions.entry(session.to_owned()).or_default(),
        };
        kept.events.push_back((event, stream, bytes.to_vec()));
        kept.bytes += bytes.len();
        while kept.events.len() > self.per_session
            || (kept.bytes > self.bytes_per_session && kept.events.len() > 1)
        {
            if let Some((_, _, old)) = kept.events.pop_front() {
                kept.bytes -= old.len();
            }
        }
    }

    fn replay(
        &mut self,
        session: &str,
        stream: HttpStreamId,
        after: u64,
        out: &mut dyn FnMut(&[u8]),
    ) {
        let events = self.sessions.get(session).map(|k| &k.events);
        for (event, s, bytes) in events.into_iter().flatten() {
            if *s == stream && *event > after {
                out(bytes);
            }
        }
    }

    fn forget(&mut self, session: &str) {
        self.sessions.remove(session);
        if self.sessions.capacity() > 4 * self.sessions.len() + 64 {
            self.sessions.shrink_to(2 * self.sessions.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_one_streams_later_events_in_order_within_the_bound() {
        let mut store = MemoryEventStore::new(3);
        let (a, b) = (HttpStreamId(1), HttpStreamId(2));
        store.append("s", a, 1, b"a1");
        store.append("s", b, 2, b"b2");
        store.append("s", a, 3, b"a3");
        store.append("t", a, 1, b"other session");
        let replay = |store: &mut MemoryEventStore, stream, after| {
            let mut seen = Vec::new();
            store.replay("s", stream, after, &mut |e| seen.push(e.to_vec()));
            seen
        };
        assert_eq!(
            replay(&mut store, a, 0),
            vec![b"a1".to_vec(), b"a3".to_vec()]
        );
        assert_eq!(replay(&mut store, a, 1), vec![b"a3".to_vec()]);
        assert_eq!(replay(&mut store, b, 0), vec![b"b2".to_vec()]);
        // Over the bound, the oldest goes.
        store.append("s", a, 4, b"a4");
        assert_eq!(
            replay(&mut store, a, 0),
            vec![b"a3".to_vec(), b"a4".to_vec()]
        );
        assert_eq!(store.len(), 4);
        store.forget("s");
        assert!(replay(&mut store, a, 0).is_empty());
        store.forget("t");
        assert!(store.is_empty());
    }

    /// Past the byte bound the oldest go too, but the newest event always stays.
    #[test]
    fn a_session_keeps_at_most_its_bytes_and_always_the_newest_event() {
        let mut store = MemoryEventStore::with_bytes(100, 10);
        let a = HttpStreamId(1);
        let all = |store: &mut MemoryEventStore| {
            let mut seen = Vec::new();
            store.replay("s", a, 0, &mut |e| seen.push(e.to_vec()));
            seen
        };
        store.append("s", a, 1, b"1234");
        store.append("s", a, 2, b"5678");
        assert_eq!((store.len(), store.bytes()), (2, 8));
        store.append("s", a, 3, b"9abc");
        assert_eq!(all(&mut store), vec![b"5678".to_vec(), b"9abc".to_vec()]);
        assert_eq!(store.bytes(), 8);
        store.append("s", a, 4, b"a long event of 24 bytes");
        assert_eq!(all(&mut store), vec![b"a long event of 24 bytes".to_vec()]);
        assert_eq!((store.len(), store.bytes()), (1, 24));
        store.append("t", a, 1, b"12345678");
        assert_eq!(store.bytes(), 32, "each session has its own bound");
        store.forget("s");
        assert_eq!(store.bytes(), 8);
    }
}
