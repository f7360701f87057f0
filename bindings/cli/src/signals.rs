//! Passing SIGINT, SIGTERM and SIGHUP on to the child the command runs (`tap`, `probe`), so
//! that stopping the command stops its child instead of leaving it running on its own. The
//! command itself then ends as the child's end leads it to. A signal from the terminal
//! (Ctrl-C, a hang-up) already reached the child, which shares the command's process group,
//! and is not passed on a second time (on Linux, which tells it apart).

#[cfg(unix)]
mod imp {
    use std::sync::atomic::{AtomicI32, Ordering};

    /// The child to pass signals to (0: none yet).
    pub(super) static CHILD: AtomicI32 = AtomicI32::new(0);
    /// The child leads a process group of its own (`probe`'s server), and signals go to the
    /// whole group: a server behind a shell wrapper gets them too.
    static GROUP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    /// What kill(2) takes to reach `child`: its group when it leads one of its own.
    fn target(child: libc::pid_t) -> libc::pid_t {
        if GROUP.load(Ordering::SeqCst) {
            -child
        } else {
            child
        }
    }
    /// The last signal passed on (0: none).
    static CAUGHT: AtomicI32 = AtomicI32::new(0);
    /// A signal caught before the child was known (0: none), for `pass_to` to pass on.
    static PENDING: AtomicI32 = AtomicI32::new(0);
    /// Held while the child is reaped, and while it is killed (see `kill_unless_reaped`).
    static REAPING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    extern "C" fn pass_on(
        signal: libc::c_int,
        info: *mut libc::siginfo_t,
        _context: *mut libc::c_void,
    ) {
        // Only lock-free atomics and plain system calls, which are async-signal-safe; errno,
        // which they may set, is put back for the code the signal interrupted.
        let errno = Errno::save();
        CAUGHT.store(signal, Ordering::SeqCst);
        let child = CHILD.load(Ordering::SeqCst);
        if child > 0 {
            // SAFETY: the kernel hands an SA_SIGINFO handler a valid `info` (or null).
            if !(from_the_terminal(unsafe { info.as_ref() }) && same_group(child)) {
                // SAFETY: kill(2) takes plain integers and is async-signal-safe.
                unsafe { libc::kill(target(child), signal) };
            }
        } else {
            // No child yet (being started): `pass_to` passes it on. Should the child have
            // been named meanwhile, whichever of the two takes it back passes it on.
            PENDING.store(signal, Ordering::SeqCst);
            pass_pending();
        }
        errno.restore();
    }

    /// Passes a signal caught before the child was known on to it, once it is.
    fn pass_pending() {
        let child = CHILD.load(Ordering::SeqCst);
        if child > 0 {
            let signal = PENDING.swap(0, Ordering::SeqCst);
            if signal != 0 {
                // SAFETY: kill(2) takes plain integers and is async-signal-safe.
                unsafe { libc::kill(target(child), signal) };
            }
        }
    }

    /// Whether the kernel sent the signal, not a process: for these three signals, the
    /// terminal's (Ctrl-C, or a hang-up), which go to its whole foreground process group.
    fn from_the_terminal(info: Option<&libc::siginfo_t>) -> bool {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        return info.is_some_and(|i| i.si_code == libc::SI_KERNEL);
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            let _ = info;
            false
        }
    }

    /// Whether `child` is in this process's group, so that what the terminal sent to the
    /// group reached it too (unless it left the group, as a daemon would).
    fn same_group(child: libc::pid_t) -> bool {
        // SAFETY: getpgid(2) and getpgrp(2) take and return plain integers.
        unsafe { libc::getpgid(child) == libc::getpgrp() }
    }

    /// errno, kept across a signal handler's system calls.
    struct Errno(libc::c_int);

    impl Errno {
        fn save() -> Errno {
            Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        }

        fn restore(self) {
            // SAFETY: the location of this thread's errno, valid for the thread's life.
            #[cfg(any(target_os = "linux", target_os = "android"))]
            unsafe {
                *libc::__errno_location() = self.0
            };
            #[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
            unsafe {
                *libc::__error() = self.0
            };
        }
    }

    pub fn pass_to(child: u32) {
        let Ok(pid) = i32::try_from(child) else {
            return;
        };
        catch();
        CHILD.store(pid, Ordering::SeqCst);
        pass_pending();
    }

    pub fn pass_to_group(child: u32) {
        GROUP.store(true, Ordering::SeqCst);
        pass_to(child);
    }

    pub fn catch() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(install);
    }

    fn install() {
        for signal in SIGNALS {
            // SAFETY: `action` and `old` are zeroed sigactions alive for the calls; `action`
            // has a valid handler and an empty mask. SA_RESTART keeps the relay's reads and
            // writes going.
            unsafe {
                // A signal this process was started ignoring (nohup's SIGHUP, SIGINT for a
                // job a shell put in the background) stays ignored: the child inherits
                // that, and catching it would only end in killing it.
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, std::ptr::null(), &mut old) == 0
                    && old.sa_sigaction == libc::SIG_IGN
                {
                    continue;
                }
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = pass_on
                    as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                    as libc::sighandler_t;
                action.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    }

    /// Reaps `child` once it has exited (waiting for that with `block`), after it stops
    /// being the one signals go to: its pid is free for another process once reaped. The
    /// exit is seen first without reaping (`WNOWAIT`), so a signal never reaches a pid
    /// reaped since.
    pub fn reap(
        child: &mut std::process::Child,
        block: bool,
    ) -> Option<std::io::Result<std::process::ExitStatus>> {
        let pid: libc::id_t = child.id();
        let flags = libc::WEXITED | libc::WNOWAIT | if block { 0 } else { libc::WNOHANG };
        let mut waitid_failed = false;
        loop {
            // SAFETY: `info` is a zeroed siginfo_t alive for the call; waitid(2) with
            // WNOWAIT only looks at our own child's state.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let rc = unsafe { libc::waitid(libc::P_PID, pid, &mut info, flags) };
            if rc == -1 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                // (Reaped already, say: `Child` knows its status then.)
                waitid_failed = true;
                break;
            }
            // SAFETY: waitid filled `info`; with WNOHANG and no exit yet, si_pid is 0.
            if unsafe { info.si_pid() } == 0 {
                return None;
            }
            break;
        }
        // The relay forgets the pid and the child is reaped under `REAPING`, which
        // `kill_unless_reaped` holds from its look at `CHILD` to its kill.
        let _reaping = REAPING.lock().unwrap_or_else(|p| p.into_inner());
        let _ = CHILD.compare_exchange(
            i32::try_from(pid).unwrap_or(0),
            0,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        if waitid_failed {
            return child.try_wait().transpose();
        }
        Some(child.wait())
    }

    pub fn caught() -> Option<i32> {
        match CAUGHT.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// SIGKILL to `child` while it is still the one signals go to: not yet reaped, so its
    /// pid is still its own (a flag set after the reap left a moment in which the pid was
    /// free and might have been another process's).
    pub fn kill_unless_reaped(child: u32) {
        let Ok(pid) = i32::try_from(child) else {
            return;
        };
        let _reaping = REAPING.lock().unwrap_or_else(|p| p.into_inner());
        if pid > 0 && CHILD.load(Ordering::SeqCst) == pid {
            // SAFETY: kill(2) takes plain integers; `pid` is our unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

#[cfg(not(unix))]
mod imp {
    pub fn pass_to(_child: u32) {}
    pub fn pass_to_group(_child: u32) {}
    pub fn reap(
        child: &mut std::process::Child,
        block: bool,
    ) -> Option<std::io::Result<std::process::ExitStatus>> {
        if block {
            Some(child.wait())
        } else {
            child.try_wait().transpose()
        }
    }
    pub fn caught() -> Option<i32> {
        None
    }
    pub fn kill_unless_reaped(_child: u32) {}
    pub fn catch() {}
}

/// Kills `child` (SIGKILL) `grace` after this process caught a signal, unless it was reaped
/// by then ([`reap`]): for a child that ignores the signal passed on to it. Runs on a thread
/// of its own until one or the other happens; `gone`, set once the child is reaped, ends
/// the thread early.
pub fn kill_if_stubborn(
    child: u32,
    gone: std::sync::Arc<std::sync::atomic::AtomicBool>,
    grace: std::time::Duration,
) {
    use std::sync::atomic::Ordering;
    std::thread::spawn(move || {
        let mut since = None;
        while !gone.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(100));
            if caught().is_some() {
                let at = *since.get_or_insert_with(std::time::Instant::now);
                if at.elapsed() >= grace {
                    imp::kill_unless_reaped(child);
                    return;
                }
            }
        }
    });
}

/// Catches SIGINT, SIGTERM and SIGHUP from now on, to pass them on to the child once
/// [`pass_to`] names it: call it before starting the child, so that a signal that comes
/// while it starts does not end this process and leave the child running on its own.
pub use imp::catch;
/// The last signal passed on to the child, if any.
pub use imp::caught;
/// From now on, SIGINT, SIGTERM and SIGHUP sent to this process go to `child` instead (those
/// this process ignores stay ignored); one caught since [`catch`] goes to it now.
pub use imp::pass_to;
/// [`pass_to`] for a child started as the leader of a process group of its own
/// (`process_group(0)`): signals go to that whole group.
pub use imp::pass_to_group;
/// Reaps the child once it has exited (`None`: not yet, without `block`), after signals stop
/// going to it. Use it instead of `Child::wait` and `try_wait` for the child signals go to.
pub use imp::reap;

#[cfg(all(test, unix))]
mod tests {
    use std::sync::atomic::Ordering;

    /// Reaping the child makes the relay forget it: its pid may be another process's next.
    /// (The relay kept it, and a later signal went to whatever process had the pid.)
    #[test]
    fn reaping_the_child_stops_signals_going_to_its_pid() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .unwrap();
        super::pass_to(child.id());
        assert!(super::reap(&mut child, false).is_none(), "still running");
        assert_eq!(super::imp::CHILD.load(Ordering::SeqCst), child.id() as i32);
        let status = super::reap(&mut child, true).unwrap().unwrap();
        assert!(status.success(), "{status:?}");
        assert_eq!(super::imp::CHILD.load(Ordering::SeqCst), 0);
        // Reaped already: the status is still there.
        assert!(super::reap(&mut child, false).unwrap().unwrap().success());

        // The stubborn-child kill spares a pid the relay has forgotten (here another
        // process's), and kills the child it relays to.
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        super::imp::kill_unless_reaped(other.id());
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(other.try_wait().unwrap().is_none(), "not the relay's child");
        super::pass_to(other.id());
        super::imp::kill_unless_reaped(other.id());
        let status = super::reap(&mut other, true).unwrap().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");

        // A signal caught while no child is named (one being started) goes to the child
        // once it is (it ended the command, and the child went on on its own).
        super::catch();
        // SAFETY: raise(3) with a signal whose handler is installed just above.
        unsafe { libc::raise(libc::SIGHUP) };
        assert_eq!(super::caught(), Some(libc::SIGHUP));
        let mut late = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        super::pass_to(late.id());
        let status = super::reap(&mut late, true).unwrap().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGHUP), "{status:?}");
    }
}
