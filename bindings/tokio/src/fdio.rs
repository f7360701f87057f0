//! Reading and writing this process's standard input and output through tokio's reactor,
//! without a thread hand-off per call, and without changing a flag the parent process shares.
//!
//! `tokio::io::stdin` and `stdout` do every read and write on the blocking thread pool: two
//! thread wake-ups per call. Waiting on the descriptor with epoll instead needs non-blocking
//! calls, and `O_NONBLOCK` belongs to the open file description, which stdin and stdout share
//! with the parent (a shell, an MCP client). Two ways around that, on Linux:
//!
//! - **Pipes, FIFOs and terminals** are opened again through `/proc/self/fd/N`. That makes a
//!   new open file description of the same pipe or device, whose `O_NONBLOCK` is ours alone.
//!   When that fails (another user's pipe, no `/proc` in a sandbox) and the shared description
//!   is non-blocking already, the duplicate is polled as it is, since nothing needs changing.
//! - **Sockets** (Node, and so the TypeScript SDK, hands its children socket pairs) cannot be
//!   opened that way. They are used through a duplicate of the descriptor with `recv` and
//!   `send` and `MSG_DONTWAIT`, which makes each call non-blocking and leaves the flags alone.
//!
//! Anything else (a regular file, `/dev/null`, a descriptor epoll refuses) gets `None`, and
//! the caller keeps tokio's own types.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{Interest, ReadBuf};

/// A descriptor registered with tokio's reactor. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct PolledFd {
    fd: AsyncFd<File>,
    /// A socket: every call passes `MSG_DONTWAIT` (the descriptor itself stays blocking).
    socket: bool,
}

impl PolledFd {
    /// `fd` made ready for polled reads (`write` false) or writes (`write` true), or `None`
    /// when that cannot be done without touching the flags it shares (see the module docs).
    /// Also `None` outside a tokio runtime.
    ///
    /// # Panics
    /// Inside a runtime built without IO (`enable_io`), like every tokio socket type.
    pub(crate) fn new(fd: BorrowedFd<'_>, write: bool) -> Option<PolledFd> {
        Self::with_reopen(fd, write, || {
            let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            (OpenOptions::new().read(!write).write(write))
                .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                .open(path)
                .ok()
        })
    }

    /// [`new`](Self::new), with the reopening of a pipe or terminal done by `reopen`.
    ///
    /// When it fails (another user's pipe, no `/proc` in a sandbox) and the shared description
    /// is already non-blocking, as some parents leave it, the duplicate is polled as it is:
    /// nothing needs changing. tokio's own types would hand the `WouldBlock` of an empty
    /// non-blocking pipe up as an error, ending the server at its first read.
    fn with_reopen(
        fd: BorrowedFd<'_>,
        write: bool,
        reopen: impl FnOnce() -> Option<File>,
    ) -> Option<PolledFd> {
        tokio::runtime::Handle::try_current().ok()?;
        let dup = File::from(fd.try_clone_to_owned().ok()?);
        let kind = dup.metadata().ok()?.file_type();
        let (file, socket) = if kind.is_socket() {
            (dup, true)
        } else if kind.is_fifo() || kind.is_char_device() {
            match reopen() {
                Some(file) => (file, false),
                None if nonblocking(dup.as_fd()) => (dup, false),
                None => return None,
            }
        } else {
            return None;
        };
        let interest = if write {
            Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        // epoll refuses what cannot be polled (regular files, /dev/null): EPERM here.
        // SAFETY: `file` owns its descriptor, which stays open, and the same, until the
        // `AsyncFd` drops it.
        let fd = unsafe { AsyncFd::register_with_interest(file, interest) }.ok()?;
        Some(PolledFd { fd, socket })
    }

    /// `AsyncRead::poll_read` on the descriptor.
    pub(crate) fn poll_read(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.fd.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match ready.try_io(|file| retry_interrupted(|| self.read_now(file.get_ref(), unfilled)))
            {
                Ok(read) => {
                    buf.advance(read?);
                    return Poll::Ready(Ok(()));
                }
                Err(_would_block) => continue, // readiness cleared: wait for the next edge
            }
        }
    }

    /// `AsyncWrite::poll_write` on the descriptor.
    pub(crate) fn poll_write(&self, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            let mut ready = ready!(self.fd.poll_write_ready(cx))?;
            match ready.try_io(|file| retry_interrupted(|| self.write_now(file.get_ref(), bytes))) {
                Ok(written) => return Poll::Ready(written),
                Err(_would_block) => continue,
            }
        }
    }

    /// One non-blocking read (`WouldBlock` when nothing is there).
    fn read_now(&self, file: &File, buf: &mut [u8]) -> io::Result<usize> {
        if !self.socket {
            return (&*file).read(buf);
        }
        // SAFETY: `buf` is valid for `buf.len()` bytes of writing, and the descriptor is open
        // for as long as `file` is borrowed.
        let n = unsafe {
            libc::recv(
                file.as_fd().as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// One non-blocking write (`WouldBlock` when the pipe or socket is full).
    fn write_now(&self, file: &File, bytes: &[u8]) -> io::Result<usize> {
        if !self.socket {
            return (&*file).write(bytes);
        }
        // SAFETY: `bytes` is valid for `bytes.len()` bytes of reading, and the descriptor is
        // open for as long as `file` is borrowed.
        let n = unsafe {
            libc::send(
                file.as_fd().as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

/// Whether `fd`'s open file description is non-blocking (false when that cannot be read).
fn nonblocking(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: F_GETFL only reads the flags of an open descriptor.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    flags >= 0 && flags & libc::O_NONBLOCK != 0
}

/// `call` again while it is interrupted by a signal.
fn retry_interrupted(mut call: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
    loop {
        match call() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A polled reader or writer over `fd`, usable with tokio's extension traits.
    struct Io(PolledFd);

    impl tokio::io::AsyncRead for Io {
        fn poll_read(
            self: std::pin::Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            self.0.poll_read(cx, buf)
        }
    }

    impl tokio::io::AsyncWrite for Io {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            cx: &mut Context<'_>,
            bytes: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.0.poll_write(cx, bytes)
        }
        fn poll_flush(self: std::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// Sets `O_NONBLOCK` on `fd`'s description, as some parents leave their children's pipes.
    fn set_nonblocking(fd: BorrowedFd<'_>) {
        // SAFETY: F_GETFL and F_SETFL on an open descriptor.
        unsafe {
            let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            assert!(flags >= 0);
            assert_eq!(
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK),
                0
            );
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_non_blocking_pipe_that_cannot_be_reopened_is_polled_as_it_is() {
        // The parent left the pipe non-blocking, and /proc cannot reopen it (another user's
        // pipe, a sandbox without /proc). Reads must wait for the data, not fail.
        let (reader, mut writer) = std::io::pipe().unwrap();
        set_nonblocking(reader.as_fd());
        let polled = PolledFd::with_reopen(reader.as_fd(), false, || None)
            .expect("an already non-blocking pipe is polled without reopening it");
        let feeder = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            writer.write_all(b"late\n").unwrap();
        });
        let mut got = Vec::new();
        Io(polled).read_to_end(&mut got).await.unwrap();
        feeder.join().unwrap();
        assert_eq!(got, b"late\n");
        // A blocking one that cannot be reopened is left to tokio's own types.
        let (reader, _writer) = std::io::pipe().unwrap();
        assert!(PolledFd::with_reopen(reader.as_fd(), false, || None).is_none());
    }

    /// 1 MiB of numbered lines, so that order and completeness can be checked.
    fn payload() -> Vec<u8> {
        let mut v = Vec::new();
        let mut i = 0u64;
        while v.len() < 1 << 20 {
            v.extend_from_slice(format!("{i:08}\n").as_bytes());
            i += 1;
        }
        v
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_pipe_is_read_and_written_through_its_own_description_and_the_shared_one_stays_blocking()
     {
        let want = payload();
        // Read side: another thread writes slowly-ish in pieces, then closes.
        let (reader, mut writer) = std::io::pipe().unwrap();
        let polled = PolledFd::new(reader.as_fd(), false).expect("a pipe can be polled");
        assert!(!polled.socket);
        assert!(
            !nonblocking(reader.as_fd()),
            "the shared description was changed"
        );
        let sent = want.clone();
        let feeder = std::thread::spawn(move || {
            for piece in sent.chunks(7_001) {
                writer.write_all(piece).unwrap();
            }
        });
        let mut got = Vec::new();
        Io(polled).read_to_end(&mut got).await.unwrap();
        feeder.join().unwrap();
        assert!(got == want, "read {} bytes of {}", got.len(), want.len());

        // Write side: more than a pipe holds (64 KiB), so writes meet a full pipe and wait.
        let (mut reader, writer) = std::io::pipe().unwrap();
        let polled = PolledFd::new(writer.as_fd(), true).expect("a pipe can be polled");
        assert!(!nonblocking(writer.as_fd()));
        let drain = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                std::thread::sleep(std::time::Duration::from_micros(50));
                match reader.read(&mut buf).unwrap() {
                    0 => return got,
                    n => got.extend_from_slice(&buf[..n]),
                }
            }
        });
        let mut io = Io(polled);
        io.write_all(&want).await.unwrap();
        drop(io);
        drop(writer);
        let got = drain.join().unwrap();
        assert!(got == want, "wrote {} bytes of {}", got.len(), want.len());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_socket_is_used_with_per_call_flags_and_stays_blocking() {
        let want = payload();
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let reading = PolledFd::new(ours.as_fd(), false).expect("a socket can be polled");
        let writing = PolledFd::new(ours.as_fd(), true).expect("a socket can be polled");
        assert!(reading.socket && writing.socket);
        assert!(
            !nonblocking(ours.as_fd()),
            "the shared description was changed"
        );
        // The peer echoes everything back, in its own time, until we shut our side.
        let echo = std::thread::spawn(move || {
            let mut buf = [0u8; 3000];
            loop {
                match theirs.read(&mut buf).unwrap() {
                    0 => return,
                    n => theirs.write_all(&buf[..n]).unwrap(),
                }
            }
        });
        let (mut r, mut w) = (Io(reading), Io(writing));
        let sent = want.clone();
        let writer = async move {
            w.write_all(&sent).await.unwrap();
            ours.shutdown(std::net::Shutdown::Write).unwrap();
            ours
        };
        let mut got = Vec::new();
        let reader = async { r.read_to_end(&mut got).await.unwrap() };
        let (ours, _) = tokio::join!(writer, reader);
        echo.join().unwrap();
        assert!(got == want, "echoed {} bytes of {}", got.len(), want.len());
        assert!(!nonblocking(ours.as_fd()));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_regular_file_is_left_to_the_caller() {
        let file = File::open(std::env::current_exe().unwrap()).unwrap();
        assert!(PolledFd::new(file.as_fd(), false).is_none());
        let null = OpenOptions::new().write(true).open("/dev/null").unwrap();
        assert!(PolledFd::new(null.as_fd(), true).is_none());
    }

    #[test]
    fn outside_a_runtime_nothing_is_registered() {
        let (reader, _writer) = std::io::pipe().unwrap();
        assert!(PolledFd::new(reader.as_fd(), false).is_none());
    }
}
