//! The entry point for front ends other than the command line (the Python
//! module): a command's options in (built from keywords by
//! [`infopt_ops::keywords`], no argv), its report out, rendered every way a
//! caller may show it and written to the `report=` files, with the failure
//! beside it. Nothing is printed; the progress lines go to the caller's
//! [`Progress`].

use std::path::PathBuf;

use crate::exit::{OpsError, OpsResult};
use infopt_ops::commands as ops;
use infopt_ops::keywords::{Call, Options};
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
    pub fn failed(e: OpsError) -> Finished {
        Finished {
            report: None,
            failure: Some(e),
        }
    }
}

/// The report rendered, and written to `reports` (as `--report` does, also
/// when a gate or verification failed: the files say what failed).
fn render<R: CommandReport>(
    outcome: OpsResult<Outcome<R>>,
    reports: &[PathBuf],
) -> OpsResult<Finished> {
    let outcome = outcome?;
    let r = &outcome.report;
    crate::report::write_files(r, reports, None)?;
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

/// Runs one call, its progress going to `progress`.
pub fn execute(call: &Call, progress: &dyn Progress) -> Finished {
    dispatch(call, progress).unwrap_or_else(Finished::failed)
}

fn dispatch(call: &Call, p: &dyn Progress) -> OpsResult<Finished> {
    // An unknown report kind fails before the work, as on the command line.
    crate::report::kinds(&call.reports)?;
    let files = &call.reports;
    match &call.options {
        Options::Optimize(o) => render(ops::optimize(o, p), files),
        Options::BuildEngine(o) => render(ops::build_engine(o, p), files),
        Options::Compare(o) => render(ops::compare(o, p), files),
        Options::Bench(o) => render(ops::bench(o, p), files),
        Options::Inspect(o) => render(ops::inspect(o, p), files),
        Options::Calibrate(o) => render(ops::calibrate(o, p), files),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::ErrorKind;

    struct Quiet;
    impl Progress for Quiet {
        fn line(&self, _: &str, _: &str) {}
    }

    fn run(command: &str, keywords: &str) -> Finished {
        match infopt_ops::keywords::parse(command, keywords) {
            Ok(call) => execute(&call, &Quiet),
            Err(e) => Finished::failed(e),
        }
    }

    #[test]
    fn a_missing_model_is_a_load_error_without_a_report() {
        let f = run("inspect", r#"{"model": "/nonexistent/m.onnx"}"#);
        let e = f.failure.unwrap();
        assert_eq!(e.kind, ErrorKind::Load);
        assert_eq!(e.message, "/nonexistent/m.onnx does not exist");
        assert!(f.report.is_none());
    }

    #[test]
    fn the_report_goes_to_the_report_files() {
        let dir = tempfile::tempdir().unwrap();
        let model = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/models/cnn_bn_relu.onnx"
        );
        let json = dir.path().join("r.json");
        let keywords =
            serde_json::json!({"model": model, "report": [json, dir.path().join("r.md")]});
        let f = run("inspect", &keywords.to_string());
        assert!(f.failure.is_none(), "{:?}", f.failure);
        let written = std::fs::read_to_string(&json).unwrap();
        assert_eq!(written.trim_end(), f.report.unwrap().json);
        assert!(dir.path().join("r.md").exists());
        let e = run("inspect", r#"{"model": "m.onnx", "report": "r.txt"}"#);
        assert_eq!(e.failure.unwrap().kind, ErrorKind::Usage);
    }
}
