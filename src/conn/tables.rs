//! Correlation state: our requests in flight, the peer's requests in flight, remembered ids,
//! and the timer heap. All bounded.

use std::cmp::Reverse;
use std::collections::hash_map::RandomState;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::sync::OnceLock;
use std::time::Duration;

use super::output::StreamId;
use super::time::Timestamp;
use crate::jsonrpc::OwnedId;
use crate::mcp::{Caps, LogLevel, ProtocolVersion};

/// The `Hasher` methods other than `finish` and `write_u64`: bytes go in eight at a time, and
/// every integer as one `u64`.
macro_rules! word_writes {
    () => {
        fn write(&mut self, bytes: &[u8]) {
            for chunk in bytes.chunks(8) {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                self.write_u64(u64::from_le_bytes(word));
            }
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
    };
}

/// A small, fast hasher for keys this side chooses: our request ids, counters (multiply and
/// rotate). Sequential keys land in neighbouring buckets, which keeps lookups in cache. A key's
/// low bits decide the hash's low bits, and so its bucket: for keys the peer chooses, use
/// [`PeerKeys`].
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    word_writes!();
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Hashing for tables keyed by what the peer chooses: its request ids, in the table of its
/// requests in flight and the set of those it cancelled. With [`IdHasher`] a peer could send
/// ids that differ only in their high bits; they would all share a bucket, and every lookup
/// would walk all of them (256 requests in flight made each request 4.5 times dearer). Here
/// the high half of a 128-bit product is folded into the low half, and the state starts from
/// a seed drawn once per process, and the result is mixed once more when it is read, so the
/// peer cannot choose an id's bucket.
///
/// It has no size: the seed is read when a hash begins, so a table of the peer's ids is no
/// larger than any other (connections are built and moved per stateless request).
#[derive(Default, Clone, Copy)]
pub(crate) struct PeerKeys;

impl BuildHasher for PeerKeys {
    type Hasher = FoldHasher;
    fn build_hasher(&self) -> FoldHasher {
        static SEED: OnceLock<u64> = OnceLock::new();
        FoldHasher(*SEED.get_or_init(|| RandomState::new().hash_one(0x6d63_7077_u64)))
    }
}

/// The hasher of [`PeerKeys`].
pub(crate) struct FoldHasher(u64);

impl Hasher for FoldHasher {
    fn finish(&self) -> u64 {
        // Keys that differ only in high bits differ only in the state's high bits: shifted
        // down and multiplied again, they reach the low bits, which pick the bucket.
        let x = self.0 ^ (self.0 >> 29);
        let x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x ^ (x >> 32)
    }
    fn write_u64(&mut self, n: u64) {
        let product = u128::from(self.0 ^ n) * 0x9e37_79b9_7f4a_7c15_u128;
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }
    word_writes!();
}

/// A map keyed by what the peer chooses (see [`PeerKeys`]).
pub(crate) type PeerMap<K, V> = HashMap<K, V, PeerKeys>;

/// Our requests in flight, keyed by the ids we hand out in increasing order. The ids in flight
/// form a window, so each entry sits in the slot its id's low bits name: a lookup is one index
/// and one compare, with no hashing, and answers that come back roughly in order walk the slots
/// in order. An entry whose slot still holds an older request (one that is taking long) goes to
/// a small hash map instead, so a straggler never makes the slot array grow. The array doubles
/// while more than three quarters of it is used, so it stays within a constant factor of the
/// most requests ever in flight at once; a peer's ids are only looked up, never inserted.
#[derive(Debug)]
pub(crate) struct SeqMap<V> {
    /// Empty, or a power of two long.
    slots: Vec<Option<(i64, V)>>,
    in_slots: usize,
    overflow: FastMap<i64, V>,
}

impl<V> Default for SeqMap<V> {
    fn default() -> Self {
        SeqMap {
            slots: Vec::new(),
            in_slots: 0,
            overflow: FastMap::default(),
        }
    }
}

impl<V> SeqMap<V> {
    fn slot_of(&self, id: i64) -> usize {
        // `slots.len()` is a power of two (or zero, when no caller gets this far).
        id as u64 as usize & (self.slots.len().wrapping_sub(1))
    }

    pub(crate) fn len(&self) -> usize {
        self.in_slots + self.overflow.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots allocated plus overflow capacity (for the memory tests).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len() + self.overflow.capacity()
    }

    pub(crate) fn get(&self, id: &i64) -> Option<&V> {
        if let Some(Some((k, v))) = self.slots.get(self.slot_of(*id))
            && k == id
        {
            return Some(v);
        }
        if self.overflow.is_empty() {
            return None;
        }
        self.overflow.get(id)
    }

    pub(crate) fn get_mut(&mut self, id: &i64) -> Option<&mut V> {
        let slot = self.slot_of(*id);
        if let Some(Some((k, _))) = self.slots.get(slot)
            && k == id
        {
            return self.slots[slot].as_mut().map(|(_, v)| v);
        }
        if self.overflow.is_empty() {
            return None;
        }
        self.overflow.get_mut(id)
    }

    pub(crate) fn remove(&mut self, id: &i64) -> Option<V> {
        let slot = self.slot_of(*id);
        if let Some(entry) = self.slots.get_mut(slot)
            && entry.as_ref().is_some_and(|(k, _)| k == id)
        {
            self.in_slots -= 1;
            return entry.take().map(|(_, v)| v);
        }
        if self.overflow.is_empty() {
            return None;
        }
        self.overflow.remove(id)
    }

    /// Inserts an entry for `id`, replacing (and returning) the value of an entry with the
    /// same id.
    pub(crate) fn insert(&mut self, id: i64, value: V) -> Option<V> {
        let old = self.remove(&id);
        if (self.in_slots + 1) * 4 > self.slots.len() * 3 {
            self.resize((self.slots.len() * 2).max(16));
        }
        let slot = self.slot_of(id);
        match &mut self.slots[slot] {
            free @ None => {
                *free = Some((id, value));
                self.in_slots += 1;
            }
            Some(_) => {
                self.overflow.insert(id, value);
            }
        }
        old
    }

    /// Moves every entry into a slot array of `len` (a power of two, or zero when there are
    /// none), where it fits; the rest go to the overflow map.
    fn resize(&mut self, len: usize) {
        let old = std::mem::take(&mut self.slots);
        let overflow = std::mem::take(&mut self.overflow);
        self.slots.resize_with(len, || None);
        self.in_slots = 0;
        let entries = old.into_iter().flatten().chain(overflow);
        for (id, value) in entries {
            let slot = self.slot_of(id);
            match self.slots.get_mut(slot) {
                Some(free @ None) => {
                    *free = Some((id, value));
                    self.in_slots += 1;
                }
                _ => {
                    self.overflow.insert(id, value);
                }
            }
        }
    }

    /// Gives back the capacity the entries do not need.
    pub(crate) fn shrink_to_fit(&mut self) {
        let n = self.len();
        let len = if n == 0 {
            0
        } else {
            (n * 4 / 3 + 1).next_power_of_two().max(16)
        };
        if len < self.slots.len() {
            self.resize(len);
        }
        self.overflow.shrink_to_fit();
    }

    pub(crate) fn clear(&mut self) {
        self.slots.iter_mut().for_each(|e| *e = None);
        self.in_slots = 0;
        self.overflow.clear();
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&i64, &V)> {
        let in_slots = self.slots.iter().flatten().map(|(k, v)| (k, v));
        in_slots.chain(self.overflow.iter())
    }
}

/// What one of our requests is, for the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PendingKind {
    /// An application request.
    Normal,
    /// The engine's `initialize`.
    Initialize,
    /// The engine's `server/discover` probe (`retried` once after a -32022).
    Discover { retried: bool },
    /// The engine's `tasks/cancel` for a task whose handle came after its request had ended
    /// (2025-11-25): its answer, or its end, is nobody's event.
    CancelTask,
}

/// What a request needs to be retried after an "input required" result (2026-07-28).
#[derive(Debug, Clone)]
pub(crate) struct RetryBase {
    pub method: &'static str,
    /// The application's params, as given (before the engine's `_meta`).
    pub params: Option<String>,
    /// The options it was sent with: the retry keeps its timeout and its progress.
    pub options: super::RequestOptions,
}

/// One of our requests awaiting its answer.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub kind: PendingKind,
    pub started: Timestamp,
    pub timeout: Duration,
    pub deadline: Timestamp,
    pub reset_on_progress: bool,
    /// Whether we asked for progress (our token is the request id).
    pub wants_progress: bool,
    pub last_progress: Option<f64>,
    /// A 2025-11-25 task-augmented request (its params carry `task`): a `CreateTaskResult`
    /// may answer it.
    pub task_augmented: bool,
    /// A 2026-07-28 `subscriptions/listen`: the server may end it with `notifications/cancelled`.
    pub listen: bool,
    /// The stream the request went out on (a server's request related to one of the peer's
    /// travels on that request's stream): its cancellation goes there too.
    pub stream: StreamId,
}

/// What a stateless-era (2026-07-28) request declared in its `_meta`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModernContext {
    pub version: ProtocolVersion,
    pub client_caps: Caps,
    pub log_level: Option<LogLevel>,
}

/// What a `subscriptions/listen` stream opted in to and we can honour: once acknowledged,
/// what it was granted.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListenFilter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    pub resource_uris: Vec<String>,
    /// Tasks whose `notifications/tasks` the stream carries (the tasks extension).
    pub task_ids: Vec<String>,
    /// Waiting for the application's grant ([`Policy::review_listens`]): the lists hold what
    /// was asked and can be honoured, nothing is sent to the stream yet.
    ///
    /// [`Policy::review_listens`]: super::Policy::review_listens
    pub pending: bool,
    /// It came to the application as a request (under review): its cancellation is reported.
    pub seen: bool,
}

impl ListenFilter {
    /// What the stream carries, item by item, in a fixed order: the list changes, then the
    /// resource URIs, then the task ids.
    pub fn items(&self) -> impl Iterator<Item = super::ListenItem<'_>> {
        use super::ListenItem as L;
        let flags = [
            (self.tools, L::ToolsListChanged),
            (self.prompts, L::PromptsListChanged),
            (self.resources, L::ResourcesListChanged),
        ];
        flags
            .into_iter()
            .filter_map(|(on, item)| on.then_some(item))
            .chain(self.resource_uris.iter().map(|u| L::Resource(u)))
            .chain(self.task_ids.iter().map(|t| L::Task(t)))
    }

    /// Keeps the items whose entry in `keep` (in [`items`](Self::items) order) is `true`.
    pub fn retain(&mut self, keep: &[bool]) {
        let mut next = keep.iter().copied();
        for on in [&mut self.tools, &mut self.prompts, &mut self.resources] {
            if *on {
                *on = next.next().unwrap_or(false);
            }
        }
        self.resource_uris.retain(|_| next.next().unwrap_or(false));
        self.task_ids.retain(|_| next.next().unwrap_or(false));
    }
}

/// One of the peer's requests we have not answered yet.
#[derive(Debug, Clone)]
pub(crate) struct Inbound {
    pub progress_token: Option<OwnedId>,
    pub last_progress: Option<f64>,
    /// Whether "input required" is an allowed answer (tools/call, prompts/get, resources/read
    /// in 2026-07-28).
    pub input_eligible: bool,
    /// Whether a task handle is an allowed answer (tools/call in 2026-07-28, SEP-2663).
    pub task_eligible: bool,
    /// Whether the result is cacheable (`ttlMs` and `cacheScope` are required in 2026-07-28).
    pub cacheable: bool,
    pub modern: Option<ModernContext>,
    pub listen: Option<Box<ListenFilter>>,
    /// The batch it arrived in, if any.
    pub batch: Option<u32>,
    pub stream: StreamId,
}

/// What a key of a [`BoundedSet`] holds on the heap, against [`BoundedSet::MAX_BYTES`].
pub(crate) trait HeapBytes {
    /// The bytes the key owns outside itself.
    fn heap_bytes(&self) -> usize;
}

impl HeapBytes for i64 {
    fn heap_bytes(&self) -> usize {
        0
    }
}

impl HeapBytes for OwnedId {
    fn heap_bytes(&self) -> usize {
        match self {
            OwnedId::Int(_) => 0,
            // (Inline up to its first 22 bytes; counted whole, to keep it simple.)
            OwnedId::Str(s) => s.len(),
        }
    }
}

/// A set that remembers at most `capacity` keys, and keys holding at most
/// [`MAX_BYTES`](Self::MAX_BYTES) on the heap in all, forgetting the oldest first.
#[derive(Debug)]
pub(crate) struct BoundedSet<K: Hash + Eq + Clone, S = BuildHasherDefault<IdHasher>> {
    order: VecDeque<K>,
    set: HashSet<K, S>,
    /// (Both `u32`, packed in one word: an idle connection has two of these sets, and its
    /// whole size is held to 2 KiB.)
    capacity: u32,
    /// What the keys in `order` hold on the heap (each twice: in `order` and in `set`), at
    /// most [`MAX_BYTES`](Self::MAX_BYTES), or one key's weight past it.
    bytes: u32,
}

impl<K: Hash + Eq + Clone + HeapBytes, S: BuildHasher + Default> BoundedSet<K, S> {
    /// The most the keys may hold on the heap: a peer's string ids are as long as its frames
    /// allow, and a thousand ids of megabytes each would be remembered whole.
    pub(crate) const MAX_BYTES: usize = 1 << 20;

    pub(crate) fn new(capacity: usize) -> Self {
        BoundedSet {
            order: VecDeque::new(),
            set: HashSet::default(),
            capacity: u32::try_from(capacity).unwrap_or(u32::MAX).max(1),
            bytes: 0,
        }
    }

    pub(crate) fn insert(&mut self, key: K) {
        if self.set.contains(&key) {
            return;
        }
        let weight = |k: &K| u32::try_from(2 * k.heap_bytes()).unwrap_or(u32::MAX);
        let w = weight(&key);
        let capacity = self.capacity as usize;
        while (self.order.len() >= capacity
            || self.bytes.saturating_add(w) as usize > Self::MAX_BYTES)
            && let Some(old) = self.order.pop_front()
        {
            self.bytes = self.bytes.saturating_sub(weight(&old));
            self.set.remove(&old);
        }
        self.bytes = self.bytes.saturating_add(w);
        self.set.insert(key.clone());
        self.order.push_back(key);
        if self.order.len() == capacity && self.set.capacity() < 2 * capacity {
            // Full from now on: every insert follows a removal. With room for twice the keys,
            // the table reclaims the removals' tombstones in place instead of growing, so a
            // full set never allocates again.
            self.set.reserve(capacity);
        }
    }

    pub(crate) fn contains(&self, key: &K) -> bool {
        // Usually empty: no hash is computed then.
        !self.set.is_empty() && self.set.contains(key)
    }

    /// Forgets `key`; whether it was there. Its place in the age order stays until it would
    /// have been forgotten anyway (keys are not inserted twice where this is used).
    pub(crate) fn remove(&mut self, key: &K) -> bool {
        self.set.remove(key)
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

    /// The buckets (of a table of 512) that 256 peer ids differing only above bit 20 land in.
    fn buckets<S: BuildHasher>(hashing: &S, string: bool) -> usize {
        let ids = (0..256i64).map(|j| {
            let n = (j << 20) | 0x2345;
            if string {
                OwnedId::Str(format!("request-{n}").into_bytes().into_iter().collect())
            } else {
                OwnedId::Int(n)
            }
        });
        let seen: HashSet<u64> = ids.map(|id| hashing.hash_one(&id) & 511).collect();
        seen.len()
    }

    /// Ids a peer chose to share a bucket under the fast hasher are spread by the peer-keyed
    /// one (about 200 buckets is what 256 random keys fill).
    #[test]
    fn peer_ids_cannot_be_made_to_share_a_bucket() {
        assert_eq!(
            buckets(&BuildHasherDefault::<IdHasher>::default(), false),
            1
        );
        for string in [false, true] {
            let spread = buckets(&PeerKeys, string);
            assert!(spread >= 150, "{spread} buckets (strings: {string})");
        }
    }

    /// The table works as a map under a sliding window of requests in flight, with lookups of
    /// ids that were never ours mixed in; in-order answers never need the overflow map.
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
                assert_eq!(map.remove(&old), None);
            }
            assert_eq!(map.get(&-id), if id == 0 { Some(&0) } else { None });
            assert_eq!(map.get(&(id + 1 + (1 << 40))), None);
            assert_eq!(map.get_mut(&(id - (1 << 40))), None);
        }
        assert_eq!(map.len(), window as usize);
        assert!(map.overflow.is_empty());
        assert!(map.capacity() < 4 * window as usize);
    }

    /// A request that is never answered holds its slot; the ids that later map onto that slot
    /// go to the overflow map, and the slot array does not grow for it.
    #[test]
    fn a_straggler_does_not_make_the_table_grow() {
        let mut map = SeqMap::<i64>::default();
        map.insert(1, -1);
        for id in 2..200_000i64 {
            map.insert(id, id);
            if id >= 10 {
                assert_eq!(map.remove(&(id - 8)), Some(id - 8));
            }
        }
        assert_eq!(map.get(&1), Some(&-1));
        assert_eq!(map.len(), 9);
        assert!(map.slots.len() <= 16, "{}", map.slots.len());
        assert!(map.overflow.len() <= 1);
        *map.get_mut(&1).expect("straggler") = 7;
        assert_eq!(map.remove(&1), Some(7));
        assert_eq!(map.len(), 8);
    }

    /// Against `HashMap`: random inserts of increasing ids with gaps, removals in random order,
    /// lookups of absent and negative ids, shrinking, clearing and iteration.
    #[test]
    fn matches_a_hash_map_under_random_operations() {
        use std::collections::HashMap;
        let mut rand = crate::xorshift(0x9E37_79B9_7F4A_7C15);
        let mut map = SeqMap::<u64>::default();
        let mut model = HashMap::<i64, u64>::new();
        let mut next = 1i64;
        for step in 0..200_000u64 {
            match rand() % 16 {
                0..=6 => {
                    next += 1 + (rand() % 3) as i64;
                    assert_eq!(map.insert(next, step), model.insert(next, step));
                }
                7..=11 => {
                    let id = next - (rand() % 600) as i64;
                    assert_eq!(map.remove(&id), model.remove(&id));
                }
                12 => {
                    let id = next - (rand() % 600) as i64;
                    if let (Some(a), Some(b)) = (map.get_mut(&id), model.get_mut(&id)) {
                        *a = step;
                        *b = step;
                    }
                }
                13 => {
                    let id = (rand() as i64).wrapping_neg();
                    assert_eq!(map.get(&id), model.get(&id));
                }
                14 if step % 97 == 0 => map.shrink_to_fit(),
                15 if step % 50_000 == 0 => {
                    map.clear();
                    model.clear();
                }
                _ => {
                    let id = next - (rand() % 600) as i64;
                    assert_eq!(map.get(&id), model.get(&id));
                }
            }
            assert_eq!(map.len(), model.len());
            assert_eq!(map.is_empty(), model.is_empty());
        }
        let mut seen: Vec<_> = map.iter().map(|(k, v)| (*k, *v)).collect();
        let mut want: Vec<_> = model.iter().map(|(k, v)| (*k, *v)).collect();
        seen.sort_unstable();
        want.sort_unstable();
        assert_eq!(seen, want);
        // Shrinking keeps every entry and gives the slots back once empty.
        map.shrink_to_fit();
        for (k, v) in &model {
            assert_eq!(map.get(k), Some(v));
        }
        for k in model.keys() {
            map.remove(k);
        }
        map.shrink_to_fit();
        assert_eq!(map.capacity(), 0);
    }
}
