//! The command's IO layer: child processes over pipes and a clock, around the library's
//! blocking loop (`mcpwire::blocking`).

use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpwire::Timestamp;
use mcpwire::blocking::{self, Io};
use mcpwire::conn::{Config, Connection};
use mcpwire::http::ReconnectPolicy;

/// Events as the command handles them: the library's owned copy.
pub use mcpwire::OwnedEvent as Ev;
/// Which way bytes went, for transcripts.
pub use mcpwire::blocking::Direction as Dir;

/// A transcript callback: sees every chunk that crosses the pipes.
pub type Transcript = Box<dyn FnMut(Dir, &[u8]) + Send>;

/// How much of the server's latest output is kept for error messages.
const RECENT_INPUT: usize = 4096;

/// Why the loop stopped without the awaited outcome.
#[derive(Debug)]
pub enum Stop {
    /// The deadline passed.
    Deadline,
    /// The server closed its output (exited or crashed).
    Eof,
    /// This process got SIGINT, SIGTERM or SIGHUP (passed on to the server, which may ignore
    /// it): the caller stops the server its own way.
    Signal,
}

/// A client engine talking to a server: a child process over its stdin/stdout on the
/// library's blocking loop, or a Streamable HTTP endpoint through `mcpwire-tokio`'s client.
pub struct Session {
    link: Link,
    start: Instant,
    /// Sees every chunk that crosses (stdio), when set.
    transcript: Arc<Mutex<Option<Transcript>>>,
    /// The last few KiB of input (stdio), for naming what a misbehaving server wrote.
    last_input: Arc<Mutex<Vec<u8>>>,
}

/// How often a wait over HTTP looks for a signal.
const SIGNAL_LOOK: Duration = Duration::from_millis(100);

enum Link {
    Stdio {
        conn: Box<Connection>,
        child: Child,
        io: Io<Watched>,
        watch: Arc<Watch>,
    },
    Http {
        // (Dropped before the runtime: its drop lets its last POSTs out on it.)
        client: Box<mcpwire_tokio::client::Client>,
        runtime: tokio::runtime::Runtime,
    },
}

/// The server's stdin, noting when the write under way began: the blocking loop's writes
/// wait as long as the server does not read, beyond `--timeout` and a signal (see [`Watch`]).
pub struct Watched {
    inner: ChildStdin,
    watch: Arc<Watch>,
}

impl std::io::Write for Watched {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.watch.begin();
        let written = self.inner.write(buf);
        self.watch.end();
        written
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Watches the writes to the server from a thread of its own, and kills the server when one
/// has waited longer than `limit` (the server stopped reading: nothing else ends that write),
/// or 2 s once this process caught a signal. The write then fails, and the command reports
/// why ([`Session::stopped_reading`]).
pub struct Watch {
    start: Instant,
    /// When the write under way began, in ms since `start`, plus one (0: none under way).
    since: AtomicU64,
    /// Set once the server was killed for it.
    killed: AtomicBool,
    /// The server, while it may be signalled: `None` once it is about to be reaped (its pid
    /// may then be another process's).
    pid: Mutex<Option<u32>>,
}

impl Watch {
    fn begin(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.since.store(ms + 1, Ordering::SeqCst);
    }

    fn end(&self) {
        self.since.store(0, Ordering::SeqCst);
    }

    /// `child.try_wait()`, with the watchdog kept from signalling a pid that reaping frees.
    /// (Through `signals::reap`, so that the signal relay forgets the pid too.)
    fn try_wait(&self, child: &mut Child) -> Option<ExitStatus> {
        let mut pid = self.pid.lock().unwrap_or_else(|p| p.into_inner());
        let status = crate::signals::reap(child, false)?;
        *pid = None;
        status.ok()
    }

    /// `child.wait()` (see [`try_wait`](Self::try_wait)).
    fn wait(&self, child: &mut Child) -> Option<ExitStatus> {
        *self.pid.lock().unwrap_or_else(|p| p.into_inner()) = None;
        crate::signals::reap(child, true)?.ok()
    }

    fn spawn(self: &Arc<Self>, limit: Duration) {
        let watch = Arc::downgrade(self);
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(100));
                let Some(watch) = watch.upgrade() else { return };
                let since = watch.since.load(Ordering::SeqCst);
                if since == 0 {
                    continue;
                }
                let waited = Duration::from_millis(
                    u64::try_from(watch.start.elapsed().as_millis())
                        .unwrap_or(u64::MAX)
                        .saturating_sub(since - 1),
                );
                let give_up = if crate::signals::caught().is_some() {
                    limit.min(Duration::from_secs(2))
                } else {
                    limit
                };
                if waited < give_up {
                    continue;
                }
                let pid = watch.pid.lock().unwrap_or_else(|p| p.into_inner());
                if watch.since.load(Ordering::SeqCst) != since {
                    // The write ended (the server read after all), or another began, since
                    // the look above: nothing to stop it for yet.
                    continue;
                }
                if let Some(pid) = *pid {
                    watch.killed.store(true, Ordering::SeqCst);
                    kill(pid);
                }
                return;
            }
        });
    }
}

/// The server leads a process group of its own (see `Session::spawn`): the signals go to
/// that group.
#[cfg(unix)]
static SERVER_GROUP: AtomicBool = AtomicBool::new(false);

/// `signal` to the server, and to its process group when it leads one, so that a server
/// started through a shell wrapper (`sh -c 'python server.py; …'`) gets it too: sent to the
/// shell alone, the server outlived the probe.
#[cfg(unix)]
fn signal_group(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        let target = if SERVER_GROUP.load(Ordering::SeqCst) {
            -pid
        } else {
            pid
        };
        // SAFETY: kill(2) on our own child, or the group it leads, the child not reaped yet
        // (the callers hold `Watch::pid`, cleared before the child is waited for, or have
        // not seen it exit): the id is not another process's.
        unsafe { libc::kill(target, signal) };
    }
}

/// After the server (its group's leader) exited on the SIGTERM: what is left of its group
/// (a wrapper's server that ignores the signal, or takes long over its clean-up) gets until
/// `until`, then SIGKILL. (The group's id is not handed out again while a member lives.)
#[cfg(unix)]
fn end_group(pid: u32, until: Instant) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if !SERVER_GROUP.load(Ordering::SeqCst) {
        return;
    }
    // SAFETY: kill(2) with signal 0 only asks whether the group has members.
    while Instant::now() < until && unsafe { libc::kill(-pid, 0) } == 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: as above; no member, and the call fails with ESRCH.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
}

/// The server (its group's leader) exited without a signal: what is left of its group gets
/// SIGTERM, then [`end_group`]'s two seconds, then SIGKILL.
#[cfg(unix)]
fn end_leftovers(pid: u32) {
    let Ok(group) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) with signal 0 only asks whether the group has members; the group's id
    // is not handed out again while one lives.
    if !SERVER_GROUP.load(Ordering::SeqCst) || unsafe { libc::kill(-group, 0) } != 0 {
        return;
    }
    // SAFETY: as above: the group has members, so the id is still its.
    unsafe { libc::kill(-group, libc::SIGTERM) };
    end_group(pid, Instant::now() + Duration::from_secs(2));
}

/// Whether this process runs in the foreground of its controlling terminal. The server
/// then stays in this process group: in a group of its own it would be a background job,
/// stopped as soon as it prompts on the terminal (ssh, sudo) or writes to it under
/// `stty tostop`. (The terminal's signals reach the whole foreground group, wrappers'
/// servers included.)
#[cfg(unix)]
fn in_terminal_foreground() -> bool {
    // SAFETY: open(2), tcgetpgrp(3), getpgrp(2) and close(2) take and return plain values;
    // the path is a NUL-terminated literal, and the descriptor is closed before returning.
    unsafe {
        let fd = libc::open(
            c"/dev/tty".as_ptr(),
            libc::O_RDONLY | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return false; // no controlling terminal
        }
        let foreground = libc::tcgetpgrp(fd) == libc::getpgrp();
        libc::close(fd);
        foreground
    }
}

/// SIGKILL to `pid` and its process group.
fn kill(pid: u32) {
    #[cfg(unix)]
    signal_group(pid, libc::SIGKILL);
    #[cfg(not(unix))]
    let _ = pid;
}

impl Session {
    pub fn spawn(argv: &[String], config: Config, quiet_stderr: bool) -> std::io::Result<Session> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| std::io::Error::other("no server command given"))?;
        // Before the server starts: a configuration refused here would leave it running.
        let request_timeout = config.request_timeout;
        let conn = Connection::new(config, Timestamp::ZERO).map_err(std::io::Error::other)?;
        // A signal that comes while the server starts is held for it (see below).
        crate::signals::catch();
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if quiet_stderr {
                Stdio::null()
            } else {
                Stdio::inherit()
            });
        // Away from a terminal's foreground (a script, CI), a process group of its own, so
        // that every signal the probe sends (passed on, or its own at the end) reaches what
        // the server started too: a shell wrapper's server outlived a probe that signalled
        // the shell alone.
        #[cfg(unix)]
        let grouped = !in_terminal_foreground();
        #[cfg(not(unix))]
        let grouped = false;
        #[cfg(unix)]
        if grouped {
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
        let mut child = command.spawn()?;
        #[cfg(unix)]
        SERVER_GROUP.store(grouped, Ordering::SeqCst);
        // Stopping the command stops the server too (and the command then sees it go).
        if grouped {
            crate::signals::pass_to_group(child.id());
        } else {
            crate::signals::pass_to(child.id());
        }
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let start = Instant::now();
        let clock = move || Timestamp::from_nanos(start.elapsed().as_nanos() as u64);
        let watch = Arc::new(Watch {
            start,
            since: AtomicU64::new(0),
            killed: AtomicBool::new(false),
            pid: Mutex::new(Some(child.id())),
        });
        watch.spawn(request_timeout);
        let stdin = Watched {
            inner: stdin,
            watch: Arc::clone(&watch),
        };
        let mut io = Io::new(stdout, stdin, clock);
        let transcript: Arc<Mutex<Option<Transcript>>> = Arc::default();
        let last_input: Arc<Mutex<Vec<u8>>> = Arc::default();
        let (t, last) = (Arc::clone(&transcript), Arc::clone(&last_input));
        io.set_tap(move |dir, bytes| {
            if dir == Dir::Received
                && let Ok(mut last) = last.lock()
            {
                // A line may come in several writes: keep the end of the input, not the
                // last chunk alone.
                let keep = RECENT_INPUT.saturating_sub(bytes.len());
                let drop = last.len().saturating_sub(keep);
                last.drain(..drop);
                last.extend_from_slice(&bytes[bytes.len().saturating_sub(RECENT_INPUT)..]);
            }
            if let Ok(mut t) = t.lock()
                && let Some(t) = t.as_mut()
            {
                t(dir, bytes);
            }
        });
        Ok(Session {
            link: Link::Stdio {
                conn: Box::new(conn),
                child,
                io,
                watch,
            },
            start,
            transcript,
            last_input,
        })
    }

    /// A session with the Streamable HTTP endpoint at `url`.
    pub fn connect_http(url: &str, config: Config) -> std::io::Result<Session> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let client = {
            let _guard = runtime.enter();
            Box::new(
                mcpwire_tokio::client::Client::new(url, config, ReconnectPolicy::default())
                    .map_err(|e| match e {
                        // (Without the URL, which the caller names, its credentials hidden.)
                        mcpwire_tokio::client::ClientError::Url(_) => std::io::Error::other(
                            "not a usable URL: only http:// with a host is supported",
                        ),
                        e => std::io::Error::other(e),
                    })?,
            )
        };
        Ok(Session {
            link: Link::Http { runtime, client },
            start: Instant::now(),
            transcript: Arc::default(),
            last_input: Arc::default(),
        })
    }

    /// The MCP connection, for commands and getters.
    pub fn conn(&mut self) -> &mut Connection {
        match &mut self.link {
            Link::Stdio { conn, .. } => conn,
            Link::Http { client, .. } => client.connection(),
        }
    }

    /// Over HTTP, the start of the last error body that held no JSON-RPC answer (an HTML
    /// page, a proxy's text), to show with its status.
    pub fn failure_text(&self) -> Option<String> {
        match &self.link {
            Link::Stdio { .. } => None,
            Link::Http { client, .. } => client.http().failure_text().map(str::to_owned),
        }
    }

    /// Shows every chunk that crosses from now on to `transcript` (stdio).
    pub fn set_transcript(&mut self, transcript: Transcript) {
        if let Ok(mut t) = self.transcript.lock() {
            *t = Some(transcript);
        }
    }

    /// Whether the server was killed because a write to it waited too long (it stopped
    /// reading its input; see [`Watch`]).
    pub fn stopped_reading(&self) -> bool {
        matches!(&self.link, Link::Stdio { watch, .. } if watch.killed.load(Ordering::SeqCst))
    }

    /// The last bytes the server wrote (stdio; at most `RECENT_INPUT`).
    pub fn last_input(&self) -> Vec<u8> {
        self.last_input
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default()
    }

    pub fn now(&self) -> Timestamp {
        match &self.link {
            Link::Stdio { .. } => Timestamp::from_nanos(self.start.elapsed().as_nanos() as u64),
            Link::Http { client, .. } => client.now(),
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Runs until `f` returns `Some`, handing it every event. `f` may issue commands.
    pub fn run_until<T>(
        &mut self,
        limit: Duration,
        mut f: impl FnMut(&mut Connection, Timestamp, Ev) -> Option<T>,
    ) -> Result<T, Stop> {
        let give_up = Timestamp::from_nanos(self.now().as_nanos() + limit.as_nanos() as u64);
        match &mut self.link {
            Link::Stdio { conn, io, .. } => loop {
                // In slices of 100 ms: a signal passed on to a server that ignores it ends the
                // wait at once, not at the request's timeout.
                let slice = Timestamp::from_nanos(io.now().as_nanos() + 100_000_000).min(give_up);
                match io.run_until(conn, Some(slice), &mut f) {
                    Ok(out) => return Ok(out),
                    Err(blocking::Stop::Eof) => return Err(Stop::Eof),
                    Err(blocking::Stop::Deadline) if slice >= give_up => {
                        return Err(Stop::Deadline);
                    }
                    Err(blocking::Stop::Deadline) => {
                        if crate::signals::caught().is_some() {
                            return Err(Stop::Signal);
                        }
                    }
                }
            },
            Link::Http { runtime, client } => runtime.block_on(async {
                // From the first wait on, SIGINT, SIGTERM and SIGHUP end the session as a
                // failure does (its requests cancelled, its DELETE sent, the report printed),
                // not the process. (Not before: std's connect retries on EINTR, and a
                // signal there went unheeded for as long as the address took.)
                crate::signals::catch();
                let deadline = tokio::time::Instant::now() + limit;
                loop {
                    if crate::signals::caught().is_some() {
                        return Err(Stop::Signal);
                    }
                    // (A look for a signal every 100 ms: `next_event` loses nothing when its
                    // wait is cut short.)
                    let slice = deadline.min(tokio::time::Instant::now() + SIGNAL_LOOK);
                    match tokio::time::timeout_at(slice, client.next_event()).await {
                        Ok(Some(ev)) => {
                            let now = client.now();
                            if let Some(out) = f(client.connection(), now, ev) {
                                return Ok(out);
                            }
                        }
                        Ok(None) => return Err(Stop::Eof),
                        Err(_) if crate::signals::caught().is_some() => {
                            return Err(Stop::Signal);
                        }
                        Err(_) if slice >= deadline => return Err(Stop::Deadline),
                        Err(_) => {}
                    }
                }
            }),
        }
    }

    /// The exit status, if the server exits within a moment (it has closed its output, so it
    /// is usually on its way out). Always `None` over HTTP.
    /// The stdio server's exit status if it has exited already (no wait).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let Link::Stdio { child, watch, .. } = &mut self.link else {
            return None;
        };
        watch.try_wait(child)
    }

    pub fn try_status(&mut self) -> Option<ExitStatus> {
        let Link::Stdio { child, watch, .. } = &mut self.link else {
            return None;
        };
        let until = Instant::now() + Duration::from_millis(500);
        loop {
            if let Some(status) = watch.try_wait(child) {
                return Some(status);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The stdio shutdown the spec describes: close the server's stdin, wait, then SIGTERM,
    /// then SIGKILL. Over HTTP there is nothing to stop.
    pub fn shutdown(mut self) -> Option<ExitStatus> {
        let (child, io, watch) = match &mut self.link {
            Link::Stdio {
                child, io, watch, ..
            } => (child, io, watch),
            Link::Http { runtime, client } => {
                // What went out last (a timed-out request's cancellation, say) reaches the
                // server first, with or without a session; a session is then ended with its
                // DELETE.
                runtime.block_on(async {
                    // Requests still in flight (stopped by a signal, say) are cancelled: the
                    // close's deadline is now, and its cancellations go out as it is handled,
                    // until the connection has closed.
                    let now = client.now();
                    client.connection().close(now, Duration::ZERO);
                    let _ = tokio::time::timeout(Duration::from_secs(1), async {
                        while client.next_event().await.is_some() {}
                    })
                    .await;
                    client.flush(Duration::from_secs(2)).await;
                    client.end_session(Duration::from_secs(2)).await;
                });
                return None;
            }
        };
        io.close_output();
        for terminate in [false, true] {
            if terminate {
                // (Not the `kill` program, which slim images lack: then no SIGTERM came, and
                // the server was killed 2 s later without its clean-up.)
                // (The child is not reaped yet: try_wait above has not returned its status.)
                #[cfg(unix)]
                signal_group(child.id(), libc::SIGTERM);
            }
            let until = Instant::now() + Duration::from_secs(2);
            let pid = child.id();
            while Instant::now() < until {
                if let Some(status) = watch.try_wait(child) {
                    // What the server left in its group goes too (a wrapper's server, a
                    // daemon it started): the server exiting on its own, or reaped before
                    // (it went quietly), let them outlive the probe.
                    #[cfg(unix)]
                    if terminate {
                        end_group(pid, until);
                    } else {
                        end_leftovers(pid);
                    }
                    return Some(status);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        kill(child.id());
        let _ = child.kill();
        watch.wait(child)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Link::Stdio { child, watch, .. } = &mut self.link
            && watch.try_wait(child).is_none()
        {
            kill(child.id());
            let _ = child.kill();
            watch.wait(child);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A configuration the engine refuses fails the spawn before the server starts: it was
    // started first, and then dropped still running (a Child is not killed when dropped).
    #[test]
    fn a_refused_configuration_starts_no_server() {
        let marker = std::env::temp_dir().join(format!("mcpwire-cli-spawn-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        let mut config = Config::client("t", "1");
        config.versions.clear();
        let argv = [
            "sh",
            "-c",
            "echo started > \"$0\"",
            &marker.display().to_string(),
        ]
        .map(String::from);
        assert!(Session::spawn(&argv, config, true).is_err());
        std::thread::sleep(Duration::from_millis(500));
        let started = marker.exists();
        let _ = std::fs::remove_file(&marker);
        assert!(!started, "the server was started");
    }
}
