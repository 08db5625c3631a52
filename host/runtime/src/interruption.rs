//! Stopping a run from a signal handler: [`interrupt`] at once (what runs is killed),
//! or [`stop_after_current`] gracefully (what runs finishes, nothing more starts).

/// Stops everything this process's runtimes run: the programs running now are killed
/// with all their descendants, plugins running now are stopped at their next epoch
/// tick, nothing more is launched, and the engine applies no further resource. For a
/// signal handler thread (`signal` is the signal's number, for messages).
pub fn interrupt(signal: i32) {
    wconverge_launch::interrupt(signal);
}

/// The signal that asked the run to stop after the resources in progress, or 0.
static STOPPING: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Asks the run to finish the resources in progress and apply nothing more: nothing is
/// killed (`wconverge agent` stopping). For a signal handler thread.
pub fn stop_after_current(signal: i32) {
    STOPPING.store(signal, std::sync::atomic::Ordering::SeqCst);
}

/// Why the run applies nothing more, once [`stop_after_current`] was called.
pub fn stopping() -> Option<String> {
    match STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        signal => {
            let name = nix::sys::signal::Signal::try_from(signal)
                .map_or_else(|_| format!("signal {signal}"), |signal| signal.to_string());
            Some(format!(
                "wconverge was asked to stop ({name}) after the resources in progress"
            ))
        }
    }
}

/// Why this process must stop, once [`interrupt`] was called.
pub fn interrupted() -> Option<String> {
    wconverge_launch::interrupted_by().map(|signal| {
        let name = nix::sys::signal::Signal::try_from(signal)
            .map_or_else(|_| format!("signal {signal}"), |signal| signal.to_string());
        format!("wconverge was interrupted ({name})")
    })
}
