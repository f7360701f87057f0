//! Answers a session's client may not have received, set aside from the event store's
//! bounds.
//!
//! The event store drops a session's oldest events past its bounds (by default 256 events or
//! 4 MiB per session). While a request's stream is detached (its client went away, or the
//! application closed it for polling), nobody reads its answer, and a burst of other events
//! (log messages, say) could push that answer out before the client came back with
//! `Last-Event-ID`: the resumption then replayed nothing, and the client waited for its
//! timeout. So the server keeps such answers here as well, under bounds of their own, and
//! puts back any the store lost when the stream is resumed. Kept are the answers given while
//! no response held the stream, and those still unwritten in a response when its client went
//! away; only for a stream the client can resume (its host wrote some of it out, or it was
//! closed for polling, which its host writes out before it ends: the client may hold one of
//! its event ids). An answer goes once a response carrying it was
//! written out to the end, or once a resumption's `Last-Event-ID` shows the client has it.
//! An answer the host wrote out just before the connection broke is not kept: the store's
//! copy is what a quick resumption finds.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::HttpStreamId;

/// How much may be kept: per session (events and bytes; the session's oldest go first, the
/// newest always stays) and over all sessions (bytes; an answer that does not fit beside the
/// other sessions' is not kept).
#[derive(Clone, Copy)]
pub(crate) struct KeepLimits {
    pub(crate) events: usize,
    pub(crate) bytes: usize,
    pub(crate) total_bytes: usize,
}

/// One answer event, as the store was given it.
struct Kept {
    stream: HttpStreamId,
    event: u64,
    bytes: Vec<u8>,
    /// The stream of the response that now carries it (a resumption), if any: once that one
    /// is written out to the end, the answer goes.
    carrier: Option<HttpStreamId>,
}

/// One session's kept answers, oldest first. Empty (and allocation-free) for every session
/// whose clients held their streams to the end.
#[derive(Default)]
pub(crate) struct KeptAnswers {
    list: VecDeque<Kept>,
    bytes: usize,
    /// The bytes kept over all sessions, shared with the server; set at the first keep. A
    /// session that goes (however it goes) gives its bytes back when dropped.
    total: Option<Arc<AtomicUsize>>,
}

impl KeptAnswers {
    /// Keeps answer event `event` of `stream` (its SSE bytes), making room within `limits`
    /// by dropping this session's oldest. `total` counts the bytes over all sessions.
    pub(crate) fn keep(
        &mut self,
        total: &Arc<AtomicUsize>,
        limits: KeepLimits,
        stream: HttpStreamId,
        event: u64,
        bytes: Vec<u8>,
    ) {
        if limits.events == 0
            || self
                .list
                .iter()
                .any(|k| k.stream == stream && k.event == event)
        {
            return;
        }
        let total = self.total.get_or_insert_with(|| Arc::clone(total));
        let len = bytes.len();
        if (total.load(Ordering::Relaxed)).saturating_sub(self.bytes) + len > limits.total_bytes {
            // Other sessions hold the rest of the bound: what this one keeps stays.
            return;
        }
        let over = |list: &VecDeque<Kept>, mine: usize| {
            list.len() >= limits.events
                || mine + len > limits.bytes
                || total.load(Ordering::Relaxed) + len > limits.total_bytes
        };
        while over(&self.list, self.bytes) {
            let Some(old) = self.list.pop_front() else {
                break;
            };
            self.bytes -= old.bytes.len();
            total.fetch_sub(old.bytes.len(), Ordering::Relaxed);
        }
        self.bytes += len;
        total.fetch_add(len, Ordering::Relaxed);
        self.list.push_back(Kept {
            stream,
            event,
            bytes,
            carrier: None,
        });
    }

    /// The answers of `stream` numbered above `after`, in event order, for a resumption
    /// from event `after`. Those up to it go: the client says it has them.
    pub(crate) fn resume(&mut self, stream: HttpStreamId, after: u64) -> Vec<(u64, Vec<u8>)> {
        self.drop_where(|k| k.stream == stream && k.event <= after);
        let mut out: Vec<(u64, Vec<u8>)> = (self.list.iter())
            .filter(|k| k.stream == stream && k.event > after)
            .map(|k| (k.event, k.bytes.clone()))
            .collect();
        out.sort_unstable_by_key(|&(event, _)| event);
        out
    }

    /// The answers of `stream` numbered above `after` are now carried by the response of
    /// stream `carrier` (a resumption).
    pub(crate) fn carried(&mut self, stream: HttpStreamId, after: u64, carrier: HttpStreamId) {
        for k in self.list.iter_mut() {
            if k.stream == stream && k.event > after {
                k.carrier = Some(carrier);
            }
        }
    }

    /// The response of stream `carrier` no longer carries what it did (its bytes were
    /// replaced): those answers wait for the next resumption.
    pub(crate) fn uncarry(&mut self, carrier: HttpStreamId) {
        for k in self.list.iter_mut().filter(|k| k.carrier == Some(carrier)) {
            k.carrier = None;
        }
    }

    /// The response of stream `carrier` was written out to the end: what it carried goes.
    pub(crate) fn delivered(&mut self, carrier: HttpStreamId) {
        self.drop_where(|k| k.carrier == Some(carrier));
    }

    /// Drops the answers `gone` picks.
    fn drop_where(&mut self, gone: impl Fn(&Kept) -> bool) {
        if self.list.is_empty() {
            return;
        }
        let mut freed = 0;
        self.list.retain(|k| {
            let gone = gone(k);
            if gone {
                freed += k.bytes.len();
            }
            !gone
        });
        self.bytes -= freed;
        if let Some(total) = &self.total {
            total.fetch_sub(freed, Ordering::Relaxed);
        }
    }

    /// How many answers are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }
}

impl Drop for KeptAnswers {
    fn drop(&mut self) {
        if let Some(total) = &self.total {
            total.fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

/// The stream and event number in an event's `id: STREAM-EVENT` line (`gSTREAM-EVENT` on a GET
/// stream), as the server writes its events.
fn event_id(event: &[u8]) -> Option<(HttpStreamId, u64)> {
    let rest = event.strip_prefix(b"id: ")?;
    let line = std::str::from_utf8(&rest[..rest.iter().position(|&b| b == b'\n')?]).ok()?;
    let line = line
        .strip_prefix(super::server::LISTEN_MARK)
        .unwrap_or(line);
    let (stream, number) = line.split_once('-')?;
    Some((HttpStreamId(stream.parse().ok()?), number.parse().ok()?))
}

/// The event number in an event's `id:` line.
fn event_number(event: &[u8]) -> Option<u64> {
    event_id(event).map(|(_, number)| number)
}

/// The events of an SSE buffer from the one that holds byte `read` on (those not written out
/// whole), as (the stream its id names, event number, the event's bytes, its data joined),
/// for the events with an id and data. The buffer holds whole events only, as the server
/// writes them (`id:` and `data:` lines, comments, `retry:`), each ending in an empty line.
pub(crate) fn unwritten_events(buf: &[u8], read: usize) -> Vec<(HttpStreamId, u64, &[u8], String)> {
    let read = read.min(buf.len());
    let start = (buf[..read].windows(2))
        .rposition(|w| w == b"\n\n")
        .map_or(0, |at| at + 2);
    let mut out = Vec::new();
    let mut rest = &buf[start..];
    while !rest.is_empty() {
        let end = (rest.windows(2).position(|w| w == b"\n\n")).map_or(rest.len(), |at| at + 2);
        let (event, tail) = rest.split_at(end);
        rest = tail;
        let mut number = None;
        let mut data: Option<String> = None;
        for line in event.split(|&b| b == b'\n') {
            if line.starts_with(b"id: ") {
                number = event_id(event);
            } else if let Some(text) = line.strip_prefix(b"data: ") {
                let text = String::from_utf8_lossy(text);
                match data.as_mut() {
                    Some(joined) => {
                        joined.push('\n');
                        joined.push_str(&text);
                    }
                    None => data = Some(text.into_owned()),
                }
            }
        }
        if let (Some((stream, number)), Some(data)) = (number, data)
            && !data.is_empty()
        {
            out.push((stream, number, event, data));
        }
    }
    out
}

/// `replayed` (the store's events, each whole) with every answer of `kept` it lacks put in
/// its place by event number. Events whose number cannot be read keep their place after the
/// one before them.
pub(crate) fn merge(replayed: &[Vec<u8>], kept: Vec<(u64, Vec<u8>)>) -> Vec<u8> {
    let numbers: Vec<Option<u64>> = replayed.iter().map(|e| event_number(e)).collect();
    let mut kept = kept
        .into_iter()
        .filter(|(n, _)| !numbers.contains(&Some(*n)))
        .peekable();
    let size = replayed.iter().map(Vec::len).sum::<usize>();
    let mut out = Vec::with_capacity(size);
    for (event, number) in replayed.iter().zip(&numbers) {
        if let Some(number) = number {
            while let Some((_, bytes)) = kept.next_if(|(k, _)| k < number) {
                out.extend_from_slice(&bytes);
            }
        }
        out.extend_from_slice(event);
    }
    for (_, bytes) in kept {
        out.extend_from_slice(&bytes);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(stream: u64, n: u64, text: &str) -> Vec<u8> {
        format!("id: {stream}-{n}\ndata: {text}\n\n").into_bytes()
    }

    #[test]
    fn merge_puts_missing_answers_in_event_order_and_never_twice() {
        let replayed = vec![event(7, 3, "a"), event(7, 9, "b")];
        let kept = vec![
            (3, event(7, 3, "a")),
            (5, event(7, 5, "x")),
            (12, event(7, 12, "y")),
        ];
        let merged = String::from_utf8(merge(&replayed, kept)).unwrap();
        assert_eq!(
            merged,
            "id: 7-3\ndata: a\n\nid: 7-5\ndata: x\n\nid: 7-9\ndata: b\n\nid: 7-12\ndata: y\n\n"
        );
        assert_eq!(merge(&[], vec![(2, event(1, 2, "z"))]), event(1, 2, "z"));
    }

    #[test]
    fn unwritten_events_start_at_the_event_the_host_was_in() {
        let mut buf = event(4, 1, "");
        buf.extend_from_slice(b"retry: 1000\n\n");
        let second = event(4, 2, r#"{"a":1}"#);
        let at_second = buf.len();
        buf.extend_from_slice(&second);
        buf.extend_from_slice(b":\n\n");
        let third: &[u8] = b"id: 4-3\ndata: [1,\ndata: 2]\n\n";
        buf.extend_from_slice(third);
        // From the start of the second event, inside it, one byte short of its end: it and
        // the third (the comment and the empty priming event carry no data).
        for read in [at_second, at_second + 5, at_second + second.len() - 1] {
            let found: Vec<(u64, String)> = unwritten_events(&buf, read)
                .into_iter()
                .map(|(s, n, _, data)| {
                    assert_eq!(s, HttpStreamId(4));
                    (n, data)
                })
                .collect();
            assert_eq!(
                found,
                [(2, r#"{"a":1}"#.to_owned()), (3, "[1,\n2]".to_owned())],
                "{read}"
            );
        }
        // Written whole up to the third: the third alone, its bytes whole.
        let last = unwritten_events(&buf, buf.len() - third.len());
        assert_eq!(last.len(), 1);
        assert_eq!(last[0].2, third);
        assert!(unwritten_events(&buf, buf.len()).is_empty());
    }

    #[test]
    fn bounds_hold_per_session_and_over_all_sessions() {
        let total = Arc::new(AtomicUsize::new(0));
        let limits = KeepLimits {
            events: 2,
            bytes: 1000,
            total_bytes: 150,
        };
        let mut a = KeptAnswers::default();
        for n in 1..=3 {
            a.keep(&total, limits, HttpStreamId(1), n, vec![b'a'; 50]);
        }
        assert_eq!(a.len(), 2, "the oldest went at the count bound");
        assert_eq!(total.load(Ordering::Relaxed), 100);
        let mut b = KeptAnswers::default();
        b.keep(&total, limits, HttpStreamId(2), 1, vec![b'b'; 50]);
        b.keep(&total, limits, HttpStreamId(2), 2, vec![b'b'; 50]);
        assert_eq!(total.load(Ordering::Relaxed), 150);
        assert_eq!(
            b.len(),
            1,
            "the total bound made this session drop its own oldest"
        );
        b.keep(&total, limits, HttpStreamId(2), 3, vec![b'b'; 120]);
        assert_eq!(
            (b.len(), total.load(Ordering::Relaxed)),
            (1, 150),
            "what cannot fit beside the other session's answers is refused, and the session's \
             own stay"
        );
        drop(a);
        assert_eq!(
            total.load(Ordering::Relaxed),
            50,
            "a dropped session gives its bytes back"
        );
        b.keep(&total, limits, HttpStreamId(2), 4, vec![b'b'; 120]);
        assert_eq!(b.len(), 1, "the session's own older answer made room");
        b.delivered(HttpStreamId(2));
        assert_eq!(b.len(), 1, "a response that did not carry it leaves it");
        assert_eq!(b.resume(HttpStreamId(2), 3).len(), 1);
        b.carried(HttpStreamId(2), 3, HttpStreamId(9));
        b.delivered(HttpStreamId(9));
        assert_eq!((b.len(), total.load(Ordering::Relaxed)), (0, 0));
        // A resumption from an event says the client has that one and those before it.
        b.keep(&total, limits, HttpStreamId(2), 5, vec![b'b'; 10]);
        b.keep(&total, limits, HttpStreamId(3), 6, vec![b'b'; 10]);
        assert!(b.resume(HttpStreamId(2), 5).is_empty());
        assert_eq!(b.len(), 1, "only the other stream's answer is left");
        b.delivered(HttpStreamId(3));
        assert_eq!(b.len(), 1, "a response that did not carry it leaves it");
        assert_eq!(b.resume(HttpStreamId(3), 0).len(), 1);
        b.carried(HttpStreamId(3), 0, HttpStreamId(3));
        b.delivered(HttpStreamId(3));
        assert_eq!((b.len(), total.load(Ordering::Relaxed)), (0, 0));
    }
}
