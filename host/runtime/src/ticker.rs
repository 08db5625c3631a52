//! The thread that advances the engine's epoch, which the CPU limit of a plugin call
//! counts. It ticks only while some plugin code runs (a call, an instantiation) and
//! sleeps on a condition variable otherwise: a resident process (a watching agent) that
//! waits for drift uses no CPU and never wakes.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How often the epoch advances (and the CPU limit is checked) while code runs.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// How many plugin calls run now, and whether the runtime is gone.
#[derive(Default)]
pub(crate) struct Gate {
    state: Mutex<GateState>,
    wake: Condvar,
}

#[derive(Default)]
struct GateState {
    running: usize,
    closed: bool,
}

/// Plugin code running: the ticker ticks until the last of these is dropped.
pub(crate) struct Running(Arc<Gate>);

impl Drop for Running {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
        state.running = state.running.saturating_sub(1);
    }
}

impl Gate {
    /// Plugin code starts running (until the value is dropped).
    pub(crate) fn enter(self: &Arc<Gate>) -> Running {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.running += 1;
        if state.running == 1 {
            self.wake.notify_all();
        }
        Running(Arc::clone(self))
    }

    /// The runtime is gone: the ticker ends.
    pub(crate) fn close(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        self.wake.notify_all();
    }

    /// Blocks until some code runs (true) or the runtime is gone (false).
    fn wait_running(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while state.running == 0 && !state.closed {
            state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        !state.closed
    }
}

/// Starts the ticker of `engine`, gated by `gate`.
pub(crate) fn start(engine: &wasmtime::Engine, gate: Arc<Gate>) {
    let engine = engine.weak();
    std::thread::spawn(move || {
        while gate.wait_running() {
            let Some(engine) = engine.upgrade() else {
                return;
            };
            engine.increment_epoch();
            drop(engine);
            std::thread::sleep(EPOCH_TICK);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_opens_while_code_runs_and_ends_the_ticker_when_closed() {
        let gate = Arc::new(Gate::default());
        let running = gate.enter();
        assert!(gate.wait_running(), "code runs: the ticker goes on");
        drop(running);
        let waiter = {
            let gate = Arc::clone(&gate);
            std::thread::spawn(move || gate.wait_running())
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "nothing runs: the ticker sleeps");
        let running = gate.enter();
        assert!(waiter.join().expect("joined"), "woken by code that runs");
        drop(running);
        gate.close();
        assert!(!gate.wait_running(), "closed: the ticker ends");
    }
}
