//! Reports for CI: a concise Markdown summary fit for a pull-request comment (and for
//! `$GITHUB_STEP_SUMMARY`), and JUnit XML.
//!
//! Every command's report gives a [`CiSummary`] (`CommandReport::summary`); the
//! Markdown and JUnit renderings are built from it, so every command reports alike.

use std::fmt::Write;

use infopt_runtime::OutputAgreement;

use crate::gates::GateReport;

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
