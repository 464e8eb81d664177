//! The build-engine report: data first (JSON with a schema version), rendered as a
//! terminal table or Markdown.

use std::fmt::Write;

use comfy_table::presets::{ASCII_MARKDOWN, UTF8_FULL_CONDENSED};
use comfy_table::{CellAlignment, Table};
use infopt_runtime::Latency;
use infopt_runtime::tensorrt::{
    EngineMemory, EnginePrecision, LayerInfo, LayerSource, Profile, Trt10Precision,
};
use infopt_verify::{BackendInfo, Verification};
use serde::Serialize;

use super::realized::{Outcome, RealizedReport};
use crate::ci::{Check, CiSummary};
use crate::report::{DeclinedGroup, ModelFacts, OpCount, PassStat};

/// Bumped on incompatible changes to the JSON layout. 2: engine.flavor, gpu,
/// compute_capabilities, layer_source, memory, realized_precision, gpu_latency; per-layer
/// tensors and fused ONNX nodes; trtexec[].flavor.
pub const ENGINE_REPORT_SCHEMA_VERSION: u32 = 2;

#[derive(Serialize, Debug, Clone)]
pub struct EngineReport {
    pub schema_version: u32,
    pub infopt_version: String,
    pub pipeline: String,
    pub target: String,
    pub input: ModelFacts,
    /// The rewritten (strongly typed) ONNX, when `--emit-onnx` wrote it.
    pub onnx: Option<ModelFacts>,
    /// Its float32 sibling for TensorRT 10's builder flags, when one was written.
    pub onnx_fp32: Option<ModelFacts>,
    pub ops: Vec<OpCount>,
    pub passes: Vec<PassStat>,
    pub declined: Vec<DeclinedGroup>,
    pub verification: Option<Verification>,
    /// Calibration and held-out accuracy of an INT8 pipeline.
    pub int8: Option<crate::int8::Int8Report>,
    /// With --fp16/--bf16 and verification: the automatic float32 islands.
    pub half_precision: Option<crate::half::HalfReport>,
    pub settings: BuildSettings,
    pub engine: Option<EngineFacts>,
    pub latency: Option<EngineLatency>,
    /// The equivalent trtexec commands (`--emit-onnx`).
    pub trtexec: Vec<TrtexecCommand>,
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
    pub total_time_ms: f64,
}

/// What TensorRT is asked for.
#[derive(Serialize, Debug, Clone)]
pub struct BuildSettings {
    pub workspace_bytes: Option<u64>,
    pub builder_opt_level: Option<u8>,
    pub profiles: Vec<Profile>,
    pub timing_cache: Option<String>,
    /// TensorRT 10 without `--strongly-typed`: the builder flags and layer overrides.
    pub trt10: Trt10Precision,
}

/// The GPUs a TensorRT-RTX engine is compiled for when first loaded.
#[derive(Serialize, Debug, Clone)]
pub struct ComputeTargets {
    /// Given with --compute-capability (else TensorRT-RTX's default set).
    pub explicit: bool,
    pub sm: Vec<u32>,
}

#[derive(Serialize, Debug, Clone)]
pub struct EngineFacts {
    pub path: String,
    pub bytes: u64,
    pub tensorrt_version: String,
    /// "TensorRT 11", "TensorRT-RTX", ...
    pub flavor: String,
    /// TensorRT-RTX only.
    pub compute_capabilities: Option<ComputeTargets>,
    /// Whether a GPU was present (without one the engine is never loaded).
    pub gpu: bool,
    /// Where the layer table came from: the engine inspector or the builder's log.
    pub layer_source: LayerSource,
    /// The builder's memory totals (scratch, weights, activations).
    pub memory: Option<EngineMemory>,
    /// Realized precision per placed ONNX node against the request.
    pub realized_precision: Option<RealizedReport>,
    pub strongly_typed: bool,
    pub build_time_ms: f64,
    pub layers: Vec<LayerInfo>,
    /// Layer count per precision.
    pub precisions: Vec<(EnginePrecision, usize)>,
    pub tensorrt_warnings: Vec<String>,
    pub timing_cache_written: Option<String>,
}

#[derive(Serialize, Debug, Clone)]
pub struct EngineLatency {
    /// GPU time of `enqueueV3` (CUDA events), at the profile's opt shapes.
    pub tensorrt: Latency,
    /// The input ONNX model in ONNX Runtime at the same shapes, when it ran.
    pub onnx: Option<OnnxLatency>,
    /// onnx.median / tensorrt.median.
    pub speedup: Option<f64>,
}

#[derive(Serialize, Debug, Clone)]
pub struct OnnxLatency {
    pub backend: BackendInfo,
    pub latency: Latency,
}

#[derive(Serialize, Debug, Clone)]
pub struct TrtexecCommand {
    pub tensorrt_major: u32,
    /// "TensorRT 11", "TensorRT 10", "TensorRT-RTX" (its command is `tensorrt_rtx`).
    pub flavor: String,
    /// "strongly typed" or "builder flags".
    pub mode: String,
    pub command: String,
}

fn table(markdown: bool, header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(if markdown {
        ASCII_MARKDOWN
    } else {
        UTF8_FULL_CONDENSED
    });
    t.set_header(header.to_vec());
    for i in 1..header.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

fn ms(l: &Latency) -> String {
    format!(
        "{:.3} ms (p90 {:.3}, {} runs)",
        l.median_ms, l.p90_ms, l.runs
    )
}

/// At most this many layers are listed in the table (all are in the JSON).
const MAX_LAYER_ROWS: usize = 40;

pub fn render(r: &EngineReport, markdown: bool) -> String {
    let mut s = String::new();
    if markdown {
        let _ = writeln!(s, "## infopt build-engine report\n");
    }
    let target = match (&r.engine, &r.onnx) {
        (Some(e), _) => e.path.clone(),
        (None, Some(o)) => format!("{} (ONNX for TensorRT; no engine built)", o.path),
        (None, None) => "(nothing written)".into(),
    };
    let _ = writeln!(
        s,
        "{} -> {}  (pipeline {}, target {})",
        r.input.path, target, r.pipeline, r.target
    );
    passes_and_checks(&mut s, r, markdown);
    if let Some(e) = &r.engine {
        engine(&mut s, e, markdown);
    }
    realized(&mut s, r, markdown);
    closing(&mut s, r, markdown);
    s
}

/// A section heading: Markdown's `###`, or a plain line.
fn heading(s: &mut String, markdown: bool, title: &str) {
    if markdown {
        let _ = writeln!(s, "\n### {title}\n");
    } else {
        let _ = writeln!(s, "\n{title}");
    }
}

/// What the passes changed, the verification, half and INT8 precision.
fn passes_and_checks(s: &mut String, r: &EngineReport, markdown: bool) {
    let changed: Vec<&OpCount> = r.ops.iter().filter(|o| o.delta != 0).collect();
    if !changed.is_empty() {
        heading(s, markdown, "Ops changed by the passes");
        let mut t = table(markdown, &["op", "before", "after"]);
        for o in changed {
            t.add_row(vec![
                o.op.clone(),
                o.before.to_string(),
                o.after.to_string(),
            ]);
        }
        let _ = writeln!(s, "{t}");
    }
    let ran: Vec<&PassStat> = r.passes.iter().filter(|p| p.rewrites > 0).collect();
    if !ran.is_empty() {
        heading(s, markdown, "Passes that changed the model");
        let mut t = table(markdown, &["pass", "rewrites", "nodes removed"]);
        for p in ran {
            t.add_row(vec![
                p.pass.clone(),
                p.rewrites.to_string(),
                p.nodes_removed.to_string(),
            ]);
        }
        let _ = writeln!(s, "{t}");
    }
    if let Some(v) = &r.verification {
        let worst = infopt_verify::worst_abs(&v.outputs);
        let _ = writeln!(
            s,
            "\nverification in {}: {} (max abs {worst:.3e}; {})",
            v.backend.name,
            if v.passed { "passed" } else { "FAILED" },
            v.criterion.describe()
        );
    }
    if let Some(h) = &r.half_precision {
        let _ = write!(s, "{}", h.render());
    }
    if let Some(q) = &r.int8 {
        let held = q
            .held_out
            .as_ref()
            .map(|h| {
                let worst = h.outputs.iter().map(|o| o.cosine).fold(1.0, f64::min);
                format!(", held-out cosine {worst:.5} on {} samples", h.samples)
            })
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "INT8: {} ranges from {} samples ({}){held}",
            q.method, q.calibration_samples, q.calibration_data
        );
        if !q.kept_by_user.is_empty() {
            let _ = writeln!(
                s,
                "INT8: kept in float by the user's precision map: {}",
                q.kept_by_user.join(", ")
            );
        }
        let search: Vec<&str> = q.kept_float.iter().map(|k| k.layer.as_str()).collect();
        if !search.is_empty() {
            let _ = writeln!(
                s,
                "INT8: kept in float by the search: {}",
                search.join(", ")
            );
        }
    }
}

/// The engine: what was built, its memory and its layers.
fn engine(s: &mut String, e: &EngineFacts, markdown: bool) {
    heading(s, markdown, "Engine");
    let _ = writeln!(
        s,
        "{} {}{}, {} bytes, built in {:.0} ms, {} kernels{}",
        e.flavor,
        e.tensorrt_version,
        if e.strongly_typed {
            " (strongly typed)"
        } else {
            ""
        },
        e.bytes,
        e.build_time_ms,
        e.layers.len(),
        match e.layer_source {
            LayerSource::BuildLog => " (from the builder's log: no GPU, the engine was not loaded)",
            LayerSource::Inspector => " (from the engine inspector)",
            LayerSource::None => " (TensorRT reported no layer table)",
        }
    );
    if let Some(c) = &e.compute_capabilities {
        let list: Vec<String> = c.sm.iter().map(u32::to_string).collect();
        let _ = writeln!(
            s,
            "compute capabilities: {}{}",
            list.join(", "),
            if c.explicit {
                ""
            } else {
                " (TensorRT-RTX's default)"
            }
        );
    }
    if let Some(m) = &e.memory {
        let f = |v: Option<u64>| v.map_or("?".to_string(), |b| format!("{b} B"));
        let _ = writeln!(
            s,
            "memory: scratch {}, weights {}, activations {}",
            f(m.max_scratch_bytes),
            f(m.weights_bytes),
            f(m.activation_bytes)
        );
    }
    if !e.gpu {
        let _ = writeln!(s, "GPU latency: not measured: no GPU");
    }
    let mut t = table(markdown, &["precision", "layers"]);
    for (p, n) in &e.precisions {
        t.add_row(vec![p.to_string(), n.to_string()]);
    }
    let _ = writeln!(s, "{t}");
    let has_tensors = e
        .layers
        .iter()
        .any(|l| !l.onnx_nodes.is_empty() || !l.inputs.is_empty());
    let mut t = if has_tensors {
        table(
            markdown,
            &[
                "kernel",
                "type",
                "precision",
                "in / weights / out",
                "fused ONNX nodes",
            ],
        )
    } else {
        table(markdown, &["layer", "type", "precision"])
    };
    for l in e.layers.iter().take(MAX_LAYER_ROWS) {
        let mut row = vec![
            l.name.clone(),
            l.layer_type.clone().unwrap_or_default(),
            l.precision.to_string(),
        ];
        if has_tensors {
            let types = |ts: &[infopt_runtime::tensorrt::TensorInfo]| {
                let mut v: Vec<String> = Vec::new();
                for t in ts {
                    let d = t.datatype.to_string();
                    if !v.contains(&d) {
                        v.push(d);
                    }
                }
                if v.is_empty() {
                    "-".into()
                } else {
                    v.join(",")
                }
            };
            row.push(format!(
                "{} / {} / {}",
                types(&l.inputs),
                types(&l.constants),
                types(&l.outputs)
            ));
            row.push(l.onnx_nodes.join(", "));
        }
        t.add_row(row);
    }
    let _ = writeln!(s, "{t}");
    if e.layers.len() > MAX_LAYER_ROWS {
        let _ = writeln!(
            s,
            "... {} more layers (all in --json / --report)",
            e.layers.len() - MAX_LAYER_ROWS
        );
    }
}

/// The precision each placed node got against the request.
fn realized(s: &mut String, r: &EngineReport, markdown: bool) {
    if let Some(rp) = r
        .engine
        .as_ref()
        .and_then(|e| e.realized_precision.as_ref())
    {
        heading(s, markdown, "Realized precision vs request");
        let _ = writeln!(
            s,
            "{} placed nodes: {} match, {} mismatch, {} not observable ({:.1}% of the observable ones match)",
            rp.placed,
            rp.matched,
            rp.mismatched,
            rp.not_observable,
            rp.match_rate() * 100.0
        );
        let mut t = table(
            markdown,
            &["requested", "placed", "match", "mismatch", "not observable"],
        );
        for c in &rp.per_precision {
            t.add_row(vec![
                c.requested.clone(),
                c.placed.to_string(),
                c.matched.to_string(),
                c.mismatched.to_string(),
                c.not_observable.to_string(),
            ]);
        }
        let _ = writeln!(s, "{t}");
        let listed: Vec<_> = rp
            .nodes
            .iter()
            .filter(|n| n.outcome == Outcome::Mismatch)
            .chain(
                rp.nodes
                    .iter()
                    .filter(|n| n.outcome == Outcome::NotObservable),
            )
            .take(MAX_LAYER_ROWS)
            .collect();
        if !listed.is_empty() {
            let mut t = table(
                markdown,
                &["node", "op", "requested", "realized", "outcome", "why"],
            );
            for n in listed {
                t.add_row(vec![
                    n.node.clone(),
                    n.op.clone(),
                    n.requested.clone(),
                    n.realized.clone(),
                    match n.outcome {
                        Outcome::Match => "match",
                        Outcome::Mismatch => "MISMATCH",
                        Outcome::NotObservable => "not observable",
                    }
                    .to_string(),
                    n.reason.clone().unwrap_or_default(),
                ]);
            }
            let _ = writeln!(s, "{t}");
        }
    }
}

/// Latency, the trtexec commands, notes and warnings.
fn closing(s: &mut String, r: &EngineReport, markdown: bool) {
    if let Some(l) = &r.latency {
        heading(s, markdown, "Latency");
        let _ = writeln!(s, "TensorRT engine (GPU time): {}", ms(&l.tensorrt));
        if let Some(o) = &l.onnx {
            let _ = writeln!(
                s,
                "input ONNX in {} {}: {}",
                o.backend.name,
                o.backend.describe(),
                ms(&o.latency)
            );
        }
        if let Some(x) = l.speedup {
            let _ = writeln!(s, "speedup: {x:.2}x");
        }
    }
    if !r.trtexec.is_empty() {
        heading(s, markdown, "Equivalent trtexec commands");
        for c in &r.trtexec {
            let _ = writeln!(s, "# {} ({})", c.flavor, c.mode);
            let _ = writeln!(s, "{}", c.command);
        }
    }
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
}

impl crate::outcome::CommandReport for EngineReport {
    fn command(&self) -> &'static str {
        "build-engine"
    }
    fn text(&self) -> String {
        render(self, false)
    }
    fn markdown(&self) -> String {
        render(self, true)
    }
    fn summary(&self) -> CiSummary<'_> {
        summary(self)
    }
}

/// The CI view: what was built from what, the verification of the
/// rewritten ONNX and the realized precisions as checks, the full report
/// folded below.
fn summary(r: &EngineReport) -> CiSummary<'_> {
    let built = r
        .engine
        .as_ref()
        .map(|e| e.path.as_str())
        .or(r.onnx.as_ref().map(|o| o.path.as_str()))
        .unwrap_or("(nothing written)");
    let mut checks = Vec::new();
    if let Some(v) = &r.verification {
        checks.push(Check {
            name: "verification".into(),
            passed: v.passed,
            message: format!(
                "worst max abs {:.3e} over {} outputs",
                infopt_verify::worst_abs(&v.outputs),
                v.outputs.len()
            ),
        });
    }
    CiSummary {
        title: "infopt build-engine".into(),
        subject: format!("`{}` → `{built}`", r.input.path),
        checks,
        agreement: r
            .verification
            .as_ref()
            .map(|v| v.outputs.as_slice())
            .unwrap_or(&[]),
        details: Some(render(r, true)),
        ..Default::default()
    }
}
