//! `infopt inspect`: what a model contains.

use std::path::PathBuf;

use infopt_ops::commands;

use crate::exit::OpsResult;
use crate::progress::Terminal;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model to inspect.
    pub model: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the report to FILE (repeatable): .json (JSON), .md (Markdown for a
    /// pull-request comment), .xml (JUnit XML).
    #[arg(long, value_name = "FILE")]
    pub report: Vec<PathBuf>,
}

impl From<Args> for infopt_ops::commands::inspect::InspectOptions {
    fn from(a: Args) -> Self {
        infopt_ops::commands::inspect::InspectOptions { model: a.model }
    }
}

/// The report (text or JSON) and the `--report` files.
pub fn run(args: Args) -> OpsResult {
    crate::report::kinds(&args.report)?;
    let (json, reports) = (args.json, args.report.clone());
    let outcome = commands::inspect(&args.into(), &Terminal)?;
    crate::report::emit(&outcome.report, json, &reports)?;
    outcome.verdict()
}
