//! `infopt optimize`: the main job. Load, run the pipeline, verify against the
//! original, write atomically, report what changed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use infopt_ir::Model;
use infopt_ir::stats::GraphStats;
use infopt_passes::{DriverOptions, Flow, SideData, Target};
use infopt_runtime::OutputAgreement;
use infopt_verify::config::CriterionName;
use infopt_verify::intermediates::{self, Side};
use infopt_verify::{Verifier, worst_abs};

use crate::exit::{CliError, CliResult, Exit};
use crate::outcome::Outcome;
use crate::progress;
use crate::report::{self, PassCheck, Report};
use crate::stages::{self, PassHooks, VerifyOverrides};

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
    /// Also write the report to FILE (repeatable): .json (JSON), .md (Markdown for a
    /// pull-request comment), .xml (JUnit XML, one test case per gate).
    #[arg(long, value_name = "FILE")]
    pub report: Vec<PathBuf>,
    #[command(flatten)]
    pub gates: crate::gates::GateArgs,
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
    /// How outputs are judged: `scaled` (default; the largest difference
    /// relative to the output's magnitude, and the cosine) or `elementwise`
    /// (every element within --atol + --rtol x |expected|).
    #[arg(long, value_enum)]
    pub criterion: Option<CriterionArg>,
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
    pub backend: crate::backend_args::BackendArgs,
    /// Validate the graph after every pass.
    #[arg(long)]
    pub validate: bool,
    #[command(flatten)]
    pub save: crate::save_args::SaveArgs,
    /// Convert to float16 after the pipeline's other passes (appends convert-float16).
    #[arg(long, conflicts_with = "bf16")]
    pub fp16: bool,
    /// Convert to bfloat16 after the pipeline's other passes (appends convert-bfloat16).
    #[arg(long)]
    pub bf16: bool,
    /// With --fp16/--bf16: the graph's float inputs and outputs become the half type
    /// too (no Cast at either end; for callers that feed and read half on the device).
    #[arg(long)]
    pub fp16_io: bool,
    /// Per-layer precision, NAME_OR_OP=fp32|fp16|bf16|int8 (repeatable): a
    /// bare op type (Softmax) matches the op, anything else a node name,
    /// exactly or as a regex matching the whole name; an entry that matches
    /// nothing, or whose precision no pass makes (fp16 without --fp16, int8
    /// without --int8), is refused.
    #[arg(long = "precision", value_name = "NAME_OR_OP=P")]
    pub precision: Vec<String>,
    /// With --fp16/--bf16: convert and judge once, without keeping the layers
    /// that miss the accuracy target in float32 automatically.
    #[arg(long)]
    pub no_auto_fp32: bool,
    #[command(flatten)]
    pub int8: crate::int8::Int8Args,
    /// Convert the model's default-domain opset to N (up to 24) before the
    /// fusions, so they can use newer ops (LayerNormalization 17, Gelu 20,
    /// RMSNormalization 23); refused with the node's name when an op cannot
    /// be converted exactly.
    #[arg(long, value_name = "N")]
    pub upgrade_opset: Option<i64>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum CriterionArg {
    Scaled,
    Elementwise,
}

impl From<CriterionArg> for CriterionName {
    fn from(c: CriterionArg) -> CriterionName {
        match c {
            CriterionArg::Scaled => CriterionName::Scaled,
            CriterionArg::Elementwise => CriterionName::Elementwise,
        }
    }
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

fn external_bytes(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum()
}

/// Where `--verify-each-pass` stopped.
struct Bisect {
    pass: &'static str,
    outputs: Vec<OutputAgreement>,
    /// The model no longer loads or runs.
    error: Option<String>,
    first_tensor: Option<String>,
}

/// Checks after each pass (`--verify-each-pass`): the first pass whose
/// model leaves the criterion stops the pipeline.
#[derive(Default)]
struct EachPass {
    checks: Vec<PassCheck>,
    bisect: Option<Bisect>,
}

impl EachPass {
    fn after(
        &mut self,
        v: &Verifier,
        last_good: &mut Model,
        pass: &'static str,
        m: &Model,
    ) -> Flow {
        let outcome = v.load(m).and_then(|loaded| v.check(loaded.as_ref()));
        let (outputs, passed) = match outcome {
            Ok(r) => r,
            Err(e) => {
                self.checks.push(PassCheck {
                    pass: pass.to_string(),
                    passed: false,
                    max_abs: f64::INFINITY,
                });
                self.bisect = Some(Bisect {
                    pass,
                    outputs: Vec::new(),
                    error: Some(e.message),
                    first_tensor: None,
                });
                return Flow::Stop;
            }
        };
        self.checks.push(PassCheck {
            pass: pass.to_string(),
            passed,
            max_abs: worst_abs(&outputs),
        });
        if passed {
            *last_good = m.clone();
            return Flow::Continue;
        }
        let first_tensor = first_divergence(v, last_good, m);
        self.bisect = Some(Bisect {
            pass,
            outputs,
            error: None,
            first_tensor,
        });
        Flow::Stop
    }
}

/// The first tensor (in topological order) that differs between the last model
/// that agreed and the one after the failing pass.
fn first_divergence(v: &Verifier, good: &Model, bad: &Model) -> Option<String> {
    let side = |m| Side {
        model: m,
        dir: v.dir.clone(),
        inputs: &v.inputs,
    };
    let tol = infopt_runtime::compare::Tolerance {
        rtol: 1e-4,
        atol: 1e-5,
    };
    let report = intermediates::compare(
        v.chosen.backend.as_ref(),
        &v.shapes,
        side(good),
        side(bad),
        tol,
    )
    .ok()?;
    report
        .first_divergence
        .map(|f| format!("{} (node '{}', {})", f.name, f.node, f.op_type))
}

/// Warns when folding made the weights grow noticeably (1% and at least 64 KiB).
fn growth_warning(before: &GraphStats, after: &GraphStats) -> Option<String> {
    let grown = after.parameter_bytes.saturating_sub(before.parameter_bytes);
    (grown > 64 * 1024 && grown * 100 > before.parameter_bytes).then(|| {
        format!(
            "the weights grew by {grown} bytes ({:.1}%): folded constants were materialized; lower fold-constants max_tensor_bytes to trade size for nodes",
            grown as f64 * 100.0 / before.parameter_bytes.max(1) as f64
        )
    })
}

/// Whether every pass that changed the model only changed its storage or
/// removed what nothing reads (its registry entry says `Numerics::Exact`):
/// the model computes what the original computed.
fn storage_only(run: &infopt_passes::PipelineRun) -> bool {
    use infopt_passes::registry::Numerics;
    run.records
        .iter()
        .all(|r| r.rewrites == 0 || Numerics::of(r.name) == Some(Numerics::Exact))
}

/// `infopt optimize`: the report (table or JSON) and `--report` files, then
/// the verdict as the exit code.
pub fn run(args: Args) -> CliResult {
    let (json, reports) = (args.json, args.report.clone());
    let outcome = execute(args)?;
    crate::report::ci::emit_optimize(&outcome.report, json, &reports)?;
    outcome.verdict()
}

/// The optimize job without printing: load, pipeline, verification, save,
/// gates; the report, with the failure of verification or a gate beside it.
pub fn execute(args: Args) -> CliResult<Outcome<Report>> {
    let started = Instant::now();
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| default_output(&args.model));
    // Check the whole command line before the (possibly long) work starts.
    infopt_ir::check_output_folder(&output).map_err(CliError::from_ir)?;
    let (mut config, pipeline_name) = stages::load_pipeline(
        args.config.as_deref(),
        &args.passes,
        args.target.map(Into::into),
    )?;
    let mut inputs = stages::resolve_inputs(&config, &args.inputs)?;
    stages::apply_input_shapes(&mut config, &args.inputs)?;
    // Precision and INT8 options: applied once, each checked to take effect.
    let job = crate::job::Job::resolve(
        &mut config,
        &crate::job::PrecisionFlags {
            half: match (args.fp16, args.bf16) {
                (true, _) => Some(infopt_passes::Precision::Fp16),
                (_, true) => Some(infopt_passes::Precision::Bf16),
                _ => None,
            },
            overrides: &args.precision,
            int8: &args.int8,
            no_auto_fp32: args.no_auto_fp32,
            disabled: &args.disable,
        },
    )?;
    // Float16 for ONNX Runtime's CUDA provider (the model verified there): its
    // contrib ops have float16 kernels, so they are converted too instead of
    // staying float32 islands between Casts (configs/onnxruntime-cuda-fp16.yaml
    // does the same for a pipeline of its own).
    if config.target == infopt_passes::Target::Onnxruntime
        && args.backend.runs_on_cuda()?
        && infopt_passes::pipeline_edit::convert_contrib_ops(&mut config)
    {
        crate::progress::note(
            "precision",
            "note: convert-float16 converts the com.microsoft ops too: ONNX Runtime's CUDA provider has float16 kernels for them",
        );
    }
    if args.fp16_io && !infopt_passes::pipeline_edit::use_half_io(&mut config) {
        return Err(CliError::usage(
            "--fp16-io makes the half-precision graph's inputs and outputs half too: add --fp16 or --bf16 (or a convert-float16 step to the pipeline)",
        ));
    }
    if let Some(to) = args.upgrade_opset {
        infopt_passes::pipeline_edit::add_to_pipeline(&mut config, to)
            .map_err(|e| CliError::usage(format!("--upgrade-opset {to}: {e}")))?;
    }
    let int8_step = infopt_calibration::int8::find_step(&config);
    let save_options = args.save.options()?;
    let do_verify = config.verify.enabled && !args.no_verify;
    if args.verify_each_pass && !do_verify {
        return Err(CliError::usage(
            "--verify-each-pass needs verification; drop --no-verify",
        ));
    }
    let gates = crate::gates::Gates::resolve(Some(&config.gates), &args.gates)?;
    crate::report::ci::report_kinds(&args.report)?;
    if gates.config.has_accuracy() && !do_verify {
        return Err(CliError::usage(
            "accuracy gates compare the outputs with the original's: drop --no-verify",
        ));
    }
    // The latency gate times the models itself (more runs, a confidence interval).
    let latency_gate = gates.latency_threshold().is_some();
    args.backend.check_io_binding(
        args.bench || latency_gate,
        "add --bench, or a max_latency_ratio gate",
    )?;
    let mut gate_results: Vec<crate::gates::GateResult> = Vec::new();
    let mut latency_evidence = None;
    let overrides = VerifyOverrides {
        rtol: args.rtol,
        atol: args.atol,
        criterion: args.criterion.map(Into::into),
    };

    // Load.
    let t = Instant::now();
    let mut model = crate::models::load_model(&args.model)?;
    job.check_model(&config, &model)?;
    let original = model.clone();
    let stats_before = GraphStats::of_model(&model);
    let src = model.source.clone().unwrap_or_default();
    progress::done(
        "load",
        format!(
            "loaded {} ({} nodes) in {:.0} ms",
            args.model.display(),
            stats_before.nodes,
            t.elapsed().as_secs_f64() * 1e3
        ),
    )?;

    // The original runs once; its outputs are the reference for every check.
    let mut notes: Vec<String> = job.notes.clone();
    // The calibration data's sizes, for calibration and verification alike.
    if int8_step.is_some() && inputs.file.is_none() {
        let bound =
            crate::int8::bind_data_shapes(&config, &args.int8, &original, &mut inputs.shapes)?;
        notes.extend(bound);
    }
    let mut policy = stages::verify_policy(
        &config,
        &overrides,
        &args.backend,
        stats_before.nodes + stats_before.subgraph_nodes,
        args.bench || latency_gate,
    )?;
    if int8_step.is_some() {
        // INT8 changes every value a little: judged by the accuracy target.
        let min_cosine = args
            .int8
            .int8_min_cosine
            .unwrap_or(crate::int8::DEFAULT_MIN_COSINE);
        policy.criterion = infopt_verify::Criterion::Scaled {
            max_scaled_error: f64::INFINITY,
            min_cosine,
        };
        notes.push(format!(
            "verification of the INT8 model uses its accuracy target (cosine >= {min_cosine} per output, top-1 agreement >= {} for classifier outputs) on samples of the calibration data, not the float tolerance on one random input",
            args.int8.int8_min_top1.unwrap_or(crate::int8::DEFAULT_MIN_TOP1)
        ));
    }
    // When no backend runs the original, the refusal waits for the pipeline:
    // a pipeline that changes nothing that computes needs no verification.
    let mut cannot_verify: Option<infopt_verify::VerifyError> = None;
    let mut verifier = if do_verify || args.bench || latency_gate {
        let t = Instant::now();
        let dir = stages::model_dir(&args.model);
        match progress::ticking("verify", "running the original", progress::TICK, || {
            Verifier::new(&original, dir, &inputs, policy)
        }) {
            Ok(v) => {
                progress::done(
                    "verify",
                    format!(
                        "ran the original in {} in {:.0} ms",
                        v.backend_name(),
                        t.elapsed().as_secs_f64() * 1e3
                    ),
                )?;
                Some(v)
            }
            Err(e)
                if e.kind == infopt_verify::ErrorKind::CannotVerify
                    && !args.bench
                    && !latency_gate
                    && !args.verify_each_pass
                    && int8_step.is_none()
                    && !gates.config.has_accuracy() =>
            {
                cannot_verify = Some(e);
                None
            }
            Err(e) => return Err(e.into()),
        }
    } else {
        None
    };

    // Passes.
    let options = DriverOptions {
        validate: args.validate,
        disable: args.disable.clone(),
        stop_after: args.stop_after.clone(),
        builtin_pipeline: args.config.is_none() && args.passes.is_empty(),
    };
    // The providers --ep names are the ones the output is for: passes that
    // emit provider-specific ops (FusedConv) ask for them.
    // Without --ep, the installed ONNX Runtime's providers stand in for them.
    let installed = (args.backend.execution_providers.is_empty()
        && config.target == Target::Onnxruntime)
        .then(|| {
            infopt_runtime::ort_backend::installed_providers(args.backend.ort_dylib.as_deref()).ok()
        })
        .flatten();
    let providers = || {
        let mut side = SideData::default();
        side.insert(infopt_passes::ExecutionProviders(
            args.backend.execution_providers.clone(),
        ));
        if let Some(installed) = &installed {
            side.insert(infopt_passes::InstalledProviders(installed.clone()));
        }
        side
    };
    let mut each = EachPass::default();
    // The last model that passed, for --verify-each-pass only: a copy of
    // the graph is as large as the graph (bert_deep: 13 MB of 147).
    let mut last_good = (verifier.is_some() && args.verify_each_pass).then(|| original.clone());
    let after_pass: Option<stages::AfterPass<'_>> = match (&verifier, last_good.as_mut()) {
        (Some(v), Some(last_good)) => Some(Box::new(|pass, m| each.after(v, last_good, pass, m))),
        _ => None,
    };
    let hooks = PassHooks {
        dump_dir: args.dump_dir.clone(),
        after_pass,
    };
    let t = Instant::now();
    let mut int8_report = None;
    let mut half_report = None;
    let mut judged = None;
    // Half precision judged while converting: the float32 islands it needs.
    let half_steps = match (&verifier, int8_step) {
        (Some(_), None) if do_verify && !args.verify_each_pass => crate::half::split(&config),
        _ => None,
    };
    let run = match int8_step {
        Some(index) => {
            drop(hooks);
            let fallback;
            let backend = match &verifier {
                Some(v) => &v.chosen,
                None => {
                    fallback = args.backend.build(infopt_verify::BackendKind::Tract)?;
                    &fallback
                }
            };
            let dir = stages::model_dir(&args.model);
            let shapes = verifier
                .as_ref()
                .map(|v| v.shapes.clone())
                .unwrap_or_else(|| inputs.shapes.clone());
            let cx = crate::int8::Context {
                original: &original,
                dir: &dir,
                shapes: &shapes,
                backend,
                options: &options,
                backend_args: &args.backend,
                judge: do_verify,
            };
            let (run, report) = crate::int8::run(&mut model, &config, index, &args.int8, &cx)?;
            int8_report = report;
            run
        }
        None => match (&half_steps, &verifier) {
            (Some((before, from)), Some(v)) => {
                let run = stages::run_passes(&mut model, before, &options, providers(), hooks)?;
                let cx = crate::half::Context {
                    verifier: v,
                    options: &options,
                    inputs: format!("{} ({})", v.inputs_description, inputs.source.describe()),
                    generated_inputs: inputs.file.is_none(),
                    search: !args.no_auto_fp32,
                };
                let outcome = crate::half::convert_to_target(&mut model, from, &cx)?;
                model = outcome.model;
                half_report = outcome.report;
                judged = outcome.judged;
                crate::half::merged(run, outcome.run)
            }
            _ => stages::run_passes(&mut model, &config, &options, providers(), hooks)?,
        },
    };
    let stats_after = GraphStats::of_model(&model);
    progress::done(
        "passes",
        format!(
            "pipeline {pipeline_name}: {} -> {} nodes in {:.0} ms",
            stats_before.nodes,
            stats_after.nodes,
            t.elapsed().as_secs_f64() * 1e3
        ),
    )?;
    if let Some(e) = cannot_verify {
        match storage_only(&run) {
            true => notes.push(format!(
                "not verified, and nothing to verify: the pipeline changed only how the model is stored (no rewrite of what it computes); {}",
                e.message
            )),
            false => return Err(e.into()),
        }
    }
    let mut warnings: Vec<String> = run.budget_exhausted.clone();
    if int8_step.is_none() {
        warnings.extend(growth_warning(&stats_before, &stats_after));
    }

    // Verification and latency.
    let mut verification = None;
    let mut latency = None;
    if let Some(v) = verifier.as_mut() {
        let t = Instant::now();
        let (checked, loaded) = match crate::half::reuse_judgement(v, judged, &mut notes) {
            Some(reused) => reused,
            None => progress::ticking("verify", "verifying", progress::TICK, || {
                v.verify_candidate(&model, &original, &inputs)
            })?,
        };
        notes.append(&mut v.notes);
        warnings.append(&mut v.warnings);
        if do_verify {
            progress::done(
                "verify",
                format!(
                    "verified in {} in {:.0} ms (reference: {})",
                    v.backend_name(),
                    t.elapsed().as_secs_f64() * 1e3,
                    v.info().reference_description()
                ),
            )?;
            if let Some(topk) = &gates.config.min_topk_agreement
                && checked.passed
            {
                let actual = loaded.run(&v.inputs).map_err(|e| {
                    CliError::new(
                        Exit::Verify,
                        format!("the optimized model fails to run: {e}"),
                    )
                })?;
                let only = crate::gates::config::GatesConfig {
                    min_topk_agreement: Some(topk.clone()),
                    ..Default::default()
                };
                gate_results.extend(crate::gates::accuracy(
                    &only,
                    &[],
                    Some((&v.expected, &actual)),
                ));
            }
            let mut checked = checked;
            if let Some(q) = &int8_report {
                crate::int8::judged_on_data(&mut checked, q);
            }
            verification = Some(checked);
        }
        let verified = verification.as_ref().is_none_or(|x| x.passed);
        if latency_gate && verified {
            let (comparison, evidence) =
                crate::gates::optimize_latency(v, loaded, &gates, args.warmup, args.runs)?;
            latency = Some(comparison);
            latency_evidence = Some(evidence);
        } else if args.bench && verified {
            latency = Some(v.bench(loaded, args.warmup, args.runs)?);
        }
    } else if !do_verify {
        warnings
            .push("verification disabled: the output was not checked against the original".into());
    }
    let bisect = each.bisect;
    if let Some(b) = &bisect
        && let Some(v) = verification.as_mut()
    {
        v.passed = false;
        if !b.outputs.is_empty() {
            v.outputs = b.outputs.clone();
        }
    }
    let verified_ok = verification.as_ref().is_none_or(|v| v.passed);

    // Save (only what agrees).
    let output_facts = if verified_ok {
        Some(stages::save(
            &mut model,
            &output,
            &save_options,
            &stats_after,
        )?)
    } else {
        None
    };

    // Gates (only on a model that was written).
    let gate_report = match &output_facts {
        Some(facts) if !gates.is_empty() => {
            let mut results = match &verification {
                Some(v) => crate::gates::accuracy(
                    &crate::gates::without_topk(&gates.config),
                    &v.outputs,
                    None,
                ),
                None => Vec::new(),
            };
            results.append(&mut gate_results);
            results.extend(
                latency_evidence
                    .as_ref()
                    .map(crate::gates::latency::gate_result),
            );
            results.extend(crate::gates::structure(
                &gates,
                &model,
                facts.file_bytes + facts.external_bytes,
            ));
            Some(crate::gates::GateReport::new(results, latency_evidence))
        }
        _ => None,
    };

    // Report.
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
        pass_checks: each.checks,
        first_failing_pass: bisect.as_ref().map(|b| b.pass.to_string()),
        first_diverging_tensor: bisect.as_ref().and_then(|b| b.first_tensor.clone()),
        int8: int8_report,
        half_precision: half_report,
        notes: run.notes.iter().cloned().chain(notes).collect(),
        details: run.details.clone(),
        warnings,
        total_time_ms: started.elapsed().as_secs_f64() * 1e3,
        gates: gate_report,
    };
    let failure = match report.gates.as_ref().and_then(|g| g.error()) {
        Some(e) => Some(e),
        None if verified_ok => None,
        None => match report.int8.as_ref().and_then(|q| q.failure.clone()) {
            Some(f) => Some(CliError::new(
                Exit::Verify,
                format!(
                    "{f}; output not written (lower --int8-min-cosine / --int8-min-top1, or exclude layers in the quantize-int8 step)"
                ),
            )),
            None => Some(verification_failure(&report, bisect.as_ref())),
        },
    };
    Ok(Outcome { report, failure })
}

/// The one-line error of a failed verification.
fn verification_failure(report: &Report, bisect: Option<&Bisect>) -> CliError {
    if let Some(b) = bisect {
        let what = match (&b.error, &b.first_tensor) {
            (Some(e), _) => e.clone(),
            (None, Some(t)) => format!("first diverging tensor '{t}'"),
            (None, None) => {
                "no intermediate tensor of both models diverges; only the outputs do".into()
            }
        };
        return CliError::new(
            Exit::Verify,
            format!(
                "pass '{}' broke numerical agreement with the original: {what}; output not written",
                b.pass
            ),
        );
    }
    let Some(v) = report.verification.as_ref() else {
        return CliError::new(Exit::Internal, "verification failed without a verdict");
    };
    if let Some(h) = &report.half_precision {
        return crate::half::missed_target(h, &v.outputs);
    }
    let failing: Vec<String> = v
        .outputs
        .iter()
        .filter(|o| !o.within_tolerance)
        .map(infopt_verify::Criterion::failure_summary)
        .collect();
    CliError::new(
        Exit::Verify,
        format!(
            "the optimized model does not match the original ({}): {}; output not written (use --verify-each-pass to find the pass, or --no-verify to write it anyway)",
            v.criterion.describe(),
            failing.join(", ")
        ),
    )
}
