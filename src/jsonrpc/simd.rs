//! The simd-json backend.
//!
//! simd-json validates the whole frame (UTF-8, grammar, escapes, surrogates, depth) with
//! runtime CPU detection, writing its tape into reusable scratch. The envelope is then read
//! from simd-json's structural index over the untouched frame, so views are still slices of
//! the frame. When simd-json rejects a frame, the native validator runs on it to name the exact
//! reason and offset, so both backends report identical errors (and a frame that simd-json
//! refuses only for its own limits, such as a number too large for it, is still judged by JSON's
//! grammar).

use simd_json::{Buffers, INPUT_PADDING, Node, Tape};

use super::decode::Syntax;
use super::scan::{self, Fault};

/// The largest frame simd-json validates. Its tape takes 24 bytes per structural character,
/// reserved whole before the walk can apply `max_batch`: a 16 MiB `[1,1,…]` would take some
/// 500 MiB. Larger frames go to the native validator, which gives the same verdicts (and
/// measured faster on both bench corpora).
pub(crate) const MAX_SIMD_FRAME: usize = 1024 * 1024;

/// Reusable buffers: the padded copy simd-json unescapes into, its stage buffers and its tape.
/// Kept warm between frames while they weigh at most [`crate::frame::KEEP_WHEN_EMPTY`] in
/// all, as every engine buffer is; given back after a frame that made them heavier.
pub(crate) struct Scratch {
    copy: Vec<u8>,
    buffers: Option<(usize, Buffers)>,
    tape: Option<Tape<'static>>,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            copy: Vec::new(),
            buffers: None,
            tape: Some(Tape::null().reset()),
        }
    }
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch")
            .field("copy_capacity", &self.copy.capacity())
            .finish_non_exhaustive()
    }
}

impl Scratch {
    /// Validates `frame`; on success returns simd-json's structural index for it.
    pub(crate) fn validate(&mut self, frame: &[u8], max_depth: usize) -> Result<&[u32], Fault> {
        if frame.len() > MAX_SIMD_FRAME {
            return native(frame, max_depth);
        }
        self.copy.clear();
        self.copy.extend_from_slice(frame);
        self.copy.resize(frame.len() + INPUT_PADDING, b' ');
        if self
            .buffers
            .as_ref()
            .is_none_or(|(depth, _)| *depth != max_depth)
        {
            self.buffers = Some((max_depth, Buffers::with_max_depth(frame.len(), max_depth)));
        }
        let Some((_, buffers)) = self.buffers.as_mut() else {
            return native(frame, max_depth);
        };
        let mut tape = self.tape.take().unwrap_or_else(Tape::null).reset();
        let outcome = simd_json::fill_tape_padded(&mut self.copy, frame.len(), buffers, &mut tape);
        self.tape = Some(tape.reset());
        match outcome {
            Ok(()) => Ok(buffers.structural_indexes()),
            // Let the native validator name the exact fault (or accept what simd-json refused
            // only for its own limits); an empty index sends the walk down the native path.
            Err(_) => native(frame, max_depth),
        }
    }
}

impl Scratch {
    /// Gives the buffers back when they weigh more than an idle connection may keep: call it
    /// once the index [`validate`](Self::validate) gave is no longer read.
    pub(crate) fn trim(&mut self) {
        if self.held() > crate::frame::KEEP_WHEN_EMPTY {
            *self = Scratch::default();
        }
    }

    /// The bytes held, as far as can be told from outside simd-json: the copy; the stage
    /// buffers' input and string copies, each as large as the largest frame, which the copy's
    /// capacity stands for; their structural index; and the tape.
    pub(crate) fn held(&self) -> usize {
        let tape = (self.tape.as_ref()).map_or(0, |t| t.0.capacity() * size_of::<Node<'_>>());
        let index = (self.buffers.as_ref()).map_or(0, |(_, b)| size_of_val(b.structural_indexes()));
        3 * self.copy.capacity() + index + tape
    }
}

/// The native validator's verdict on `frame`; an empty index on success.
#[cold]
fn native(frame: &[u8], max_depth: usize) -> Result<&'static [u32], Fault> {
    super::utf8::validate(frame)?;
    scan::validate_document(frame, max_depth).map(|()| &[][..])
}

/// Reads a frame that simd-json has validated, using its structural index.
pub(crate) struct IndexedSyntax<'f, 'i> {
    buf: &'f [u8],
    index: &'i [u32],
}

impl<'f, 'i> IndexedSyntax<'f, 'i> {
    pub(crate) fn new(buf: &'f [u8], index: &'i [u32]) -> Self {
        IndexedSyntax { buf, index }
    }
}

impl<'f> Syntax<'f> for IndexedSyntax<'f, '_> {
    fn buf(&self) -> &'f [u8] {
        self.buf
    }

    fn string(&mut self, open: usize) -> Result<(usize, bool), Fault> {
        if self.index.is_empty() {
            return scan::string(self.buf, open + 1);
        }
        // Validated: find the closing quote, stepping over escapes.
        let buf = self.buf;
        let mut i = open + 1;
        let mut escaped = false;
        while i < buf.len() {
            match buf[i] {
                b'"' => return Ok((i + 1, escaped)),
                b'\\' => {
                    escaped = true;
                    i += 2;
                }
                _ => i += 1,
            }
        }
        scan::string(buf, open + 1)
    }

    fn value(&mut self, start: usize, depth_left: usize) -> Result<usize, Fault> {
        let buf = self.buf;
        if self.index.is_empty() {
            return scan::skip_value(buf, start, depth_left);
        }
        match buf.get(start) {
            Some(b'{' | b'[') => {}
            Some(b'"') => return self.string(start).map(|(end, _)| end),
            Some(b't' | b'n') => return Ok(start + 4),
            Some(b'f') => return Ok(start + 5),
            _ => return scan::number(buf, start).map(|n| n.end),
        }
        let Ok(k) = self.index.binary_search(&(start as u32)) else {
            return scan::skip_value(buf, start, depth_left);
        };
        let mut depth = 0usize;
        for &at in &self.index[k..] {
            match buf[at as usize] {
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(at as usize + 1);
                    }
                }
                _ => {}
            }
        }
        scan::skip_value(buf, start, depth_left)
    }

    fn prevalidated(&self) -> bool {
        !self.index.is_empty()
    }
}
