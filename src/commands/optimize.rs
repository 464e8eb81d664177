//! `infopt optimize`: arguments → options → `infopt_ops` → report → exit code.

use std::path::PathBuf;

use infopt_ops::commands;

use crate::exit::OpsResult;
use crate::progress::Terminal;

use infopt_passes::Target;
use infopt_verify::config::CriterionName;

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
    pub gates: crate::args::GateArgs,
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
    #[arg(long, default_value_t = infopt_ops::commands::optimize::DEFAULT_RUNS)]
    pub runs: usize,
    /// Untimed warm-up runs per model with --bench.
    #[arg(long, default_value_t = infopt_ops::commands::optimize::DEFAULT_WARMUP)]
    pub warmup: usize,
    /// Run the model after every pass that changed it and stop at the first pass
    /// whose outputs leave the tolerance, naming it and the first diverging tensor.
    #[arg(long)]
    pub verify_each_pass: bool,
    #[command(flatten)]
    pub inputs: crate::args::InputArgs,
    #[command(flatten)]
    pub backend: crate::args::BackendArgs,
    /// Validate the graph after every pass.
    #[arg(long)]
    pub validate: bool,
    #[command(flatten)]
    pub save: crate::args::SaveArgs,
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
    pub int8: crate::args::Int8Args,
    /// Convert the model's default-domain opset to N (up to 24) before the
    /// fusions, so they can use newer ops (LayerNormalization 17, Gelu 20,
    /// RMSNormalization 23); refused with the node's name when an op cannot
    /// be converted exactly.
    #[arg(long, value_name = "N")]
    pub upgrade_opset: Option<i64>,
}

impl From<Args> for infopt_ops::commands::optimize::OptimizeOptions {
    fn from(a: Args) -> Self {
        infopt_ops::commands::optimize::OptimizeOptions {
            model: a.model,
            output: a.output,
            config: a.config,
            config_text: None,
            passes: a.passes,
            disable: a.disable,
            stop_after: a.stop_after,
            dump_dir: a.dump_dir,
            target: a.target.map(Into::into),
            gates: a.gates.into(),
            no_verify: a.no_verify,
            rtol: a.rtol,
            atol: a.atol,
            criterion: a.criterion.map(Into::into),
            bench: a.bench,
            runs: a.runs,
            warmup: a.warmup,
            verify_each_pass: a.verify_each_pass,
            inputs: a.inputs.into(),
            backend: a.backend.into(),
            validate: a.validate,
            save: a.save.into(),
            fp16: a.fp16,
            bf16: a.bf16,
            fp16_io: a.fp16_io,
            precision: a.precision,
            no_auto_fp32: a.no_auto_fp32,
            int8: a.int8.into(),
            upgrade_opset: a.upgrade_opset,
        }
    }
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

/// The report (table or JSON) and the `--report` files, then the verdict.
pub fn run(args: Args) -> OpsResult {
    crate::report::kinds(&args.report)?;
    let (json, reports) = (args.json, args.report.clone());
    let outcome = commands::optimize(&args.into(), &Terminal)?;
    crate::report::emit(&outcome.report, json, &reports)?;
    outcome.verdict()
}
