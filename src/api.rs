//! The entry point for front ends other than the command line (the Python
//! module): a command's arguments in, its report out, rendered every way a
//! caller may show it, with the failure beside it. Nothing is printed; the
//! progress lines go to the caller's [`Progress`].
//!
//! The arguments are the command's own (`["optimize", "m.onnx", "--fp16"]`),
//! parsed by the same definitions, so every option and every one-line error
//! is the command's.

use std::ffi::OsString;

use clap::Parser;

use crate::commands::{self, Command};
use crate::exit::{ErrorKind, OpsError, OpsResult};
use infopt_ops::outcome::{CommandReport, Outcome};
use infopt_ops::progress::Progress;

/// A command's report in every rendering a caller may want.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// "optimize", "compare", ...
    pub command: &'static str,
    pub json: String,
    pub markdown: String,
    pub text: String,
}

/// What a command ended with: a report (unless it failed before having
/// one), and its failure.
#[derive(Debug)]
pub struct Finished {
    pub report: Option<Rendered>,
    pub failure: Option<OpsError>,
}

impl Finished {
    fn failed(e: OpsError) -> Finished {
        Finished {
            report: None,
            failure: Some(e),
        }
    }
}

fn render<R: CommandReport>(outcome: OpsResult<Outcome<R>>) -> OpsResult<Finished> {
    let outcome = outcome?;
    let r = &outcome.report;
    let report = Rendered {
        command: r.command(),
        json: r.json()?,
        markdown: r.markdown(),
        text: r.text(),
    };
    Ok(Finished {
        report: Some(report),
        failure: outcome.failure,
    })
}

/// A clap error as one line: its first line, with the hints clap puts
/// under it ("invalid value 'gpu' for '--target <TARGET>'; possible values:
/// portable, onnxruntime, tensorrt"), without the usage and help lines.
fn usage_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("invalid arguments");
    let mut parts = vec![first.strip_prefix("error: ").unwrap_or(first).to_string()];
    for line in lines.map(str::trim) {
        if let Some(tip) = line.strip_prefix("tip: ") {
            parts.push(tip.to_string());
        } else if let Some(values) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            parts.push(values.to_string());
        }
    }
    parts.join("; ")
}

/// Runs one command from its arguments (without the program name), its
/// progress going to `progress`.
pub fn execute<I, T>(args: I, progress: &dyn Progress) -> Finished
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv = std::iter::once(OsString::from("infopt")).chain(args.into_iter().map(Into::into));
    let cli = match commands::Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => return Finished::failed(OpsError::usage(usage_line(&e))),
    };
    dispatch(cli.command, progress).unwrap_or_else(Finished::failed)
}

fn dispatch(command: Command, p: &dyn Progress) -> OpsResult<Finished> {
    use infopt_ops::commands as ops;
    match command {
        Command::Optimize(a) => render(ops::optimize(&(*a).into(), p)),
        Command::BuildEngine(a) => render(ops::build_engine(&(*a).into(), p)),
        Command::Compare(a) => render(ops::compare(&a.into(), p)),
        Command::Bench(a) => render(ops::bench(&a.into(), p)),
        Command::Inspect(a) => render(ops::inspect(&a.into(), p)),
        Command::Calibrate(a) => render(ops::calibrate(&(*a).into(), p)),
        Command::Convert(_) | Command::Passes(_) | Command::Doctor(_) => Err(OpsError::new(
            ErrorKind::Usage,
            "this command has no report to return; run it with the infopt command",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Quiet;
    impl Progress for Quiet {
        fn line(&self, _: &str, _: &str) {}
    }

    fn execute_quietly<const N: usize>(args: [&str; N]) -> Finished {
        execute(args, &Quiet)
    }

    #[test]
    fn a_bad_argument_is_the_commands_usage_line() {
        let f = execute_quietly(["optimize", "m.onnx", "--target", "gpu"]);
        let e = f.failure.unwrap();
        assert_eq!(e.kind, ErrorKind::Usage);
        assert_eq!(
            e.message,
            "invalid value 'gpu' for '--target <TARGET>'; possible values: portable, onnxruntime, tensorrt"
        );
        let e = execute_quietly(["optimize", "m.onnx", "--fp61"])
            .failure
            .unwrap();
        assert_eq!(
            e.message,
            "unexpected argument '--fp61' found; a similar argument exists: '--fp16'"
        );
        assert!(f.report.is_none());
    }

    #[test]
    fn a_missing_model_is_a_load_error_without_a_report() {
        let f = execute_quietly(["inspect", "/nonexistent/m.onnx"]);
        let e = f.failure.unwrap();
        assert_eq!(e.kind, ErrorKind::Load);
        assert_eq!(e.message, "/nonexistent/m.onnx does not exist");
    }

    #[test]
    fn commands_without_a_report_are_refused() {
        let e = execute_quietly(["passes", "list"]).failure.unwrap();
        assert_eq!(e.kind, ErrorKind::Usage);
    }
}
