//! The stages commands are made of: pipeline → inputs → verifier → passes →
//! save → report. `optimize` runs them all; `calibrate` and `build-engine`
//! reuse the ones they need. Logic another command would need lives in the
//! library crates; this module only turns command-line options into their
//! arguments and their errors into exit codes.

use std::path::{Path, PathBuf};

use infopt_ir::Model;
use infopt_passes::{
    DriverOptions, Flow, PipelineConfig, PipelineRun, SideData, Target, run_pipeline_with,
};
use infopt_runtime::InputShapes;
use infopt_runtime::compare::Tolerance;
use infopt_verify::config::CriterionName;
use infopt_verify::{BackendKind, Criterion, Inputs, VerifyPolicy};

use crate::backend_args::BackendSettings;
use crate::error::{ErrorKind, OpsError, OpsResult};
use crate::inputs_arg::InputSettings;
use crate::job_file::JobFile;
use crate::report::{self, ModelFacts};

/// The pipeline used when neither `-c` nor `--passes` is given (configs/default.yaml).
pub const DEFAULT_PIPELINE: &str = include_str!("../../configs/default.yaml");

/// Above this many nodes, verification runs tract without its graph optimizer.
pub const LARGE_GRAPH_NODES: usize = 2000;

/// The name reports give a pipeline passed as text.
pub const PIPELINE_TEXT: &str = "pipeline (given as text)";

/// The pipeline: `-c FILE`, its YAML `text` (the Python API's dict), `--passes
/// a,b`, or the built-in default; with a name for reports.
pub fn load_pipeline(
    config: Option<&Path>,
    text: Option<&str>,
    passes: &[String],
    target: Option<Target>,
) -> OpsResult<(JobFile, String)> {
    let (mut cfg, name) = if let Some(text) = text {
        (
            JobFile::from_yaml(text, PIPELINE_TEXT)?,
            PIPELINE_TEXT.into(),
        )
    } else if let Some(path) = config {
        let text = std::fs::read_to_string(path).map_err(|e| {
            OpsError::usage(format!("cannot read pipeline {}: {e}", path.display()))
        })?;
        let cfg = JobFile::from_yaml(&text, &path.display().to_string())?;
        (cfg, path.display().to_string())
    } else if !passes.is_empty() {
        let cfg =
            JobFile::from_pipeline(PipelineConfig::from_pass_names(passes, Target::Portable)?);
        (cfg, format!("--passes {}", passes.join(",")))
    } else {
        let cfg = JobFile::from_yaml(DEFAULT_PIPELINE, "configs/default.yaml")
            .map_err(|e| OpsError::new(ErrorKind::Internal, e))?;
        (cfg, "default".into())
    };
    if let Some(t) = target {
        cfg.target = t;
    }
    Ok((cfg, name))
}

/// `--input-shape` also feeds the pipeline's `fix-shapes` steps.
pub fn apply_input_shapes(config: &mut PipelineConfig, args: &InputSettings) -> OpsResult {
    let specs = args
        .input_shapes
        .iter()
        .map(|a| {
            infopt_passes::fix_shapes::parse_input_shape(a)
                .map_err(|e| format!("--input-shape {e}"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(OpsError::usage)?;
    let extra =
        infopt_passes::fix_shapes::FixShapesOptions::from_specs(&specs).map_err(OpsError::usage)?;
    let has_fix_shapes = infopt_passes::pipeline_edit::apply_pipeline_shapes(config, &extra)
        .map_err(OpsError::usage)?;
    if !specs.is_empty() && !has_fix_shapes {
        crate::progress::note(
            "passes",
            "note: the pipeline has no fix-shapes step; --input-shape only sets the shapes the models run with",
        );
    }
    Ok(())
}

/// Shape bindings for running the models: the pipeline's `inputs:`/`symbols:`,
/// then the command line (which wins).
pub fn resolve_inputs(config: &JobFile, args: &InputSettings) -> OpsResult<Inputs> {
    let mut input_args = args.clone();
    input_args.seed = input_args.seed.or(Some(config.verify.seed));
    let mut inputs = input_args.resolve().map_err(OpsError::usage)?;
    let mut shapes = InputShapes::new().with_default_dim(2);
    for (name, dims) in &config.inputs {
        let dims = dims
            .iter()
            .map(|&d| usize::try_from(d).ok().filter(|&d| d > 0))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| {
                OpsError::usage(format!("pipeline inputs.{name}: dims must be positive"))
            })?;
        shapes = shapes.with_shape(name.clone(), dims);
    }
    for (name, v) in &config.symbols {
        let v = usize::try_from(*v)
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| OpsError::usage(format!("pipeline symbols.{name}: must be positive")))?;
        shapes = shapes.with_symbol(name.clone(), v);
    }
    shapes.shapes.extend(inputs.shapes.shapes.clone());
    shapes.symbols.extend(inputs.shapes.symbols.clone());
    inputs.shapes = shapes;
    Ok(inputs)
}

/// The folder a model's external data is resolved against.
pub fn model_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Command-line overrides of the pipeline's `verify:` section.
#[derive(Clone, Debug, Default)]
pub struct VerifyOverrides {
    pub rtol: Option<f64>,
    pub atol: Option<f64>,
    pub criterion: Option<CriterionName>,
}

/// The verification policy: criterion and tolerance from the pipeline and
/// the command line, backends in the order the target prefers.
pub fn verify_policy(
    config: &JobFile,
    overrides: &VerifyOverrides,
    backend: &BackendSettings,
    nodes: usize,
    keep_original: bool,
) -> OpsResult<VerifyPolicy> {
    let v = &config.verify;
    let tolerance = Tolerance {
        rtol: overrides.rtol.unwrap_or(v.rtol),
        atol: overrides.atol.unwrap_or(v.atol),
    };
    if !(tolerance.rtol >= 0.0 && tolerance.atol >= 0.0) {
        return Err(OpsError::usage("--rtol and --atol must be non-negative"));
    }
    let criterion = match overrides.criterion.unwrap_or(v.criterion) {
        CriterionName::Elementwise => Criterion::Elementwise {
            rtol: tolerance.rtol,
            atol: tolerance.atol,
        },
        CriterionName::Scaled => {
            if !(v.max_scaled_error >= 0.0 && (-1.0..=1.0).contains(&v.min_cosine)) {
                return Err(OpsError::usage(
                    "verify.max_scaled_error must be >= 0 and verify.min_cosine within [-1, 1]",
                ));
            }
            Criterion::Scaled {
                max_scaled_error: v.max_scaled_error,
                min_cosine: v.min_cosine,
            }
        }
    };
    // Large graphs skip tract's optimizer for a one-shot run; timing wants
    // the optimized plan.
    let tract = if nodes > LARGE_GRAPH_NODES && !keep_original {
        BackendKind::TractOneShot
    } else {
        BackendKind::Tract
    };
    // The reference is not the optimizer's own arithmetic: ONNX Runtime
    // (the original at graph optimizations off) when it is available, tract
    // only when it is not or cannot run the original. tract serves as the
    // fallback evaluator of constant folding, so a fold it computes wrong
    // would be judged right by itself (ONNX's node tests found a reverse
    // GRU folded as forward, "verified in tract"). bfloat16 stays with
    // tract: ONNX Runtime's CPU provider has no bfloat16 Gemm or Conv.
    let prefer = if converts_to_bfloat16(config) && config.target != Target::Onnxruntime {
        vec![tract, BackendKind::Ort]
    } else {
        vec![BackendKind::Ort, tract]
    };
    // A precision change is judged against float32 as specified: on CUDA the
    // reference then runs without TF32. An exact rewrite keeps the user's
    // arithmetic on both sides.
    let mut options = backend.options()?;
    options.reference_tf32_off = changes_precision(config);
    Ok(VerifyPolicy {
        prefer,
        explicit: backend.explicit()?,
        options,
        criterion,
        tolerance,
        keep_original,
        half_io: infopt_passes::pipeline_edit::writes_half_io(config),
    })
}

/// Whether the pipeline changes the model's precision (float16, bfloat16, INT8).
fn changes_precision(config: &PipelineConfig) -> bool {
    let names = config.pass_names();
    ["convert-float16", "convert-bfloat16", "quantize-int8"]
        .iter()
        .any(|p| names.contains(p))
}

/// Whether the pipeline converts to bfloat16.
fn converts_to_bfloat16(config: &PipelineConfig) -> bool {
    config.pass_names().contains(&"convert-bfloat16")
}

/// Called after every pass that changed the model; `Flow::Stop` ends the pipeline.
pub type AfterPass<'a> = Box<dyn FnMut(&'static str, &Model) -> Flow + 'a>;

/// Hooks into the pipeline: a model dump after every pass that changed it,
/// and a check after each (`--verify-each-pass`).
#[derive(Default)]
pub struct PassHooks<'a> {
    pub dump_dir: Option<PathBuf>,
    pub after_pass: Option<AfterPass<'a>>,
}

/// Runs the pipeline on `model`.
pub fn run_passes(
    model: &mut Model,
    config: &PipelineConfig,
    options: &DriverOptions,
    side: SideData,
    mut hooks: PassHooks<'_>,
) -> OpsResult<PipelineRun> {
    if let Some(dir) = &hooks.dump_dir {
        std::fs::create_dir_all(dir).map_err(|e| {
            OpsError::new(
                ErrorKind::Write,
                format!("cannot create --dump-dir {}: {e}", dir.display()),
            )
        })?;
    }
    let mut dump_index = 0;
    let mut observer = |pass: &'static str, m: &Model| -> Result<Flow, infopt_passes::PassError> {
        if let Some(dir) = &hooks.dump_dir {
            dump_index += 1;
            let path = dir.join(format!("{dump_index:02}-{pass}.onnx"));
            let mut copy = m.clone();
            copy.save(&path, &infopt_ir::SaveOptions::default())?;
        }
        crate::progress::event("pass", pass);
        // Asked to stop: end the pipeline here; the check below turns it
        // into the error.
        if crate::progress::checkpoint().is_err() {
            return Ok(Flow::Stop);
        }
        Ok(match &mut hooks.after_pass {
            Some(f) => f(pass, m),
            None => Flow::Continue,
        })
    };
    let run = run_pipeline_with(model, config, options, side, &mut observer)?;
    crate::progress::checkpoint()?;
    Ok(run)
}

/// Writes the model and returns its facts for the report.
pub fn save(
    model: &mut Model,
    output: &Path,
    options: &infopt_ir::SaveOptions,
    stats: &infopt_ir::stats::GraphStats,
) -> OpsResult<ModelFacts> {
    let summary = model.save(output, options).map_err(OpsError::from_ir)?;
    crate::models::print_save_summary(output, &summary);
    Ok(report::facts(
        &output.display().to_string(),
        summary.model_bytes,
        summary.external_bytes,
        stats,
    ))
}
