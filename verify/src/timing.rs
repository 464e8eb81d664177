//! Interleaved timing: warm-up and timed runs alternate between the models,
//! and the model that goes first alternates from one round to the next, so
//! drift (clock scaling, other load, caches) touches every model alike.

use std::time::Instant;

use infopt_runtime::{HostTensor, Latency, LoadedModel, Transfer};

use crate::error::{ErrorKind, Result, VerifyError};

/// A model to time, with its inputs.
pub struct Timed {
    /// Names the model in errors (a path, "original").
    pub label: String,
    pub model: Box<dyn LoadedModel>,
    pub inputs: Vec<HostTensor>,
}

/// Where timing is, for a progress display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// A phase starts: its name and number of rounds.
    Phase(&'static str, usize),
    /// One round of the phase done.
    Round,
    Done,
}

/// Times `models` interleaved, moving data as `transfer` says: each model
/// gets its runner (bindings, buffers) before the first warm-up run, so no
/// timed run pays for setting it up.
pub fn time_interleaved(
    models: &[Timed],
    warmup: usize,
    runs: usize,
    transfer: Transfer,
    progress: &mut dyn FnMut(Progress),
) -> Result<Vec<Latency>> {
    let failed = |m: &Timed, e: infopt_runtime::RuntimeError| {
        let kind = if transfer == Transfer::DeviceResident
            && matches!(e, infopt_runtime::RuntimeError::InvalidArgument(_))
        {
            ErrorKind::Usage
        } else {
            ErrorKind::Load
        };
        VerifyError::new(kind, format!("{}: {e}", m.label))
    };
    let mut runners = Vec::with_capacity(models.len());
    for m in models {
        runners.push(
            m.model
                .timed_runner(&m.inputs, transfer)
                .map_err(|e| failed(m, e))?,
        );
    }
    let mut run = |i: usize| runners[i].run_once().map_err(|e| failed(&models[i], e));
    let order = |round: usize| round_order(models.len(), round);
    if warmup > 0 {
        progress(Progress::Phase("warm-up", warmup));
        for round in 0..warmup {
            for i in order(round) {
                run(i)?;
            }
            progress(Progress::Round);
        }
    }
    progress(Progress::Phase("timing", runs));
    let mut samples = vec![Vec::with_capacity(runs); models.len()];
    for round in 0..runs {
        for i in order(round) {
            let started = Instant::now();
            run(i)?;
            samples[i].push(started.elapsed().as_secs_f64() * 1e3);
        }
        progress(Progress::Round);
    }
    progress(Progress::Done);
    samples
        .iter()
        .map(|s| {
            Latency::from_samples(warmup, s).map_err(|e| VerifyError::new(ErrorKind::Internal, e))
        })
        .collect()
}

/// The order `n` interleaved models run in at `round`: forward on even rounds,
/// reversed on odd ones, so none always goes first (every interleaved timing of
/// infopt, the latency gate's included, uses it).
pub fn round_order(n: usize, round: usize) -> Vec<usize> {
    let mut ix: Vec<usize> = (0..n).collect();
    if round % 2 == 1 {
        ix.reverse();
    }
    ix
}
