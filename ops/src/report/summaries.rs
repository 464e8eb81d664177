//! The CI summary ([`CiSummary`]) of each command's report.

use super::Report;
use crate::ci::{Check, CiSummary};
use crate::gates::GateReport;

fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn change(before: u64, after: u64) -> String {
    if before == 0 {
        return "-".into();
    }
    format!(
        "{:+.1}%",
        (after as f64 - before as f64) / before as f64 * 100.0
    )
}

/// One line about a latency gate's evidence, or the before/after medians.
pub fn latency_line(g: Option<&GateReport>, fallback: Option<(&str, f64, f64)>) -> Option<String> {
    if let Some(e) = g.and_then(|g| g.latency.as_ref()) {
        return Some(format!(
            "{} {:.3} ms ({}) → {:.3} ms, {} ({}, {} runs each{})",
            e.statistic,
            e.reference_statistic_ms,
            e.reference,
            e.candidate_statistic_ms,
            e.verdict,
            e.backend,
            e.runs,
            if e.paired { ", interleaved" } else { "" }
        ));
    }
    fallback.map(|(backend, before, after)| {
        format!(
            "median {before:.3} ms → {after:.3} ms ({:.2}x, {backend})",
            if after > 0.0 { before / after } else { 0.0 }
        )
    })
}

pub fn optimize(r: &Report) -> CiSummary<'_> {
    let out = r.output.as_ref();
    let subject = format!(
        "`{}` → `{}`",
        r.input.path,
        out.map(|o| o.path.as_str()).unwrap_or("(not written)")
    );
    let mut facts = Vec::new();
    let b = &r.input;
    let nodes_b = (b.nodes + b.subgraph_nodes) as u64;
    let size_b = b.file_bytes + b.external_bytes;
    match out {
        Some(o) => {
            let nodes_a = (o.nodes + o.subgraph_nodes) as u64;
            let size_a = o.file_bytes + o.external_bytes;
            facts.push([
                "nodes".into(),
                nodes_b.to_string(),
                nodes_a.to_string(),
                change(nodes_b, nodes_a),
            ]);
            facts.push([
                "file size".into(),
                bytes(size_b),
                bytes(size_a),
                change(size_b, size_a),
            ]);
        }
        None => {
            facts.push(["nodes".into(), nodes_b.to_string(), "-".into(), "-".into()]);
        }
    }
    let mut checks = Vec::new();
    if let Some(v) = &r.verification {
        checks.push(Check {
            name: "verification".into(),
            passed: v.passed,
            message: format!(
                "{} outputs against the original in {} (rtol {:e}, atol {:e}){}",
                v.outputs.len(),
                v.backend.name,
                v.rtol,
                v.atol,
                if v.passed {
                    String::new()
                } else {
                    ": outside tolerance; the output was not written".into()
                }
            ),
        });
    }
    CiSummary {
        title: "infopt optimize".into(),
        subject,
        facts,
        checks,
        gates: r.gates.as_ref(),
        ops: r
            .ops
            .iter()
            .filter(|o| o.delta != 0)
            .map(|o| (o.op.clone(), o.before, o.after))
            .collect(),
        agreement: r
            .verification
            .as_ref()
            .map(|v| v.outputs.as_slice())
            .unwrap_or(&[]),
        latency: latency_line(
            r.gates.as_ref(),
            r.latency.as_ref().map(|l| {
                (
                    l.backend.name.as_str(),
                    l.before.median_ms,
                    l.after.median_ms,
                )
            }),
        ),
        details: Some(super::render::render(r, true)),
    }
}

impl crate::outcome::CommandReport for Report {
    fn command(&self) -> &'static str {
        "optimize"
    }
    fn text(&self) -> String {
        super::render::render(self, false)
    }
    fn markdown(&self) -> String {
        super::render::render(self, true)
    }
    fn summary(&self) -> crate::ci::CiSummary<'_> {
        optimize(self)
    }
}
