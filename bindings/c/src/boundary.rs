//! The edge between C and Rust: the one panic boundary, the one NULL check, handles, and
//! typed conversions of the caller's pointers.
//!
//! Every exported function runs its body through [`catch`] (usually by way of [`call`],
//! [`with_ref`] or [`with_mut`], or [`with_mut_pair`] and [`with_mut_and_ref`] for a call on
//! two handles); every pointer from C goes through [`required`] (or
//! [`optional`]) before it is used; every pointer cast is one of the typed helpers below.

use std::cell::Cell;
use std::ffi::c_char;
use std::panic::{self, AssertUnwindSafe};
use std::ptr::NonNull;

use super::result::mcpw_result::{self, *};
use mcpwire::jsonrpc::RawJson;

/// What an exported body returns before it becomes a code.
pub(crate) type Outcome = Result<(), mcpw_result>;

// ---- The panic boundary -------------------------------------------------------------------

/// The one panic boundary: runs `body`, and if it panics, returns `on_panic()` instead of
/// unwinding into C.
pub(crate) fn catch<T>(on_panic: impl FnOnce() -> T, body: impl FnOnce() -> T) -> T {
    panic::catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| on_panic())
}

/// Runs a body that needs no handle.
pub(crate) fn call(body: impl FnOnce() -> Outcome) -> mcpw_result {
    catch(|| MCPW_ERR_PANIC, || code(body()))
}

fn code(outcome: Outcome) -> mcpw_result {
    match outcome {
        Ok(()) => MCPW_OK,
        Err(e) => e,
    }
}

// ---- Callbacks ----------------------------------------------------------------------------

thread_local! {
    /// How many of the host's callbacks this thread is inside, run by a call of the library:
    /// while any is, every call that takes a handle is refused (`MCPW_ERR_REENTRANT`). The
    /// call that runs the callback holds its handle as `&mut`, and the views it lent are
    /// valid: a callback reaching either would alias that borrow, which is undefined
    /// behaviour, whatever it then did.
    static IN_CALLBACK: Cell<u32> = const { Cell::new(0) };
}

/// Runs one of the host's callbacks: calls into the library from inside it are refused.
pub(crate) fn host_callback<T>(callback: impl FnOnce() -> T) -> T {
    /// Leaves the callback on the way out, however it ends.
    struct Inside;
    impl Drop for Inside {
        fn drop(&mut self) {
            IN_CALLBACK.with(|n| n.set(n.get().saturating_sub(1)));
        }
    }
    IN_CALLBACK.with(|n| n.set(n.get().saturating_add(1)));
    let _inside = Inside;
    callback()
}

/// `MCPW_ERR_REENTRANT` when called from inside a host's callback.
pub(crate) fn not_reentrant() -> Outcome {
    if IN_CALLBACK.with(Cell::get) > 0 {
        return Err(MCPW_ERR_REENTRANT);
    }
    Ok(())
}

// ---- Handles ------------------------------------------------------------------------------

/// An object behind an opaque C handle: it carries the poison flag that a panic sets.
pub(crate) trait Handle {
    /// Set once a call on this handle panicked; every later call fails.
    fn poisoned(&self) -> &Cell<bool>;
    /// Runs before every call that may change the handle (once it is known not poisoned):
    /// takes note of what happened to it in between, through views it lent.
    fn before_call(&mut self) {}
    /// Runs after every call that may change the handle (and did not panic): gives back
    /// scratch space the call needed.
    fn after_call(&mut self) {}
    /// Runs once a call on this handle panicked, after it was poisoned: passes the poison on
    /// where the panic may have left things half changed (a view's lender, the views a
    /// lender lent). Must not panic.
    fn on_panic(&self) {}
}

/// Moves `value` to the heap and hands its ownership to C.
pub(crate) fn into_handle<H>(value: H) -> *mut H {
    Box::into_raw(Box::new(value))
}

/// Takes a handle back from C and drops it. NULL does nothing.
///
/// # Safety
/// `handle` is NULL or came from [`into_handle`] and has not been freed.
pub(crate) unsafe fn free_handle<H>(handle: *mut H) {
    catch(
        || (),
        || {
            // (From inside a callback, the handle may be the one whose call runs it: it is
            // kept, as a leak is the one safe outcome.)
            if handle.is_null() || not_reentrant().is_err() {
                return;
            }
            // Safety: not NULL, and (caller) made by `into_handle` and not freed yet, so the
            // box is ours to drop, exactly once.
            drop(unsafe { Box::from_raw(handle) });
        },
    )
}

/// Runs `body` on the handle behind `handle`, for calls that do not change it (a `const`
/// first argument in C).
///
/// # Safety
/// `handle` is NULL or a live handle of type `H` that no other thread is using.
pub(crate) unsafe fn with_ref<H: Handle>(
    handle: *const H,
    body: impl FnOnce(&H) -> Outcome,
) -> mcpw_result {
    let run = || {
        not_reentrant()?;
        let h = required(handle)?;
        // Safety: not NULL, and (caller) live and not in use elsewhere.
        let h = unsafe { h.as_ref() };
        if h.poisoned().get() {
            return Err(MCPW_ERR_POISONED);
        }
        body(h)
    };
    // Safety: (caller) NULL or live; the body's borrow ended with the unwind.
    catch(|| unsafe { poison(handle) }, || code(run()))
}

/// Runs `body` on the handle behind `handle`, for calls that may change it.
///
/// # Safety
/// `handle` is NULL or a live handle of type `H` that no other thread is using.
pub(crate) unsafe fn with_mut<H: Handle>(
    handle: *mut H,
    body: impl FnOnce(&mut H) -> Outcome,
) -> mcpw_result {
    let run = || {
        not_reentrant()?;
        let mut h = required_mut(handle)?;
        // Safety: not NULL, and (caller) live and not in use elsewhere, so no other
        // reference to it exists during this call.
        let h = unsafe { h.as_mut() };
        if h.poisoned().get() {
            return Err(MCPW_ERR_POISONED);
        }
        h.before_call();
        let outcome = body(h);
        h.after_call();
        outcome
    };
    // Safety: (caller) NULL or live; the body's borrow ended with the unwind.
    catch(|| unsafe { poison(handle.cast_const()) }, || code(run()))
}

/// Runs `body` on two handles of different kinds at once, for calls that may change both (a
/// task table answering on a connection). Both are checked (NULL, poisoned) before `body`
/// runs; a panic poisons both.
///
/// # Safety
/// `a` and `b` are each NULL or a live handle of their type that no other thread is using.
pub(crate) unsafe fn with_mut_pair<A: Handle, B: Handle>(
    a: *mut A,
    b: *mut B,
    body: impl FnOnce(&mut A, &mut B) -> Outcome,
) -> mcpw_result {
    let run = || {
        not_reentrant()?;
        let (mut pa, mut pb) = (required_mut(a)?, required_mut(b)?);
        if pa.cast::<u8>() == pb.cast::<u8>() {
            // Two handles of different kinds are never one object; this is a caller's cast.
            return Err(MCPW_ERR_INVALID_ARGUMENT);
        }
        // Safety: not NULL, distinct, and (caller) live and not in use elsewhere, so these are
        // the only references to either during this call.
        let (ha, hb) = unsafe { (pa.as_mut(), pb.as_mut()) };
        if ha.poisoned().get() || hb.poisoned().get() {
            return Err(MCPW_ERR_POISONED);
        }
        ha.before_call();
        hb.before_call();
        let outcome = body(ha, hb);
        ha.after_call();
        hb.after_call();
        outcome
    };
    let on_panic = || {
        // Safety: (caller) NULL or live; the body's borrows ended with the unwind.
        unsafe { poison(b.cast_const()) };
        // Safety: as above.
        unsafe { poison(a.cast_const()) }
    };
    catch(on_panic, || code(run()))
}

/// [`with_mut_pair`] for a call that changes `a` and only reads `b` (a `const` second handle
/// in C). A panic poisons both.
///
/// # Safety
/// `a` and `b` are each NULL or a live handle of their type that no other thread is using.
pub(crate) unsafe fn with_mut_and_ref<A: Handle, B: Handle>(
    a: *mut A,
    b: *const B,
    body: impl FnOnce(&mut A, &B) -> Outcome,
) -> mcpw_result {
    let run = || {
        not_reentrant()?;
        let (mut pa, pb) = (required_mut(a)?, required(b)?);
        if pa.cast::<u8>() == pb.cast::<u8>() {
            // Two handles of different kinds are never one object; this is a caller's cast.
            return Err(MCPW_ERR_INVALID_ARGUMENT);
        }
        // Safety: not NULL, distinct, and (caller) live and not in use elsewhere, so no other
        // reference to `a` exists during this call and `b` is only read.
        let (ha, hb) = unsafe { (pa.as_mut(), pb.as_ref()) };
        if ha.poisoned().get() || hb.poisoned().get() {
            return Err(MCPW_ERR_POISONED);
        }
        ha.before_call();
        let outcome = body(ha, hb);
        ha.after_call();
        outcome
    };
    let on_panic = || {
        // Safety: (caller) NULL or live; the body's borrows ended with the unwind.
        unsafe { poison(b) };
        // Safety: as above.
        unsafe { poison(a.cast_const()) }
    };
    catch(on_panic, || code(run()))
}

/// Marks the handle poisoned after a panic inside a call on it.
///
/// # Safety
/// `handle` is NULL or live, and no reference into it is alive.
unsafe fn poison<H: Handle>(handle: *const H) -> mcpw_result {
    if let Ok(h) = required(handle) {
        // Safety: (caller) live, and the panicking body's borrow is gone.
        let h = unsafe { h.as_ref() };
        h.poisoned().set(true);
        h.on_panic();
    }
    MCPW_ERR_PANIC
}

// ---- Pointers from C ---------------------------------------------------------------------

/// The one NULL check: a pointer the call cannot do without.
pub(crate) fn required<T>(ptr: *const T) -> Result<NonNull<T>, mcpw_result> {
    NonNull::new(ptr.cast_mut()).ok_or(MCPW_ERR_NULL_ARGUMENT)
}

/// [`required`] for a pointer the call writes through.
pub(crate) fn required_mut<T>(ptr: *mut T) -> Result<NonNull<T>, mcpw_result> {
    required(ptr.cast_const())
}

/// A pointer that may be NULL: `None` when it is.
pub(crate) fn optional<T>(ptr: *const T) -> Option<NonNull<T>> {
    required(ptr).ok()
}

/// Reads a small `#[repr(C)]` struct of plain numbers the caller passed by pointer.
///
/// # Safety
/// `ptr` is NULL or valid for reading a `T`, and every bit pattern is a valid `T`.
pub(crate) unsafe fn read_in<T: Copy>(ptr: *const T) -> Result<T, mcpw_result> {
    let p = required(ptr)?;
    // Safety: not NULL; (caller) valid for reads, any bits valid.
    Ok(unsafe { p.as_ptr().read() })
}

/// Bytes from C as a slice: `(NULL, 0)` is the empty slice.
///
/// # Safety
/// Unless `len` is 0, `ptr` is NULL or points to `len` bytes readable for `'a`.
pub(crate) unsafe fn bytes_in<'a>(ptr: *const u8, len: usize) -> Result<&'a [u8], mcpw_result> {
    if len == 0 {
        return Ok(&[]);
    }
    // NULL first: "a NULL pointer with a non-zero length" whatever the length.
    let p = required(ptr)?;
    if isize::try_from(len).is_err() {
        return Err(MCPW_ERR_INVALID_ARGUMENT);
    }
    // Safety: not NULL, `len` fits `isize`, and (caller) `len` bytes are readable for 'a.
    Ok(unsafe { std::slice::from_raw_parts(p.as_ptr(), len) })
}

/// An array of `len` structs from C: `(NULL, 0)` is the empty slice.
///
/// # Safety
/// Unless `len` is 0, `ptr` is NULL or points to `len` readable, initialised `T` for `'a`.
pub(crate) unsafe fn array_in<'a, T>(ptr: *const T, len: usize) -> Result<&'a [T], mcpw_result> {
    if len == 0 {
        return Ok(&[]);
    }
    let p = required(ptr)?;
    if len > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(MCPW_ERR_INVALID_ARGUMENT);
    }
    // Safety: not NULL, the size fits `isize`, and (caller) `len` readable `T` for 'a.
    Ok(unsafe { std::slice::from_raw_parts(p.as_ptr(), len) })
}

/// Characters from C: a `const char*` viewed as bytes.
pub(crate) fn chars_as_bytes(ptr: *const c_char) -> *const u8 {
    ptr.cast::<u8>()
}

/// Text from C, which must be UTF-8: `(NULL, 0)` is the empty string.
///
/// # Safety
/// As [`bytes_in`].
pub(crate) unsafe fn text_in<'a>(ptr: *const c_char, len: usize) -> Result<&'a str, mcpw_result> {
    // Safety: forwarded from the caller.
    utf8(unsafe { bytes_in(chars_as_bytes(ptr), len) }?)
}

/// Optional bytes from C: NULL (with length 0) is "absent", anything else as [`bytes_in`].
///
/// # Safety
/// As [`bytes_in`].
pub(crate) unsafe fn optional_bytes_in<'a>(
    ptr: *const c_char,
    len: usize,
) -> Result<Option<&'a [u8]>, mcpw_result> {
    if ptr.is_null() {
        return if len == 0 {
            Ok(None)
        } else {
            Err(MCPW_ERR_NULL_ARGUMENT)
        };
    }
    // Safety: forwarded from the caller.
    unsafe { bytes_in(chars_as_bytes(ptr), len) }.map(Some)
}

// ---- Outputs to C ------------------------------------------------------------------------

/// An output parameter, checked for NULL before the call does anything, written (once) only
/// when the call succeeds.
pub(crate) struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// Checks an output pointer.
    ///
    /// # Safety
    /// `ptr` is NULL or valid and aligned for writing a `T` until [`write`](Self::write).
    pub(crate) unsafe fn new(ptr: *mut T) -> Result<Self, mcpw_result> {
        required_mut(ptr).map(Out)
    }

    /// Writes the value, without reading or dropping what was there (C memory may be
    /// uninitialised).
    pub(crate) fn write(self, value: T) {
        // Safety: not NULL, and valid and aligned for writes as promised to `Out::new`.
        unsafe { self.0.as_ptr().write(value) }
    }
}

/// Bytes lent to C: the pointer of a slice, or NULL for an empty one.
pub(crate) fn bytes_out(bytes: &[u8]) -> *const u8 {
    if bytes.is_empty() {
        std::ptr::null()
    } else {
        bytes.as_ptr()
    }
}

/// Text lent to C as `const char*` (not NUL-terminated; a length travels with it). Present
/// but empty text gets a valid pointer (to a static empty string), never NULL, which means
/// "absent".
pub(crate) fn chars_out(text: &str) -> *const c_char {
    if text.is_empty() {
        c"".as_ptr()
    } else {
        text.as_ptr().cast::<c_char>()
    }
}

/// A caller's text buffer (`out_text`, `capacity`, `out_len`), checked before the call does
/// anything: the length is always written; the text only when it fits, followed by a NUL
/// when there is room for one.
pub(crate) struct TextOut {
    text: *mut c_char,
    capacity: usize,
    len: Out<usize>,
}

impl TextOut {
    /// Checks the buffer: `out_len` is required, and `out_text` may be NULL only with
    /// `capacity` 0 (a call that asks for the length alone).
    ///
    /// # Safety
    /// `text` points to `capacity` writable bytes (or is NULL with `capacity` 0); `len` is
    /// NULL or writable.
    pub(crate) unsafe fn new(
        text: *mut c_char,
        capacity: usize,
        len: *mut usize,
    ) -> Result<Self, mcpw_result> {
        // Safety: (caller) writable or NULL, which is refused.
        let len = unsafe { Out::new(len) }?;
        if text.is_null() && capacity != 0 {
            return Err(MCPW_ERR_NULL_ARGUMENT);
        }
        Ok(TextOut {
            text,
            capacity,
            len,
        })
    }

    /// Whether the buffer shares a byte with `input` (a caller decoding in place): what is
    /// written there must then be copied out of the input first.
    pub(crate) fn overlaps(&self, input: &[u8]) -> bool {
        let (out, at) = (self.text as usize, input.as_ptr() as usize);
        self.capacity > 0 && !input.is_empty() && out < at + input.len() && at < out + self.capacity
    }

    /// Writes `bytes` when they fit, and their length in any case. `bytes` must not overlap
    /// the buffer (see [`overlaps`](Self::overlaps)).
    pub(crate) fn write(self, bytes: &[u8]) {
        let n = bytes.len();
        if n <= self.capacity {
            // Safety: `n <= capacity`, and (caller of `new`) `text` holds `capacity` writable
            // bytes (`n` is 0 when it is NULL); (caller) `bytes` lies outside them.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.text.cast::<u8>(), n);
                if n < self.capacity {
                    self.text.add(n).write(0);
                }
            }
        }
        self.len.write(n);
    }
}

// ---- Validation of what C passed -----------------------------------------------------------

/// Bytes that must be UTF-8.
pub(crate) fn utf8(bytes: &[u8]) -> Result<&str, mcpw_result> {
    std::str::from_utf8(bytes).map_err(|_| MCPW_ERR_INVALID_UTF8)
}

/// Bytes that must be exactly one JSON value.
pub(crate) fn json(bytes: &[u8]) -> Result<RawJson<'_>, mcpw_result> {
    RawJson::new(utf8(bytes)?).map_err(|_| MCPW_ERR_INVALID_JSON)
}
