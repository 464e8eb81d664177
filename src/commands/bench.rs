//! `infopt bench`: arguments → options → `infopt_ops` → report → exit code.

use std::path::PathBuf;

use infopt_ops::commands;

use crate::exit::OpsResult;
use crate::progress::Terminal;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model to time.
    pub model: PathBuf,
    /// More models to time in the same process, runs interleaved with MODEL's
    /// (repeatable); prints MODEL's median over each one's (its speed-up).
    #[arg(long, value_name = "OTHER.onnx")]
    pub compare: Vec<PathBuf>,
    #[command(flatten)]
    pub backend: crate::args::BackendArgs,
    #[command(flatten)]
    pub inputs: crate::args::InputArgs,
    /// Untimed runs first.
    #[arg(long, default_value_t = infopt_ops::commands::bench::DEFAULT_WARMUP)]
    pub warmup: usize,
    /// Timed runs.
    #[arg(long, default_value_t = infopt_ops::commands::bench::DEFAULT_RUNS)]
    pub runs: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the report to FILE (repeatable): .json, .md (pull-request comment),
    /// .xml (JUnit XML).
    #[arg(long, value_name = "FILE")]
    pub report: Vec<PathBuf>,
    #[command(flatten)]
    pub gates: crate::args::GateArgs,
}

impl From<Args> for infopt_ops::commands::bench::BenchOptions {
    fn from(a: Args) -> Self {
        infopt_ops::commands::bench::BenchOptions {
            model: a.model,
            compare: a.compare,
            backend: a.backend.into(),
            inputs: a.inputs.into(),
            warmup: a.warmup,
            runs: a.runs,
            gates: a.gates.into(),
        }
    }
}

/// The report (table or JSON, gates included) and the `--report` files,
/// then the verdict of the gates as the exit code.
pub fn run(args: Args) -> OpsResult {
    crate::report::kinds(&args.report)?;
    let (json, reports) = (args.json, args.report.clone());
    let outcome = commands::bench(&args.into(), &Terminal)?;
    crate::report::emit(&outcome.report, json, &reports)?;
    outcome.verdict()
}
