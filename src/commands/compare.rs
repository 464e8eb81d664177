//! `infopt compare`: arguments → options → `infopt_ops` → report → exit code.

use std::path::PathBuf;

use infopt_ops::commands;

use crate::exit::OpsResult;
use crate::progress::Terminal;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The reference model.
    pub a: PathBuf,
    /// The model under test.
    pub b: PathBuf,
    #[command(flatten)]
    pub backend: crate::args::BackendArgs,
    #[command(flatten)]
    pub inputs: crate::args::InputArgs,
    /// Relative tolerance: an element agrees when |b - a| <= atol + rtol * |a|
    /// (same default as `optimize`; widened to one ulp for float16/bfloat16 outputs).
    #[arg(long, default_value_t = infopt_ops::commands::compare::DEFAULT_RTOL)]
    pub rtol: f64,
    /// Absolute tolerance.
    #[arg(long, default_value_t = infopt_ops::commands::compare::DEFAULT_ATOL)]
    pub atol: f64,
    /// Also compare every tensor computed under the same name in both models, and name
    /// the first that diverges (runs in ort unless --backend says otherwise).
    #[arg(long)]
    pub intermediate: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the report to FILE (repeatable): .json, .md (pull-request comment),
    /// .xml (JUnit XML).
    #[arg(long, value_name = "FILE")]
    pub report: Vec<PathBuf>,
    #[command(flatten)]
    pub gates: crate::args::GateArgs,
    /// Untimed runs per model before a latency gate's timed runs.
    #[arg(long, default_value_t = infopt_ops::commands::compare::DEFAULT_WARMUP)]
    pub warmup: usize,
    /// Timed runs per model for a latency gate (at least 30).
    #[arg(long, default_value_t = infopt_ops::commands::compare::DEFAULT_RUNS)]
    pub runs: usize,
}

impl From<Args> for infopt_ops::commands::compare::CompareOptions {
    fn from(a: Args) -> Self {
        infopt_ops::commands::compare::CompareOptions {
            a: a.a,
            b: a.b,
            backend: a.backend.into(),
            inputs: a.inputs.into(),
            rtol: a.rtol,
            atol: a.atol,
            intermediate: a.intermediate,
            gates: a.gates.into(),
            warmup: a.warmup,
            runs: a.runs,
        }
    }
}

/// The report (table or JSON, gates included) and the `--report` files,
/// then the verdict of the gates as the exit code.
pub fn run(args: Args) -> OpsResult {
    crate::report::kinds(&args.report)?;
    let (json, reports) = (args.json, args.report.clone());
    let outcome = commands::compare(&args.into(), &Terminal)?;
    crate::report::emit(&outcome.report, json, &reports)?;
    outcome.verdict()
}
