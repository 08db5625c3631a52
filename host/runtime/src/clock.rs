//! The monotonic clock as a plugin sees it: wasmtime-wasi's, except that no timer runs
//! past the end of the current call.
//!
//! A plugin that sleeps (or waits on a timer in `wasi:io/poll`) is blocked inside the
//! host, where neither fuel nor epochs reach it. Each timer it subscribes to is cut at
//! the call's wall-clock deadline, so the wait ends in time, the plugin runs again, and
//! the epoch check stops it there (`PluginState::stop_reason`).

use crate::state::PluginState;
use std::time::Duration;
use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::clocks::WasiClocksCtxView;
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;

/// Replaces wasmtime-wasi's `wasi:clocks/monotonic-clock` in a linker that has it.
pub(crate) fn add_to_linker(
    linker: &mut wasmtime::component::Linker<PluginState>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    monotonic_clock::add_to_linker::<PluginState, Timed>(linker, view)?;
    linker.allow_shadowing(false);
    Ok(())
}

pub(crate) struct Timed;

impl HasData for Timed {
    type Data<'a> = TimedView<'a>;
}

pub(crate) struct TimedView<'a> {
    clocks: WasiClocksCtxView<'a>,
    /// What is left of the call's wall-clock time.
    remaining: Duration,
}

fn view(state: &mut PluginState) -> TimedView<'_> {
    // The time is not recorded for a replay.
    state.unrecorded = true;
    let remaining = state.wall_remaining();
    let PluginState { wasi, table, .. } = state;
    TimedView {
        clocks: WasiClocksCtxView {
            ctx: wasi.clocks(),
            table,
        },
        remaining,
    }
}

/// Nanoseconds, as the clock counts, of at most `limit`.
fn capped(nanoseconds: u64, limit: Duration) -> u64 {
    nanoseconds.min(u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX))
}

impl monotonic_clock::Host for TimedView<'_> {
    fn now(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        monotonic_clock::Host::now(&mut self.clocks)
    }

    fn resolution(&mut self) -> wasmtime::Result<monotonic_clock::Duration> {
        monotonic_clock::Host::resolution(&mut self.clocks)
    }

    fn subscribe_instant(
        &mut self,
        when: monotonic_clock::Instant,
    ) -> wasmtime::Result<Resource<monotonic_clock::Pollable>> {
        let now = monotonic_clock::Host::now(&mut self.clocks)?;
        let wait = capped(when.saturating_sub(now), self.remaining);
        monotonic_clock::Host::subscribe_duration(&mut self.clocks, wait)
    }

    fn subscribe_duration(
        &mut self,
        duration: monotonic_clock::Duration,
    ) -> wasmtime::Result<Resource<monotonic_clock::Pollable>> {
        let wait = capped(duration, self.remaining);
        monotonic_clock::Host::subscribe_duration(&mut self.clocks, wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timer_is_cut_at_the_deadline() {
        assert_eq!(capped(5_000_000_000, Duration::from_secs(1)), 1_000_000_000);
        assert_eq!(capped(5, Duration::from_secs(1)), 5);
        assert_eq!(capped(u64::MAX, Duration::MAX), u64::MAX);
    }
}
