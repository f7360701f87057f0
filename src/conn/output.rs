//! The outgoing byte queue, tagged by stream, lent to the caller for writing.

use std::collections::VecDeque;

/// Which transport stream output belongs to.
///
/// stdio and other byte streams have one stream, [`StreamId::MAIN`]. Message-oriented
/// transports (Streamable HTTP) use one per exchange; the engine tags each frame with the
/// stream its request arrived on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

impl StreamId {
    /// The single stream of a byte-stream transport.
    pub const MAIN: StreamId = StreamId(0);
}

/// Bytes ready for the transport, from [`Connection::poll_transmit`](super::Connection::poll_transmit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit<'a> {
    /// The stream they belong to.
    pub stream: StreamId,
    /// The bytes: whole newline-terminated frames, possibly several.
    pub bytes: &'a [u8],
}

/// One whole message for a message-oriented transport, from
/// [`Connection::poll_frame`](super::Connection::poll_frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The stream it belongs to.
    pub stream: StreamId,
    /// The message: one JSON text, without the newline stdio framing adds.
    pub bytes: &'a [u8],
}

/// How many written bytes at the front of the buffer [`Output::begin`] lets stand before it
/// moves the rest down (when they are at least half of it).
const COMPACT_AFTER: usize = 64 * 1024;

/// One contiguous buffer. Each frame ends with the newline of stdio framing; byte-stream
/// hosts take runs of one stream's frames at once ([`peek`](Output::peek)), message hosts
/// take one frame at a time without its newline ([`peek_frame`](Output::peek_frame)).
#[derive(Debug, Default)]
pub(crate) struct Output {
    buf: Vec<u8>,
    read: usize,
    /// (stream, end offset in `buf`) of each segment, oldest first: consecutive frames of one
    /// stream form one segment.
    segments: VecDeque<(StreamId, usize)>,
    /// Give the buffers back once drained (after the handshake, so an idle connection stays
    /// small; steady traffic then regrows them once and keeps them).
    release_when_drained: bool,
}

impl Output {
    /// Asks for the buffers to be freed the next time everything has been written.
    pub(crate) fn release_when_drained(&mut self) {
        self.release_when_drained = true;
        if self.segments.is_empty() {
            self.release();
        }
    }

    fn release(&mut self) {
        self.buf = Vec::new();
        self.segments = VecDeque::new();
        self.read = 0;
        self.release_when_drained = false;
    }

    /// Takes over the buffers of `old`, emptied, when this output has none yet (a fresh
    /// connection reusing a finished one's memory). No byte of `old` stays readable.
    pub(crate) fn adopt_buffers(&mut self, old: &mut Output) {
        old.buf.clear();
        old.segments.clear();
        if self.buf.capacity() == 0 && self.segments.capacity() == 0 && self.buf.is_empty() {
            std::mem::swap(&mut self.buf, &mut old.buf);
            std::mem::swap(&mut self.segments, &mut old.segments);
        }
    }

    /// The bytes its buffers hold on to.
    pub(crate) fn capacity(&self) -> usize {
        self.buf.capacity() + self.segments.capacity() * size_of::<(StreamId, usize)>()
    }

    /// Bytes not yet written.
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len() - self.read
    }

    /// The buffer to encode one frame into, on `stream`; call [`end_frame`] afterwards.
    pub(crate) fn begin(&mut self) -> &mut Vec<u8> {
        if self.read == self.buf.len() {
            self.buf.clear();
            self.read = 0;
        } else if self.read >= COMPACT_AFTER && self.read >= self.buf.len() / 2 {
            // The written bytes at the front go: a buffer that never drains whole (its peer
            // reads about as fast as we write) holds what waits, not all it ever held. The
            // bytes moved are fewer than those dropped, so each byte is moved O(1) times.
            let read = self.read;
            self.buf.drain(..read);
            for (_, end) in &mut self.segments {
                *end -= read;
            }
            self.read = 0;
        }
        &mut self.buf
    }

    /// Terminates the frame started with [`begin`] and files it under `stream`.
    pub(crate) fn end_frame(&mut self, stream: StreamId) {
        self.buf.push(b'\n');
        let end = self.buf.len();
        match self.segments.back_mut() {
            Some((s, e)) if *s == stream => *e = end,
            _ => self.segments.push_back((stream, end)),
        }
    }

    pub(crate) fn peek(&self) -> Option<(StreamId, &[u8])> {
        let &(stream, end) = self.segments.front()?;
        Some((stream, &self.buf[self.read..end]))
    }

    /// The oldest frame not yet (wholly) consumed, without its newline. A frame partly
    /// written through [`peek`](Output::peek) comes back from where that stopped. The encoder
    /// never writes a raw newline inside a message, so the first one ends the frame: frames
    /// need no bookkeeping of their own, and byte-stream hosts pay nothing for this.
    pub(crate) fn peek_frame(&self) -> Option<(StreamId, &[u8])> {
        let (stream, bytes) = self.peek()?;
        let len = crate::frame::line::find_newline(bytes).unwrap_or(bytes.len());
        Some((stream, &bytes[..len]))
    }

    /// Consumes the oldest frame whole (its newline included).
    pub(crate) fn consume_frame(&mut self) {
        if let Some((_, frame)) = self.peek_frame() {
            let n = frame.len() + 1;
            self.consume(n);
        }
    }

    pub(crate) fn consume(&mut self, mut n: usize) {
        while n > 0 {
            let Some(&(_, end)) = self.segments.front() else {
                break;
            };
            let step = n.min(end - self.read);
            self.read += step;
            n -= step;
            if self.read == end {
                self.segments.pop_front();
            }
        }
        if self.segments.is_empty() {
            self.read = 0;
            if self.release_when_drained {
                self.release();
            } else {
                crate::frame::empty(&mut self.buf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(out: &mut Output, stream: u64, text: &str) {
        out.begin().extend_from_slice(text.as_bytes());
        out.end_frame(StreamId(stream));
    }

    #[test]
    fn frames_come_one_at_a_time_without_the_newline_and_runs_stay_whole() {
        let mut out = Output::default();
        frame(&mut out, 1, "{\"a\":1}");
        frame(&mut out, 1, "{\"b\":2}");
        frame(&mut out, 2, "{\"c\":3}");
        // A byte-stream host sees one stream's run at once, newlines included.
        assert_eq!(
            out.peek(),
            Some((StreamId(1), &b"{\"a\":1}\n{\"b\":2}\n"[..]))
        );
        // A message host sees one frame.
        assert_eq!(out.peek_frame(), Some((StreamId(1), &b"{\"a\":1}"[..])));
        out.consume_frame();
        assert_eq!(out.peek_frame(), Some((StreamId(1), &b"{\"b\":2}"[..])));
        // Mixed use: three bytes written as bytes, the rest of the frame as a frame.
        out.consume(3);
        assert_eq!(out.peek_frame(), Some((StreamId(1), &b"\":2}"[..])));
        out.consume_frame();
        assert_eq!(out.peek_frame(), Some((StreamId(2), &b"{\"c\":3}"[..])));
        out.consume_frame();
        assert_eq!(out.peek_frame(), None);
        assert_eq!(out.buffered(), 0);
    }

    /// A buffer that never drains whole (each write takes all but the last frame) holds what
    /// waits, not everything written since it was last empty: it grew to the 10 MiB written.
    #[test]
    fn a_buffer_that_never_drains_whole_keeps_only_what_waits() {
        let mut out = Output::default();
        let text = format!("{{\"x\":\"{}\"}}", "y".repeat(1000));
        let mut sent = Vec::new();
        let mut written = 0;
        for n in 0..10_000 {
            frame(&mut out, n % 2, &text);
            // The host writes everything but the newest frame's last 10 bytes.
            let waiting = out.buffered();
            let mut take = waiting - 10;
            while take > 0 {
                let (_, bytes) = out.peek().unwrap();
                let step = bytes.len().min(take);
                sent.extend_from_slice(&bytes[..step]);
                out.consume(step);
                take -= step;
            }
            written += waiting - 10;
        }
        assert_eq!(sent.len(), written);
        assert!(out.buffered() == 10);
        assert!(out.capacity() < 256 * 1024, "{} bytes held", out.capacity());
        // Nothing was lost or reordered: the bytes written are the frames, in order.
        let mut expected = Vec::new();
        for _ in 0..10_000 {
            expected.extend_from_slice(text.as_bytes());
            expected.push(b'\n');
        }
        expected.truncate(written);
        assert!(sent == expected);
    }
}
