//! Watching a launched program to its end on the launching thread: one poll over its
//! pidfd and its output pipes (or threads where there is no pidfd), within its deadline,
//! its output capped.

use super::*;

/// Whether launches are supervised through pidfds (tests turn it off to run the
/// threads that stand in for them on kernels without).
pub(super) static PIDFDS_USABLE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(true);

/// What a launch ended with: its status, whether it was killed at its deadline (or on
/// an interruption), and what it wrote to its output and its errors.
type Supervised = (std::process::ExitStatus, bool, [Captured; 2]);

/// Waits for the program `pid` (through its pidfd) while reading its two output pipes,
/// all in this thread: at its deadline (or an interruption) it is killed with all it
/// started; `ended` runs as soon as it is gone. What it left in the pipes is read until
/// they close, unless something it started still holds them open: then at the latest
/// [`DRAIN_GRACE`] later, or the deadline (200 ms after a kill).
#[expect(clippy::too_many_arguments, reason = "one launch's parts, used once")]
pub(super) fn supervise(
    pid: i32,
    pidfd: &rustix::fd::OwnedFd,
    pipes: [std::fs::File; 2],
    cap: usize,
    deadline: Instant,
    before: &Before,
    killer: Option<&Killer>,
    mut ended: impl FnMut(),
) -> Result<Supervised, WaitError> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let [out, err] = pipes;
    let mut open = [Some(out), Some(err)];
    let mut captured = [Captured::default(), Captured::default()];
    let mut status: Option<std::process::ExitStatus> = None;
    let mut timed_out = false;
    let mut grace: Option<Instant> = None;
    // Read into without being cleared first (most launches read only the end of output).
    let mut buffer: Vec<u8> = Vec::with_capacity(16 * 1024);
    let timespec = |within: Duration| Timespec {
        tv_sec: i64::try_from(within.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(within.subsec_nanos()),
    };
    let reaped = || crate::spawn::wait(pid).map_err(WaitError::Failed);
    loop {
        let now = Instant::now();
        if status.is_none() && (now >= deadline || crate::interrupted_by().is_some()) {
            kill_launch(pid, before, killer);
            timed_out = true;
            let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
            let gone = !matches!(poll(&mut fds, Some(&timespec(KILLED_GRACE))), Ok(0));
            status = Some(if gone {
                reaped()?
            } else {
                // A status a tracer holds is given up on, as a kill.
                use std::os::unix::process::ExitStatusExt;
                std::process::ExitStatus::from_raw(libc::SIGKILL)
            });
            ended();
            grace = Some(Instant::now() + Duration::from_millis(200));
            continue;
        }
        let reading = open.iter().any(Option::is_some);
        if status.is_some() && (!reading || grace.is_some_and(|grace| now >= grace)) {
            break;
        }
        let until = grace.unwrap_or(deadline);
        let within = until.saturating_duration_since(now).min(INTERRUPT_POLL);
        let (out_ready, err_ready, child_ended) = {
            let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(3);
            let mut slots = [None, None, None];
            for (idx, pipe) in open.iter().enumerate() {
                if let Some(pipe) = pipe {
                    slots[idx] = Some(fds.len());
                    fds.push(PollFd::new(pipe, PollFlags::IN));
                }
            }
            if status.is_none() {
                slots[2] = Some(fds.len());
                fds.push(PollFd::new(pidfd, PollFlags::IN));
            }
            match poll(&mut fds, Some(&timespec(within))) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(error) => return Err(WaitError::Failed(error.into())),
            }
            let ready = |slot: Option<usize>| slot.is_some_and(|at| !fds[at].revents().is_empty());
            (ready(slots[0]), ready(slots[1]), ready(slots[2]))
        };
        for (idx, ready) in [out_ready, err_ready].into_iter().enumerate() {
            if !ready {
                continue;
            }
            buffer.clear();
            let read = match &open[idx] {
                Some(pipe) => rustix::io::read(pipe, rustix::buffer::spare_capacity(&mut buffer)),
                None => continue,
            };
            match read {
                Ok(0) | Err(_) => open[idx] = None,
                Ok(n) => {
                    let room = cap.saturating_sub(captured[idx].bytes.len());
                    let kept = n.min(room);
                    captured[idx].bytes.extend_from_slice(&buffer[..kept]);
                    if kept < n {
                        captured[idx].truncated = true;
                    }
                }
            }
        }
        if child_ended {
            status = Some(reaped()?);
            ended();
            let now = Instant::now();
            grace = Some((now + DRAIN_GRACE).min(deadline.max(now)));
        } else if status.is_none() && !out_ready && !err_ready {
            // A daemon an earlier launch started came to wconverge, a subreaper; once
            // it dies it is reaped here (see `wait_until`).
            reap_strays(pid);
        }
    }
    let status = status.ok_or(WaitError::StatusLost)?;
    Ok((status, timed_out, captured))
}

/// [`supervise`] without a pidfd: a thread reads each pipe, another waits.
pub(super) fn supervise_with_threads(
    pid: i32,
    pipes: [std::fs::File; 2],
    cap: usize,
    deadline: Instant,
    before: &Before,
    killer: Option<&Killer>,
    mut ended: impl FnMut(),
) -> Result<Supervised, WaitError> {
    let [out, err] = pipes;
    let (drained, drained_signal) = mpsc::channel();
    let (stdout, stdout_reader) = spawn_drain(out, cap, drained.clone());
    let (stderr, stderr_reader) = spawn_drain(err, cap, drained);
    let waited = wait_until(pid, deadline, before, killer);
    ended();
    let (status, timed_out) = waited?;
    let grace = if timed_out {
        Instant::now() + Duration::from_millis(200)
    } else {
        (Instant::now() + DRAIN_GRACE).min(deadline.max(Instant::now()))
    };
    let mut finished = 0;
    while finished < 2 {
        let left = grace.saturating_duration_since(Instant::now());
        match drained_signal.recv_timeout(left) {
            Ok(()) => finished += 1,
            Err(_) => break,
        }
    }
    for handle in [stdout_reader, stderr_reader] {
        if handle.is_finished() {
            let _ = handle.join();
        }
    }
    let take = |captured: &Arc<Mutex<Captured>>| {
        let mut captured = captured.lock().expect("no reader panics while holding it");
        Captured {
            bytes: std::mem::take(&mut captured.bytes),
            truncated: captured.truncated,
        }
    };
    Ok((status, timed_out, [take(&stdout), take(&stderr)]))
}
