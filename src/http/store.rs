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
use std::fmt;

use super::HttpStreamId;

/// A shared store could not be read just now (it timed out, or cannot be reached): return it
/// from [`EventStore::replay`] or [`SessionStore::load`] instead of an empty answer. The
/// server then answers the request 503 with `Retry-After`, so the client tries again, where
/// an empty answer would lose what is stored: a resumed stream would end without the answer
/// it carries, a session would be taken for unknown (404) and its client would start over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreUnavailable;

impl fmt::Display for StoreUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the shared store could not be read")
    }
}

impl std::error::Error for StoreUnavailable {}

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
///   session ended, expired or was evicted, or its server was dropped without a shared
///   [`SessionStore`]: the server forgets each live session then).
///
/// Event numbers increase per stream, in the order each stream's events are appended; across
/// a session's streams a later number may be appended before an earlier one (a request's
/// stream stores its events once the host first drains it). Numbers are not unique per
/// session: a session restored from a shared [`SessionStore`] (on another replica, or on
/// this one after it left memory) numbers its events from 1 again, on streams of its own.
/// Key events by session, stream and number. Stream ids are unique per server (a shared
/// store serving several replicas needs each replica to draw stream ids from its own range).
pub trait EventStore: Send {
    /// Stores one SSE event (`bytes`, complete with its `id:` line) of `session`'s `stream`.
    fn append(&mut self, session: &str, stream: HttpStreamId, event: u64, bytes: &[u8]);

    /// Calls `out` with each stored event of `session`'s `stream` numbered above `after`, in
    /// order. [`StoreUnavailable`] when the store could not be read (then `out` must not
    /// have been called): the client is told to come back.
    fn replay(
        &mut self,
        session: &str,
        stream: HttpStreamId,
        after: u64,
        out: &mut dyn FnMut(&[u8]),
    ) -> Result<(), StoreUnavailable>;

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
/// The server calls these methods synchronously, once per request for a session it serves
/// (and for a session whose client holds a stream open, every half idle timeout; after a
/// failed `touch`, sooner): an implementation over the network adds one round trip to each
/// such request.
pub trait SessionStore: Send {
    /// Records a session that this process just opened, with the JSON text of the
    /// `initialize` request that opened it. [`StoreUnavailable`] when it could not be
    /// recorded: the session does not open, and the client is told to come back (503 with
    /// `Retry-After`). Opened unrecorded, it got 404 from the other replicas, and from this
    /// one at its first touch, and its client opened another, over and over.
    fn create(&mut self, session: &str, initialize: &str) -> Result<(), StoreUnavailable>;

    /// The `initialize` request of a live session that this process does not hold, or
    /// `None` when no replica knows it (never opened, deleted or expired). Counts as a touch.
    /// [`StoreUnavailable`] when the store could not be read: the client is told to come
    /// back, and keeps its session.
    fn load(&mut self, session: &str) -> Result<Option<String>, StoreUnavailable>;

    /// Whether the session is still alive (not deleted on any replica, not expired), marking
    /// it active now. [`StoreUnavailable`] when the store could not be reached: the session
    /// goes on here (a blip must not end the sessions a replica serves), and the server tries
    /// again soon, so that the session does not expire in the store meanwhile.
    fn touch(&mut self, session: &str) -> Result<bool, StoreUnavailable>;

    /// Deletes the session for every replica (the client ended it). [`StoreUnavailable`]
    /// when the store could not be reached: the DELETE gets 503 with `Retry-After` and the
    /// session goes on everywhere, where a 200 would leave it alive in the store, its id still
    /// good on every replica.
    fn forget(&mut self, session: &str) -> Result<(), StoreUnavailable>;
}

/// The default [`EventStore`]: the last `per_session` events of each session, and at most
/// `bytes_per_session` bytes of them, in this process's memory, and at most `total_bytes`
/// over all sessions (the oldest anywhere go first). Use it for a single server process.
#[derive(Debug)]
pub struct MemoryEventStore {
    per_session: usize,
    bytes_per_session: usize,
    total_bytes: usize,
    sessions: HashMap<String, Kept>,
    /// The session of each `Kept` (by its `seq`), for the eviction of the oldest event.
    names: HashMap<u64, String>,
    next_seq: u64,
    /// (session `seq`, stream, event number) in the order of their appends: the global age
    /// of every event, and some entries whose event already went (skipped, and compacted
    /// away). (The stream too: a restored session numbers its events from 1 again.)
    order: VecDeque<(u64, HttpStreamId, u64)>,
    /// Events and bytes stored, over all sessions.
    count: usize,
    bytes: usize,
}

/// One session's events, oldest first, and their total size.
#[derive(Debug)]
struct Kept {
    seq: u64,
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
        Self::with_bounds(per_session, bytes_per_session, Self::DEFAULT_TOTAL_BYTES)
    }

    /// The default bound over all sessions, 256 MiB: without one, a client opening the most
    /// sessions a server allows, each with a large answer, would pin all of them at once (4
    /// GiB with the defaults).
    pub const DEFAULT_TOTAL_BYTES: usize = 256 * 1024 * 1024;

    /// [`with_bytes`](Self::with_bytes), and at most `total_bytes` over all sessions: past it
    /// the oldest events of any session go first (the newest always stays). Size it to the
    /// memory the process may spend on resumption.
    pub fn with_bounds(per_session: usize, bytes_per_session: usize, total_bytes: usize) -> Self {
        MemoryEventStore {
            per_session,
            bytes_per_session,
            total_bytes,
            sessions: HashMap::new(),
            names: HashMap::new(),
            next_seq: 0,
            order: VecDeque::new(),
            count: 0,
            bytes: 0,
        }
    }

    /// How many events are stored, over all sessions.
    pub fn len(&self) -> usize {
        self.count
    }

    /// How many bytes of events are stored, over all sessions.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Drops the oldest event of all, unless it is the newest (`newest`: session `seq`,
    /// stream, event); false when nothing was dropped.
    fn drop_oldest(&mut self, newest: (u64, HttpStreamId, u64)) -> bool {
        while let Some(&(seq, stream, event)) = self.order.front() {
            if (seq, stream, event) == newest {
                return false;
            }
            self.order.pop_front();
            let Some(name) = self.names.get(&seq) else {
                continue; // its session was forgotten
            };
            let Some(kept) = self.sessions.get_mut(name.as_str()) else {
                continue;
            };
            if kept
                .events
                .front()
                .is_none_or(|e| (e.0, e.1) != (event, stream))
            {
                continue; // it went with its session's own bounds
            }
            if let Some((_, _, old)) = kept.events.pop_front() {
                kept.bytes -= old.len();
                self.bytes -= old.len();
                self.count -= 1;
            }
            if kept.events.is_empty() {
                // Nothing left of it: its entries go too (a server whose sessions are shared
                // never forgets them here, and they would pile up, one per session ever
                // served).
                self.sessions.remove(name.as_str());
                self.names.remove(&seq);
            }
            return true;
        }
        false
    }

    /// Drops the `order` entries whose event went by other ways (a session's own bounds, its
    /// end). A session's stored events are the newest of its appends, in append order, and
    /// so are its entries here: the last `events.len()` of them are the live ones. (Their
    /// numbers need not increase: a session's streams store their events as each is first
    /// drained, so a later number may be stored before an earlier one.)
    fn compact(&mut self) {
        let mut left: HashMap<u64, usize> = HashMap::new();
        let mut live = VecDeque::with_capacity(self.count);
        for &(seq, stream, event) in self.order.iter().rev() {
            let n = left.entry(seq).or_insert_with(|| {
                (self.names.get(&seq))
                    .and_then(|name| self.sessions.get(name.as_str()))
                    .map_or(0, |kept| kept.events.len())
            });
            if *n > 0 {
                *n -= 1;
                live.push_front((seq, stream, event));
            }
        }
        self.order = live;
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

impl EventStore for MemoryEventStore {
    fn append(&mut self, session: &str, stream: HttpStreamId, event: u64, bytes: &[u8]) {
        if self.per_session == 0 {
            return;
        }
        let kept = match self.sessions.get_mut(session) {
            Some(kept) => kept,
            None => {
                let seq = self.next_seq;
                self.next_seq += 1;
                self.names.insert(seq, session.to_owned());
                self.sessions.entry(session.to_owned()).or_insert(Kept {
                    seq,
                    bytes: 0,
                    events: VecDeque::new(),
                })
            }
        };
        let seq = kept.seq;
        kept.events.push_back((event, stream, bytes.to_vec()));
        kept.bytes += bytes.len();
        self.bytes += bytes.len();
        self.count += 1;
        while kept.events.len() > self.per_session
            || (kept.bytes > self.bytes_per_session && kept.events.len() > 1)
        {
            if let Some((_, _, old)) = kept.events.pop_front() {
                kept.bytes -= old.len();
                self.bytes -= old.len();
                self.count -= 1;
            }
        }
        self.order.push_back((seq, stream, event));
        while self.bytes > self.total_bytes && self.drop_oldest((seq, stream, event)) {}
        // Entries whose event went by other ways are compacted once they are half the list.
        if self.order.len() > 2 * self.count + 64 {
            self.compact();
        }
    }

    fn replay(
        &mut self,
        session: &str,
        stream: HttpStreamId,
        after: u64,
        out: &mut dyn FnMut(&[u8]),
    ) -> Result<(), StoreUnavailable> {
        let events = self.sessions.get(session).map(|k| &k.events);
        for (event, s, bytes) in events.into_iter().flatten() {
            if *s == stream && *event > after {
                out(bytes);
            }
        }
        Ok(())
    }

    fn forget(&mut self, session: &str) {
        if let Some(kept) = self.sessions.remove(session) {
            self.names.remove(&kept.seq);
            self.bytes -= kept.bytes;
            self.count -= kept.events.len();
        }
        if self.sessions.capacity() > 4 * self.sessions.len() + 64 {
            self.sessions.shrink_to(2 * self.sessions.len());
            self.names.shrink_to(2 * self.names.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session restored from a shared session store numbers its events from 1 again, on
    /// streams of its own: an older event with the newest's number was taken for the newest,
    /// and the total bound was let go.
    #[test]
    fn a_number_repeated_on_another_stream_still_obeys_the_total_bound() {
        let mut store = MemoryEventStore::with_bounds(8, 1 << 20, 10);
        store.append("s", HttpStreamId(1), 1, b"first!");
        store.append("s", HttpStreamId(2), 1, b"second");
        assert_eq!(store.bytes(), 6);
        let mut replayed = Vec::new();
        for stream in [1, 2] {
            store
                .replay("s", HttpStreamId(stream), 0, &mut |e| {
                    replayed.push(e.to_vec())
                })
                .unwrap();
        }
        assert_eq!(replayed, vec![b"second".to_vec()]);
    }

    /// A session's streams store their events as each is first drained (the server holds a
    /// new POST stream's events until then), so a later number may come before an earlier
    /// one. The bound over all sessions still holds: the entries of such events were taken
    /// for gone when the age list was compacted (by number: 7 stored, so 6 "went"), and
    /// event 6 was then never counted out (1,050 bytes held against a bound of 1,000).
    #[test]
    fn events_stored_out_of_number_order_still_obey_the_total_bound() {
        let mut store = MemoryEventStore::with_bounds(2, 1 << 20, 1000);
        store.append("s", HttpStreamId(1), 7, &[b'g'; 100]);
        store.append("s", HttpStreamId(2), 6, &[b'a'; 100]);
        // Another session's churn leaves entries of gone events until the list is compacted.
        for n in 1..=71 {
            store.append("t", HttpStreamId(3), n, b"x");
        }
        store.append("u", HttpStreamId(4), 1, &[b'u'; 950]);
        assert!(store.bytes() <= 1000, "{} bytes", store.bytes());
        let mut replayed = 0;
        store
            .replay("s", HttpStreamId(2), 0, &mut |_| replayed += 1)
            .unwrap();
        assert_eq!(replayed, 0, "the oldest of all went first");
        // And the age list keeps naming every event still stored, in order: each later
        // append over the bound drops the oldest, never one "already gone".
        for n in 8..40 {
            store.append("s", HttpStreamId(1), n, &[b'g'; 100]);
            assert!(
                store.bytes() <= 1000 || store.len() == 1,
                "{} bytes",
                store.bytes()
            );
        }
    }

    /// A session whose every event went to the bound over all sessions leaves nothing
    /// behind: its entries stayed, one per session ever served, where nothing forgets
    /// sessions (a server whose sessions are shared with other replicas).
    #[test]
    fn sessions_emptied_by_the_total_bound_leave_no_entry() {
        let mut store = MemoryEventStore::with_bounds(16, 1 << 20, 1000);
        for n in 0..10_000 {
            store.append(&format!("s{n}"), HttpStreamId(1), 1, &[b'x'; 100]);
        }
        assert!(store.bytes() <= 1000);
        assert!(store.sessions.len() <= 10, "{}", store.sessions.len());
        assert_eq!(store.names.len(), store.sessions.len());
        // The newest are still there, and a session emptied earlier starts again.
        let mut seen = Vec::new();
        store
            .replay("s9999", HttpStreamId(1), 0, &mut |e| seen.push(e.len()))
            .unwrap();
        assert_eq!(seen, [100]);
        store.append("s0", HttpStreamId(1), 2, b"again");
        let mut seen = Vec::new();
        store
            .replay("s0", HttpStreamId(1), 0, &mut |e| seen.push(e.to_vec()))
            .unwrap();
        assert_eq!(seen, [b"again".to_vec()]);
    }

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
            store
                .replay("s", stream, after, &mut |e| seen.push(e.to_vec()))
                .unwrap();
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

    /// Past the bound over all sessions the oldest events anywhere go first, whichever
    /// session holds them; the newest always stays. (Without it, many sessions each within
    /// their own bound held gigabytes between them.)
    #[test]
    fn all_sessions_together_keep_at_most_the_total_bound() {
        let mut store = MemoryEventStore::with_bounds(100, 100, 20);
        let a = HttpStreamId(1);
        let all = |store: &mut MemoryEventStore, s: &str| {
            let mut seen = Vec::new();
            store
                .replay(s, a, 0, &mut |e| seen.push(e.to_vec()))
                .unwrap();
            seen
        };
        store.append("s", a, 1, b"s1s1s1");
        store.append("t", a, 1, b"t1t1t1");
        store.append("s", a, 2, b"s2s2s2");
        assert_eq!((store.len(), store.bytes()), (3, 18));
        store.append("t", a, 2, b"t2t2t2");
        // 24 bytes: the oldest of all (s1) goes.
        assert_eq!(all(&mut store, "s"), vec![b"s2s2s2".to_vec()]);
        assert_eq!(all(&mut store, "t").len(), 2);
        assert_eq!((store.len(), store.bytes()), (3, 18));
        // One event over the bound by itself stays alone.
        store.append("u", a, 1, &[b'x'; 30]);
        assert_eq!((store.len(), store.bytes()), (1, 30));
        assert!(all(&mut store, "s").is_empty() && all(&mut store, "t").is_empty());
        store.forget("u");
        assert!(store.is_empty());
        assert_eq!(store.bytes(), 0);
        // Entries of events that went by other ways do not pile up.
        let mut small = MemoryEventStore::with_bounds(2, 1000, 1000);
        for n in 0..10_000 {
            small.append("s", a, n, b"e");
        }
        assert!(
            small.order.len() <= 2 * small.len() + 65,
            "{}",
            small.order.len()
        );
    }

    /// Past the byte bound the oldest go too, but the newest event always stays.
    #[test]
    fn a_session_keeps_at_most_its_bytes_and_always_the_newest_event() {
        let mut store = MemoryEventStore::with_bytes(100, 10);
        let a = HttpStreamId(1);
        let all = |store: &mut MemoryEventStore| {
            let mut seen = Vec::new();
            store
                .replay("s", a, 0, &mut |e| seen.push(e.to_vec()))
                .unwrap();
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
