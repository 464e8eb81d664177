//! Edits a front end makes to a pipeline's steps before it runs: shapes
//! into the `fix-shapes` steps, an `upgrade-opset` step, the float16 steps'
//! options. They read and set the options of the pass files, so they sit
//! above them: a pass file knows nothing of the pipeline that holds it.

use crate::config::{PassConfig, PipelineConfig, Step};
use crate::convert_float16::ConvertOptions;
use crate::fix_shapes::FixShapesOptions;
use crate::pass_info::PassKind;
use crate::upgrade_opset::{self, MAX_OPSET, MIN_SOURCE_OPSET, UpgradeOpsetOptions};

/// Gives every `fix-shapes` step of the pipeline the pipeline's top-level
/// `inputs:`/`symbols:` (and the CLI's `--input-shape`s, passed as `extra`).
/// Returns false when the pipeline has no `fix-shapes` step to receive them.
pub fn apply_pipeline_shapes(
    config: &mut PipelineConfig,
    extra: &FixShapesOptions,
) -> Result<bool, String> {
    let (inputs, symbols) = (config.inputs.clone(), config.symbols.clone());
    let mut found = false;
    for p in config.pass_configs_mut() {
        if let Some(o) = p.options_mut::<FixShapesOptions>() {
            o.merge(&inputs, &symbols)?;
            o.merge(&extra.inputs, &extra.symbols)?;
            for (s, i) in &extra.symbol_inputs {
                o.symbol_inputs.insert(s.clone(), i.clone());
            }
            found = true;
        }
    }
    Ok(found)
}

/// Puts `upgrade-opset` with `to` into `config`: an existing step gets the
/// new target; otherwise the step goes before the first fixed-point group or
/// fusion pass, so the fusions see the new opset.
pub fn add_to_pipeline(config: &mut PipelineConfig, to: i64) -> Result<(), String> {
    if !(MIN_SOURCE_OPSET..=MAX_OPSET).contains(&to) {
        return Err(format!(
            "choose an opset from {MIN_SOURCE_OPSET} to {MAX_OPSET}"
        ));
    }
    let set = |p: &mut PassConfig| {
        if let Some(o) = p.options_mut::<UpgradeOpsetOptions>() {
            o.to = to;
        }
    };
    for step in &mut config.passes {
        match step {
            Step::Pass(p) if p.name() == upgrade_opset::INFO.name => {
                set(p);
                return Ok(());
            }
            Step::FixedPoint { passes, .. } => {
                if let Some(p) = passes
                    .iter_mut()
                    .find(|p| p.name() == upgrade_opset::INFO.name)
                {
                    set(p);
                    return Ok(());
                }
            }
            _ => {}
        }
    }
    let mut pass = PassConfig::from_name(upgrade_opset::INFO.name)?;
    set(&mut pass);
    let at = config
        .passes
        .iter()
        .position(|s| match s {
            Step::FixedPoint { .. } => true,
            Step::Pass(p) => {
                !matches!(p.info().kind, PassKind::Canonicalize | PassKind::Shape)
                    || p.name().starts_with("convert-")
            }
        })
        .unwrap_or(config.passes.len());
    config.passes.insert(at, Step::Pass(pass));
    Ok(())
}

/// Makes every `convert-float16` step of `config` convert the `com.microsoft` ops
/// of the onnxruntime target too (`contrib_ops: true`): for a model that runs, and
/// is verified, on ONNX Runtime's CUDA provider, which has float16 kernels for
/// them. Without it each such op is a float32 island between two Casts (a SiLU
/// fused to QuickGelu in every block of a CNN: YOLOv5s 116 Casts, 0.97x FP32 on an
/// H200; converted, 2 Casts and 1.18x). Returns whether any step changed.
pub fn convert_contrib_ops(config: &mut PipelineConfig) -> bool {
    let mut changed = false;
    for p in config.pass_configs_mut() {
        if p.name() != "convert-float16" {
            continue;
        }
        if let Some(o) = p.options_mut::<ConvertOptions>()
            && !o.contrib_ops
        {
            o.contrib_ops = true;
            changed = true;
        }
    }
    changed
}

/// Makes every `convert-float16` / `convert-bfloat16` step of `config` write its
/// graph's float inputs and outputs in the half type (`keep_io_types: false`, the
/// command line's `--fp16-io`): a caller that feeds and reads half on the device then
/// pays for no Cast at either end. Returns whether the pipeline has such a step.
pub fn use_half_io(config: &mut PipelineConfig) -> bool {
    let mut found = false;
    for p in config.pass_configs_mut() {
        if let Some(o) = p.options_mut::<ConvertOptions>() {
            o.keep_io_types = false;
            found = true;
        }
    }
    found
}

/// Whether a half-precision step of `config` writes half graph inputs and outputs.
pub fn writes_half_io(config: &PipelineConfig) -> bool {
    config.pass_configs().any(|p| {
        p.options::<ConvertOptions>()
            .is_some_and(|o| !o.keep_io_types)
    })
}
