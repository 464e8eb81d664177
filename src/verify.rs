//! Running the original and the optimized model on the same inputs and
//! comparing their outputs; timing both.

use std::path::Path;

use infopt_runtime::compare::{self, Tolerance};
use infopt_runtime::inputs::{self, InputGen};
use infopt_runtime::{Backend, DefaultedDim, HostTensor, InputShapes, LoadedModel, OutputAgreement, TensorData};
use serde::Serialize;

use crate::exit::{CliError, CliResult, Exit};

#[derive(Serialize, Debug, Clone)]
pub struct Verification {
    pub backend: String,
    pub backend_version: String,
    pub seed: u64,
    pub rtol: f64,
    pub atol: f64,
    /// Concrete input shapes both models ran with.
    pub input_shapes: Vec<(String, Vec<usize>)>,
    /// Symbolic dims nobody fixed, which took the default value.
    pub defaulted_dims: Vec<DefaultedDim>,
    pub outputs: Vec<OutputAgreement>,
    pub passed: bool,
}

#[derive(Serialize, Debug, Clone)]
pub struct LatencyComparison {
    pub backend: String,
    pub threads: usize,
    pub before: infopt_runtime::Latency,
    pub after: infopt_runtime::Latency,
    /// before.median / after.median.
    pub speedup: f64,
}

/// Inputs for verification: seeded, with masks set to ones (an all-zero
/// attention mask makes softmax rows undefined and hides real differences).
pub fn generate_inputs(model: &dyn LoadedModel, seed: u64) -> CliResult<Vec<HostTensor>> {
    let mut opts = InputGen::with_seed(seed);
    for spec in model.inputs() {
        let lower = spec.name.to_lowercase();
        if lower.contains("token_type") {
            opts = opts.with_vocab_for(spec.name.clone(), 2);
        }
    }
    let mut tensors = inputs::generate_for_model(model, &opts).map_err(runtime_error)?;
    for t in &mut tensors {
        let is_mask = t.name().is_some_and(|n| n.to_lowercase().contains("mask"));
        if !is_mask {
            continue;
        }
        let shape = t.shape().to_vec();
        let n = t.len();
        let data = match t.data() {
            TensorData::I64(_) => Some(TensorData::I64(vec![1; n])),
            TensorData::I32(_) => Some(TensorData::I32(vec![1; n])),
            TensorData::F32(_) => Some(TensorData::F32(vec![1.0; n])),
            _ => None,
        };
        if let Some(data) = data {
            let name = t.name().map(|s| s.to_string());
            *t = HostTensor::new(name, shape, data).map_err(runtime_error)?;
        }
    }
    Ok(tensors)
}

pub fn runtime_error(e: infopt_runtime::RuntimeError) -> CliError {
    CliError::new(Exit::Load, e)
}

pub struct LoadedPair {
    pub before: Box<dyn LoadedModel>,
    pub after: Box<dyn LoadedModel>,
}

/// Loads both models in the backend with the same shape bindings.
pub fn load_pair(
    backend: &dyn Backend,
    before: &[u8],
    after: &[u8],
    dir: Option<&Path>,
    shapes: &InputShapes,
) -> CliResult<LoadedPair> {
    let before = backend.load(before, dir, shapes).map_err(|e| {
        CliError::new(Exit::Load, format!("cannot run the original model in {}: {e}", backend.name()))
    })?;
    let after = backend.load(after, dir, shapes).map_err(|e| {
        CliError::new(Exit::Verify, format!("cannot run the optimized model in {}: {e}", backend.name()))
    })?;
    Ok(LoadedPair { before, after })
}

pub fn verify(backend: &dyn Backend, pair: &LoadedPair, seed: u64, rtol: f64, atol: f64) -> CliResult<Verification> {
    let inputs = generate_inputs(pair.before.as_ref(), seed)?;
    let expected = pair.before.run(&inputs).map_err(runtime_error)?;
    let actual = pair
        .after
        .run(&inputs)
        .map_err(|e| CliError::new(Exit::Verify, format!("the optimized model fails to run: {e}")))?;
    let outputs = compare::compare_outputs(&actual, &expected, Tolerance { atol, rtol });
    let passed = compare::all_within_tolerance(&outputs);
    let resolution = pair.before.resolution();
    Ok(Verification {
        backend: backend.name().to_string(),
        backend_version: backend.version(),
        seed,
        rtol,
        atol,
        input_shapes: resolution.input_shapes.clone(),
        defaulted_dims: resolution.defaulted.clone(),
        outputs,
        passed,
    })
}

/// Times both models, alternating single runs so that drift (frequency
/// scaling, other load) affects both alike.
pub fn bench(backend: &dyn Backend, pair: &LoadedPair, seed: u64, warmup: usize, runs: usize) -> CliResult<LatencyComparison> {
    let inputs = generate_inputs(pair.before.as_ref(), seed)?;
    for _ in 0..warmup {
        pair.before.run(&inputs).map_err(runtime_error)?;
        pair.after.run(&inputs).map_err(runtime_error)?;
    }
    let mut before = Vec::with_capacity(runs);
    let mut after = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let t = std::time::Instant::now();
        pair.before.run(&inputs).map_err(runtime_error)?;
        before.push(t.elapsed().as_secs_f64() * 1e3);
        let t = std::time::Instant::now();
        pair.after.run(&inputs).map_err(runtime_error)?;
        after.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let before = infopt_runtime::Latency::from_samples(warmup, &before).map_err(runtime_error)?;
    let after = infopt_runtime::Latency::from_samples(warmup, &after).map_err(runtime_error)?;
    let speedup = if after.median_ms > 0.0 { before.median_ms / after.median_ms } else { 0.0 };
    Ok(LatencyComparison { backend: backend.name().to_string(), threads: 1, before, after, speedup })
}
