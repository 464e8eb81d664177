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

use crate::exit::{CliError, CliResult, Exit};
use crate::outcome::Outcome;
use crate::stages::{self, PassHooks, VerifyOverrides};
use report::{
    BuildSettings, EngineFacts, EngineLatency, EngineReport, OnnxLatency, TrtexecCommand,
};

/// The pipeline used without `-c` (configs/tensorrt.yaml).
const TENSORRT_PIPELINE: &str = include_str!("../../configs/tensorrt.yaml");

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model to build (never modified).
    pub model: PathBuf,
    /// Engine file (default: MODEL with `.engine`).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Pipeline YAML (default: the built-in configs/tensorrt.yaml); its target is set to tensorrt.
    #[arg(short = 'c', long = "config", value_name = "PIPELINE.yaml")]
    pub config: Option<PathBuf>,
    /// Float16: append convert-float16 (TensorRT 11: strongly typed graph; 10: kFP16).
    #[arg(long, conflicts_with = "bf16")]
    pub fp16: bool,
    /// Bfloat16: append convert-bfloat16 (TensorRT 11: strongly typed graph; 10: kBF16).
    #[arg(long)]
    pub bf16: bool,
    /// Per-layer precision NAME_OR_OP=fp32|fp16|bf16|int8 (repeatable): a bare op
    /// type matches the op, anything else a node name, exactly or as a regex
    /// matching the whole name; an entry that matches nothing, or whose
    /// precision no pass makes (fp16 without --fp16, int8 without --int8), is refused.
    #[arg(long = "precision", value_name = "NAME_OR_OP=P")]
    pub precision: Vec<String>,
    /// INT8: `--int8 --calib-data PATH` (or `--ranges FILE`) appends a calibrated
    /// quantize-int8 step, as `optimize --int8` does.
    #[command(flatten)]
    pub int8: crate::int8::Int8Args,
    /// TensorRT workspace limit: 1G, 512M, 1.5G or bytes.
    #[arg(long, value_name = "SIZE")]
    pub workspace: Option<String>,
    /// Optimization profile of a dynamic input, NAME:MIN/OPT/MAX (each like
    /// 1x3x224x224), or NAME:DIMS for one shape (repeatable).
    #[arg(long = "shapes", value_name = "NAME:MIN/OPT/MAX")]
    pub shapes: Vec<String>,
    /// Timing cache: read if it exists, written back after the build.
    #[arg(long, value_name = "FILE")]
    pub timing_cache: Option<PathBuf>,
    /// Fail instead of timing a tactic the timing cache lacks (reproducible builds).
    #[arg(long, requires = "timing_cache")]
    pub error_on_timing_cache_miss: bool,
    /// Builder optimization level 0..=5 (TensorRT's default: 3).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=5))]
    pub builder_opt_level: Option<u8>,
    /// TensorRT 10: build the strongly typed graph (like TensorRT 11) instead of the
    /// float32 graph with builder flags.
    #[arg(long)]
    pub strongly_typed: bool,
    /// TensorRT 10: obey the per-layer precisions (fail without a kernel) rather than prefer them.
    #[arg(long)]
    pub obey_precision_constraints: bool,
    /// Write the ONNX TensorRT would build (strongly typed) and print the equivalent
    /// trtexec commands; TensorRT is not needed.
    #[arg(long, value_name = "FILE")]
    pub emit_onnx: Option<PathBuf>,
    /// The infopt TensorRT shim (default: $INFOPT_TRT_SHIM, then next to infopt).
    #[arg(long, value_name = "PATH")]
    pub trt_shim: Option<PathBuf>,
    /// Folder holding libnvinfer / libnvonnxparser (default: $TENSORRT_LIB, pip, system).
    #[arg(long, value_name = "DIR")]
    pub trt_lib: Option<PathBuf>,
    /// The TensorRT major to target: with --emit-onnx, print only its trtexec command;
    /// when building, refuse a TensorRT of another major.
    #[arg(long, value_name = "10|11", value_parser = clap::value_parser!(u32).range(10..=11))]
    pub trt_major: Option<u32>,
    /// TensorRT flavour: trt10, trt11 or rtx (TensorRT-RTX, builds without a GPU).
    /// Default: TensorRT 11/10 where a GPU is present and installed, else TensorRT-RTX.
    #[arg(long, value_name = "trt10|trt11|rtx")]
    pub trt_flavor: Option<String>,
    /// TensorRT-RTX: the GPUs to compile the engine for, as SM numbers: 86,89,120
    /// (default: TensorRT-RTX's own, 80, 86, 89 and 120).
    #[arg(long, value_name = "SM,SM")]
    pub compute_capability: Option<String>,
    /// Release gate on the engine (repeatable): `max_precision_mismatches=N` fails (exit
    /// 5) when more than N placed nodes got another precision than requested;
    /// `realized_precision` is `max_precision_mismatches=0`.
    #[arg(long = "gate", value_name = "GATE")]
    pub gate: Vec<String>,
    /// Do not run the models to check that the rewritten ONNX agrees with the original.
    #[arg(long)]
    pub no_verify: bool,
    /// With --fp16/--bf16: convert and judge once, without keeping the layers
    /// that miss the accuracy target in float32 automatically.
    #[arg(long)]
    pub no_auto_fp32: bool,
    /// Timed runs of the engine (and of the input ONNX in ONNX Runtime); 0 skips timing.
    #[arg(long, default_value_t = 50)]
    pub runs: usize,
    /// Untimed warm-up runs before timing.
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// Also write the report to FILE (.json for JSON, .md for Markdown).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Print the report as JSON on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub inputs: crate::inputs_arg::InputArgs,
    #[command(flatten)]
    pub backend: crate::backend_args::BackendArgs,
    #[command(flatten)]
    pub save: crate::save_args::SaveArgs,
    /// Print the build matrix instead of building: one engine per TensorRT flavour
    /// (--trt-flavor rtx,trt11; default rtx) x compute capability (--compute-capability;
    /// default: every one the flavour targets) x precision (--precisions), as one line of
    /// JSON `{"include": [...]}` for a CI matrix, each entry with its exact build command
    /// and an artifact name keyed by the hash of model, job, infopt and TensorRT
    /// versions and compute capability.
    #[arg(long)]
    pub matrix: bool,
    /// With --matrix: the precisions to build, fp32,fp16,bf16,int8 (default: the one
    /// --fp16/--bf16/--int8 asks for, else fp32).
    #[arg(long, value_name = "P,P", requires = "matrix")]
    pub precisions: Option<String>,
    /// The command line after `build-engine`, for the matrix's commands.
    #[arg(skip)]
    pub argv: Vec<String>,
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
fn trt_error(e: RuntimeError) -> CliError {
    match e {
        RuntimeError::Unavailable { .. } => CliError::new(Exit::Unavailable, e),
        RuntimeError::InvalidArgument(_)
        | RuntimeError::InputShape { .. }
        | RuntimeError::UnknownName(_) => CliError::usage(e),
        RuntimeError::Load { message, .. } => CliError::new(
            Exit::Load,
            format!("TensorRT could not build the engine: {message}"),
        ),
        RuntimeError::Decode(_) => CliError::new(
            Exit::Load,
            format!("TensorRT could not build the engine: {e}"),
        ),
        other => CliError::new(Exit::Internal, other),
    }
}

/// The settings every build shares, checked before any work.
struct Settings {
    workspace: Option<u64>,
    shapes: Vec<Profile>,
}

fn parse_settings(args: &Args) -> CliResult<Settings> {
    let workspace = args
        .workspace
        .as_deref()
        .map(|w| trt_args::parse_size(w).map_err(|e| CliError::usage(format!("--workspace {e}"))))
        .transpose()?;
    if workspace == Some(0) {
        return Err(CliError::usage(
            "--workspace 0 leaves TensorRT no scratch memory; give a size such as 1G, or omit it",
        ));
    }
    let shapes = args
        .shapes
        .iter()
        .map(|s| {
            trt_args::parse_shape_spec(s).map_err(|e| CliError::usage(format!("--shapes {e}")))
        })
        .collect::<CliResult<Vec<_>>>()?;
    for (i, p) in shapes.iter().enumerate() {
        if shapes[..i].iter().any(|q| q.input == p.input) {
            return Err(CliError::usage(format!(
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
    trt: &TensorRt,
    plan: &EnginePlan,
    output: &Path,
    warmup: usize,
    runs: usize,
) -> CliResult<EngineOutcome> {
    let spec = trt.flavor();
    let cfg = plan.config_for(spec);
    let strongly_typed = plan.strongly_typed_on(spec);
    let onnx = match &plan.flags_onnx {
        Some(fp32) if plan.parses_fp32(spec) => fp32,
        _ => &plan.typed_onnx,
    };
    // TensorRT builds on the ticking worker while this thread only waits:
    // one thread at a time uses it (see `crate::progress::Exclusive`).
    // SAFETY: only the worker uses `trt` until `ticking` returns.
    let handle = unsafe { crate::progress::Exclusive::new(trt) };
    let config = &cfg;
    let built = crate::progress::ticking(
        "build",
        "building the engine",
        crate::progress::TICK,
        move || handle.get().build_engine(onnx, config),
    )
    .map_err(trt_error)?;
    infopt_ir::save::write_atomically(output, |w| std::io::Write::write_all(w, &built.bytes))
        .map_err(CliError::from_ir)?;
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
        tensorrt::save_timing_cache(path, bytes).map_err(|e| CliError::new(Exit::Write, e))?;
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
) -> CliResult<Vec<TrtexecCommand>> {
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
            .map_err(CliError::usage)?;
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
fn parse_gates(gates: &[String]) -> CliResult<Option<usize>> {
    let mut max = None;
    for g in gates {
        let (key, value) = match g.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (g.trim(), None),
        };
        let n = match (key, value) {
            ("realized_precision", None | Some("true")) => 0,
            ("max_precision_mismatches", Some(v)) => v.parse::<usize>().map_err(|_| {
                CliError::usage(format!(
                    "--gate {g}: max_precision_mismatches takes a whole number, such as max_precision_mismatches=0"
                ))
            })?,
            _ => {
                return Err(CliError::usage(format!(
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
    args: &Args,
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

/// `infopt build-engine`: the report (table or JSON) and `--report`, then
/// the verdict as the exit code.
pub fn run(args: Args) -> CliResult {
    if args.matrix {
        return matrix::run(&args);
    }
    let (json, report_path) = (args.json, args.report.clone());
    let outcome = execute(args)?;
    stages::emit_report(
        &outcome.report,
        json,
        report_path.as_deref(),
        report::render,
    )?;
    outcome.verdict()
}

/// Builds the engine (or the ONNX and trtexec commands), without printing:
/// the report, with a verification failure beside it.
pub fn execute(args: Args) -> CliResult<Outcome<EngineReport>> {
    if args.matrix {
        return Err(CliError::usage(
            "--matrix prints a plan on the command line; it builds no report",
        ));
    }
    let started = Instant::now();
    let settings = parse_settings(&args)?;
    let max_mismatches = parse_gates(&args.gate)?;
    args.backend
        .check_io_binding(args.runs > 0, "--runs 0 times nothing")?;
    let compute_capabilities = args
        .compute_capability
        .as_deref()
        .map(flavor::parse_compute_capabilities)
        .transpose()
        .map_err(CliError::usage)?
        .unwrap_or_default();
    let flavor_flag = args
        .trt_flavor
        .as_deref()
        .map(flavor::by_id)
        .transpose()
        .map_err(CliError::usage)?;
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| default_output(&args.model));
    let same_file = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    };
    if args.emit_onnx.is_none() && same_file(&output, &args.model) {
        return Err(CliError::usage(format!(
            "-o {} is the input model; give the engine another path (default: MODEL.engine)",
            output.display()
        )));
    }

    // The pipeline, with precision as passes.
    let (mut config, pipeline_name) = match &args.config {
        Some(path) => stages::load_pipeline(Some(path), &[], Some(Target::Tensorrt))?,
        None => {
            let cfg =
                crate::job_file::JobFile::from_yaml(TENSORRT_PIPELINE, "configs/tensorrt.yaml")
                    .map_err(|e| CliError::new(Exit::Internal, e))?;
            (cfg, "tensorrt".into())
        }
    };
    config.target = Target::Tensorrt;
    let mut inputs = stages::resolve_inputs(&config, &args.inputs)?;
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
    let mut notes = job.notes.clone();
    let save_options = args.save.options()?;
    let do_verify = config.verify.enabled && !args.no_verify;

    // TensorRT before the work, so a missing install costs nothing.
    let trt = if args.emit_onnx.is_none() {
        let trt = TensorRt::open(&TrtOptions {
            shim: args.trt_shim.clone(),
            lib_dir: args.trt_lib.clone(),
            flavor: flavor_flag.map(|f| f.id.to_string()),
        })
        .map_err(trt_error)?;
        trt.flavor()
            .check_compute_capabilities(trt.version(), &compute_capabilities)
            .map_err(CliError::usage)?;
        if let Some(m) = args.trt_major
            && m != trt.version().major
        {
            return Err(CliError::usage(format!(
                "--trt-major {m}, but the TensorRT found is {} ({})",
                trt.version(),
                trt.libraries().nvinfer.display()
            )));
        }
        Some(trt)
    } else {
        None
    };

    // Load and run the passes: the float32 part, then the precision part.
    let model_in = crate::models::load_model(&args.model)?;
    job.check_model(&config, &model_in)?;
    let stats_before = GraphStats::of_model(&model_in);
    let src = model_in.source.clone().unwrap_or_default();
    let (base_cfg, precision_cfg) = split_precision(&config);
    let options = DriverOptions {
        builtin_pipeline: args.config.is_none(),
        ..DriverOptions::default()
    };
    let hooks = || PassHooks {
        dump_dir: None,
        after_pass: None,
    };
    let mut fp32_model = model_in.clone();
    let int8_step = infopt_calibration::int8::find_step(&base_cfg);
    let mut int8_report = None;
    let mut run = match int8_step {
        // Calibration of the model as it is at the quantize-int8 step, then the rest.
        Some(index) => {
            let backend = args.backend.build(BackendKind::Tract)?;
            let dir = stages::model_dir(&args.model);
            let cx = crate::int8::Context {
                original: &model_in,
                dir: &dir,
                shapes: &inputs.shapes,
                backend: &backend,
                options: &options,
                backend_args: &args.backend,
                judge: do_verify,
            };
            let (run, report) =
                crate::int8::run(&mut fp32_model, &base_cfg, index, &args.int8, &cx)?;
            // Never an engine from an INT8 graph that misses its target on the data.
            if let Some(f) = report.as_ref().and_then(|q| q.failure.clone()) {
                return Err(CliError::new(
                    crate::exit::Exit::Verify,
                    format!("{f}; no engine built"),
                ));
            }
            int8_report = report;
            run
        }
        None => stages::run_passes(
            &mut fp32_model,
            &base_cfg,
            &options,
            SideData::default(),
            hooks(),
        )?,
    };
    // Profiles, from the graph TensorRT parses (its inputs are the float32
    // graph's: the half conversion keeps their names and dims).
    let shape_args = args
        .inputs
        .input_shapes
        .iter()
        .map(|a| crate::shape_args::parse(a))
        .collect::<Result<Vec<_>, _>>()
        .map_err(CliError::usage)?;
    let profiles = profiles::profiles(&fp32_model, &settings.shapes, &shape_args, &config.symbols)
        .map_err(CliError::usage)?;
    // Verification and ONNX Runtime timing run at the profiles' opt shapes, unless
    // --input-shape said otherwise.
    for p in &profiles {
        if !inputs.shapes.shapes.contains_key(&p.input) {
            let dims = p.opt.iter().map(|&d| d.max(0) as usize).collect();
            inputs.shapes.shapes.insert(p.input.clone(), dims);
        }
    }

    // The verifier runs the original first: the half conversion is judged
    // while it is made (the automatic float32 islands).
    let mut verifier = None;
    if do_verify {
        let overrides = VerifyOverrides::default();
        let mut policy = stages::verify_policy(
            &config,
            &overrides,
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
            notes.push(format!(
                "verification of the INT8 model uses its accuracy target (cosine >= {min_cosine} per output), not the float tolerance"
            ));
        }
        let dir = stages::model_dir(&args.model);
        verifier = Some(crate::progress::ticking(
            "verify",
            "running the original",
            crate::progress::TICK,
            || Verifier::new(&model_in, dir, &inputs, policy),
        )?);
    }
    let t = Instant::now();
    let mut half_report = None;
    let mut judged = None;
    let typed_model = match (&precision_cfg, &verifier) {
        (Some(pc), Some(v)) if int8_step.is_none() => {
            let cx = crate::half::Context {
                verifier: v,
                options: &options,
                inputs: format!("{} ({})", v.inputs_description, inputs.source.describe()),
                generated_inputs: inputs.file.is_none(),
                search: !args.no_auto_fp32,
            };
            let outcome = crate::half::convert_to_target(&mut fp32_model, pc, &cx)?;
            run = merge_runs(run, outcome.run);
            half_report = outcome.report;
            judged = outcome.judged;
            Some(outcome.model)
        }
        (Some(pc), _) => {
            let mut m = fp32_model.clone();
            let r = stages::run_passes(&mut m, pc, &options, SideData::default(), hooks())?;
            run = merge_runs(run, r);
            Some(m)
        }
        (None, _) => None,
    };
    let typed = typed_model.as_ref().unwrap_or(&fp32_model);
    let stats_after = GraphStats::of_model(typed);
    crate::progress::note(
        "passes",
        format!(
            "pipeline {pipeline_name}: {} -> {} nodes",
            stats_before.nodes, stats_after.nodes
        ),
    );

    // Verification of the rewritten ONNX.
    let mut warnings: Vec<String> = run.budget_exhausted.clone();
    let mut verification = None;
    if let Some(v) = verifier.as_mut() {
        let checked = match crate::half::reuse_judgement(v, judged, &mut notes) {
            Some((checked, _)) => checked,
            None => {
                crate::progress::ticking("verify", "verifying", crate::progress::TICK, || {
                    v.verify_candidate(typed, &model_in, &inputs)
                })?
                .0
            }
        };
        notes.append(&mut v.notes);
        warnings.append(&mut v.warnings);
        crate::progress::note(
            "verify",
            format!(
                "verified in {} in {:.0} ms: {}",
                v.backend_name(),
                t.elapsed().as_secs_f64() * 1e3,
                if checked.passed { "agrees" } else { "DIFFERS" }
            ),
        );
        verification = Some(checked);
    } else {
        warnings.push(
            "verification disabled: the rewritten ONNX was not checked against the original".into(),
        );
    }
    let verified = verification.as_ref().is_none_or(|v| v.passed);

    // The build plan.
    let (trt10, trt10_notes) = trt10_precision(
        &fp32_model,
        config.precision.as_ref(),
        args.obey_precision_constraints,
    );
    let common = EngineBuildConfig {
        workspace_bytes: settings.workspace,
        opt_level: args.builder_opt_level,
        profiles: profiles.clone(),
        timing_cache: args.timing_cache.clone(),
        error_on_timing_cache_miss: args.error_on_timing_cache_miss,
        model_path: Some(args.model.clone()),
        compute_capabilities: compute_capabilities.clone(),
        ..Default::default()
    };
    let to_bytes = |m: &Model| m.to_bytes_referencing_sources().map_err(CliError::from_ir);
    let plan = EnginePlan {
        typed_onnx: to_bytes(typed)?,
        flags_onnx: typed_model
            .as_ref()
            .map(|_| to_bytes(&fp32_model))
            .transpose()?,
        common,
        trt10: trt10.clone(),
        strongly_typed_on_10: args.strongly_typed,
    };

    let mut onnx_facts = None;
    let mut onnx_fp32_facts = None;
    let mut trtexec = Vec::new();
    let mut engine = None;
    let mut latency = None;
    if verified {
        if let Some(path) = &args.emit_onnx {
            let mut m = typed.clone();
            onnx_facts = Some(stages::save(&mut m, path, &save_options, &stats_after)?);
            let wants_fp32 = plan.flags_onnx.is_some()
                && !args.strongly_typed
                && args.trt_major.is_none_or(|m| m == 10);
            let fp32_path = fp32_sibling(path);
            if wants_fp32 {
                let mut m = fp32_model.clone();
                let stats = GraphStats::of_model(&m);
                onnx_fp32_facts = Some(stages::save(&mut m, &fp32_path, &save_options, &stats)?);
            }
            trtexec = trtexec_commands(
                &plan,
                path,
                wants_fp32.then_some(fp32_path.as_path()),
                &output,
                args.trt_major,
                flavor_flag,
            )?;
            notes.extend(trt10_notes);
        } else if let Some(trt) = &trt {
            if !trt.flavor().strongly_typed_only && !args.strongly_typed {
                notes.extend(trt10_notes);
            }
            let outcome = build_with(trt, &plan, &output, args.warmup, args.runs)?;
            warnings.extend(outcome.warnings.iter().cloned());
            if !outcome.strongly_typed && plan.flags_onnx.is_some() {
                notes.push(
                    "TensorRT 10 built the float32 graph with builder flags; the graph verified is the strongly typed one (--strongly-typed builds exactly that)".into(),
                );
            }
            if let Some(l) = outcome.latency.clone() {
                let onnx = if args.runs > 0 {
                    match onnx_latency(&model_in, &stages::model_dir(&args.model), &inputs, &args) {
                        Ok(o) => Some(o),
                        Err(e) => {
                            notes
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
                latency = Some(EngineLatency {
                    tensorrt: l,
                    onnx,
                    speedup,
                });
            }
            // Realized precision: what the passes placed in the graph TensorRT parsed
            // against the kernels it built.
            let layers = &outcome.built.layers;
            let realized = (outcome.strongly_typed
                && layers.iter().any(|l| !l.onnx_nodes.is_empty()))
            .then(|| {
                realized::compare(
                    &realized::requests(typed, config.precision.as_ref()),
                    &realized::conversion_nodes(typed),
                    layers,
                )
            });
            if !outcome.strongly_typed {
                notes.push("realized precision is compared for strongly typed builds only (TensorRT 10 with builder flags chooses per layer)".into());
            }
            engine = Some(engine_facts(&output, &outcome, trt, realized));
        }
    }

    let report = EngineReport {
        schema_version: report::ENGINE_REPORT_SCHEMA_VERSION,
        infopt_version: env!("CARGO_PKG_VERSION").to_string(),
        pipeline: pipeline_name,
        target: config.target.to_string(),
        input: crate::report::facts(
            &args.model.display().to_string(),
            src.file_size,
            src.external_files
                .iter()
                .filter_map(|f| std::fs::metadata(f).ok())
                .map(|m| m.len())
                .sum(),
            &stats_before,
        ),
        onnx: onnx_facts,
        onnx_fp32: onnx_fp32_facts,
        ops: crate::report::op_diff(&stats_before, &stats_after),
        passes: crate::report::pass_stats(&run),
        declined: crate::report::group_declined(&run.declined),
        verification,
        int8: int8_report,
        half_precision: half_report,
        settings: BuildSettings {
            workspace_bytes: settings.workspace,
            builder_opt_level: args.builder_opt_level,
            profiles,
            timing_cache: args.timing_cache.as_ref().map(|p| p.display().to_string()),
            trt10,
        },
        engine,
        latency,
        trtexec,
        notes: run.notes.iter().cloned().chain(notes).collect(),
        warnings,
        total_time_ms: started.elapsed().as_secs_f64() * 1e3,
    };
    if verified {
        let gate = match (max_mismatches, &report.engine) {
            (Some(max), Some(e)) => check_precision_gate(max, e).err(),
            _ => None,
        };
        return Ok(Outcome {
            report,
            failure: gate,
        });
    }
    if let (Some(h), Some(v)) = (&report.half_precision, &report.verification) {
        let e = crate::half::missed_target(h, &v.outputs);
        let failure = CliError::new(
            e.exit,
            e.message.replace("output not written", "no engine built"),
        );
        return Ok(Outcome {
            report,
            failure: Some(failure),
        });
    }
    let failing: Vec<String> = report
        .verification
        .iter()
        .flat_map(|v| v.outputs.iter())
        .filter(|o| !o.within_tolerance)
        .map(infopt_verify::Criterion::failure_summary)
        .collect();
    let criterion = report
        .verification
        .as_ref()
        .map(|v| v.criterion.describe())
        .unwrap_or_default();
    let failure = CliError::new(
        Exit::Verify,
        format!(
            "the rewritten ONNX does not match the original ({criterion}): {}; no engine built (keep a layer in fp32 with --precision NAME_OR_OP=fp32, or --no-verify)",
            failing.join(", ")
        ),
    );
    Ok(Outcome {
        report,
        failure: Some(failure),
    })
}

/// The realized-precision gate: at most `max` placed nodes with another precision.
fn check_precision_gate(max: usize, e: &EngineFacts) -> CliResult {
    let Some(r) = &e.realized_precision else {
        return Err(CliError::new(
            Exit::Gate,
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
    Err(CliError::new(
        Exit::Gate,
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
