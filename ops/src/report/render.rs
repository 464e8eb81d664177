//! Terminal table and Markdown renderings of a [`Report`].

use std::fmt::Write;

use comfy_table::presets::{ASCII_MARKDOWN, UTF8_FULL_CONDENSED};
use comfy_table::{CellAlignment, Table};

use super::Report;

fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
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

fn signed(d: i64) -> String {
    if d > 0 {
        format!("+{d}")
    } else {
        d.to_string()
    }
}

fn table(markdown: bool, header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(if markdown {
        ASCII_MARKDOWN
    } else {
        UTF8_FULL_CONDENSED
    });
    t.set_header(header.to_vec());
    t
}

fn right_align(t: &mut Table, from: usize) {
    let n = t.column_count();
    for i in from..n {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// A section heading: Markdown's `###`, or a plain line.
fn heading(s: &mut String, markdown: bool, title: &str) {
    if markdown {
        let _ = writeln!(s, "\n### {title}\n");
    } else {
        let _ = writeln!(s, "\n{title}");
    }
}

/// Renders the report; `markdown` selects Markdown tables and headings.
pub fn render(r: &Report, markdown: bool) -> String {
    let mut s = String::new();
    if markdown {
        let _ = writeln!(s, "## infopt optimize report\n");
    }
    summary(&mut s, r, markdown);
    ops_and_passes(&mut s, r, markdown);
    checks(&mut s, r, markdown);
    if let Some(h) = &r.half_precision {
        let _ = write!(s, "{}", h.render());
    }
    if let Some(q) = &r.int8 {
        int8(&mut s, q, markdown);
    }
    closing(&mut s, r, markdown);
    s
}

/// The paths and the before/after table (with latency when measured).
fn summary(s: &mut String, r: &Report, markdown: bool) {
    let out_path = r
        .output
        .as_ref()
        .map(|o| o.path.as_str())
        .unwrap_or("(not written)");
    let _ = writeln!(
        s,
        "{} -> {}  (pipeline {}, target {})",
        r.input.path, out_path, r.pipeline, r.target
    );

    let mut t = table(markdown, &["", "before", "after", "change"]);
    let before = &r.input;
    let row = |t: &mut Table, label: &str, b: u64, a: Option<u64>, fmt: &dyn Fn(u64) -> String| {
        let (after, change) = match a {
            Some(a) => {
                let pct = if b > 0 {
                    (a as f64 - b as f64) / b as f64 * 100.0
                } else {
                    0.0
                };
                (fmt(a), format!("{pct:+.1}%"))
            }
            None => ("-".into(), "-".into()),
        };
        t.add_row(vec![label.to_string(), fmt(b), after, change]);
    };
    let out = r.output.as_ref();
    row(
        &mut t,
        "nodes",
        before.nodes as u64,
        out.map(|o| o.nodes as u64),
        &|v| v.to_string(),
    );
    if before.subgraph_nodes > 0 || out.is_some_and(|o| o.subgraph_nodes > 0) {
        row(
            &mut t,
            "subgraph nodes",
            before.subgraph_nodes as u64,
            out.map(|o| o.subgraph_nodes as u64),
            &|v| v.to_string(),
        );
    }
    row(
        &mut t,
        "initializers",
        before.initializers as u64,
        out.map(|o| o.initializers as u64),
        &|v| v.to_string(),
    );
    row(
        &mut t,
        "parameters",
        before.parameters,
        out.map(|o| o.parameters),
        &|v| v.to_string(),
    );
    row(
        &mut t,
        "parameter bytes",
        before.parameter_bytes,
        out.map(|o| o.parameter_bytes),
        &bytes,
    );
    row(
        &mut t,
        "file size",
        before.file_bytes + before.external_bytes,
        out.map(|o| o.file_bytes + o.external_bytes),
        &bytes,
    );
    if let Some(l) = &r.latency {
        let _ = (l.before.median_ms * 1000.0) as u64;
        t.add_row(vec![
            format!("latency median ({})", l.backend.name),
            format!("{:.3} ms", l.before.median_ms),
            format!("{:.3} ms", l.after.median_ms),
            format!("{:.2}x", l.speedup),
        ]);
        t.add_row(vec![
            "latency p90".to_string(),
            format!("{:.3} ms", l.before.p90_ms),
            format!("{:.3} ms", l.after.p90_ms),
            String::new(),
        ]);
    }
    right_align(&mut t, 1);
    heading(s, markdown, "Summary");
    let _ = writeln!(s, "{t}");
}

/// The op counts that changed and what each pass did.
fn ops_and_passes(s: &mut String, r: &Report, markdown: bool) {
    let changed: Vec<_> = r.ops.iter().filter(|o| o.delta != 0).collect();
    heading(s, markdown, "Ops (changed)");
    if changed.is_empty() {
        let _ = writeln!(s, "no op counts changed");
    } else {
        let mut t = table(markdown, &["op", "before", "after", "change"]);
        for o in changed {
            t.add_row(vec![
                o.op.clone(),
                o.before.to_string(),
                o.after.to_string(),
                signed(o.delta),
            ]);
        }
        right_align(&mut t, 1);
        let _ = writeln!(s, "{t}");
    }

    heading(s, markdown, "Passes");
    let mut t = table(
        markdown,
        &[
            "pass",
            "group",
            "runs",
            "rewrites",
            "time ms",
            "nodes removed",
        ],
    );
    for p in &r.passes {
        t.add_row(vec![
            p.pass.clone(),
            p.group
                .map(|g| format!("fixed-point {g}"))
                .unwrap_or_default(),
            p.runs.to_string(),
            p.rewrites.to_string(),
            format!("{:.2}", p.time_ms),
            p.nodes_removed.to_string(),
        ]);
    }
    right_align(&mut t, 2);
    let _ = writeln!(s, "{t}");
}

/// Verification, the checks after each pass, the declined rewrites.
fn checks(s: &mut String, r: &Report, markdown: bool) {
    if let Some(v) = &r.verification {
        heading(s, markdown, "Verification");
        let shapes: Vec<String> = v
            .input_shapes
            .iter()
            .map(|(n, d)| {
                format!(
                    "{n}:{}",
                    d.iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join("x")
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "{}, inputs {}, criterion: {} (mismatches counted at rtol {:e}, atol {:e}), shapes {}: {}",
            v.backend.describe(),
            v.inputs,
            v.criterion.describe(),
            v.rtol,
            v.atol,
            shapes.join(" "),
            if v.passed { "PASSED" } else { "FAILED" }
        );
        for d in &v.defaulted_dims {
            let _ = writeln!(
                s,
                "note: {}[{}] ({}) was not fixed; verified with {}",
                d.input,
                d.axis,
                d.symbol.as_deref().unwrap_or("unnamed"),
                d.value
            );
        }
        let mut t = table(
            markdown,
            &["output", "max abs", "max rel", "cosine", "mismatches", "ok"],
        );
        for o in &v.outputs {
            t.add_row(vec![
                o.name.clone(),
                format!("{:.3e}", o.max_abs),
                format!("{:.3e}", o.max_rel),
                format!("{:.6}", o.cosine),
                format!("{}/{}", o.mismatches, o.elements),
                if o.within_tolerance {
                    "yes".into()
                } else {
                    "NO".into()
                },
            ]);
        }
        right_align(&mut t, 1);
        let _ = writeln!(s, "{t}");
    }

    if !r.pass_checks.is_empty() {
        heading(s, markdown, "Agreement after each pass");
        let mut t = table(markdown, &["pass", "max abs", "ok"]);
        for c in &r.pass_checks {
            t.add_row(vec![
                c.pass.clone(),
                format!("{:.3e}", c.max_abs),
                if c.passed { "yes".into() } else { "NO".into() },
            ]);
        }
        let _ = writeln!(s, "{t}");
    }
    if let Some(p) = &r.first_failing_pass {
        let _ = writeln!(s, "first failing pass: {p}");
        if let Some(t) = &r.first_diverging_tensor {
            let _ = writeln!(s, "first diverging tensor: {t}");
        }
    }

    if !r.declined.is_empty() {
        heading(s, markdown, "Declined rewrites");
        let mut t = table(markdown, &["pass", "reason", "count", "at"]);
        for d in &r.declined {
            let mut at = d.at.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
            if d.count > 3 {
                at.push_str(", ...");
            }
            t.add_row(vec![
                d.pass.clone(),
                d.reason.clone(),
                d.count.to_string(),
                at,
            ]);
        }
        let _ = writeln!(s, "{t}");
    }
}

/// Calibration, accuracy on held-out data, and what was kept in float.
fn int8(s: &mut String, q: &super::int8::Int8Report, markdown: bool) {
    if q.method == super::int8::GIVEN_RANGES {
        let _ = writeln!(
            s,
            "int8: ranges of {} tensors given in {} (not calibrated here), judged in {}",
            q.tensors_calibrated, q.calibration_data, q.backend
        );
    } else {
        let _ = writeln!(
            s,
            "int8: {} ranges of {} tensors from {} sample(s) of {} in {:.2} s ({})",
            q.method,
            q.tensors_calibrated,
            q.calibration_samples,
            q.calibration_data,
            q.calibration_seconds,
            q.backend
        );
    }
    if !q.methods_chosen.is_empty() && q.method == "auto" {
        let chosen: Vec<String> = q
            .methods_chosen
            .iter()
            .map(|(m, n)| format!("{m} {n}"))
            .collect();
        let _ = writeln!(
            s,
            "int8: range method per tensor: {} (per tensor in the JSON report)",
            chosen.join(", ")
        );
    }
    if let Some(h) = &q.held_out {
        held_out(s, q, h, markdown);
    }
    if !q.worst_layers.is_empty() {
        let mut t = table(markdown, &["layer (lowest SNR)", "op", "SNR dB", "cosine"]);
        for l in &q.worst_layers {
            t.add_row(vec![
                l.layer.clone(),
                l.op.clone(),
                format!("{:.1}", l.snr_db),
                format!("{:.5}", l.cosine),
            ]);
        }
        let _ = writeln!(s, "{t}");
    }
    if !q.kept_by_user.is_empty() {
        let _ = writeln!(
            s,
            "kept in float by the user's precision map: {}",
            q.kept_by_user.join(", ")
        );
    }
    for k in &q.kept_float {
        let alone = k
            .cosine_alone
            .map(|c| format!("; alone in INT8: {c:.5}"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "kept in float: {} '{}' ({}) (lowest output cosine {:.5} -> {:.5}{alone})",
            k.kind, k.layer, k.op, k.cosine_before, k.cosine_after
        );
    }
    if !q.candidates.is_empty() {
        const SHOWN: usize = 10;
        let mut t = table(
            markdown,
            &[
                "candidate (alone in INT8)",
                "kind",
                "op",
                "noise",
                "harm",
                "cosine",
            ],
        );
        for c in q.candidates.iter().take(SHOWN) {
            t.add_row(vec![
                c.candidate.clone(),
                c.kind.clone(),
                c.op.clone(),
                format!("{:.3e}", c.loss),
                format!("{:.3e}", c.harm),
                format!("{:.5}", c.cosine),
            ]);
        }
        let _ = writeln!(s, "{t}");
        if q.candidates.len() > SHOWN {
            let _ = writeln!(
                s,
                "({} more candidates measured: int8.candidates in --json)",
                q.candidates.len() - SHOWN
            );
        }
    }
}

/// The INT8 model's accuracy against the float model, per output.
fn held_out(
    s: &mut String,
    q: &super::int8::Int8Report,
    h: &infopt_verify::evaluate::HeldOut,
    markdown: bool,
) {
    let mut t = table(
        markdown,
        &[
            "output",
            "cosine",
            "top-1 / neighbour / label / score agreement / correlation",
            "max abs",
            "SNR dB",
        ],
    );
    for o in &h.outputs {
        t.add_row(vec![
            o.name.clone(),
            format!("{:.6}", o.cosine),
            {
                let kind = if h.neighbour_judged.contains(&o.name) {
                    "neighbours "
                } else if h.label_judged.contains(&o.name) {
                    "labels "
                } else {
                    ""
                };
                match (h.top1_agreement.get(&o.name), h.top1_expected.get(&o.name)) {
                    (Some(a), Some(e)) if h.on_calibration_samples => {
                        format!("{kind}{a:.4} (unseen: {e:.4} expected)")
                    }
                    (Some(a), _) => format!("{kind}{a:.4}"),
                    _ => match (
                        h.correlation.get(&o.name),
                        h.correlation_expected.get(&o.name),
                    ) {
                        (Some(r), Some(e)) if h.on_calibration_samples => {
                            format!("correlation {r:.5} (unseen: {e:.5} expected)")
                        }
                        (Some(r), _) => format!("correlation {r:.5}"),
                        _ => "-".into(),
                    },
                }
            },
            format!("{:.3e}", o.max_abs),
            format!("{:.1}", o.snr_db),
        ]);
    }
    for p in &h.parts {
        t.add_row(vec![
            p.agreement.name.clone(),
            format!("{:.6}", p.agreement.cosine),
            match (p.score_agreement, p.score_agreement_expected) {
                (Some(a), Some(e)) if h.on_calibration_samples => {
                    format!("scores {a:.4} (unseen: {e:.4} expected)")
                }
                (Some(a), _) => format!("scores {a:.4}"),
                _ => "-".into(),
            },
            "-".into(),
            format!("{:.1}", p.agreement.snr_db),
        ]);
    }
    let on = if h.on_calibration_samples {
        format!(
            "{} calibration sample(s): there were no held-out samples, so this is how the model fits the data it was calibrated on",
            h.samples
        )
    } else {
        format!(
            "{} held-out sample(s) (after the {} calibration samples)",
            h.samples, h.skipped
        )
    };
    let target = match (q.target_cosine, q.target_top1, h.metric, q.max_drop) {
        (_, _, Some(m), Some(d)) => format!(
            "; target: your metric at most {d} below float's: float {:.5}, INT8 {:.5}: {}",
            m.original,
            m.candidate,
            if q.target_met { "met" } else { "MISSED" }
        ),
        (Some(c), Some(t1), _, _) => format!(
            "; target cosine >= {c}, top-1 agreement >= {t1} for classifier outputs (nearest-neighbour agreement for embeddings){}: {}",
            match q.regression_outputs.is_empty() {
                true => String::new(),
                false => format!(
                    ", correlation across samples >= {c} for each value of the regression outputs ({})",
                    q.regression_outputs.join(", ")
                ),
            },
            if q.target_met { "met" } else { "MISSED" }
        ),
        _ => String::new(),
    };
    let _ = writeln!(s, "accuracy against the float model on {on}{target}:\n{t}");
    for p in &h.parts {
        let how = match p.part.kind {
            infopt_verify::parts::PartKind::Scores => format!(
                "scores in [0, 1], judged on the {} of {} positions where either model scores above {}: cosine, and the score both share above every threshold (1 - sum|a-b| / sum max(a,b)) against the top-1 target",
                p.positions,
                p.elements,
                infopt_verify::parts::ACTIVE_FRACTION
            ),
            infopt_verify::parts::PartKind::Values => {
                format!("judged over its {} elements", p.elements)
            }
        };
        let _ = writeln!(
            s,
            "int8: {} judged on its own against the target: {how}",
            p.agreement.name
        );
    }
}

/// Notes, warnings, where the pipeline stopped, the gates.
fn closing(s: &mut String, r: &Report, markdown: bool) {
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    if let Some(p) = &r.stopped_after {
        let _ = writeln!(s, "stopped after pass '{p}'");
    }
    if let Some(g) = &r.gates {
        if markdown {
            heading(s, markdown, "Release gates");
            let mut t = table(markdown, &["gate", "value", "threshold", "verdict"]);
            for x in &g.results {
                t.add_row(vec![
                    x.gate.clone(),
                    x.value.clone(),
                    x.threshold.clone(),
                    format!("{} {}", if x.passed { "pass" } else { "FAIL" }, x.message),
                ]);
            }
            let _ = writeln!(s, "{t}");
        } else {
            s.push_str(&crate::ci::render_gates_text(g));
        }
    }
}
