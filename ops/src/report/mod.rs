//! The optimize report: one data structure, serialized as JSON (with a schema
//! version) or rendered as a terminal table or Markdown.

pub mod half;
pub mod int8;
pub mod render;
pub mod summaries;

use std::collections::BTreeMap;

use infopt_ir::stats::GraphStats;
use infopt_passes::{Declined, PipelineRun};
use serde::Serialize;

pub use infopt_verify::{LatencyComparison, Verification};

/// Agreement with the original after one pass (`--verify-each-pass`).
#[derive(Serialize, Debug, Clone)]
pub struct PassCheck {
    pub pass: String,
    pub passed: bool,
    /// Largest absolute difference over all outputs.
    pub max_abs: f64,
}

/// Bumped on incompatible changes to the JSON layout.
pub const REPORT_SCHEMA_VERSION: u32 = 1;

#[derive(Serialize, Debug, Clone)]
pub struct ModelFacts {
    pub path: String,
    pub file_bytes: u64,
    /// Bytes of external-data files, when the model has them.
    pub external_bytes: u64,
    pub nodes: usize,
    pub subgraph_nodes: usize,
    pub initializers: usize,
    pub parameters: u64,
    pub parameter_bytes: u64,
}

#[derive(Serialize, Debug, Clone)]
pub struct OpCount {
    pub op: String,
    pub before: usize,
    pub after: usize,
    pub delta: i64,
}

#[derive(Serialize, Debug, Clone)]
pub struct PassStat {
    pub pass: String,
    /// Fixed-point group index, when the pass ran inside one.
    pub group: Option<usize>,
    pub runs: usize,
    pub rewrites: usize,
    pub time_ms: f64,
    pub nodes_before: usize,
    pub nodes_after: usize,
    /// Nodes this pass removed over all its runs (negative: added).
    pub nodes_removed: i64,
}

#[derive(Serialize, Debug, Clone)]
pub struct DeclinedGroup {
    pub pass: String,
    pub reason: String,
    pub count: usize,
    /// Where (node names), at most 20.
    pub at: Vec<String>,
}

#[derive(Serialize, Debug, Clone)]
pub struct Report {
    pub schema_version: u32,
    pub infopt_version: String,
    pub pipeline: String,
    pub target: String,
    pub input: ModelFacts,
    pub output: Option<ModelFacts>,
    /// Ops of the main graph (and subgraphs, prefixed "subgraph:"), before and after.
    pub ops: Vec<OpCount>,
    pub passes: Vec<PassStat>,
    pub declined: Vec<DeclinedGroup>,
    pub verification: Option<Verification>,
    pub latency: Option<LatencyComparison>,
    pub stopped_after: Option<String>,
    /// With `--verify-each-pass`: agreement with the original after every pass that changed the model.
    pub pass_checks: Vec<PassCheck>,
    pub first_failing_pass: Option<String>,
    pub first_diverging_tensor: Option<String>,
    /// With INT8 quantization: calibration, held-out accuracy, worst layers.
    pub int8: Option<int8::Int8Report>,
    /// With --fp16/--bf16 and verification: the automatic float32 islands.
    pub half_precision: Option<half::HalfReport>,
    pub notes: Vec<String>,
    /// Facts the passes record that are not printed (nobody asked, nothing
    /// to act on): dims that stay dynamic unasked, ONNX Runtime-only passes
    /// of a built-in pipeline doing nothing for another target.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
    pub warnings: Vec<String>,
    pub total_time_ms: f64,
    /// Release gates, when any were set (absent when verification failed).
    pub gates: Option<crate::gates::GateReport>,
}

pub fn facts(path: &str, file_bytes: u64, external_bytes: u64, stats: &GraphStats) -> ModelFacts {
    ModelFacts {
        path: path.to_string(),
        file_bytes,
        external_bytes,
        nodes: stats.nodes,
        subgraph_nodes: stats.subgraph_nodes,
        initializers: stats.initializers,
        parameters: stats.parameters,
        parameter_bytes: stats.parameter_bytes,
    }
}

pub fn op_diff(before: &GraphStats, after: &GraphStats) -> Vec<OpCount> {
    let mut rows: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (op, n) in &before.ops {
        rows.entry(op.clone()).or_default().0 = *n;
    }
    for (op, n) in &after.ops {
        rows.entry(op.clone()).or_default().1 = *n;
    }
    for (op, n) in &before.subgraph_ops {
        rows.entry(format!("subgraph:{op}")).or_default().0 = *n;
    }
    for (op, n) in &after.subgraph_ops {
        rows.entry(format!("subgraph:{op}")).or_default().1 = *n;
    }
    rows.into_iter()
        .map(|(op, (b, a))| OpCount {
            op,
            before: b,
            after: a,
            delta: a as i64 - b as i64,
        })
        .collect()
}

pub fn pass_stats(run: &PipelineRun) -> Vec<PassStat> {
    run.records
        .iter()
        .map(|r| PassStat {
            pass: r.name.to_string(),
            group: r.group,
            runs: r.runs,
            rewrites: r.rewrites,
            time_ms: r.time.as_secs_f64() * 1e3,
            nodes_before: r.nodes_before,
            nodes_after: r.nodes_after,
            nodes_removed: r.nodes_removed,
        })
        .collect()
}

/// A decline reason with the option that removes it, as the command line
/// asks for it: passes name the step ("an upgrade-opset step to 17 raises
/// it"), the job knows the flag that adds that step.
fn with_flag(reason: String) -> String {
    match infopt_passes::upgrade_opset::remedy_opset(&reason) {
        Some(to) => format!("{reason} (--upgrade-opset {to})"),
        None => reason,
    }
}

pub fn group_declined(declined: &[Declined]) -> Vec<DeclinedGroup> {
    let mut groups: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for d in declined {
        groups
            .entry((d.pass.to_string(), d.reason.clone()))
            .or_default()
            .push(d.at.clone());
    }
    let mut out: Vec<DeclinedGroup> = groups
        .into_iter()
        .map(|((pass, reason), at)| DeclinedGroup {
            pass,
            reason: with_flag(reason),
            count: at.len(),
            at: at.into_iter().take(20).collect(),
        })
        .collect();
    out.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(a.pass.cmp(&b.pass))
            .then(a.reason.cmp(&b.reason))
    });
    out
}
