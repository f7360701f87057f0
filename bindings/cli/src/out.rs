//! The commands' reports on stdout, when its reader may have gone (`mcpwire probe … | head`).
//! `println!` panics on a broken pipe: Rust ignores SIGPIPE, and the commands must, since they
//! also write to their servers' pipes. Here the command ends quietly instead, with the status
//! a shell reports for a process that SIGPIPE ended.

/// The exit status when stdout's reader went away: 128 + SIGPIPE (13).
pub const EXIT_READER_GONE: i32 = 141;

/// Writes `text` to stdout at once. When the reader has gone, the process exits with
/// [`EXIT_READER_GONE`] (a server it started sees its stdin end and stops); on any other
/// failure to write, it says so on stderr and exits with 1.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    // (Waiting while a stdout its parent left non-blocking is full: Node does that, and a
    // large report then meets `WouldBlock`, which is no failure.)
    if let Err(e) = crate::tap::write_waiting(&mut out, text.as_bytes()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(EXIT_READER_GONE);
        }
        say!("mcpwire: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// [`print`] of one line.
pub fn line(args: std::fmt::Arguments<'_>) {
    print(&format!("{args}\n"));
}
