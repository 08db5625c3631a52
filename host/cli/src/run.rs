//! Running a prepared catalog, whole (`apply`) or the resources a watch saw drift
//! (`watch`), on the stack its lazy values need.

use wconverge_engine::Mode;

/// Runs `prepared` (the resources `scope` selects) with up to `jobs` at once. With lazy
/// values and one job, on the compiler's stack once, so that they evaluate without a
/// thread each (and only then: that thread is a little slower); concurrent runs give
/// each worker such a stack.
pub(crate) fn run_prepared(
    (prepared, runtime): (&wconverge_engine::Prepared, &wconverge_runtime::Runtime),
    (mode, jobs, lazy): (Mode, usize, bool),
    scope: wconverge_engine::Scope<'_>,
) -> (
    wconverge_engine::report::Report,
    wconverge_catalog::NodeAttributes,
) {
    let run = || wconverge_engine::run_scoped(prepared, runtime, mode, jobs, scope);
    if lazy && jobs == 1 {
        wconverge_lang::run_on_big_stack(run)
    } else {
        run()
    }
}
