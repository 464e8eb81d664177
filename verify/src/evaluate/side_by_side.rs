//! A candidate judged against a [`Reference`] with its samples shared among
//! several sessions of it, each on its own thread: a judgement on every
//! sample (64 runs of PP-OCRv4 rec) is where the INT8 search waits longest
//! between decisions, and ONNX Runtime's threads on one batch-1 run share
//! its work far worse than two sessions share the samples. The outputs are
//! compared here, in sample order, so the figures are those of
//! [`held_out_against_keeping`] on one session.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use infopt_ir::Model;
use infopt_runtime::{HostTensor, InputShapes};

use super::{Judged, LoadedAt, Reference, Tally, held_out_against_keeping, run_sample};
use crate::backend::ChosenBackend;
use crate::error::Result;

/// One sample's outputs from a worker, with the time its run took.
type Ran = (usize, Result<(Vec<HostTensor>, f64)>);

/// [`held_out_against_keeping`] with the first `limit` samples of
/// `reference` run by `sessions` sessions of `chosen` side by side (each
/// loads `candidate` itself: their loads are counted, their runs' times
/// summed). One session, or a single sample, is that function itself.
#[allow(clippy::too_many_arguments)]
pub fn held_out_against_side_by_side(
    chosen: &ChosenBackend,
    sessions: usize,
    candidate: &Model,
    dir: &Path,
    shapes: &InputShapes,
    reference: &Reference,
    limit: usize,
    classifiers: &[String],
    keep: bool,
) -> Result<Judged> {
    let samples: Vec<_> = reference.samples.iter().take(limit).collect();
    let sessions = sessions.min(samples.len());
    if sessions <= 1 {
        return held_out_against_keeping(
            chosen,
            candidate,
            dir,
            shapes,
            reference,
            limit,
            classifiers,
            keep,
        );
    }
    // The next sample to run, whichever session is free first; a failure
    // stops the others at their next sample.
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let (ran, results) = mpsc::channel::<Ran>();
    let mut loads = (0usize, 0.0f64);
    let mut tally = Tally::default();
    let (mut run_seconds, mut compare_seconds) = (0.0, 0.0);
    let mut kept = Vec::new();
    let mut first_error = None;
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..sessions)
            .map(|_| {
                let (ran, next, failed, samples) = (ran.clone(), &next, &failed, &samples);
                scope.spawn(move || {
                    let mut loaded = LoadedAt::new(chosen, candidate, dir, shapes);
                    while !failed.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(s) = samples.get(i) else { break };
                        let out = loaded.at(&s.inputs, &reference.inputs).and_then(|m| {
                            let t = std::time::Instant::now();
                            run_sample(m, &s.inputs, &s.origin)
                                .map(|o| (o, t.elapsed().as_secs_f64()))
                        });
                        if out.is_err() {
                            failed.store(true, Ordering::Relaxed);
                        }
                        if ran.send((i, out)).is_err() {
                            break;
                        }
                    }
                    (loaded.loads, loaded.load_seconds)
                })
            })
            .collect();
        drop(ran);
        // Outputs arrive in any order; they are compared in sample order.
        let mut waiting: std::collections::BTreeMap<usize, Vec<HostTensor>> = Default::default();
        let mut compared = 0;
        for (i, r) in results.iter() {
            match r {
                Ok((outputs, seconds)) => {
                    run_seconds += seconds;
                    waiting.insert(i, outputs);
                }
                Err(e) => {
                    if first_error.as_ref().is_none_or(|(j, _)| i < *j) {
                        first_error = Some((i, e));
                    }
                }
            }
            while let Some(actual) = waiting.remove(&compared) {
                let s = samples[compared];
                let t = std::time::Instant::now();
                tally.add(&s.expected, &actual, classifiers, &s.inputs);
                compare_seconds += t.elapsed().as_secs_f64();
                if keep {
                    kept.push(actual);
                }
                compared += 1;
            }
        }
        for w in workers {
            if let Ok((n, s)) = w.join() {
                loads.0 += n;
                loads.1 += s;
            }
        }
    });
    if let Some((_, e)) = first_error {
        return Err(e);
    }
    Ok(Judged {
        held_out: tally.finish(
            reference.skipped,
            reference.dataset.clone(),
            reference.meaningful,
        ),
        loads: loads.0,
        load_seconds: loads.1,
        runs: tally.samples,
        run_seconds,
        compare_seconds,
        outputs: kept,
    })
}
