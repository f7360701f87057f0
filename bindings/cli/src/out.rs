//! The commands' reports on stdout, when its reader may have gone (`mcpwire probe … | head`).
//! `println!` panics on a broken pipe: Rust ignores SIGPIPE, and the commands must, since they
//! also write to their servers' pipes. Here the command ends quietly instead, with the status
//! a shell reports for a process that SIGPIPE ended.

use std::io::Write;

/// The exit status when stdout's reader went away: 128 + SIGPIPE (13).
pub const EXIT_READER_GONE: i32 = 141;

/// Writes `text` to stdout at once. When the reader has gone, the process exits with
/// [`EXIT_READER_GONE`] (a server it started sees its stdin end and stops); on any other
/// failure to write, it says so on stderr and exits with 1.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = write_waiting(&mut out, text.as_bytes()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(EXIT_READER_GONE);
        }
        eprintln!("mcpwire: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// [`print`] of one line.
pub fn line(args: std::fmt::Arguments<'_>) {
    print(&format!("{args}\n"));
}

/// Writes and flushes `bytes`, waiting while stdout is full: a parent may have left it
/// non-blocking (Node does), and a large report then meets `WouldBlock`, which is no failure.
fn write_waiting(out: &mut impl Write, mut bytes: &[u8]) -> std::io::Result<()> {
    use std::io::ErrorKind;
    while !bytes.is_empty() {
        match out.write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => wait_writable(),
            Err(e) => return Err(e),
        }
    }
    loop {
        match out.flush() {
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => wait_writable(),
            other => return other,
        }
    }
}

/// Waits until stdout takes bytes again.
fn wait_writable() {
    #[cfg(unix)]
    {
        let mut fds = [libc::pollfd {
            fd: libc::STDOUT_FILENO,
            events: libc::POLLOUT,
            revents: 0,
        }];
        // SAFETY: `fds` is one valid, writable pollfd for the call. A poll that fails or is
        // interrupted only leads to another write attempt.
        unsafe { libc::poll(fds.as_mut_ptr(), 1, -1) };
    }
    #[cfg(not(unix))]
    std::thread::sleep(std::time::Duration::from_millis(1));
}
