//! Interruption of `apply`: `SIGINT`, `SIGTERM` or `SIGHUP` stops the run cleanly;
//! `SIGUSR1` (what `wconverge agent` sends its run when it stops) lets the resources in
//! progress finish and applies nothing more, killing nothing. The
//! programs running are killed with everything they started, plugins stop at their
//! next epoch tick, the resources not yet applied fail as "not applied", and the report
//! is printed as usual. A second signal exits at once (after the same kill), and so does
//! a run still going [`GRACE`] after the first (one stuck where nothing can interrupt
//! it, in a system call on a hung file system).

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use std::time::Duration;

/// How long an interrupted run may take to stop cleanly.
const GRACE: Duration = Duration::from_secs(10);

/// Blocks the three signals in this thread (every thread started later inherits the
/// mask; launched programs get an empty one) and starts the thread that waits for them.
/// Call before any other thread starts.
pub(crate) fn watch() {
    let mut signals = SigSet::empty();
    for signal in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGUSR1,
    ] {
        signals.add(signal);
    }
    if pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&signals), None).is_err() {
        return;
    }
    std::thread::spawn(move || {
        let mut seen = 0;
        while let Ok(signal) = signals.wait() {
            // `wconverge agent` stopping: the resources in progress finish, nothing more
            // is applied, nothing is killed.
            if signal == Signal::SIGUSR1 {
                wconverge_runtime::stop_after_current(signal as i32);
                crate::watch::wake();
                crate::output::warning(
                    "SIGUSR1 (the agent stops this run, or the run's watch): finishing the \
                     resources in progress; nothing more is applied",
                );
                continue;
            }
            seen += 1;
            wconverge_runtime::interrupt(signal as i32);
            crate::watch::wake();
            if seen == 1 {
                crate::output::warning(&format!(
                    "{signal}: stopping; what runs now is being killed, and nothing more is \
                     applied (send it again to exit at once)"
                ));
                std::thread::spawn(move || {
                    std::thread::sleep(GRACE);
                    wconverge_runtime::interrupt(signal as i32);
                    crate::output::warning(&format!(
                        "{signal}: the run did not stop within {} s; exiting",
                        GRACE.as_secs()
                    ));
                    std::process::exit(128 + signal as i32);
                });
            } else {
                std::process::exit(128 + signal as i32);
            }
        }
    });
}
