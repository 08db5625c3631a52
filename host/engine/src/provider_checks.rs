//! The providers' own checks of a catalog's resources (`validate` calls), many
//! resources per call, on every core, beside the checks of the catalog as a whole.

use crate::PluginHost;
use crate::prepared::PreparedResource;
use std::collections::HashMap;
use wconverge_catalog::{DiagnosticCode, Problem};

/// The most resources one `validate` call checks.
const MAX_VALIDATE: usize = 1024;

/// `problems` with those of the providers' checks of the `unchecked` resources (their
/// index in `resources`), each resource's after those found before it was checked, as
/// though each were checked on its own in catalog order. A call that fails as a whole
/// is made again for each of its resources, so the error is the resource's own.
///
/// Meanwhile (the checks of the catalog as a whole), `beside.0` runs on this thread and
/// `beside.1` on another before it takes calls; each thread then takes its share of
/// the calls: the cores are busy together.
pub(crate) fn provider_checks<R, S: Send>(
    problems: Vec<Problem>,
    resources: &[PreparedResource],
    unchecked: &[(usize, usize)],
    host: &(dyn PluginHost + Sync),
    beside: (impl FnOnce() -> R, impl FnOnce() -> S + Send),
) -> (Vec<Problem>, (R, S)) {
    let (here, elsewhere) = beside;
    let mut by_provider: HashMap<&str, Vec<usize>> = HashMap::new();
    for (position, &(_, idx)) in unchecked.iter().enumerate() {
        by_provider
            .entry(resources[idx].provider.as_str())
            .or_default()
            .push(position);
    }
    let mut providers: Vec<_> = by_provider.into_iter().collect();
    providers.sort_unstable_by_key(|(_, positions)| positions[0]);
    // The calls run on every core, each on an instance of its own: a few per core, so
    // that the cores finish together.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let chunks: Vec<&[usize]> = providers
        .iter()
        .flat_map(|(_, positions)| {
            positions.chunks(positions.len().div_ceil(cores * 4).clamp(64, MAX_VALIDATE))
        })
        .collect();
    let problem = |resource: &PreparedResource, message: String| Problem {
        code: DiagnosticCode::ProviderCheck,
        resource: Some(resource.reference.clone()),
        location: resource.source.clone(),
        message: resource.secrets.scrub(&message),
        help: None,
    };
    // The problems of the resources of one chunk, by their position in `unchecked`.
    let check = |chunk: &[usize]| -> Vec<(usize, Vec<Problem>)> {
        let batch: Vec<&PreparedResource> = chunk
            .iter()
            .map(|&position| &resources[unchecked[position].1])
            .collect();
        match host.validate(&batch).outcome {
            Ok(lists) => chunk
                .iter()
                .zip(&batch)
                .zip(lists)
                .map(|((&position, resource), list)| {
                    let found = list.into_iter().map(|message| problem(resource, message));
                    (position, found.collect())
                })
                .collect(),
            Err(_) if chunk.len() > 1 => chunk
                .iter()
                .zip(&batch)
                .map(|(&position, resource)| {
                    let found = match host.validate(&[resource]).outcome {
                        Ok(lists) => lists
                            .into_iter()
                            .flatten()
                            .map(|message| problem(resource, message))
                            .collect(),
                        Err(error) => vec![problem(resource, error.to_string())],
                    };
                    (position, found)
                })
                .collect(),
            Err(error) => vec![(chunk[0], vec![problem(batch[0], error.to_string())])],
        }
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut checked = Vec::new();
        while let Some(chunk) = chunks.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
        {
            checked.extend(check(chunk));
        }
        checked
    };
    let workers = cores.min(chunks.len());
    // Taken by the first thread to come to it.
    let elsewhere = std::sync::Mutex::new(Some(elsewhere));
    let run_elsewhere = || {
        let taken = elsewhere.lock().expect("work beside lock").take();
        taken.map(|run| run())
    };
    let (checked, beside) = if workers <= 1 {
        let here = here();
        let elsewhere = run_elsewhere();
        (work(), (here, elsewhere))
    } else {
        std::thread::scope(|scope| {
            // A plugin runs on its caller's stack: as much as the main thread has. This
            // thread is one of the workers (a thread costs its memory), once `beside.0`
            // is done; the first other worker runs `beside.1` first.
            let handles: Vec<_> = (1..workers)
                .map(|_| {
                    std::thread::Builder::new()
                        .name("wconverge-validate".to_owned())
                        .stack_size(8 << 20)
                        .spawn_scoped(scope, || (run_elsewhere(), work()))
                })
                .collect();
            let here = here();
            let mut done_elsewhere = None;
            let mut checked = work();
            for handle in handles {
                match handle {
                    Ok(handle) => {
                        let (done, more) = handle
                            .join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                        done_elsewhere = done_elsewhere.or(done);
                        checked.extend(more);
                    }
                    // No thread: this one checks what is left.
                    Err(_) => checked.extend(work()),
                }
            }
            // No thread came to it (none could be started): it is done here.
            (checked, (here, done_elsewhere.or_else(run_elsewhere)))
        })
    };
    let beside = (beside.0, beside.1.expect("the work beside is done once"));
    let mut found: Vec<Vec<Problem>> = vec![Vec::new(); unchecked.len()];
    for (position, problems) in checked {
        found[position] = problems;
    }
    let mut merged = Vec::with_capacity(problems.len() + found.iter().map(Vec::len).sum::<usize>());
    let mut before = problems.into_iter();
    let mut taken = 0;
    for (&(at, _), found) in unchecked.iter().zip(found) {
        merged.extend(before.by_ref().take(at - taken));
        taken = at;
        merged.extend(found);
    }
    merged.extend(before);
    (merged, beside)
}
