//! `infopt optimize`: the main job. Load, run the pipeline, verify against the
//! original, write atomically, report what changed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use infopt_ir::Model;
use infopt_ir::stats::GraphStats;
use infopt_passes::{DriverOptions, Flow, PipelineConfig, Target, run_pipeline};
use infopt_runtime::{Backend, InputShapes, TractBackend};

use crate::exit::{CliError, CliResult, Exit};
use crate::report::{self, Report};
use crate::verify;

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
    #[arg(short = 'c', long = "config", value_name = "PIPELINE.yaml", conflicts_with = "passes")]
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
    /// Seed of the generated verification inputs.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Measure latency before and after.
    #[arg(long)]
    pub bench: bool,
    /// Timed runs per model with --bench.
    #[arg(long, default_value_t = 20)]
    pub runs: usize,
    /// Untimed warm-up runs per model with --bench.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Fix an input shape, `NAME:1x3x224x224`, or bind symbols, `NAME:batch=1` (repeatable).
    #[arg(long = "input-shape", value_name = "NAME:DIMS")]
    pub input_shapes: Vec<String>,
    /// Validate the graph after every pass.
    #[arg(long)]
    pub validate: bool,
    #[command(flatten)]
    pub save: super::save_args::SaveArgs,
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
    let stem = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    model.with_file_name(format!("{stem}.opt.onnx"))
}

fn load_pipeline(args: &Args) -> CliResult<(PipelineConfig, String)> {
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError::usage(format!("cannot read pipeline {}: {e}", path.display())))?;
        let cfg = PipelineConfig::from_yaml(&text, &path.display().to_string()).map_err(CliError::usage)?;
        return Ok((cfg, path.display().to_string()));
    }
    if !args.passes.is_empty() {
        let cfg = PipelineConfig::from_pass_names(&args.passes, Target::Portable).map_err(CliError::usage)?;
        return Ok((cfg, format!("--passes {}", args.passes.join(","))));
    }
    let cfg = PipelineConfig::from_yaml(DEFAULT_PIPELINE, "configs/default.yaml").map_err(|e| CliError::new(Exit::Internal, e))?;
    Ok((cfg, "default".into()))
}

fn external_bytes(files: &[PathBuf]) -> u64 {
    files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum()
}

/// Shape bindings for running the models, from the pipeline and the command line.
fn runtime_shapes(config: &PipelineConfig, args: &[String]) -> CliResult<InputShapes> {
    let mut shapes = InputShapes::new().with_default_dim(2);
    for (name, dims) in &config.inputs {
        let dims = dims.iter().map(|&d| usize::try_from(d).unwrap_or(0)).collect();
        shapes = shapes.with_shape(name.clone(), dims);
    }
    for (name, v) in &config.symbols {
        shapes = shapes.with_symbol(name.clone(), usize::try_from(*v).unwrap_or(0));
    }
    for arg in args {
        match crate::shape_args::parse(arg).map_err(CliError::usage)? {
            crate::shape_args::ShapeArg::Dims { input, dims } => {
                shapes = shapes.with_shape(input, dims.iter().map(|&d| d as usize).collect());
            }
            crate::shape_args::ShapeArg::Symbols { symbols, .. } => {
                for (s, v) in symbols {
                    shapes = shapes.with_symbol(s, v as usize);
                }
            }
        }
    }
    Ok(shapes)
}

pub fn run(args: Args) -> CliResult {
    let started = Instant::now();
    let output = args.output.clone().unwrap_or_else(|| default_output(&args.model));
    let (mut config, pipeline_name) = load_pipeline(&args)?;
    if let Some(t) = args.target {
        config.target = t.into();
    }
    // Check the whole command line before the (possibly long) work starts.
    let shapes = runtime_shapes(&config, &args.input_shapes)?;
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

    let options = DriverOptions {
        validate: args.validate,
        disable: args.disable.clone(),
        stop_after: args.stop_after.clone(),
    };
    if let Some(dir) = &args.dump_dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::new(Exit::Write, format!("cannot create --dump-dir {}: {e}", dir.display())))?;
    }
    let mut dump_index = 0;
    let dump_dir = args.dump_dir.clone();
    let mut observer = |pass: &'static str, m: &Model| -> Result<Flow, infopt_passes::PassError> {
        if let Some(dir) = &dump_dir {
            dump_index += 1;
            let path = dir.join(format!("{dump_index:02}-{pass}.onnx"));
            let mut copy = m.clone();
            copy.save(&path, &infopt_ir::SaveOptions::default())?;
        }
        Ok(Flow::Continue)
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

    let verify_cfg = &config.verify;
    let do_verify = verify_cfg.enabled && !args.no_verify;
    let rtol = args.rtol.unwrap_or(verify_cfg.rtol);
    let atol = args.atol.unwrap_or(verify_cfg.atol);
    let seed = args.seed.unwrap_or(verify_cfg.seed);
    let mut verification = None;
    let mut latency = None;
    let mut warnings: Vec<String> = run.budget_exhausted.clone();
    if do_verify || args.bench {
        let backend = TractBackend;
        let before_bytes = original.to_bytes().map_err(CliError::from_ir)?;
        let after_bytes = model.to_bytes().map_err(CliError::from_ir)?;
        let dir = args.model.parent();
        let pair = verify::load_pair(&backend, &before_bytes, &after_bytes, dir, &shapes)?;
        if do_verify {
            let t = Instant::now();
            let v = verify::verify(&backend, &pair, seed, rtol, atol)?;
            eprintln!("verified with {} in {:.0} ms", backend.name(), t.elapsed().as_secs_f64() * 1e3);
            verification = Some(v);
        }
        if args.bench {
            latency = Some(verify::bench(&backend, &pair, seed, args.warmup, args.runs)?);
        }
    } else {
        warnings.push("verification disabled: the output was not checked against the original".into());
    }
    let verified_ok = verification.as_ref().is_none_or(|v| v.passed);

    let mut output_facts = None;
    if verified_ok {
        let summary = model.save(&output, &save_options).map_err(CliError::from_ir)?;
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
        input: report::facts(&args.model.display().to_string(), src.file_size, external_bytes(&src.external_files), &stats_before),
        output: output_facts,
        ops: report::op_diff(&stats_before, &stats_after),
        passes: report::pass_stats(&run),
        declined: report::group_declined(&run.declined),
        verification,
        latency,
        stopped_after: run.stopped_after.clone(),
        notes: run.notes.clone(),
        warnings,
        total_time_ms: started.elapsed().as_secs_f64() * 1e3,
    };
    emit_report(&report, &args)?;
    if !verified_ok {
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
                "the optimized model does not match the original within rtol {rtol:e} / atol {atol:e}: {}; output not written (use --verify-each-pass to find the pass, or --no-verify to write it anyway)",
                failing.join(", ")
            ),
        ));
    }
    Ok(())
}

fn emit_report(report: &Report, args: &Args) -> CliResult {
    let json = || serde_json::to_string_pretty(report).map_err(|e| CliError::new(Exit::Internal, e));
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
