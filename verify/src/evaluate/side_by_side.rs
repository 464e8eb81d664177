//! The original's reference outputs and a candidate judged against them,
//! with the samples shared among one or several sessions, each on its own
//! thread: a judgement on every sample (64 runs of PP-OCRv4 rec) is where
//! the INT8 search waits longest between decisions, and ONNX Runtime's
//! threads on one batch-1 run share its work far worse than two sessions
//! share the samples. Outputs are compared in sample order, so the figures
//! do not depend on the number of sessions; one session runs on the
//! calling thread.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use infopt_ir::Model;
use infopt_runtime::{HostTensor, InputShapes, IoSpec};

use super::{
    Heads, Judged, LoadedAt, Pair, Reference, ReferenceSample, Tally, run_sample, skip_samples,
    tensor_bytes,
};
use crate::backend::ChosenBackend;
use crate::dataset::Dataset;
use crate::error::Result;
use crate::error::VerifyError;

/// One sample's outputs from a worker, with the time its run took.
type Ran = (usize, Result<(Vec<HostTensor>, f64)>);

/// [`held_out_against_keeping`] with the first `limit` samples of
/// `reference` run by `sessions` sessions of `chosen` side by side (each
/// loads `candidate` itself: their loads are counted, their runs' times
/// summed); one session runs on the calling thread.
#[allow(clippy::too_many_arguments)]
pub fn held_out_against_side_by_side(
    chosen: &ChosenBackend,
    sessions: usize,
    candidate: &Model,
    dir: &Path,
    shapes: &InputShapes,
    reference: &Reference,
    limit: usize,
    heads: &Heads,
    keep: bool,
) -> Result<Judged> {
    held_out_fed(
        chosen, sessions, candidate, dir, shapes, reference, limit, heads, keep, None,
    )
}

/// What a candidate cut to part of its graph runs on instead of the
/// samples' own inputs (see `infopt_ops`'s probes from a base model's
/// tensors): its inputs, and per sample the tensors fed to them. Its
/// outputs are still compared with the original's on the samples.
pub struct Fed {
    pub specs: Vec<IoSpec>,
    pub shapes: InputShapes,
    /// Per judged sample, in `specs` order.
    pub inputs: Vec<Vec<HostTensor>>,
}

/// [`held_out_against_side_by_side`] with `candidate` run on `fed`'s
/// tensors for the first `limit` samples (at most as many as `fed` has).
#[allow(clippy::too_many_arguments)]
pub fn held_out_against_fed(
    chosen: &ChosenBackend,
    sessions: usize,
    candidate: &Model,
    dir: &Path,
    fed: &Fed,
    reference: &Reference,
    limit: usize,
    heads: &Heads,
) -> Result<Judged> {
    let limit = limit.min(fed.inputs.len());
    held_out_fed(
        chosen,
        sessions,
        candidate,
        dir,
        &fed.shapes,
        reference,
        limit,
        heads,
        false,
        Some(fed),
    )
}

#[allow(clippy::too_many_arguments)]
fn held_out_fed(
    chosen: &ChosenBackend,
    sessions: usize,
    candidate: &Model,
    dir: &Path,
    shapes: &InputShapes,
    reference: &Reference,
    limit: usize,
    heads: &Heads,
    keep: bool,
    fed: Option<&Fed>,
) -> Result<Judged> {
    let samples: Vec<_> = reference.samples.iter().take(limit).collect();
    let inputs: Vec<(&[HostTensor], &str)> = samples
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let run_on = match fed {
                Some(f) => f.inputs[i].as_slice(),
                None => s.inputs.as_slice(),
            };
            (run_on, s.origin.as_str())
        })
        .collect();
    let specs = fed.map_or(&reference.inputs, |f| &f.specs);
    let mut tally = Tally::default();
    let mut compare_seconds = 0.0;
    let mut kept = Vec::new();
    let costs = runs_in_order(
        chosen,
        sessions,
        candidate,
        dir,
        shapes,
        specs,
        &inputs,
        &mut |i, actual| {
            let s = samples[i];
            let t = std::time::Instant::now();
            tally.add(&s.expected, &actual, heads, &s.inputs);
            compare_seconds += t.elapsed().as_secs_f64();
            if keep {
                kept.push(actual);
            }
            true
        },
    )?;
    Ok(Judged {
        held_out: tally.finish(
            reference.skipped,
            reference.dataset.clone(),
            reference.meaningful,
        ),
        loads: costs.loads,
        load_seconds: costs.load_seconds,
        runs: tally.samples,
        run_seconds: costs.run_seconds,
        compare_seconds,
        outputs: kept,
    })
}

/// Runs `candidate` on the first `limit` samples of `reference` and
/// compares its outputs with the original's kept there: the figures of
/// [`held_out`] on the same samples.
pub fn held_out_against(
    chosen: &ChosenBackend,
    candidate: &Model,
    dir: &Path,
    shapes: &InputShapes,
    reference: &Reference,
    limit: usize,
    heads: &Heads,
) -> Result<Judged> {
    held_out_against_keeping(
        chosen, candidate, dir, shapes, reference, limit, heads, false,
    )
}

/// [`held_out_against`], keeping the candidate's outputs in
/// [`Judged::outputs`] when `keep` is set.
#[allow(clippy::too_many_arguments)]
pub fn held_out_against_keeping(
    chosen: &ChosenBackend,
    candidate: &Model,
    dir: &Path,
    shapes: &InputShapes,
    reference: &Reference,
    limit: usize,
    heads: &Heads,
    keep: bool,
) -> Result<Judged> {
    held_out_against_side_by_side(
        chosen, 1, candidate, dir, shapes, reference, limit, heads, keep,
    )
}

/// What [`runs_in_order`] spent: sessions loaded and their time, and the
/// runs' summed time.
#[derive(Default)]
pub(super) struct RunCosts {
    pub loads: usize,
    pub load_seconds: f64,
    pub run_seconds: f64,
}

/// Runs `model` on each sample of `samples` (its inputs, fitted to `specs`,
/// and its origin for an error) in `sessions` sessions of `chosen` side by
/// side, each session taking the next sample when it is free; `each` gets
/// the outputs in sample order, and stops the runs when it returns false.
/// The first failing sample's error, naming it, is the error.
#[allow(clippy::too_many_arguments)]
pub(super) fn runs_in_order(
    chosen: &ChosenBackend,
    sessions: usize,
    model: &Model,
    dir: &Path,
    shapes: &InputShapes,
    specs: &[IoSpec],
    samples: &[(&[HostTensor], &str)],
    each: &mut dyn FnMut(usize, Vec<HostTensor>) -> bool,
) -> Result<RunCosts> {
    if sessions.min(samples.len()) <= 1 {
        return runs_one_after_another(chosen, model, dir, shapes, specs, samples, each);
    }
    // The next sample to run, whichever session is free first; a failure,
    // or `each` having seen enough, stops the others at their next sample.
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (ran, results) = mpsc::channel::<Ran>();
    let mut costs = RunCosts::default();
    let mut first_error = None;
    let mut handed = 0;
    let mut more = true;
    let mut lost = false;
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..sessions.max(1))
            .map(|_| {
                let (ran, next, stop) = (ran.clone(), &next, &stop);
                scope.spawn(move || {
                    let mut loaded = LoadedAt::new(chosen, model, dir, shapes);
                    while !stop.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((inputs, origin)) = samples.get(i) else {
                            break;
                        };
                        let out = loaded.at(inputs, specs).and_then(|m| {
                            let t = std::time::Instant::now();
                            run_sample(m, inputs, origin).map(|o| (o, t.elapsed().as_secs_f64()))
                        });
                        if out.is_err() {
                            stop.store(true, Ordering::Relaxed);
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
        // Outputs arrive in any order; `each` sees them in sample order.
        let mut waiting: std::collections::BTreeMap<usize, Vec<HostTensor>> = Default::default();
        for (i, r) in results.iter() {
            match r {
                Ok((outputs, seconds)) => {
                    costs.run_seconds += seconds;
                    waiting.insert(i, outputs);
                }
                Err(e) => {
                    if first_error.as_ref().is_none_or(|(j, _)| i < *j) {
                        first_error = Some((i, e));
                    }
                }
            }
            while more && let Some(outputs) = waiting.remove(&handed) {
                more = each(handed, outputs);
                handed += 1;
                if !more {
                    stop.store(true, Ordering::Relaxed);
                }
            }
        }
        for w in workers {
            match w.join() {
                Ok((n, s)) => {
                    costs.loads += n;
                    costs.load_seconds += s;
                }
                // Its samples never came: the figures would be of fewer.
                Err(_) => lost = true,
            }
        }
    });
    if lost && more {
        return Err(VerifyError::new(
            crate::error::ErrorKind::Internal,
            "a session running samples side by side stopped without its outputs",
        ));
    }
    // A failure after `each` had seen enough is not its business.
    if let Some((_, e)) = first_error
        && more
    {
        return Err(e);
    }
    Ok(costs)
}

/// [`runs_in_order`] in one session, on the calling thread.
fn runs_one_after_another(
    chosen: &ChosenBackend,
    model: &Model,
    dir: &Path,
    shapes: &InputShapes,
    specs: &[IoSpec],
    samples: &[(&[HostTensor], &str)],
    each: &mut dyn FnMut(usize, Vec<HostTensor>) -> bool,
) -> Result<RunCosts> {
    let mut loaded = LoadedAt::new(chosen, model, dir, shapes);
    let mut run_seconds = 0.0;
    for (i, (inputs, origin)) in samples.iter().enumerate() {
        let m = loaded.at(inputs, specs)?;
        let t = std::time::Instant::now();
        let outputs = run_sample(m, inputs, origin)?;
        run_seconds += t.elapsed().as_secs_f64();
        if !each(i, outputs) {
            break;
        }
    }
    Ok(RunCosts {
        loads: loaded.loads,
        load_seconds: loaded.load_seconds,
        run_seconds,
    })
}

impl Reference {
    /// Runs the original of `pair` (its candidate is not run) on samples
    /// `skip..skip+limit` of `data`, keeping the samples and the outputs
    /// while they fit in `budget` bytes; the first sample is always kept.
    pub fn collect(
        pair: &Pair<'_>,
        data: &mut dyn Dataset,
        skip: usize,
        limit: usize,
        budget: usize,
    ) -> Result<Reference> {
        Reference::collect_side_by_side(pair, data, (skip, limit, budget), pair.chosen, 1)
    }

    /// [`Reference::collect`] with the original run in `sessions` sessions
    /// of `runner` side by side (its threads shared among them): the
    /// samples are read first (their inputs within `budget`), then run, the
    /// outputs kept in sample order while samples and outputs fit in
    /// `budget`.
    pub fn collect_side_by_side(
        pair: &Pair<'_>,
        data: &mut dyn Dataset,
        (skip, limit, budget): (usize, usize, usize),
        runner: &ChosenBackend,
        sessions: usize,
    ) -> Result<Reference> {
        let mut original = LoadedAt::new(pair.chosen, pair.original, pair.dir, pair.shapes);
        let inputs = original.declared_inputs()?;
        let skipped = skip_samples(data, &inputs, skip)?;
        let mut read = Vec::new();
        let mut bytes = 0usize;
        let mut complete = true;
        while read.len() < limit {
            let Some(s) = data.next_sample(&inputs).map_err(VerifyError::usage)? else {
                break;
            };
            let size: usize = s.tensors.iter().map(tensor_bytes).sum();
            if !read.is_empty() && bytes.saturating_add(size) > budget {
                complete = false;
                break;
            }
            bytes += size;
            read.push(s);
        }
        let runs: Vec<(&[HostTensor], &str)> = read
            .iter()
            .map(|s| (s.tensors.as_slice(), s.origin.as_str()))
            .collect();
        let mut expected = Vec::with_capacity(read.len());
        let mut bytes = 0usize;
        let costs = runs_in_order(
            runner,
            sessions,
            pair.original,
            pair.dir,
            pair.shapes,
            &inputs,
            &runs,
            &mut |i, outputs| {
                let size: usize = runs[i].0.iter().chain(&outputs).map(tensor_bytes).sum();
                if i > 0 && bytes.saturating_add(size) > budget {
                    complete = false;
                    return false;
                }
                bytes += size;
                expected.push(outputs);
                true
            },
        )?;
        let samples = read
            .into_iter()
            .zip(expected)
            .map(|(s, expected)| ReferenceSample {
                origin: s.origin,
                inputs: s.tensors,
                expected,
            })
            .collect();
        Ok(Reference {
            skipped,
            dataset: data.describe(),
            meaningful: data.meaningful(),
            inputs,
            samples,
            complete,
            loads: original.loads + costs.loads,
            load_seconds: original.load_seconds + costs.load_seconds,
            run_seconds: costs.run_seconds,
        })
    }
}
