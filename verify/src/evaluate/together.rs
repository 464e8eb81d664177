//! Several candidates judged in one session: their union (see
//! [`infopt_ir::union`]) runs once per sample, and each candidate's chunk
//! of the outputs is compared with the original's as if it had run alone.
//! The INT8 search's ranking probes are many small candidates that differ
//! from the float model in one place; together they share the float part
//! of the work and one session's graph optimization.

use std::path::Path;

use infopt_ir::union::Union;
use infopt_runtime::{HostTensor, InputShapes};

use super::side_by_side::runs_in_order;
use super::{Heads, Judged, Reference, Tally};
use crate::backend::ChosenBackend;
use crate::error::Result;

/// Judges the models of `union` on the first `limit` samples of
/// `reference`, each against the original's outputs as
/// [`super::held_out_against`] judges one, in the order they joined. The
/// session's load is counted once (on the first); the runs' time is shared
/// equally.
pub fn held_out_together(
    chosen: &ChosenBackend,
    union: &Union,
    dir: &Path,
    shapes: &InputShapes,
    reference: &Reference,
    limit: usize,
    heads: &Heads,
) -> Result<Vec<Judged>> {
    let count = union.models;
    let each = union.outputs_each;
    let samples: Vec<_> = reference.samples.iter().take(limit).collect();
    let inputs: Vec<(&[HostTensor], &str)> = samples
        .iter()
        .map(|s| (s.inputs.as_slice(), s.origin.as_str()))
        .collect();
    let mut tallies: Vec<Tally> = (0..count).map(|_| Tally::default()).collect();
    let mut compare_seconds = vec![0.0; count];
    let costs = runs_in_order(
        chosen,
        1,
        &union.model,
        dir,
        shapes,
        &reference.inputs,
        &inputs,
        &mut |i, mut actual| {
            let s = samples[i];
            for (k, tally) in tallies.iter_mut().enumerate().rev() {
                // Each model's chunk, from the last: split_off leaves the
                // earlier chunks in place.
                let own = actual.split_off((k * each).min(actual.len()));
                let t = std::time::Instant::now();
                tally.add(&s.expected, &own, heads, &s.inputs);
                compare_seconds[k] += t.elapsed().as_secs_f64();
            }
            true
        },
    )?;
    let share = 1.0 / count.max(1) as f64;
    Ok(tallies
        .into_iter()
        .zip(compare_seconds)
        .enumerate()
        .map(|(k, (tally, compare_seconds))| Judged {
            loads: usize::from(k == 0) * costs.loads,
            load_seconds: if k == 0 { costs.load_seconds } else { 0.0 },
            runs: tally.samples,
            run_seconds: costs.run_seconds * share,
            compare_seconds,
            held_out: tally.finish(
                reference.skipped,
                reference.dataset.clone(),
                reference.meaningful,
            ),
            outputs: Vec::new(),
        })
        .collect())
}
