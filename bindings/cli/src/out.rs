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
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
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
