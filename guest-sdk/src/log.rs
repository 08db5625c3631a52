//! Messages for the run's log and the resource's report entry.
//!
//! Compiled for the machine's own target (unit tests), messages are captured in memory
//! instead; read them with [`take_captured`].

/// How much a message matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Detail for whoever debugs the provider.
    Debug,
    /// Routine information.
    Info,
    /// Something the operator should see (Puppet's `notice`).
    Notice,
    /// Something went wrong but the resource goes on.
    Warning,
    /// Something failed.
    Error,
}

/// Records `message` at `level` against the resource being handled.
///
/// ```no_run
/// wconverge_sdk::log::log(wconverge_sdk::log::Level::Notice, "hello");
/// ```
pub fn log(level: Level, message: &str) {
    imp::log(level, message);
}

/// [`log`] at [`Level::Debug`].
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// [`log`] at [`Level::Info`].
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// [`log`] at [`Level::Notice`].
pub fn notice(message: &str) {
    log(Level::Notice, message);
}

/// [`log`] at [`Level::Warning`].
pub fn warning(message: &str) {
    log(Level::Warning, message);
}

/// [`log`] at [`Level::Error`].
pub fn error(message: &str) {
    log(Level::Error, message);
}

/// The messages logged so far on this thread, oldest first, and forgets them. Inside a
/// component the host keeps the messages, so this is always empty there.
///
/// ```no_run
/// wconverge_sdk::log::notice("hi");
/// assert_eq!(wconverge_sdk::log::take_captured().len(), 1);
/// ```
pub fn take_captured() -> Vec<(Level, String)> {
    imp::take_captured()
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::Level;
    use crate::wit::wconverge::plugin::log as wit;

    pub(super) fn log(level: Level, message: &str) {
        let level = match level {
            Level::Debug => wit::Level::Debug,
            Level::Info => wit::Level::Info,
            Level::Notice => wit::Level::Notice,
            Level::Warning => wit::Level::Warning,
            Level::Error => wit::Level::Error,
        };
        wit::log(level, message);
    }

    pub(super) fn take_captured() -> Vec<(Level, String)> {
        Vec::new()
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::Level;
    use std::cell::RefCell;

    thread_local! {
        static CAPTURED: RefCell<Vec<(Level, String)>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) fn log(level: Level, message: &str) {
        CAPTURED.with(|captured| captured.borrow_mut().push((level, message.to_owned())));
    }

    pub(super) fn take_captured() -> Vec<(Level, String)> {
        CAPTURED.with(|captured| std::mem::take(&mut *captured.borrow_mut()))
    }
}
