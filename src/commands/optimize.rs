//! `infopt optimize`: the main job. Load, run the pipeline, verify against the
//! original, write atomically, report what changed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use infopt_ir::Model;
use infopt_ir::stats::GraphStats;
use infopt_passes::{DriverOptions, Flow, PipelineConfig, Target, run_pipeline};
use infopt_runtime::InputShapes;
use infopt_runtime::compare::Tolerance;

use crate::exit::{CliError, CliResult, Exit};
use crate::report::{self, Report};
use crate::verify;

/// Above this many nodes, verification runs tract without its graph optimizer.
const LARGE_GRAPH_NODES: usize = 2000;

/// The pipeline used when neither `-c` nor `--passes` is given (configs/default.yaml).
pub const DEFAULT_PIPELINE: &str = include_str!("../../configs/default.yaml");

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model to optimize (never modified).
    pub model: PathBuf,
    /// Output path (default: MODEL with `.opt.onnx`).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Pipeline YAML (default: the built-in configs/default.yaml).
    #[arg(
        short = 'c',
        long = "config",
        value_name = "PIPELINE.yaml",
        conflicts_with = "passes"
    )]
    pub config: Option<PathBuf>,
    /// Run exactly these passes, in order (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub passes: Vec<String>,
    /// Skip a pass of the pipeline (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub disable: Vec<String>,
    /// Stop after the first run of this pass.
    #[arg(long, value_name = "NAME")]
    pub stop_after: Option<String>,
    /// Write the model after every pass that changed it, as NN-PASS.onnx.
    #[arg(long, value_name = "DIR")]
    pub dump_dir: Option<PathBuf>,
    /// Override the pipeline's target.
    #[arg(long, value_enum)]
    pub target: Option<TargetArg>,
    /// Also write the report to FILE (.json for JSON, .md for Markdown).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Print the report as JSON on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Do not run the models to check that the outputs agree.
    #[arg(long)]
    pub no_verify: bool,
    /// Relative tolerance of verification (default from the pipeline, 1e-4).
    #[arg(long)]
    pub rtol: Option<f64>,
    /// Absolute tolerance of verification (default from the pipeline, 1e-5).
    #[arg(long)]
    pub atol: Option<f64>,
    /// Measure latency before and after.
    #[arg(long)]
    pub bench: bool,
    /// Timed runs per model with --bench.
    #[arg(long, default_value_t = 20)]
    pub runs: usize,
    /// Untimed warm-up runs per model with --bench.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Run the model after every pass that changed it and stop at the first pass
    /// whose outputs leave the tolerance, naming it and the first diverging tensor.
    #[arg(long)]
    pub verify_each_pass: bool,
    #[command(flatten)]
    pub inputs: crate::inputs_arg::InputArgs,
    #[command(flatten)]
    pub backend: super::bench::BackendArgs,
    /// Validate the graph after every pass.
    #[arg(long)]
    pub validate: bool,
    #[command(flatten)]
    pub save: super::save_args::SaveArgs,
    /// Convert to float16 after the pipeline's other passes (appends convert-float16).
    #[arg(long, conflicts_with = "bf16")]
    pub fp16: bool,
    /// Convert to bfloat16 after the pipeline's other passes (appends convert-bfloat16).
    #[arg(long)]
    pub bf16: bool,
    /// Per-layer precision, NAME_OR_OP=fp32|fp16|bf16|int8 (repeatable): a
    /// bare op type (Softmax) matches the op, anything else a node name,
    /// exactly or as a regex matching the whole name.
    #[arg(long = "precision", value_name = "NAME_OR_OP=P")]
    pub precision: Vec<String>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum TargetArg {
    Portable,
    Onnxruntime,
    Tensorrt,
}

impl From<TargetArg> for Target {
    fn from(t: TargetArg) -> Target {
        match t {
            TargetArg::Portable => Target::Portable,
            TargetArg::Onnxruntime => Target::Onnxruntime,
            TargetArg::Tensorrt => Target::Tensorrt,
        }
    }
}

fn default_output(model: &Path) -> PathBuf {
    let stem = model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    model.with_file_name(format!("{stem}.opt.onnx"))
}

fn load_pipeline(args: &Args) -> CliResult<(PipelineConfig, String)> {
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path).map_err(|e| {
            CliError::usage(format!("cannot read pipeline {}: {e}", path.display()))
        })?;
        let cfg = PipelineConfig::from_yaml(&text, &path.display().to_string())
            .map_err(CliError::usage)?;
        return Ok((cfg, path.display().to_string()));
    }
    if !args.passes.is_empty() {
        let cfg = PipelineConfig::from_pass_names(&args.passes, Target::Portable)
            .map_err(CliError::usage)?;
        return Ok((cfg, format!("--passes {}", args.passes.join(","))));
    }
    let cfg = PipelineConfig::from_yaml(DEFAULT_PIPELINE, "configs/default.yaml")
        .map_err(|e| CliError::new(Exit::Internal, e))?;
    Ok((cfg, "default".into()))
}

fn external_bytes(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum()
}

/// Shape bindings for running the models: the pipeline's `inputs:`/`symbols:`,
/// then the command line. Dims nobody binds run with 2 (1 would hide broadcasting
/// mistakes) and the report lists them.
fn resolve_inputs(config: &PipelineConfig, args: &Args) -> CliResult<crate::inputs_arg::Inputs> {
    let mut input_args = args.inputs.clone();
    input_args.seed = input_args.seed.or(Some(config.verify.seed));
    let mut inputs = input_args.resolve().map_err(CliError::usage)?;
    let mut shapes = InputShapes::new().with_default_dim(2);
    for (name, dims) in &config.inputs {
        let dims = dims
            .iter()
            .map(|&d| usize::try_from(d).ok().filter(|&d| d > 0))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| {
                CliError::usage(format!("pipeline inputs.{name}: dims must be positive"))
            })?;
        shapes = shapes.with_shape(name.clone(), dims);
    }
    for (name, v) in &config.symbols {
        let v = usize::try_from(*v)
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| CliError::usage(format!("pipeline symbols.{name}: must be positive")))?;
        shapes = shapes.with_symbol(name.clone(), v);
    }
    // Command-line bindings win over the pipeline's.
    shapes.shapes.extend(inputs.shapes.shapes.clone());
    shapes.symbols.extend(inputs.shapes.symbols.clone());
    inputs.shapes = shapes;
    Ok(inputs)
}

/// The verification backend: the one asked for, else tract, falling back to
/// ONNX Runtime when tract cannot run the original (an op it lacks, e.g. Loop).
fn make_verifier(
    args: &Args,
    original: &[u8],
    dir: PathBuf,
    inputs: &crate::inputs_arg::Inputs,
    symbols: &[String],
    tol: Tolerance,
    prefer: &[&str],
) -> CliResult<(verify::Verifier, Option<String>)> {
    let build = |name: &str| -> CliResult<verify::Verifier> {
        // Distinct values for the symbols nobody fixed (2, 3, 4, ...), so a
        // rewrite that mixes up batch and sequence does not pass unnoticed;
        // if the model cannot run like that, every unbound dim gets 2.
        let mut distinct = inputs.clone();
        let mut next = 2;
        for s in symbols {
            if !distinct.shapes.symbols.contains_key(s) {
                distinct.shapes.symbols.insert(s.clone(), next);
                next += 1;
            }
        }
        let mut last = String::new();
        for attempt in [&distinct, inputs] {
            // "tract-oneshot": tract without its graph optimizer, which loads
            // far faster on large graphs (the optimizer's cost grows faster
            // than the graph) but runs convolutions slower.
            let one_shot = name == "tract-oneshot";
            let name = if one_shot { "tract" } else { name };
            let (mut backend, mut info) = args.backend.build(name)?;
            if one_shot && backend.name() == "tract" {
                backend = Box::new(infopt_runtime::TractOneShot);
                info.version = backend.version();
            }
            let backend_name = backend.name().to_string();
            match verify::Verifier::new(
                backend,
                info,
                original,
                dir.clone(),
                attempt,
                tol,
                args.bench,
            ) {
                Ok(v) => return Ok(v),
                Err(m) => last = format!("cannot run the original model in {backend_name}: {m}"),
            }
        }
        Err(CliError::new(Exit::Load, last))
    };
    if args.backend.backend.is_some() {
        return Ok((build("")?, None));
    }
    let mut errors: Vec<String> = Vec::new();
    for (i, name) in prefer.iter().enumerate() {
        match build(name) {
            Ok(v) => {
                let note = (i > 0)
                    .then(|| format!("verified in {}: {}", v.backend.name(), errors.join("; ")));
                return Ok((v, note));
            }
            Err(e) => errors.push(e.message),
        }
    }
    Err(CliError::new(
        Exit::Load,
        format!(
            "cannot verify: {} (install onnxruntime, pass --backend, or --no-verify)",
            errors.join("; and ")
        ),
    ))
}

/// Names of the symbolic dims of the model's inputs, in order of appearance.
fn input_symbols(model: &Model) -> Vec<String> {
    let g = &model.graph;
    let mut out: Vec<String> = Vec::new();
    for io in &g.inputs {
        if g.value(io.value).initializer.is_some() {
            continue;
        }
        let Some(shape) = g.value_type(io.value).and_then(|t| t.shape) else {
            continue;
        };
        for d in shape {
            if let infopt_ir::Dim::Sym(s) = d
                && !out.contains(&s)
            {
                out.push(s);
            }
        }
    }
    out
}

pub fn run(args: Args) -> CliResult {
    let started = Instant::now();
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| default_output(&args.model));
    let (mut config, pipeline_name) = load_pipeline(&args)?;
    if let Some(t) = args.target {
        config.target = t.into();
    }
    let half = match (args.fp16, args.bf16) {
        (true, _) => Some(infopt_passes::Precision::Fp16),
        (_, true) => Some(infopt_passes::Precision::Bf16),
        _ => None,
    };
    let precision_notes =
        infopt_passes::precision::apply_to_pipeline(&mut config, &args.precision, half)
            .map_err(CliError::usage)?;
    // Check the whole command line before the (possibly long) work starts.
    let inputs = resolve_inputs(&config, &args)?;
    // --input-shape also feeds the pipeline's fix-shapes step(s).
    let specs = args
        .inputs
        .input_shapes
        .iter()
        .map(|a| infopt_passes::fix_shapes::parse_input_shape(a))
        .collect::<Result<Vec<_>, _>>()
        .map_err(CliError::usage)?;
    let extra =
        infopt_passes::fix_shapes::FixShapesOptions::from_specs(&specs).map_err(CliError::usage)?;
    let has_fix_shapes = infopt_passes::fix_shapes::apply_pipeline_shapes(&mut config, &extra)
        .map_err(CliError::usage)?;
    if !specs.is_empty() && !has_fix_shapes {
        eprintln!(
            "note: the pipeline has no fix-shapes step; --input-shape only sets the shapes the models run with"
        );
    }
    let save_options = args.save.options()?;

    let t = Instant::now();
    let mut model = super::load_model(&args.model)?;
    let original = model.clone();
    let stats_before = GraphStats::of_model(&model);
    let src = model.source.clone().unwrap_or_default();
    eprintln!(
        "loaded {} ({} nodes) in {:.0} ms",
        args.model.display(),
        stats_before.nodes,
        t.elapsed().as_secs_f64() * 1e3
    );

    let verify_cfg = config.verify.clone();
    let do_verify = verify_cfg.enabled && !args.no_verify;
    let tol = Tolerance {
        rtol: args.rtol.unwrap_or(verify_cfg.rtol),
        atol: args.atol.unwrap_or(verify_cfg.atol),
    };
    if !(tol.rtol >= 0.0 && tol.atol >= 0.0) {
        return Err(CliError::usage("--rtol and --atol must be non-negative"));
    }
    if args.verify_each_pass && !do_verify {
        return Err(CliError::usage(
            "--verify-each-pass needs verification; drop --no-verify",
        ));
    }
    let mut warnings: Vec<String> = Vec::new();
    let mut notes: Vec<String> = precision_notes;
    // The original runs once; its outputs are the reference for every check.
    let verifier = if do_verify || args.bench {
        let t = Instant::now();
        let bytes = original
            .to_bytes_referencing_sources()
            .map_err(CliError::from_ir)?;
        let dir = match args.model.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        // ONNX Runtime first for its own target: tract cannot run the
        // com.microsoft ops that target produces.
        // Verification runs each model once; timing (--bench) is about the
        // optimized plan. Large graphs skip tract's optimizer.
        let large = stats_before.nodes + stats_before.subgraph_nodes > LARGE_GRAPH_NODES;
        let tract = if large && !args.bench {
            "tract-oneshot"
        } else {
            "tract"
        };
        let prefer: &[&str] = if config.target == Target::Onnxruntime {
            &["ort", tract]
        } else {
            &[tract, "ort"]
        };
        let symbols = input_symbols(&original);
        let (v, note) = make_verifier(&args, &bytes, dir, &inputs, &symbols, tol, prefer)?;
        notes.extend(note);
        eprintln!(
            "ran the original in {} in {:.0} ms",
            v.backend.name(),
            t.elapsed().as_secs_f64() * 1e3
        );
        Some(v)
    } else {
        None
    };

    let options = DriverOptions {
        validate: args.validate,
        disable: args.disable.clone(),
        stop_after: args.stop_after.clone(),
    };
    if let Some(dir) = &args.dump_dir {
        std::fs::create_dir_all(dir).map_err(|e| {
            CliError::new(
                Exit::Write,
                format!("cannot create --dump-dir {}: {e}", dir.display()),
            )
        })?;
    }
    let mut dump_index = 0;
    let dump_dir = args.dump_dir.clone();
    let mut pass_checks: Vec<verify::PassCheck> = Vec::new();
    let mut bisect: Option<Bisect> = None;
    let mut last_good = original.clone();
    let mut observer = |pass: &'static str, m: &Model| -> Result<Flow, infopt_passes::PassError> {
        if let Some(dir) = &dump_dir {
            dump_index += 1;
            let path = dir.join(format!("{dump_index:02}-{pass}.onnx"));
            let mut copy = m.clone();
            copy.save(&path, &infopt_ir::SaveOptions::default())?;
        }
        if !args.verify_each_pass {
            return Ok(Flow::Continue);
        }
        let Some(v) = &verifier else {
            return Ok(Flow::Continue);
        };
        let outcome = v.load(m).and_then(|loaded| v.check(loaded.as_ref()));
        let (outputs, passed) = match outcome {
            Ok(r) => r,
            Err(e) => {
                pass_checks.push(verify::PassCheck {
                    pass: pass.to_string(),
                    passed: false,
                    max_abs: f64::INFINITY,
                });
                bisect = Some(Bisect {
                    pass,
                    outputs: Vec::new(),
                    error: Some(e.message),
                    first_tensor: None,
                });
                return Ok(Flow::Stop);
            }
        };
        pass_checks.push(verify::PassCheck {
            pass: pass.to_string(),
            passed,
            max_abs: verify::worst_abs(&outputs),
        });
        if passed {
            last_good = m.clone();
            return Ok(Flow::Continue);
        }
        let first_tensor = first_divergence(v, &last_good, m);
        bisect = Some(Bisect {
            pass,
            outputs,
            error: None,
            first_tensor,
        });
        Ok(Flow::Stop)
    };
    let t = Instant::now();
    let run = run_pipeline(&mut model, &config, &options, &mut observer).map_err(|e| match e {
        infopt_passes::PassError::Config(m) => CliError::usage(m),
        other => CliError::new(Exit::Internal, other),
    })?;
    let stats_after = GraphStats::of_model(&model);
    eprintln!(
        "pipeline {pipeline_name}: {} -> {} nodes in {:.0} ms",
        stats_before.nodes,
        stats_after.nodes,
        t.elapsed().as_secs_f64() * 1e3
    );
    warnings.extend(run.budget_exhausted.iter().cloned());
    // Folding trades nodes for initializers; say so when the weights grow
    // noticeably (1% and at least 64 KiB).
    let grown = stats_after
        .parameter_bytes
        .saturating_sub(stats_before.parameter_bytes);
    if grown > 64 * 1024 && grown * 100 > stats_before.parameter_bytes {
        warnings.push(format!(
            "the weights grew by {grown} bytes ({:.1}%): folded constants were materialized; lower fold-constants max_tensor_bytes to trade size for nodes",
            grown as f64 * 100.0 / stats_before.parameter_bytes.max(1) as f64
        ));
    }

    let mut verification = None;
    let mut latency = None;
    if let Some(mut v) = verifier {
        let t = Instant::now();
        let loaded = match v.load(&model) {
            Ok(l) => l,
            // The rewrite produced an op tract lacks (a contrib op, say):
            // verify both models in ONNX Runtime instead.
            Err(e) if args.backend.backend.is_none() && v.backend.name() == "tract" => {
                let bytes = original
                    .to_bytes_referencing_sources()
                    .map_err(CliError::from_ir)?;
                let symbols = input_symbols(&original);
                let (ort, _) = make_verifier(
                    &args,
                    &bytes,
                    v.dir.clone(),
                    &inputs,
                    &symbols,
                    tol,
                    &["ort"],
                )
                .map_err(|o| {
                    CliError::new(Exit::Verify, format!("{}; and {}", e.message, o.message))
                })?;
                notes.push(format!("verified in ONNX Runtime: {}", e.message));
                v = ort;
                v.load(&model)?
            }
            Err(e) => return Err(e),
        };
        if do_verify {
            let (outputs, passed) = v.check(loaded.as_ref())?;
            eprintln!(
                "verified in {} in {:.0} ms",
                v.backend.name(),
                t.elapsed().as_secs_f64() * 1e3
            );
            verification = Some(v.verification(outputs, passed));
            // A disagreement seen only by tract may be tract's own error on
            // one of the two graphs: ask ONNX Runtime for a second opinion
            // (when no backend was asked for and it is available). Both
            // verdicts are reported.
            if !passed
                && args.backend.backend.is_none()
                && v.backend.name() == "tract"
                && bisect.is_none()
            {
                let bytes = original
                    .to_bytes_referencing_sources()
                    .map_err(CliError::from_ir)?;
                let symbols = input_symbols(&original);
                if let Ok((ort, _)) = make_verifier(
                    &args,
                    &bytes,
                    v.dir.clone(),
                    &inputs,
                    &symbols,
                    tol,
                    &["ort"],
                ) && let Ok(second) = ort.load(&model)
                    && let Ok((ort_outputs, true)) = ort.check(second.as_ref())
                {
                    let worst = verification
                        .as_ref()
                        .map(|x| verify::worst_abs(&x.outputs))
                        .unwrap_or(0.0);
                    warnings.push(format!(
                        "tract found a difference (max abs {worst:.3e}) that ONNX Runtime does not: the output agrees in ONNX Runtime, which is trusted here"
                    ));
                    verification = Some(ort.verification(ort_outputs, true));
                }
            }
        }
        let verified = verification
            .as_ref()
            .is_none_or(|x: &verify::Verification| x.passed);
        if args.bench && verified {
            latency = Some(v.bench(loaded, args.warmup, args.runs)?);
        }
    } else {
        warnings
            .push("verification disabled: the output was not checked against the original".into());
    }
    if let Some(b) = &bisect
        && let Some(v) = verification.as_mut()
    {
        v.passed = false;
        if !b.outputs.is_empty() {
            v.outputs = b.outputs.clone();
        }
    }
    let verified_ok = verification.as_ref().is_none_or(|v| v.passed);

    let mut output_facts = None;
    if verified_ok {
        let summary = model
            .save(&output, &save_options)
            .map_err(CliError::from_ir)?;
        super::print_save_summary(&output, &summary);
        output_facts = Some(report::facts(
            &output.display().to_string(),
            summary.model_bytes,
            summary.external_bytes,
            &stats_after,
        ));
    }

    let report = Report {
        schema_version: report::REPORT_SCHEMA_VERSION,
        infopt_version: env!("CARGO_PKG_VERSION").to_string(),
        pipeline: pipeline_name,
        target: config.target.to_string(),
        input: report::facts(
            &args.model.display().to_string(),
            src.file_size,
            external_bytes(&src.external_files),
            &stats_before,
        ),
        output: output_facts,
        ops: report::op_diff(&stats_before, &stats_after),
        passes: report::pass_stats(&run),
        declined: report::group_declined(&run.declined),
        verification,
        latency,
        stopped_after: run.stopped_after.clone(),
        pass_checks,
        first_failing_pass: bisect.as_ref().map(|b| b.pass.to_string()),
        first_diverging_tensor: bisect.as_ref().and_then(|b| b.first_tensor.clone()),
        notes: run.notes.iter().cloned().chain(notes).collect(),
        warnings,
        total_time_ms: started.elapsed().as_secs_f64() * 1e3,
    };
    emit_report(&report, &args)?;
    if !verified_ok {
        if let Some(b) = &bisect {
            let what = match (&b.error, &b.first_tensor) {
                (Some(e), _) => e.clone(),
                (None, Some(t)) => format!("first diverging tensor '{t}'"),
                (None, None) => {
                    "no intermediate tensor of both models diverges; only the outputs do".into()
                }
            };
            return Err(CliError::new(
                Exit::Verify,
                format!(
                    "pass '{}' broke numerical agreement with the original: {what}; output not written",
                    b.pass
                ),
            ));
        }
        let failing: Vec<String> = report
            .verification
            .iter()
            .flat_map(|v| v.outputs.iter())
            .filter(|o| !o.within_tolerance)
            .map(|o| format!("{} (max abs {:.3e})", o.name, o.max_abs))
            .collect();
        return Err(CliError::new(
            Exit::Verify,
            format!(
                "the optimized model does not match the original within rtol {:e} / atol {:e}: {}; output not written (use --verify-each-pass to find the pass, or --no-verify to write it anyway)",
                tol.rtol,
                tol.atol,
                failing.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Where `--verify-each-pass` stopped.
struct Bisect {
    pass: &'static str,
    outputs: Vec<infopt_runtime::OutputAgreement>,
    /// The model no longer loads or runs.
    error: Option<String>,
    first_tensor: Option<String>,
}

/// The first tensor (in topological order) that differs between the last model
/// that agreed and the one after the failing pass.
fn first_divergence(v: &verify::Verifier, good: &Model, bad: &Model) -> Option<String> {
    let side = |m| crate::intermediates::Side {
        model: m,
        dir: v.dir.clone(),
        inputs: &v.inputs,
    };
    let report =
        crate::intermediates::compare(v.backend.as_ref(), &v.shapes, side(good), side(bad), v.tol)
            .ok()?;
    report
        .first_divergence
        .map(|f| format!("{} (node '{}', {})", f.name, f.node, f.op_type))
}

fn emit_report(report: &Report, args: &Args) -> CliResult {
    let json =
        || serde_json::to_string_pretty(report).map_err(|e| CliError::new(Exit::Internal, e));
    if args.json {
        println!("{}", json()?);
    } else {
        print!("{}", report::render::render(report, false));
    }
    if let Some(path) = &args.report {
        let text = match path.extension().and_then(|e| e.to_str()) {
            Some("md") | Some("markdown") => report::render::render(report, true),
            _ => json()? + "\n",
        };
        infopt_ir::save::write_atomically(path, |w| std::io::Write::write_all(w, text.as_bytes()))
            .map_err(CliError::from_ir)?;
    }
    Ok(())
}
