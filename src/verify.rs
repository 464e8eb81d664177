//! Checking an optimized model against the original: both run on the same
//! inputs in one backend and every output is compared.

use std::path::PathBuf;

use infopt_ir::Model;
use infopt_runtime::compare::{self, Tolerance};
use infopt_runtime::{
    Backend, DefaultedDim, HostTensor, InputShapes, Latency, LoadedModel, OutputAgreement,
};
use serde::Serialize;

use crate::commands::bench::{BackendInfo, Loaded, time_interleaved};
use crate::exit::{CliError, CliResult, Exit};
use crate::inputs_arg::Inputs;

#[derive(Serialize, Debug, Clone)]
pub struct Verification {
    pub backend: BackendInfo,
    pub inputs: String,
    pub rtol: f64,
    pub atol: f64,
    /// Concrete input shapes both models ran with.
    pub input_shapes: Vec<(String, Vec<usize>)>,
    /// Symbolic dims nobody fixed, which took the default value.
    pub defaulted_dims: Vec<DefaultedDim>,
    pub outputs: Vec<OutputAgreement>,
    pub passed: bool,
}

/// Agreement with the original after one pass (`--verify-each-pass`).
#[derive(Serialize, Debug, Clone)]
pub struct PassCheck {
    pub pass: String,
    pub passed: bool,
    /// Largest absolute difference over all outputs.
    pub max_abs: f64,
}

#[derive(Serialize, Debug, Clone)]
pub struct LatencyComparison {
    pub backend: BackendInfo,
    pub before: Latency,
    pub after: Latency,
    /// before.median / after.median.
    pub speedup: f64,
}

/// The original model loaded in a backend, with its inputs and reference outputs.
pub struct Verifier {
    pub backend: Box<dyn Backend>,
    pub info: BackendInfo,
    pub shapes: InputShapes,
    pub dir: PathBuf,
    /// Kept only when latency will be measured: a runtime may hold a full copy
    /// of the weights, and verification needs just the reference outputs.
    pub original: Option<Box<dyn LoadedModel>>,
    pub resolution: infopt_runtime::ShapeResolution,
    pub inputs: Vec<HostTensor>,
    pub expected: Vec<HostTensor>,
    pub inputs_description: String,
    pub tol: Tolerance,
}

impl Verifier {
    /// Loads and runs the original. Errors here mean the backend cannot run the
    /// original model (the caller may try another backend).
    pub fn new(
        backend: Box<dyn Backend>,
        info: BackendInfo,
        original: &[u8],
        dir: PathBuf,
        inputs: &Inputs,
        tol: Tolerance,
        keep_loaded: bool,
    ) -> Result<Verifier, String> {
        let shapes = inputs.shapes.clone();
        let loaded = backend
            .load(original, Some(&dir), &shapes)
            .map_err(|e| e.to_string())?;
        let tensors = inputs.for_model(loaded.as_ref())?;
        let expected = loaded.run(&tensors).map_err(|e| e.to_string())?;
        Ok(Verifier {
            inputs_description: crate::inputs_arg::describe(&tensors),
            backend,
            info,
            shapes,
            dir,
            resolution: loaded.resolution().clone(),
            original: keep_loaded.then_some(loaded),
            inputs: tensors,
            expected,
            tol,
        })
    }

    /// Loads a candidate model in the same backend.
    pub fn load(&self, model: &Model) -> CliResult<Box<dyn LoadedModel>> {
        let bytes = model
            .to_bytes_referencing_sources()
            .map_err(CliError::from_ir)?;
        self.backend
            .load(&bytes, Some(&self.dir), &self.shapes)
            .map_err(|e| {
                CliError::new(
                    Exit::Verify,
                    format!(
                        "the optimized model cannot be loaded in {}: {e}",
                        self.backend.name()
                    ),
                )
            })
    }

    /// Runs a candidate and compares its outputs with the original's.
    pub fn check(&self, candidate: &dyn LoadedModel) -> CliResult<(Vec<OutputAgreement>, bool)> {
        let actual = candidate.run(&self.inputs).map_err(|e| {
            CliError::new(
                Exit::Verify,
                format!("the optimized model fails to run: {e}"),
            )
        })?;
        let outputs = compare::compare_outputs(&actual, &self.expected, self.tol);
        let passed = compare::all_within_tolerance(&outputs);
        Ok((outputs, passed))
    }

    pub fn verification(&self, outputs: Vec<OutputAgreement>, passed: bool) -> Verification {
        let resolution = &self.resolution;
        Verification {
            backend: self.info.clone(),
            inputs: self.inputs_description.clone(),
            rtol: self.tol.rtol,
            atol: self.tol.atol,
            input_shapes: resolution.input_shapes.clone(),
            defaulted_dims: resolution.defaulted.clone(),
            outputs,
            passed,
        }
    }

    /// Times the original against `optimized`, interleaved.
    pub fn bench(
        self,
        optimized: Box<dyn LoadedModel>,
        warmup: usize,
        runs: usize,
    ) -> CliResult<LatencyComparison> {
        let original = self.original.ok_or_else(|| {
            CliError::new(Exit::Internal, "the original model was not kept for timing")
        })?;
        let models = [
            Loaded {
                path: PathBuf::from("original"),
                model: original,
                inputs: self.inputs.clone(),
                load_ms: 0.0,
            },
            Loaded {
                path: PathBuf::from("optimized"),
                model: optimized,
                inputs: self.inputs,
                load_ms: 0.0,
            },
        ];
        let lat = time_interleaved(&models, warmup, runs)?;
        let (before, after) = (lat[0].clone(), lat[1].clone());
        let speedup = if after.median_ms > 0.0 {
            before.median_ms / after.median_ms
        } else {
            0.0
        };
        Ok(LatencyComparison {
            backend: self.info,
            before,
            after,
            speedup,
        })
    }
}

/// Largest absolute difference over outputs (infinite when an output is missing or misshaped).
pub fn worst_abs(outputs: &[OutputAgreement]) -> f64 {
    outputs
        .iter()
        .map(|o| {
            if o.issue.is_some() {
                f64::INFINITY
            } else {
                o.max_abs
            }
        })
        .fold(0.0, f64::max)
}
