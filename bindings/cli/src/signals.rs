//! Passing SIGINT, SIGTERM and SIGHUP on to the child the command runs (`tap`, `probe`), so
//! that stopping the command stops its child instead of leaving it running on its own. The
//! command itself then ends as the child's end leads it to.

#[cfg(unix)]
mod imp {
    use std::sync::atomic::{AtomicI32, Ordering};

    /// The child to pass signals to (0: none yet).
    static CHILD: AtomicI32 = AtomicI32::new(0);
    /// The last signal passed on (0: none).
    static CAUGHT: AtomicI32 = AtomicI32::new(0);

    const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    extern "C" fn pass_on(signal: libc::c_int) {
        // Only lock-free atomics and kill(2), which are async-signal-safe.
        CAUGHT.store(signal, Ordering::SeqCst);
        let child = CHILD.load(Ordering::SeqCst);
        if child > 0 {
            // SAFETY: kill(2) takes plain integers and is async-signal-safe.
            unsafe { libc::kill(child, signal) };
        }
    }

    pub fn pass_to(child: u32) {
        let Ok(pid) = i32::try_from(child) else {
            return;
        };
        CHILD.store(pid, Ordering::SeqCst);
        for signal in SIGNALS {
            // SAFETY: `action` and `old` are zeroed sigactions alive for the calls; `action`
            // has a valid handler and an empty mask. SA_RESTART keeps the relay's reads and
            // writes going.
            unsafe {
                // A signal this process was started ignoring (nohup's SIGHUP, SIGINT for a
                // job a shell put in the background) stays ignored: the child, started
                // before, ignores it too, and catching it would only end in killing it.
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, std::ptr::null(), &mut old) == 0
                    && old.sa_sigaction == libc::SIG_IGN
                {
                    continue;
                }
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = pass_on as extern "C" fn(libc::c_int) as libc::sighandler_t;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    }

    pub fn caught() -> Option<i32> {
        match CAUGHT.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    pub fn kill_unless(child: u32, gone: &std::sync::atomic::AtomicBool) {
        let Ok(pid) = i32::try_from(child) else {
            return;
        };
        if !gone.load(Ordering::SeqCst) {
            // SAFETY: kill(2) takes plain integers.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

#[cfg(not(unix))]
mod imp {
    pub fn pass_to(_child: u32) {}
    pub fn caught() -> Option<i32> {
        None
    }
    pub fn kill_unless(_child: u32, _gone: &std::sync::atomic::AtomicBool) {}
}

/// Kills `child` (SIGKILL) `grace` after this process caught a signal, unless `gone` says it
/// was reaped by then: for a child that ignores the signal passed on to it. Runs on a thread
/// of its own until one or the other happens.
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
                    imp::kill_unless(child, &gone);
                    return;
                }
            }
        }
    });
}

/// The last signal passed on to the child, if any.
pub use imp::caught;
/// From now on, SIGINT, SIGTERM and SIGHUP sent to this process go to `child` instead (those
/// this process ignores stay ignored).
pub use imp::pass_to;
