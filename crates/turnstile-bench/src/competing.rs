//! CPU-bound processes that compete with a run for the CPUs, as another service on the same
//! machine would (a backup compressing, a batch job): `repro oltp --competing-processes N`.
//!
//! Each runs a shell busy loop in a session of its own. Linux's scheduler then gives it a
//! share of its own (autogroup puts each session in a scheduling group; a service manager's
//! cgroups do the same for services), so the run gets a share of the CPUs that does not grow
//! with its thread count: the case where an `auto` gate that took idle CPUs for its own to
//! fill raised its limit to the maximum.

use std::io;
use std::process::{Child, Command, Stdio};

/// The competing processes; dropping it kills and reaps them.
#[derive(Debug)]
pub struct Competing {
    children: Vec<Child>,
}

impl Competing {
    /// Starts `n` busy loops (`/bin/sh -c 'while :; do :; done'`), each in a new session.
    pub fn start(n: u32) -> io::Result<Competing> {
        let mut c = Competing {
            children: Vec::with_capacity(n as usize),
        };
        for _ in 0..n {
            // On an error, `c` is dropped and kills those already started.
            c.children.push(spawn_in_own_session()?);
        }
        Ok(c)
    }

    /// The process ids, in start order.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }
}

impl Drop for Competing {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[cfg(unix)]
fn spawn_in_own_session() -> io::Result<Child> {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", "while :; do :; done"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure runs in the forked child before `exec`, where only async-signal-safe
    // calls are allowed. It calls `setsid` (async-signal-safe, POSIX.1-2008 §2.4.3) and, on
    // failure, builds an `io::Error` from errno, which reads errno and does not allocate; it
    // touches no lock and no memory shared with the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("starting /bin/sh for a busy loop: {e}")))
}

#[cfg(not(unix))]
fn spawn_in_own_session() -> io::Result<Child> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "competing processes need a Unix system (a session of their own)",
    ))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn competing_processes_run_in_sessions_of_their_own_and_are_gone_after_drop() {
        let c = Competing::start(2).expect("start");
        let pids = c.pids();
        assert_eq!(pids.len(), 2);
        // SAFETY: `getsid` only reads the session id of a process; any pid is a valid input.
        let ours = unsafe { libc::getsid(0) };
        for &p in &pids {
            // `spawn` returns once the child has called `exec`, so after its `setsid`.
            // SAFETY: as above.
            let sid = unsafe { libc::getsid(p as libc::pid_t) };
            assert_eq!(sid, p as libc::pid_t, "leads its own session");
            assert_ne!(sid, ours);
        }
        drop(c);
        for &p in &pids {
            // Killed and reaped: no such process (its pid could be reused, but not within
            // this instant by a process in a session it leads).
            // SAFETY: as above.
            let sid = unsafe { libc::getsid(p as libc::pid_t) };
            assert!(
                sid == -1 || sid != p as libc::pid_t,
                "pid {p} still leads a session"
            );
        }
    }
}
