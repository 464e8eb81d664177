//! `infopt optimize`: the main job. Load, run the pipeline, verify against the
//! original, write atomically, report what changed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use infopt_ir::Model;
use infopt_ir::stats::GraphStats;
use infopt_passes::{DriverOptions, Flow, SideData, Target};
use infopt_runtime::OutputAgreement;
use infopt_verify::intermediates::{self, Side};
use infopt_verify::{Verifier, worst_abs};

use crate::error::{ErrorKind, OpsError, OpsResult};
use crate::outcome::Outcome;
use crate::progress;
use crate::report::{self, PassCheck, Report};
use crate::stages::{self, PassHooks, VerifyOverrides};

/// `optimize`'s options. Built by the command line (src/commands/optimize.rs) or
/// deserialized from keywords (the Python API, with serde): [`Default`] holds the
/// defaults both use.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OptimizeOptions {
    /// Model to optimize (never modified).
    pub model: PathBuf,
    /// Output path (default: MODEL with `.opt.onnx`).
    pub output: Option<PathBuf>,
    /// Pipeline YAML (default: the built-in configs/default.yaml).
    pub config: Option<PathBuf>,
    /// The pipeline as YAML text (JSON is YAML) instead of a file: the Python API's
    /// `pipeline={...}`. Not an option of the command line.
    #[serde(skip)]
    pub config_text: Option<String>,
    /// Run exactly these passes, in order (comma-separated).
    pub passes: Vec<String>,
    /// Skip a pass of the pipeline (repeatable or comma-separated).
    pub disable: Vec<String>,
    /// Stop after the first run of this pass.
    pub stop_after: Option<String>,
    /// Write the model after every pass that changed it, as NN-PASS.onnx.
    pub dump_dir: Option<PathBuf>,
    /// Override the pipeline's target.
    pub target: Option<infopt_passes::Target>,
    pub gates: crate::gates::GateSettings,
    /// Do not run the models to check that the outputs agree.
    pub no_verify: bool,
    /// Relative tolerance of verification (default from the pipeline, 1e-4).
    pub rtol: Option<f64>,
    /// Absolute tolerance of verification (default from the pipeline, 1e-5).
    pub atol: Option<f64>,
    /// How outputs are judged: `scaled` (default; the largest difference
    /// relative to the output's magnitude, and the cosine) or `elementwise`
    /// (every element within --atol + --rtol x |expected|).
    pub criterion: Option<infopt_verify::config::CriterionName>,
    /// Measure latency before and after.
    pub bench: bool,
    /// Timed runs per model with --bench.
    pub runs: usize,
    /// Untimed warm-up runs per model with --bench.
    pub warmup: usize,
    /// Run the model after every pass that changed it and stop at the first pass
    /// whose outputs leave the tolerance, naming it and the first diverging tensor.
    pub verify_each_pass: bool,
    pub inputs: crate::inputs_arg::InputSettings,
    pub backend: crate::backend_args::BackendSettings,
    /// Validate the graph after every pass.
    pub validate: bool,
    pub save: crate::save_args::SaveSettings,
    /// Convert to float16 after the pipeline's other passes (appends convert-float16).
    pub fp16: bool,
    /// Convert to bfloat16 after the pipeline's other passes (appends convert-bfloat16).
    pub bf16: bool,
    /// With --fp16/--bf16: the graph's float inputs and outputs become the half type
    /// too (no Cast at either end; for callers that feed and read half on the device).
    pub fp16_io: bool,
    /// Per-layer precision, NAME_OR_OP=fp32|fp16|bf16|int8 (repeatable): a
    /// bare op type (Softmax) matches the op, anything else a node name,
    /// exactly or as a regex matching the whole name; an entry that matches
    /// nothing, or whose precision no pass makes (fp16 without --fp16, int8
    /// without --int8), is refused.
    pub precision: Vec<String>,
    /// With --fp16/--bf16: convert and judge once, without keeping the layers
    /// that miss the accuracy target in float32 automatically.
    pub no_auto_fp32: bool,
    pub int8: crate::int8::Int8Settings,
    /// Convert the model's default-domain opset to N (up to 24) before the
    /// fusions, so they can use newer ops (LayerNormalization 17, Gelu 20,
    /// RMSNormalization 23); refused with the node's name when an op cannot
    /// be converted exactly.
    pub upgrade_opset: Option<i64>,
}

/// Timed runs per model with `--bench`.
pub const DEFAULT_RUNS: usize = 20;
/// Untimed warm-up runs per model with `--bench`.
pub const DEFAULT_WARMUP: usize = 3;

impl Default for OptimizeOptions {
    fn default() -> Self {
        OptimizeOptions {
            model: PathBuf::new(),
            output: None,
            config: None,
            config_text: None,
            passes: Vec::new(),
            disable: Vec::new(),
            stop_after: None,
            dump_dir: None,
            target: None,
            gates: Default::default(),
            no_verify: false,
            rtol: None,
            atol: None,
            criterion: None,
            bench: false,
            runs: DEFAULT_RUNS,
            warmup: DEFAULT_WARMUP,
            verify_each_pass: false,
            inputs: Default::default(),
            backend: Default::default(),
            validate: false,
            save: Default::default(),
            fp16: false,
            bf16: false,
            fp16_io: false,
            precision: Vec::new(),
            no_auto_fp32: false,
            int8: Default::default(),
            upgrade_opset: None,
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

/// What the options resolve to before any work: the pipeline with every
/// flag applied once, the inputs, the gates, and what will run.
struct Plan {
    output: PathBuf,
    config: crate::job_file::JobFile,
    pipeline_name: String,
    inputs: infopt_verify::Inputs,
    job: crate::job::Job,
    int8_step: Option<usize>,
    save_options: infopt_ir::SaveOptions,
    do_verify: bool,
    gates: crate::gates::Gates,
    /// The latency gate times the models itself (more runs, a confidence interval).
    latency_gate: bool,
    overrides: VerifyOverrides,
}

/// The model as read, and the copy every check compares against.
struct Input {
    model: Model,
    original: Model,
    stats: GraphStats,
    source: infopt_ir::SourceInfo,
}

/// What the pipeline stage produced besides the model.
struct Ran {
    run: infopt_passes::PipelineRun,
    each: EachPass,
    int8: Option<crate::int8::Int8Report>,
    half: Option<crate::half::HalfReport>,
    judged: Option<crate::half::Judged>,
}

/// What the verification stage measured.
#[derive(Default)]
struct Checked {
    verification: Option<infopt_verify::Verification>,
    latency: Option<infopt_verify::LatencyComparison>,
    /// The top-k agreement gate, judged on the verification run's outputs.
    gate_results: Vec<crate::gates::GateResult>,
    latency_evidence: Option<crate::gates::latency::LatencyEvidence>,
}

/// The optimize job without printing: load, pipeline, verification, save,
/// gates; the report, with the failure of verification or a gate beside it.
pub fn execute(args: OptimizeOptions) -> OpsResult<Outcome<Report>> {
    let started = Instant::now();
    let mut plan = resolve(&args)?;
    let from_ranges = int8_from_ranges(&plan, &args);
    let mut input = load(&args, &plan)?;
    let mut notes: Vec<String> = plan.job.notes.clone();
    let (mut verifier, cannot_verify) = start_verifier(&args, &mut plan, &input, &mut notes)?;
    let t = Instant::now();
    let ran = run_pipeline(&args, &plan, &mut input, verifier.as_ref())?;
    let stats_after = GraphStats::of_model(&input.model);
    progress::done(
        "passes",
        format!(
            "pipeline {}: {} -> {} nodes in {:.0} ms",
            plan.pipeline_name,
            input.stats.nodes,
            stats_after.nodes,
            t.elapsed().as_secs_f64() * 1e3
        ),
    )?;
    if let Some(e) = cannot_verify {
        match storage_only(&ran.run) {
            true => notes.push(format!(
                "not verified, and nothing to verify: the pipeline changed only how the model is stored (no rewrite of what it computes); {}",
                e.message
            )),
            false => return Err(e.into()),
        }
    }
    let mut warnings: Vec<String> = ran.run.budget_exhausted.clone();
    if plan.int8_step.is_none() {
        warnings.extend(growth_warning(&input.stats, &stats_after));
    }
    let mut ran = ran;
    let mut checked = verify_and_time(
        &args,
        &plan,
        verifier.as_mut(),
        &input,
        &mut ran,
        (&mut notes, &mut warnings),
    )?;
    let bisect = std::mem::take(&mut ran.each.bisect);
    if let Some(b) = &bisect
        && let Some(v) = checked.verification.as_mut()
    {
        v.passed = false;
        if !b.outputs.is_empty() {
            v.outputs = b.outputs.clone();
        }
    }
    let verified_ok = checked.verification.as_ref().is_none_or(|v| v.passed);
    // Save (only what agrees), then the gates (only on a model that was written).
    let output_facts = match verified_ok {
        true => Some(stages::save(
            &mut input.model,
            &plan.output,
            &plan.save_options,
            &stats_after,
        )?),
        false => None,
    };
    let gate_report = output_facts
        .as_ref()
        .and_then(|facts| gate_report(&plan.gates, &mut checked, &input.model, facts));
    let report = Report {
        schema_version: report::REPORT_SCHEMA_VERSION,
        infopt_version: env!("CARGO_PKG_VERSION").to_string(),
        pipeline: plan.pipeline_name,
        target: plan.config.target.to_string(),
        input: report::facts(
            &args.model.display().to_string(),
            input.source.file_size,
            external_bytes(&input.source.external_files),
            &input.stats,
        ),
        output: output_facts,
        ops: report::op_diff(&input.stats, &stats_after),
        passes: report::pass_stats(&ran.run),
        declined: report::group_declined(&ran.run.declined),
        verification: checked.verification,
        latency: checked.latency,
        stopped_after: ran.run.stopped_after.clone(),
        pass_checks: ran.each.checks,
        first_failing_pass: bisect.as_ref().map(|b| b.pass.to_string()),
        first_diverging_tensor: bisect.as_ref().and_then(|b| b.first_tensor.clone()),
        int8: ran.int8,
        half_precision: ran.half,
        notes: ran.run.notes.iter().cloned().chain(notes).collect(),
        details: ran.run.details.clone(),
        warnings,
        total_time_ms: started.elapsed().as_secs_f64() * 1e3,
        gates: gate_report,
    };
    let failure = failure(&report, verified_ok, bisect.as_ref(), from_ranges);
    Ok(Outcome { report, failure })
}

/// Resolves the options against the pipeline before the (possibly long)
/// work starts: every flag applied once and checked.
fn resolve(args: &OptimizeOptions) -> OpsResult<Plan> {
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| default_output(&args.model));
    infopt_ir::check_output_folder(&output).map_err(OpsError::from_ir)?;
    let (mut config, pipeline_name) = stages::load_pipeline(
        args.config.as_deref(),
        args.config_text.as_deref(),
        &args.passes,
        args.target,
    )?;
    let inputs = stages::resolve_inputs(&config, &args.inputs)?;
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
    apply_output_flags(args, &mut config)?;
    let int8_step = infopt_calibration::int8::find_step(&config);
    let save_options = args.save.options()?;
    let do_verify = config.verify.enabled && !args.no_verify;
    if args.verify_each_pass && !do_verify {
        return Err(OpsError::usage(
            "--verify-each-pass needs verification; drop --no-verify",
        ));
    }
    let gates = crate::gates::Gates::resolve(Some(&config.gates), &args.gates)?;
    if gates.config.has_accuracy() && !do_verify {
        return Err(OpsError::usage(
            "accuracy gates compare the outputs with the original's: drop --no-verify",
        ));
    }
    let latency_gate = gates.latency_threshold().is_some();
    args.backend.check_io_binding(
        args.bench || latency_gate,
        "add --bench, or a max_latency_ratio gate",
    )?;
    let overrides = VerifyOverrides {
        rtol: args.rtol,
        atol: args.atol,
        criterion: args.criterion,
    };
    Ok(Plan {
        output,
        config,
        pipeline_name,
        inputs,
        job,
        int8_step,
        save_options,
        do_verify,
        gates,
        latency_gate,
        overrides,
    })
}

/// The flags that shape the written graph beyond its precision: the CUDA
/// provider's float16 contrib ops, half inputs and outputs, a newer opset.
fn apply_output_flags(
    args: &OptimizeOptions,
    config: &mut infopt_passes::PipelineConfig,
) -> OpsResult {
    // Float16 for ONNX Runtime's CUDA provider (the model verified there): its
    // contrib ops have float16 kernels, so they are converted too instead of
    // staying float32 islands between Casts (configs/onnxruntime-cuda-fp16.yaml
    // does the same for a pipeline of its own).
    if config.target == infopt_passes::Target::Onnxruntime
        && args.backend.runs_on_cuda()?
        && infopt_passes::pipeline_edit::convert_contrib_ops(config)
    {
        crate::progress::note(
            "precision",
            "note: convert-float16 converts the com.microsoft ops too: ONNX Runtime's CUDA provider has float16 kernels for them",
        );
    }
    if args.fp16_io && !infopt_passes::pipeline_edit::use_half_io(config) {
        return Err(OpsError::usage(
            "--fp16-io makes the half-precision graph's inputs and outputs half too: add --fp16 or --bf16 (or a convert-float16 step to the pipeline)",
        ));
    }
    if let Some(to) = args.upgrade_opset {
        infopt_passes::pipeline_edit::add_to_pipeline(config, to)
            .map_err(|e| OpsError::usage(format!("--upgrade-opset {to}: {e}")))?;
    }
    Ok(())
}

/// Loads the model and checks the job against it.
fn load(args: &OptimizeOptions, plan: &Plan) -> OpsResult<Input> {
    let t = Instant::now();
    let model = crate::models::load_model(&args.model)?;
    plan.job.check_model(&plan.config, &model)?;
    let stats = GraphStats::of_model(&model);
    let source = model.source.clone().unwrap_or_default();
    progress::done(
        "load",
        format!(
            "loaded {} ({} nodes) in {:.0} ms",
            args.model.display(),
            stats.nodes,
            t.elapsed().as_secs_f64() * 1e3
        ),
    )?;
    Ok(Input {
        original: model.clone(),
        model,
        stats,
        source,
    })
}

/// Runs the original once: its outputs are the reference for every check.
/// When no backend runs it, the refusal waits for the pipeline (returned
/// second): a pipeline that changes nothing that computes needs no
/// verification.
fn start_verifier(
    args: &OptimizeOptions,
    plan: &mut Plan,
    input: &Input,
    notes: &mut Vec<String>,
) -> OpsResult<(Option<Verifier>, Option<infopt_verify::VerifyError>)> {
    // The calibration data's sizes, for calibration and verification alike.
    if plan.int8_step.is_some() && plan.inputs.file.is_none() {
        let bound = crate::int8::bind_data_shapes(
            &plan.config,
            &args.int8,
            &input.original,
            &mut plan.inputs.shapes,
        )?;
        notes.extend(bound);
    }
    let mut policy = stages::verify_policy(
        &plan.config,
        &plan.overrides,
        &args.backend,
        input.stats.nodes + input.stats.subgraph_nodes,
        args.bench || plan.latency_gate,
    )?;
    if plan.int8_step.is_some() {
        // INT8 changes every value a little: judged by the accuracy target.
        let min_cosine = args
            .int8
            .int8_min_cosine
            .unwrap_or(crate::int8::DEFAULT_MIN_COSINE);
        policy.criterion = infopt_verify::Criterion::Scaled {
            max_scaled_error: f64::INFINITY,
            min_cosine,
        };
        let note = if int8_from_ranges(plan, args) {
            // No calibration data: the verifier's inputs are all there is.
            format!(
                "verification of the INT8 model uses its accuracy target (cosine >= {min_cosine} per output) on {}: with --ranges there are no calibration samples to judge it on (give --inputs with a real sample; generated inputs say little about INT8 accuracy)",
                match &plan.inputs.file {
                    Some(_) => "the --inputs sample",
                    None => "generated inputs",
                }
            )
        } else {
            format!(
                "verification of the INT8 model uses its accuracy target (cosine >= {min_cosine} per output, top-1 agreement >= {} for classifier outputs, nearest-neighbour agreement for embeddings, correlation across samples for regression outputs such as boxes and landmarks) on samples of the calibration data, not the float tolerance on one random input",
                args.int8
                    .int8_min_top1
                    .unwrap_or(crate::int8::DEFAULT_MIN_TOP1)
            )
        };
        notes.push(note);
    }
    if !(plan.do_verify || args.bench || plan.latency_gate) {
        return Ok((None, None));
    }
    let t = Instant::now();
    let dir = stages::model_dir(&args.model);
    let (original, inputs) = (&input.original, &plan.inputs);
    match progress::ticking("verify", "running the original", progress::TICK, || {
        Verifier::new(original, dir, inputs, policy)
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
            Ok((Some(v), None))
        }
        Err(e)
            if e.kind == infopt_verify::ErrorKind::CannotVerify
                && !args.bench
                && !plan.latency_gate
                && !args.verify_each_pass
                && plan.int8_step.is_none()
                && !plan.gates.config.has_accuracy() =>
        {
            Ok((None, Some(e)))
        }
        Err(e) => Err(e.into()),
    }
}

/// The driver's options and the side data passes read: the providers
/// `--ep` names are the ones the output is for (passes that emit
/// provider-specific ops, FusedConv, ask for them); without `--ep`, the
/// installed ONNX Runtime's providers stand in for them.
fn driver_setup(args: &OptimizeOptions, plan: &Plan) -> (DriverOptions, SideData) {
    let options = DriverOptions {
        validate: args.validate,
        disable: args.disable.clone(),
        stop_after: args.stop_after.clone(),
        builtin_pipeline: args.config.is_none()
            && args.config_text.is_none()
            && args.passes.is_empty(),
    };
    let installed = (args.backend.execution_providers.is_empty()
        && plan.config.target == Target::Onnxruntime)
        .then(|| {
            infopt_runtime::ort_backend::installed_providers(args.backend.ort_dylib.as_deref()).ok()
        })
        .flatten();
    let mut side = SideData::default();
    side.insert(infopt_passes::ExecutionProviders(
        args.backend.execution_providers.clone(),
    ));
    if let Some(installed) = installed {
        side.insert(infopt_passes::InstalledProviders(installed));
    }
    (options, side)
}

/// Runs the pipeline: INT8 with calibration, half precision judged while
/// converting (the float32 islands it needs), or the passes as they are
/// (checked after each with `--verify-each-pass`).
fn run_pipeline(
    args: &OptimizeOptions,
    plan: &Plan,
    input: &mut Input,
    verifier: Option<&Verifier>,
) -> OpsResult<Ran> {
    let (options, side) = driver_setup(args, plan);
    let mut ran = Ran {
        run: Default::default(),
        each: EachPass::default(),
        int8: None,
        half: None,
        judged: None,
    };
    if let Some(index) = plan.int8_step {
        let (run, report) = run_int8(args, plan, input, verifier, &options, index)?;
        ran.run = run;
        ran.int8 = report;
        return Ok(ran);
    }
    let half_steps = match verifier {
        Some(_) if plan.do_verify && !args.verify_each_pass => crate::half::split(&plan.config),
        _ => None,
    };
    if let (Some((before, from)), Some(v)) = (&half_steps, verifier) {
        let hooks = PassHooks {
            dump_dir: args.dump_dir.clone(),
            after_pass: None,
        };
        let run = stages::run_passes(&mut input.model, before, &options, side, hooks)?;
        let cx = crate::half::Context {
            verifier: v,
            options: &options,
            inputs: format!(
                "{} ({})",
                v.inputs_description,
                plan.inputs.source.describe()
            ),
            generated_inputs: plan.inputs.file.is_none(),
            search: !args.no_auto_fp32,
        };
        let outcome = crate::half::convert_to_target(&mut input.model, from, &cx)?;
        input.model = outcome.model;
        ran.half = outcome.report;
        ran.judged = outcome.judged;
        ran.run = crate::half::merged(run, outcome.run);
        return Ok(ran);
    }
    // The last model that passed, for --verify-each-pass only: a copy of
    // the graph is as large as the graph (bert_deep: 13 MB of 147).
    let mut last_good =
        (verifier.is_some() && args.verify_each_pass).then(|| input.original.clone());
    let each = &mut ran.each;
    let after_pass: Option<stages::AfterPass<'_>> = match (verifier, last_good.as_mut()) {
        (Some(v), Some(last_good)) => Some(Box::new(|pass, m| each.after(v, last_good, pass, m))),
        _ => None,
    };
    let hooks = PassHooks {
        dump_dir: args.dump_dir.clone(),
        after_pass,
    };
    ran.run = stages::run_passes(&mut input.model, &plan.config, &options, side, hooks)?;
    Ok(ran)
}

/// The INT8 pipeline: calibrated in the verifier's backend (tract when
/// nothing verifies), judged on held-out data when verifying.
fn run_int8(
    args: &OptimizeOptions,
    plan: &Plan,
    input: &mut Input,
    verifier: Option<&Verifier>,
    options: &DriverOptions,
    index: usize,
) -> OpsResult<(infopt_passes::PipelineRun, Option<crate::int8::Int8Report>)> {
    let fallback;
    let backend = match verifier {
        Some(v) => &v.chosen,
        None => {
            fallback = args.backend.build(infopt_verify::BackendKind::Tract)?;
            &fallback
        }
    };
    let dir = stages::model_dir(&args.model);
    let shapes = verifier
        .map(|v| v.shapes.clone())
        .unwrap_or_else(|| plan.inputs.shapes.clone());
    let timings = crate::int8::Timings::for_run(
        args.int8.int8_timings.as_deref(),
        plan.config.target,
        plan.do_verify,
    )?;
    let cx = crate::int8::Context {
        original: &input.original,
        dir: &dir,
        shapes: &shapes,
        backend,
        options,
        backend_args: &args.backend,
        judge: plan.do_verify,
        generated: plan.inputs.generated(),
        timings: &timings,
    };
    crate::int8::run(&mut input.model, &plan.config, index, &args.int8, &cx)
}

/// Verifies the optimized model against the original (reusing the half
/// search's last judgement when it ran), then times both with `--bench`
/// or a latency gate.
fn verify_and_time(
    args: &OptimizeOptions,
    plan: &Plan,
    verifier: Option<&mut Verifier>,
    input: &Input,
    ran: &mut Ran,
    (notes, warnings): (&mut Vec<String>, &mut Vec<String>),
) -> OpsResult<Checked> {
    let mut out = Checked::default();
    let Some(v) = verifier else {
        if !plan.do_verify {
            warnings.push(
                "verification disabled: the output was not checked against the original".into(),
            );
        }
        return Ok(out);
    };
    let t = Instant::now();
    let (mut checked, loaded) = match crate::half::reuse_judgement(v, ran.judged.take(), notes) {
        Some(reused) => reused,
        None => {
            let vv = &mut *v;
            progress::ticking("verify", "verifying", progress::TICK, || {
                vv.verify_candidate(&input.model, &input.original, &plan.inputs)
            })?
        }
    };
    notes.append(&mut v.notes);
    warnings.append(&mut v.warnings);
    if plan.do_verify {
        progress::done(
            "verify",
            format!(
                "verified in {} in {:.0} ms (reference: {})",
                v.backend_name(),
                t.elapsed().as_secs_f64() * 1e3,
                v.info().reference_description()
            ),
        )?;
        if let Some(topk) = &plan.gates.config.min_topk_agreement
            && checked.passed
        {
            let actual = loaded.run(&v.inputs).map_err(|e| {
                OpsError::new(
                    ErrorKind::Verify,
                    format!("the optimized model fails to run: {e}"),
                )
            })?;
            let only = crate::gates::config::GatesConfig {
                min_topk_agreement: Some(topk.clone()),
                ..Default::default()
            };
            out.gate_results.extend(crate::gates::accuracy(
                &only,
                &[],
                Some((&v.expected, &actual)),
            ));
        }
        if let Some(q) = &ran.int8 {
            crate::int8::judged_on_data(&mut checked, q);
        }
        out.verification = Some(checked);
    }
    let verified = out.verification.as_ref().is_none_or(|x| x.passed);
    let loaded = match (plan.latency_gate || args.bench) && verified {
        true => v.for_timing(loaded, &input.model)?,
        false => loaded,
    };
    if plan.latency_gate && verified {
        let (comparison, evidence) =
            crate::gates::optimize_latency(v, loaded, &plan.gates, args.warmup, args.runs)?;
        out.latency = Some(comparison);
        out.latency_evidence = Some(evidence);
    } else if args.bench && verified {
        out.latency = Some(v.bench(loaded, args.warmup, args.runs)?);
    }
    Ok(out)
}

/// The gates on the written model: accuracy (from the verification),
/// top-k, latency, structure.
fn gate_report(
    gates: &crate::gates::Gates,
    checked: &mut Checked,
    model: &Model,
    facts: &report::ModelFacts,
) -> Option<crate::gates::GateReport> {
    if gates.is_empty() {
        return None;
    }
    let mut results = match &checked.verification {
        Some(v) => {
            crate::gates::accuracy(&crate::gates::without_topk(&gates.config), &v.outputs, None)
        }
        None => Vec::new(),
    };
    results.append(&mut checked.gate_results);
    let evidence = checked.latency_evidence.take();
    results.extend(evidence.as_ref().map(crate::gates::latency::gate_result));
    results.extend(crate::gates::structure(
        gates,
        model,
        facts.file_bytes + facts.external_bytes,
    ));
    Some(crate::gates::GateReport::new(results, evidence))
}

/// Why the command fails, if it does: a gate, else the verification.
/// `from_ranges`: INT8 from a range table, without data (see
/// [`int8_from_ranges`]).
fn failure(
    report: &Report,
    verified_ok: bool,
    bisect: Option<&Bisect>,
    from_ranges: bool,
) -> Option<OpsError> {
    match report.gates.as_ref().and_then(|g| g.error()) {
        Some(e) => Some(e),
        None if verified_ok => None,
        None => match report.int8.as_ref().and_then(|q| q.failure.clone()) {
            Some(f) => Some(OpsError::new(
                ErrorKind::Verify,
                format!(
                    "{f}; output not written (lower --int8-min-cosine / --int8-min-top1, or exclude layers in the quantize-int8 step)"
                ),
            )),
            None if from_ranges => Some(ranges_failure(report)),
            None => Some(verification_failure(report, bisect)),
        },
    }
}

/// Whether the INT8 step quantizes from a range table (see
/// [`crate::int8::from_ranges`]).
fn int8_from_ranges(plan: &Plan, args: &OptimizeOptions) -> bool {
    crate::int8::from_ranges(&args.int8, &plan.config, plan.int8_step)
}

/// The one-line error of an INT8 model from a range table that misses the
/// accuracy target: the verifier's pass-by-pass hint does not apply (the
/// quantize step is the change), the accuracy search does (PP-OCRv6 tiny
/// rec from `infopt calibrate`'s table: cosine 0.79 on a real line with
/// every layer in INT8; the search on the same data keeps 15-26 of 39 in
/// float and meets it).
fn ranges_failure(report: &Report) -> OpsError {
    let Some(v) = report.verification.as_ref() else {
        return OpsError::new(ErrorKind::Internal, "verification failed without a verdict");
    };
    OpsError::new(
        ErrorKind::Verify,
        format!(
            "the INT8 model misses its accuracy target ({}) on {}: {}; output not written: with --ranges every layer is quantized and no search keeps the harmful ones in float: give --calib-data (the data the ranges came from) instead, keep layers in float with --precision NAME_OR_OP=fp32, or --no-verify to write it anyway",
            v.criterion.describe(),
            v.inputs,
            v.failing_outputs()
        ),
    )
}

/// The one-line error of a failed verification.
fn verification_failure(report: &Report, bisect: Option<&Bisect>) -> OpsError {
    if let Some(b) = bisect {
        let what = match (&b.error, &b.first_tensor) {
            (Some(e), _) => e.clone(),
            (None, Some(t)) => format!("first diverging tensor '{t}'"),
            (None, None) => {
                "no intermediate tensor of both models diverges; only the outputs do".into()
            }
        };
        return OpsError::new(
            ErrorKind::Verify,
            format!(
                "pass '{}' broke numerical agreement with the original: {what}; output not written",
                b.pass
            ),
        );
    }
    let Some(v) = report.verification.as_ref() else {
        return OpsError::new(ErrorKind::Internal, "verification failed without a verdict");
    };
    if let Some(h) = &report.half_precision {
        return crate::half::missed_target(h, &v.outputs);
    }
    OpsError::new(
        ErrorKind::Verify,
        format!(
            "the optimized model does not match the original ({}): {}; output not written (use --verify-each-pass to find the pass, or --no-verify to write it anyway)",
            v.criterion.describe(),
            v.failing_outputs()
        ),
    )
}
