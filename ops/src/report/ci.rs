//! Reports for CI: a concise Markdown summary fit for a pull-request comment (and for
//! `$GITHUB_STEP_SUMMARY`), and the writer of every `--report FILE` (.json, .md, .xml).
//!
//! Every command that runs gates (`optimize`, `compare`, `bench`) fills a [`CiSummary`];
//! the Markdown and JUnit renderings are built from it, so the three commands report
//! alike.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use infopt_runtime::OutputAgreement;

use crate::error::{OpsError, OpsResult, ErrorKind};
use crate::gates::GateReport;

/// The environment variable GitHub Actions sets to a file whose Markdown is shown on the
/// run's summary page.
pub const STEP_SUMMARY_ENV: &str = "GITHUB_STEP_SUMMARY";

/// A check that is not a gate (verification, output agreement), reported beside the gates.
#[derive(Debug, Clone)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    pub message: String,
}

/// What a CI summary says, whatever the command.
#[derive(Debug, Default)]
pub struct CiSummary<'a> {
    /// "infopt optimize".
    pub title: String,
    /// "`model.onnx` → `model.opt.onnx`".
    pub subject: String,
    /// Facts shown as a before/after table: label, before, after, change.
    pub facts: Vec<[String; 4]>,
    pub checks: Vec<Check>,
    pub gates: Option<&'a GateReport>,
    /// Changed op counts: op, before, after.
    pub ops: Vec<(String, usize, usize)>,
    pub agreement: &'a [OutputAgreement],
    /// One line about latency.
    pub latency: Option<String>,
    /// The full report, Markdown, folded away under the summary.
    pub details: Option<String>,
}

impl CiSummary<'_> {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed) && self.gates.is_none_or(|g| g.passed)
    }
}

/// Escapes text for a Markdown table cell.
fn cell(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

fn mark(ok: bool) -> &'static str {
    if ok { "✅" } else { "❌" }
}

/// At most this many changed ops are listed; the rest are counted.
const MAX_OP_ROWS: usize = 15;

pub fn render_markdown(s: &CiSummary<'_>) -> String {
    let mut out = String::new();
    let ok = s.passed();
    let _ = writeln!(out, "## {} {}: {}\n", mark(ok), s.title, s.subject);
    let mut parts: Vec<String> = Vec::new();
    if let Some(g) = s.gates {
        let failed = g.results.iter().filter(|r| !r.passed).count();
        parts.push(if failed == 0 {
            format!("all {} gates passed", g.results.len())
        } else {
            format!("{failed} of {} gates failed", g.results.len())
        });
    }
    for c in &s.checks {
        parts.push(format!(
            "{} {}",
            c.name,
            if c.passed { "passed" } else { "FAILED" }
        ));
    }
    let _ = writeln!(
        out,
        "**{}**{}{}\n",
        if ok { "passed" } else { "failed" },
        if parts.is_empty() { "" } else { ": " },
        parts.join(", ")
    );
    if let Some(g) = s.gates
        && !g.results.is_empty()
    {
        let _ = writeln!(out, "| gate | value | threshold | verdict |");
        let _ = writeln!(out, "|---|---:|---:|---|");
        for r in &g.results {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} {} |",
                cell(&r.gate),
                cell(&r.value),
                cell(&r.threshold),
                mark(r.passed),
                cell(&r.message)
            );
        }
        let _ = writeln!(out);
    }
    for c in s.checks.iter().filter(|c| !c.passed) {
        let _ = writeln!(out, "{} {}: {}\n", mark(false), c.name, c.message);
    }
    if !s.facts.is_empty() {
        let _ = writeln!(out, "| | before | after | change |");
        let _ = writeln!(out, "|---|---:|---:|---:|");
        for [a, b, c, d] in &s.facts {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                cell(a),
                cell(b),
                cell(c),
                cell(d)
            );
        }
        let _ = writeln!(out);
    }
    if !s.ops.is_empty() {
        let _ = writeln!(out, "| op | before | after | change |");
        let _ = writeln!(out, "|---|---:|---:|---:|");
        for (op, b, a) in s.ops.iter().take(MAX_OP_ROWS) {
            let d = *a as i64 - *b as i64;
            let _ = writeln!(
                out,
                "| `{}` | {b} | {a} | {}{d} |",
                cell(op),
                if d > 0 { "+" } else { "" }
            );
        }
        if s.ops.len() > MAX_OP_ROWS {
            let _ = writeln!(out, "| … {} more | | | |", s.ops.len() - MAX_OP_ROWS);
        }
        let _ = writeln!(out);
    }
    if !s.agreement.is_empty() {
        let _ = writeln!(
            out,
            "| output | max abs | max rel | cosine | within tolerance |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---|");
        for o in s.agreement {
            let _ = writeln!(
                out,
                "| `{}` | {:.3e} | {:.3e} | {:.6} | {} |",
                cell(&o.name),
                o.max_abs,
                o.max_rel,
                o.cosine,
                mark(o.within_tolerance)
            );
        }
        let _ = writeln!(out);
    }
    if let Some(l) = &s.latency {
        let _ = writeln!(out, "Latency: {l}\n");
    }
    if let Some(d) = &s.details {
        let _ = writeln!(
            out,
            "<details><summary>Full report</summary>\n\n{d}\n</details>"
        );
    }
    out
}

/// Escapes text for XML attributes and content; drops characters XML 1.0 forbids.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML: one test case per gate (and per other check), a `failure` element with the
/// message for each failed one.
pub fn render_junit(s: &CiSummary<'_>) -> String {
    struct Case<'a> {
        class: &'a str,
        name: &'a str,
        passed: bool,
        message: &'a str,
        detail: String,
    }
    let mut cases: Vec<Case> = Vec::new();
    for c in &s.checks {
        cases.push(Case {
            class: "infopt.check",
            name: &c.name,
            passed: c.passed,
            message: &c.message,
            detail: c.message.clone(),
        });
    }
    if let Some(g) = s.gates {
        for r in &g.results {
            cases.push(Case {
                class: match r.kind {
                    crate::gates::GateKind::Accuracy => "infopt.gate.accuracy",
                    crate::gates::GateKind::Latency => "infopt.gate.latency",
                    crate::gates::GateKind::Size => "infopt.gate.size",
                    crate::gates::GateKind::Structure => "infopt.gate.structure",
                },
                name: &r.gate,
                passed: r.passed,
                message: &r.message,
                detail: format!("value {} threshold {}: {}", r.value, r.threshold, r.message),
            });
        }
    }
    let failures = cases.iter().filter(|c| !c.passed).count();
    let suite = xml_escape(&format!("{}: {}", s.title, s.subject.replace('`', "")));
    let mut out = String::new();
    let _ = writeln!(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    let _ = writeln!(
        out,
        "<testsuites name=\"infopt\" tests=\"{}\" failures=\"{failures}\" errors=\"0\">",
        cases.len()
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{suite}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">",
        cases.len()
    );
    for c in &cases {
        let head = format!(
            "    <testcase classname=\"{}\" name=\"{}\"",
            c.class,
            xml_escape(c.name)
        );
        if c.passed {
            let _ = writeln!(out, "{head}/>");
        } else {
            let _ = writeln!(out, "{head}>");
            let _ = writeln!(
                out,
                "      <failure message=\"{}\" type=\"{}\">{}</failure>",
                xml_escape(c.message),
                if c.class == "infopt.check" {
                    "check"
                } else {
                    "gate"
                },
                xml_escape(&c.detail)
            );
            let _ = writeln!(out, "    </testcase>");
        }
    }
    let _ = writeln!(out, "  </testsuite>");
    let _ = writeln!(out, "</testsuites>");
    out
}

/// The kinds of report file, by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportKind {
    Json,
    Markdown,
    JUnit,
}

/// The kind of each `--report FILE`; an unknown extension is a usage error (checked
/// before any work).
pub fn report_kinds(paths: &[PathBuf]) -> OpsResult<Vec<(PathBuf, ReportKind)>> {
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

/// Writes every `--report` file (atomically) and appends the Markdown to
/// `$GITHUB_STEP_SUMMARY` when it is set. `json` is the command's own JSON report.
pub fn write_reports(
    paths: &[PathBuf],
    json: &str,
    summary: &CiSummary<'_>,
    step_summary: Option<&Path>,
) -> OpsResult {
    for (path, kind) in report_kinds(paths)? {
        let text = match kind {
            ReportKind::Json => format!("{json}\n"),
            ReportKind::Markdown => render_markdown(summary),
            ReportKind::JUnit => render_junit(summary),
        };
        infopt_ir::save::write_atomically(&path, |w| std::io::Write::write_all(w, text.as_bytes()))
            .map_err(OpsError::from_ir)?;
    }
    if let Some(path) = step_summary {
        use std::io::Write as _;
        let text = render_markdown(summary);
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

/// Prints a gated command's report (its JSON with `--json`, else its text,
/// gate table included) and writes its `--report` files and the step summary:
/// the output half of `bench` and `compare`.
pub fn emit_gated<'a, R: crate::outcome::CommandReport>(
    report: &'a R,
    json: bool,
    paths: &[PathBuf],
    summary: impl FnOnce(&'a R) -> CiSummary<'a>,
) -> OpsResult {
    if json {
        println!("{}", report.json()?);
    } else {
        print!("{}", report.text());
    }
    let step_summary = step_summary_path();
    if !paths.is_empty() || step_summary.is_some() {
        write_reports(
            paths,
            &report.json()?,
            &summary(report),
            step_summary.as_deref(),
        )?;
    }
    Ok(())
}

/// `$GITHUB_STEP_SUMMARY`, when set and not empty.
pub fn step_summary_path() -> Option<PathBuf> {
    std::env::var_os(STEP_SUMMARY_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The gate table for the terminal.
pub fn render_gates_text(g: &GateReport) -> String {
    use comfy_table::presets::UTF8_FULL_CONDENSED;
    let mut t = comfy_table::Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["gate", "value", "threshold", "verdict"]);
    for r in &g.results {
        t.add_row(vec![
            r.gate.clone(),
            r.value.clone(),
            r.threshold.clone(),
            format!("{} {}", if r.passed { "pass" } else { "FAIL" }, r.message),
        ]);
    }
    let failed = g.results.iter().filter(|r| !r.passed).count();
    format!(
        "\nRelease gates: {}\n{t}\n",
        if failed == 0 {
            format!("all {} passed", g.results.len())
        } else {
            format!("{failed} of {} FAILED", g.results.len())
        }
    )
}

/// `optimize`'s output: the table (or JSON) on stdout, the `--report` files, and the
/// step summary.
pub fn emit_optimize(report: &super::Report, json: bool, paths: &[PathBuf]) -> OpsResult {
    let text =
        serde_json::to_string_pretty(report).map_err(|e| OpsError::new(ErrorKind::Internal, e))?;
    if json {
        println!("{text}");
    } else {
        print!("{}", super::render::render(report, false));
    }
    let step_summary = step_summary_path();
    if !paths.is_empty() || step_summary.is_some() {
        let summary = super::summaries::optimize(report);
        write_reports(paths, &text, &summary, step_summary.as_deref())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::{GateKind, GateResult};

    #[test]
    fn junit_is_escaped_and_counts_failures() {
        let g = GateReport::new(
            vec![
                GateResult {
                    gate: "max_abs@a<b>&\"c\"".into(),
                    kind: GateKind::Accuracy,
                    threshold: "1e-3".into(),
                    value: "2e-3".into(),
                    measured: Some(2e-3),
                    passed: false,
                    message: "2e-3 > 1e-3 \u{1}".into(),
                },
                GateResult {
                    gate: "max_nodes".into(),
                    kind: GateKind::Structure,
                    threshold: "10".into(),
                    value: "3".into(),
                    measured: Some(3.0),
                    passed: true,
                    message: "3 <= 10".into(),
                },
            ],
            None,
        );
        let s = CiSummary {
            title: "infopt compare".into(),
            subject: "`a.onnx` → `b.onnx`".into(),
            gates: Some(&g),
            ..Default::default()
        };
        let x = render_junit(&s);
        assert!(x.contains("tests=\"2\" failures=\"1\""), "{x}");
        assert!(
            x.contains("name=\"max_abs@a&lt;b&gt;&amp;&quot;c&quot;\""),
            "{x}"
        );
        assert!(!x.contains('\u{1}'));
        let md = render_markdown(&s);
        assert!(md.starts_with("## ❌ infopt compare"), "{md}");
        assert!(md.contains("1 of 2 gates failed"), "{md}");
    }
}
