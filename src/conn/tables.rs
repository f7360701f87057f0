//! Correlation state: our requests in flight, the peer's requests in flight, remembered ids,
//! and the timer heap. All bounded.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::time::Duration;

use super::output::StreamId;
use super::time::Timestamp;
use crate::jsonrpc::OwnedId;
use crate::mcp::{Caps, LogLevel, ProtocolVersion};

/// A small, fast hasher for ids (multiply and rotate). The tables are keyed by ids the peer
/// chooses, but each table is bounded, so worst-case collisions cost time, never memory.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(n as u64);
    }
    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }
    fn write_isize(&mut self, n: isize) {
        self.write_u64(n as u64);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Hashes our own request ids, which we hand out in sequence, so that the requests in flight
/// (a window of consecutive ids) sit in consecutive buckets: no two collide while the window
/// spans fewer ids than the table has buckets, and answers that come back roughly in order
/// walk the table's memory in order instead of missing the cache on every lookup. The bucket comes from
/// the id's low bits; the tag a SwissTable keeps per bucket (the hash's top 7 bits) from a
/// multiplicative mix, so that probing compares tags that differ. Only we insert into a table
/// keyed this way; a peer's ids are only looked up, so it cannot crowd the table.
#[derive(Default, Clone, Copy)]
pub(crate) struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        const TAG_BITS: u32 = 7;
        let tag = self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - TAG_BITS);
        (self.0 & (u64::MAX >> TAG_BITS)) | tag << (64 - TAG_BITS)
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(word);
        }
    }
    fn write_i64(&mut self, n: i64) {
        self.0 = n as u64;
    }
}

/// A map keyed by our own sequential request ids; see [`SeqHasher`].
pub(crate) type SeqMap<V> = HashMap<i64, V, BuildHasherDefault<SeqHasher>>;
type FastSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;

/// What one of our requests is, for the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PendingKind {
    /// An application request.
    Normal,
    /// The engine's `initialize`.
    Initialize,
    /// The engine's `server/discover` probe (`retried` once after a -32022).
    Discover { retried: bool },
}

/// What a request needs to be retried after an "input required" result (2026-07-28).
#[derive(Debug, Clone)]
pub(crate) struct RetryBase {
    pub method: &'static str,
    /// The application's params, as given (before the engine's `_meta`).
    pub params: Option<String>,
}

/// One of our requests awaiting its answer.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub kind: PendingKind,
    /// Kept for requests that may come back "input required".
    pub retry: Option<RetryBase>,
    pub started: Timestamp,
    pub timeout: Duration,
    pub deadline: Timestamp,
    pub reset_on_progress: bool,
    /// Whether we asked for progress (our token is the request id).
    pub wants_progress: bool,
    pub last_progress: Option<f64>,
}

/// What a stateless-era (2026-07-28) request declared in its `_meta`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModernContext {
    pub version: ProtocolVersion,
    pub client_caps: Caps,
    pub log_level: Option<LogLevel>,
}

/// What a `subscriptions/listen` stream opted in to (and we acknowledged).
#[derive(Debug, Clone, Default)]
pub(crate) struct ListenFilter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    pub resource_uris: Vec<String>,
}

/// One of the peer's requests we have not answered yet.
#[derive(Debug, Clone)]
pub(crate) struct Inbound {
    pub progress_token: Option<OwnedId>,
    pub last_progress: Option<f64>,
    /// Whether "input required" is an allowed answer (tools/call, prompts/get, resources/read
    /// in 2026-07-28).
    pub input_eligible: bool,
    /// Whether the result is cacheable (`ttlMs` and `cacheScope` are required in 2026-07-28).
    pub cacheable: bool,
    pub modern: Option<ModernContext>,
    pub listen: Option<ListenFilter>,
    /// The batch it arrived in, if any.
    pub batch: Option<u32>,
    pub stream: StreamId,
}

/// A set that remembers at most `capacity` keys, forgetting the oldest first.
#[derive(Debug)]
pub(crate) struct BoundedSet<K: Hash + Eq + Clone> {
    order: VecDeque<K>,
    set: FastSet<K>,
    capacity: usize,
}

impl<K: Hash + Eq + Clone> BoundedSet<K> {
    pub(crate) fn new(capacity: usize) -> Self {
        BoundedSet {
            order: VecDeque::new(),
            set: FastSet::default(),
            capacity: capacity.max(1),
        }
    }

    pub(crate) fn insert(&mut self, key: K) {
        if self.set.contains(&key) {
            return;
        }
        if self.order.len() >= self.capacity
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        self.set.insert(key.clone());
        self.order.push_back(key);
        if self.order.len() == self.capacity && self.set.capacity() < 2 * self.capacity {
            // Full from now on: every insert follows a removal. With room for twice the keys,
            // the table reclaims the removals' tombstones in place instead of growing, so a
            // full set never allocates again.
            self.set.reserve(self.capacity);
        }
    }

    pub(crate) fn contains(&self, key: &K) -> bool {
        self.set.contains(key)
    }
}

/// What a timer is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TimerKey {
    /// A request's deadline (checked against its current deadline when it fires).
    Request(i64),
    /// The end of the graceful-close wait.
    CloseGrace,
}

/// Deadlines, earliest first. Entries are checked when they fire rather than removed when
/// their request ends, and the heap is rebuilt when stale entries outnumber live ones, so it
/// stays within a constant factor of the requests in flight.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(Timestamp, TimerKey)>>,
}

impl Timers {
    pub(crate) fn push(&mut self, at: Timestamp, key: TimerKey) {
        self.heap.push(Reverse((at, key)));
    }

    /// How many entries the heap holds (live and stale).
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    pub(crate) fn earliest(&self) -> Option<Timestamp> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// Removes and returns the earliest entry if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Timestamp) -> Option<TimerKey> {
        match self.heap.peek() {
            Some(Reverse((at, _))) if *at <= now => self.heap.pop().map(|Reverse((_, k))| k),
            _ => None,
        }
    }

    /// Rebuilds from the live deadlines when stale entries dominate. It reuses the heap's
    /// memory, so steady traffic allocates nothing here; only a heap left far larger than what
    /// is in flight (after a burst) gives memory back.
    pub(crate) fn compact(
        &mut self,
        live: impl Iterator<Item = (Timestamp, TimerKey)>,
        live_count: usize,
    ) {
        let threshold = 2 * live_count + 64;
        if self.heap.len() > threshold {
            let mut entries = std::mem::take(&mut self.heap).into_vec();
            entries.clear();
            if entries.capacity() > 4 * threshold {
                entries.shrink_to(2 * threshold);
            }
            entries.extend(live.map(Reverse));
            self.heap = BinaryHeap::from(entries);
        }
    }

    /// Replaces every entry with the live deadlines (and frees spare capacity).
    pub(crate) fn rebuild(&mut self, live: impl Iterator<Item = (Timestamp, TimerKey)>) {
        self.heap = live.map(Reverse).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn hash(id: i64) -> u64 {
        BuildHasherDefault::<SeqHasher>::default().hash_one(id)
    }

    /// Consecutive ids get consecutive buckets (the low bits are the id's) and tags that
    /// differ (the top 7 bits are mixed), so a window of ids never collides and a tag compare
    /// rarely matches the wrong id.
    #[test]
    fn consecutive_ids_get_consecutive_buckets_and_mixed_tags() {
        let mut tags = [0u32; 128];
        for id in 1_000..1_000 + 128 * 64 {
            let h = hash(id);
            assert_eq!(h & 0xFFFF, id as u64 & 0xFFFF);
            tags[(h >> 57) as usize] += 1;
        }
        // 8,192 ids over 128 tags: every tag used, none by more than twice its share.
        assert!(tags.iter().all(|&n| (1..=128).contains(&n)), "{tags:?}");
        // Ids far apart, and negative ones from a peer, hash without trouble.
        assert_ne!(hash(-1), hash(i64::MAX));
        assert_ne!(hash(i64::MIN), hash(0));
    }

    /// The table works as a map under a sliding window of requests in flight, with lookups of
    /// ids that were never ours mixed in.
    #[test]
    fn a_sliding_window_of_ids_behaves_as_a_map() {
        let mut map = SeqMap::<i64>::default();
        let window = 5_000;
        for id in 0..100_000i64 {
            assert_eq!(map.insert(id, id * 3), None);
            if id >= window {
                let old = id - window;
                assert_eq!(map.remove(&old), Some(old * 3));
                assert_eq!(map.get(&old), None);
            }
            assert_eq!(map.get(&-id), if id == 0 { Some(&0) } else { None });
            assert_eq!(map.get(&(id + 1 + (1 << 40))), None);
        }
        assert_eq!(map.len(), window as usize);
        assert!(map.capacity() < 4 * window as usize);
    }
}
