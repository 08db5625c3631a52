//! What a process spends compiling components the cache did not have (an empty cache,
//! a new wconverge or plugin): a run's summary adds it to its own time, and says so.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Components compiled, and the wall-clock time during which at least one was being
/// compiled (several at once on several cores count once).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Compiled {
    pub components: u64,
    pub time: Duration,
}

/// Compiles in progress and done.
#[derive(Default)]
pub(super) struct Compiling(Mutex<Progress>);

#[derive(Default)]
struct Progress {
    running: usize,
    since: Option<Instant>,
    done: Compiled,
}

impl Compiling {
    /// Runs `compile`, counting it and its time.
    pub(super) fn counted<T>(&self, compile: impl FnOnce() -> T) -> T {
        {
            let mut progress = self.0.lock().expect("compile count lock");
            progress.running += 1;
            progress.since.get_or_insert_with(Instant::now);
        }
        let compiled = compile();
        let mut progress = self.0.lock().expect("compile count lock");
        progress.running -= 1;
        progress.done.components += 1;
        if progress.running == 0
            && let Some(since) = progress.since.take()
        {
            progress.done.time += since.elapsed();
        }
        compiled
    }

    /// What was compiled so far, a compile in progress counted up to now.
    fn so_far(&self) -> Compiled {
        let progress = self.0.lock().expect("compile count lock");
        let mut compiled = progress.done;
        if let Some(since) = progress.since {
            compiled.time += since.elapsed();
        }
        compiled
    }
}

impl crate::Runtime {
    /// The components this process compiled because the cache had none for them, and
    /// how long that took.
    pub fn compiled(&self) -> Compiled {
        self.cache.compiling.so_far()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_at_once_count_their_wall_clock_time_once() {
        let compiling = Compiling::default();
        let started = Instant::now();
        // Four compiles that all run at once: each waits until all have started.
        let all_started = std::sync::Barrier::new(4);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    compiling.counted(|| {
                        all_started.wait();
                        std::thread::sleep(Duration::from_millis(20));
                    })
                });
            }
        });
        let outside = started.elapsed();
        let compiled = compiling.so_far();
        assert_eq!(compiled.components, 4);
        // Never more than the time that passed (a sum of the four would be at least
        // 80 ms more than one of them), and at least one compile's.
        assert!(compiled.time <= outside, "{compiled:?} in {outside:?}");
        assert!(compiled.time >= Duration::from_millis(20), "{compiled:?}");
    }
}
