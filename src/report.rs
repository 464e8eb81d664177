//! The one emitter of every command's report: the table (or JSON with
//! `--json`) on stdout, each `--report FILE` in the format its extension
//! names (.json, .md, .xml for JUnit), and the Markdown appended to
//! `$GITHUB_STEP_SUMMARY` when it is set.

use std::path::{Path, PathBuf};

use infopt_ops::ci::{render_junit, render_markdown};
use infopt_ops::outcome::CommandReport;

use crate::exit::{ErrorKind, OpsError, OpsResult};

/// The environment variable GitHub Actions sets to a file whose Markdown is
/// shown on the run's summary page.
pub const STEP_SUMMARY_ENV: &str = "GITHUB_STEP_SUMMARY";

/// The kinds of report file, by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportKind {
    Json,
    Markdown,
    JUnit,
}

/// The kind of each `--report FILE`; an unknown extension is a usage error
/// (checked before the command starts).
pub fn kinds(paths: &[PathBuf]) -> OpsResult<Vec<(PathBuf, ReportKind)>> {
    paths
        .iter()
        .map(|p| {
            let kind = match p
                .extension()
                .and_then(|e| e.to_str())
                .map(str::to_ascii_lowercase)
                .as_deref()
            {
                Some("json") => ReportKind::Json,
                Some("md") | Some("markdown") => ReportKind::Markdown,
                Some("xml") => ReportKind::JUnit,
                _ => {
                    return Err(OpsError::usage(format!(
                        "--report {}: name the file .json (JSON), .md (Markdown) or .xml (JUnit XML)",
                        p.display()
                    )));
                }
            };
            Ok((p.clone(), kind))
        })
        .collect()
}

/// A report file's text.
pub fn render<R: CommandReport>(report: &R, kind: ReportKind) -> OpsResult<String> {
    Ok(match kind {
        ReportKind::Json => format!("{}\n", report.json()?),
        ReportKind::Markdown => render_markdown(&report.summary()),
        ReportKind::JUnit => render_junit(&report.summary()),
    })
}

/// Prints the report and writes its files: the output half of every command.
pub fn emit<R: CommandReport>(report: &R, json: bool, paths: &[PathBuf]) -> OpsResult {
    if json {
        println!("{}", report.json()?);
    } else {
        print!("{}", report.text());
    }
    write_files(report, paths, step_summary_path().as_deref())
}

/// Writes every `--report` file (atomically) and appends the Markdown
/// summary to `step_summary`.
pub fn write_files<R: CommandReport>(
    report: &R,
    paths: &[PathBuf],
    step_summary: Option<&Path>,
) -> OpsResult {
    for (path, kind) in kinds(paths)? {
        let text = render(report, kind)?;
        infopt_ir::save::write_atomically(&path, |w| std::io::Write::write_all(w, text.as_bytes()))
            .map_err(OpsError::from_ir)?;
    }
    if let Some(path) = step_summary {
        use std::io::Write as _;
        let text = render_markdown(&report.summary());
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|e| {
                OpsError::new(
                    ErrorKind::Write,
                    format!(
                        "cannot append to ${STEP_SUMMARY_ENV} {}: {e}",
                        path.display()
                    ),
                )
            })?;
    }
    Ok(())
}

/// `$GITHUB_STEP_SUMMARY`, when set and not empty.
fn step_summary_path() -> Option<PathBuf> {
    std::env::var_os(STEP_SUMMARY_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}
