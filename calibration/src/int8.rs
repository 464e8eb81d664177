//! The `quantize-int8` step inside a pipeline: finding it, adding it
//! (`--int8`), and splitting the pipeline around it so that the model can be
//! calibrated as it is at that step (after Conv+BN folding and the other
//! rewrites before it), not as it was loaded.

use infopt_passes::Target;
use infopt_passes::config::{PassConfig, PipelineConfig, Step};

use crate::quantize::QuantizeOptions;

/// The pass's registry name.
pub const STEP: &str = "quantize-int8";

/// Index of the first top-level `quantize-int8` step.
pub fn find_step(config: &PipelineConfig) -> Option<usize> {
    config
        .passes
        .iter()
        .position(|s| matches!(s, Step::Pass(p) if p.name() == STEP))
}

/// Whether a fixed-point group holds the step (it cannot be split there).
pub fn nested_step(config: &PipelineConfig) -> bool {
    config.passes.iter().any(|s| match s {
        Step::FixedPoint { passes, .. } => passes.iter().any(|p| p.name() == STEP),
        Step::Pass(_) => false,
    })
}

/// Passes that turn float layers into ONNX Runtime contrib ops the
/// quantizer cannot read (`com.microsoft.FusedConv`): on the onnxruntime
/// target the step goes before the first of them, so every Conv is still a
/// Conv when it is quantized (a quantized Conv is then left alone by the
/// fusion, and ONNX Runtime makes it a QLinearConv).
const BEFORE_CONTRIB: &[&str] = &["fuse-conv-activation"];

/// Adds a `quantize-int8` step with default options unless the pipeline
/// has one: after the pipeline's passes, but on the onnxruntime target
/// before the contrib fusions of [`BEFORE_CONTRIB`] (taken out of their
/// fixed-point groups to run once after it); returns its index.
pub fn ensure_step(config: &mut PipelineConfig) -> Result<usize, String> {
    if nested_step(config) {
        return Err(format!(
            "{STEP} inside a fixed-point group: put it at the top level of the pipeline, after the fusions"
        ));
    }
    if let Some(i) = find_step(config) {
        return Ok(i);
    }
    let step = PassConfig::from_name(STEP)?;
    if config.target != Target::Onnxruntime {
        config.passes.push(Step::Pass(step));
        return Ok(config.passes.len() - 1);
    }
    // The contrib fusions leave their fixed-point groups and run once,
    // after the step; a top-level one stays where it is, after the step.
    let mut moved: Vec<PassConfig> = Vec::new();
    for s in &mut config.passes {
        if let Step::FixedPoint { passes, .. } = s {
            let (contrib, rest): (Vec<PassConfig>, Vec<PassConfig>) = std::mem::take(passes)
                .into_iter()
                .partition(|p| BEFORE_CONTRIB.contains(&p.name()));
            *passes = rest;
            moved.extend(contrib);
        }
    }
    let at = config
        .passes
        .iter()
        .position(|s| matches!(s, Step::Pass(p) if BEFORE_CONTRIB.contains(&p.name())))
        .unwrap_or(config.passes.len());
    let after: Vec<Step> = std::iter::once(Step::Pass(step))
        .chain(moved.into_iter().map(Step::Pass))
        .collect();
    config.passes.splice(at..at, after);
    Ok(at)
}

/// The options of the step at `index`.
pub fn options(config: &PipelineConfig, index: usize) -> Option<&QuantizeOptions> {
    match config.passes.get(index)? {
        Step::Pass(p) => p.options::<QuantizeOptions>(),
        Step::FixedPoint { .. } => None,
    }
}

pub fn options_mut(config: &mut PipelineConfig, index: usize) -> Option<&mut QuantizeOptions> {
    match config.passes.get_mut(index)? {
        Step::Pass(p) => p.options_mut::<QuantizeOptions>(),
        Step::FixedPoint { .. } => None,
    }
}

/// The pipeline before step `index`, and from it on.
pub fn split(config: &PipelineConfig, index: usize) -> (PipelineConfig, PipelineConfig) {
    let mut before = config.clone();
    let mut from = config.clone();
    before.passes.truncate(index);
    from.passes.drain(..index);
    (before, from)
}
