//! Release gates: thresholds from the pipeline's `gates:` and `--gate NAME[@OUTPUT]=VALUE`,
//! evaluated into one row per gate (value, threshold, verdict) that every report shows.
//! A failed gate makes the command exit 5 after writing its reports.
//!
//! The gates and what they measure:
//! - accuracy (`min_cosine`, `max_abs`, `max_rel`, per output or for all): the agreement
//!   of the candidate's outputs with the reference's on the verification inputs;
//!   `min_topk_agreement`: the fraction of rows (all dims but the last) whose reference
//!   top-1 class is among the candidate's top k classes (ties count for the candidate);
//! - latency (`max_latency_ratio`): see [`latency`];
//! - size and structure (`max_file_size`, `max_nodes`, `forbid_ops`, `max_opset`): the
//!   candidate model as written.

pub mod config;
pub mod latency;
mod result;

pub use result::{GateKind, GateResult};

use std::path::PathBuf;

use config::{ALL_OUTPUTS, GATE_NAMES, GatesConfig, PerOutput, TopKGate};
use infopt_ir::Model;
use infopt_runtime::{HostTensor, OutputAgreement};
use serde::Serialize;

use crate::error::{OpsError, OpsResult};

/// `--gate` and `--baseline`, shared by `optimize`, `compare` and `bench`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GateSettings {
    /// A release gate, NAME=VALUE or NAME@OUTPUT=VALUE (repeatable): min_cosine, max_abs,
    /// max_rel, min_topk_agreement (FRACTION or FRACTION,k=K), max_latency_ratio (RATIO of
    /// medians, or RATIO,q=0.1 for 10th percentiles),
    /// max_file_size (10M, 1G), max_nodes, forbid_ops (A,B), max_opset. A failed gate exits 5.
    pub gates: Vec<String>,
    /// With max_latency_ratio: compare against the latency samples of an earlier JSON
    /// report (--report FILE.json of a run with a latency gate) instead of the original.
    pub baseline: Option<PathBuf>,
}

/// Gates ready to evaluate: the configuration with sizes parsed and values checked.
#[derive(Debug, Clone, Default)]
pub struct Gates {
    pub config: GatesConfig,
    pub max_file_size: Option<u64>,
    pub baseline: Option<PathBuf>,
}

impl Gates {
    /// The pipeline's gates with the command line's on top (a `--gate` replaces the
    /// pipeline's value of the same gate and output).
    pub fn resolve(pipeline: Option<&GatesConfig>, args: &GateSettings) -> OpsResult<Gates> {
        let mut config = pipeline.cloned().unwrap_or_default();
        for g in &args.gates {
            apply_cli(&mut config, g).map_err(OpsError::usage)?;
        }
        check(&config).map_err(OpsError::usage)?;
        let max_file_size = config
            .max_file_size
            .as_ref()
            .map(|s| {
                infopt_runtime::tensorrt::args::parse_size(&s.0)
                    .map_err(|e| OpsError::usage(format!("gate max_file_size: {e}")))
            })
            .transpose()?;
        if args.baseline.is_some() && config.max_latency_ratio.is_none() {
            return Err(OpsError::usage(
                "--baseline is for the max_latency_ratio gate; add --gate max_latency_ratio=R",
            ));
        }
        Ok(Gates {
            config,
            max_file_size,
            baseline: args.baseline.clone(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.config.is_empty()
    }

    pub fn latency_threshold(&self) -> Option<f64> {
        self.config.max_latency_ratio.as_ref().map(|l| l.max)
    }

    /// The latency quantile the gate compares (0.5: medians).
    pub fn latency_quantile(&self) -> f64 {
        self.config
            .max_latency_ratio
            .as_ref()
            .map_or(config::DEFAULT_LATENCY_QUANTILE, |l| l.quantile)
    }

    /// How the latency gate measures, from the command's warm-up and run counts.
    pub fn latency_plan(
        &self,
        warmup: usize,
        runs: usize,
        transfer: infopt_runtime::Transfer,
    ) -> latency::LatencyPlan {
        latency::LatencyPlan {
            threshold: self.latency_threshold().unwrap_or(f64::INFINITY),
            quantile: self.latency_quantile(),
            warmup,
            runs,
            transfer,
        }
    }
}

/// "did you mean 'min_cosine'?" for a misspelled gate name.
fn suggest(name: &str) -> String {
    let best = GATE_NAMES
        .iter()
        .map(|n| (infopt_passes::registry::edit_distance(name, n), *n))
        .min()
        .filter(|(d, n)| *d <= 3.max(n.len() / 3));
    let hint = best
        .map(|(_, n)| format!("did you mean '{n}'? "))
        .or_else(|| {
            // `max_abs_diff`, `latency_ratio`: a gate name inside the word.
            GATE_NAMES
                .iter()
                .filter(|n| name.contains(**n) || n.contains(name))
                .max_by_key(|n| n.len())
                .map(|n| format!("did you mean '{n}'? "))
        })
        .unwrap_or_default();
    format!(
        "unknown gate '{name}'; {hint}valid gates: {}",
        GATE_NAMES.join(", ")
    )
}

fn number(gate: &str, v: &str) -> Result<f64, String> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| format!("gate {gate}: `{v}` is not a number"))
}

/// Applies one `--gate NAME[@OUTPUT]=VALUE`.
pub fn apply_cli(cfg: &mut GatesConfig, arg: &str) -> Result<(), String> {
    let (key, value) = arg.split_once('=').ok_or_else(|| {
        format!("--gate {arg}: write NAME=VALUE or NAME@OUTPUT=VALUE (e.g. min_cosine=0.999)")
    })?;
    let (name, output) = match key.split_once('@') {
        Some((n, o)) if !o.is_empty() => (n.trim(), Some(o.to_string())),
        Some((n, _)) => return Err(format!("--gate {arg}: empty output name after `{n}@`")),
        None => (key.trim(), None),
    };
    if !GATE_NAMES.contains(&name) {
        return Err(suggest(name));
    }
    let per_output = matches!(
        name,
        "min_cosine" | "max_abs" | "max_rel" | "min_topk_agreement"
    );
    if output.is_some() && !per_output {
        return Err(format!(
            "--gate {arg}: `{name}` is about the whole model; drop `@{}`",
            output.unwrap_or_default()
        ));
    }
    let set = |m: &mut PerOutput, v: f64| {
        m.0.insert(output.clone().unwrap_or_else(|| ALL_OUTPUTS.into()), v);
    };
    match name {
        "min_cosine" => set(&mut cfg.min_cosine, number(name, value)?),
        "max_abs" => set(&mut cfg.max_abs, number(name, value)?),
        "max_rel" => set(&mut cfg.max_rel, number(name, value)?),
        "min_topk_agreement" => {
            let (min, k) = match value.split_once(',') {
                Some((m, k)) => {
                    let k = k
                        .trim()
                        .strip_prefix("k=")
                        .and_then(|k| k.parse::<usize>().ok())
                        .filter(|&k| k >= 1)
                        .ok_or_else(|| {
                            format!("gate min_topk_agreement: `{value}`: write FRACTION or FRACTION,k=K (K >= 1), e.g. 0.99,k=5")
                        })?;
                    (number(name, m)?, k)
                }
                None => (number(name, value)?, 1),
            };
            cfg.min_topk_agreement = Some(TopKGate { min, k, output });
        }
        "max_latency_ratio" => {
            let (max, quantile) = match value.split_once(',') {
                Some((m, q)) => {
                    let q = q
                        .trim()
                        .strip_prefix("q=")
                        .or_else(|| q.trim().strip_prefix("quantile="))
                        .and_then(|q| q.parse::<f64>().ok())
                        .ok_or_else(|| {
                            format!("gate max_latency_ratio: `{value}`: write RATIO or RATIO,q=QUANTILE, e.g. 1.05 or 1.05,q=0.1")
                        })?;
                    (number(name, m)?, q)
                }
                None => (number(name, value)?, config::DEFAULT_LATENCY_QUANTILE),
            };
            cfg.max_latency_ratio = Some(config::LatencyGate { max, quantile });
        }
        "max_file_size" => {
            infopt_runtime::tensorrt::args::parse_size(value)
                .map_err(|e| format!("gate max_file_size: {e}"))?;
            cfg.max_file_size = Some(config::SizeText(value.to_string()));
        }
        "max_nodes" => {
            cfg.max_nodes = Some(value.trim().parse().map_err(|_| {
                format!("gate max_nodes: `{value}` is not a non-negative whole number")
            })?)
        }
        "forbid_ops" => {
            for op in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if !cfg.forbid_ops.iter().any(|o| o == op) {
                    cfg.forbid_ops.push(op.to_string());
                }
            }
        }
        "max_opset" => {
            cfg.max_opset = Some(
                value
                    .trim()
                    .parse()
                    .map_err(|_| format!("gate max_opset: `{value}` is not a whole number"))?,
            )
        }
        _ => return Err(suggest(name)),
    }
    Ok(())
}

/// Value checks shared by YAML and the command line.
fn check(cfg: &GatesConfig) -> Result<(), String> {
    for (o, v) in &cfg.min_cosine.0 {
        if !(-1.0..=1.0).contains(v) {
            return Err(format!("gate min_cosine@{o}: {v} is outside [-1, 1]"));
        }
    }
    for (name, m) in [("max_abs", &cfg.max_abs), ("max_rel", &cfg.max_rel)] {
        for (o, v) in &m.0 {
            if !(v.is_finite() && *v >= 0.0) {
                return Err(format!(
                    "gate {name}@{o}: {v} must be a non-negative number"
                ));
            }
        }
    }
    if let Some(t) = &cfg.min_topk_agreement
        && !(0.0..=1.0).contains(&t.min)
    {
        return Err(format!(
            "gate min_topk_agreement: {} is not a fraction in [0, 1]",
            t.min
        ));
    }
    if let Some(l) = &cfg.max_latency_ratio {
        if !(l.max.is_finite() && l.max > 0.0) {
            return Err(format!(
                "gate max_latency_ratio: {} must be positive",
                l.max
            ));
        }
        // Extreme quantiles have no usable bootstrap interval.
        if !(0.05..=0.95).contains(&l.quantile) {
            return Err(format!(
                "gate max_latency_ratio: quantile {} must be within [0.05, 0.95]",
                l.quantile
            ));
        }
    }
    Ok(())
}

/// Every gate of a run.
#[derive(Serialize, Debug, Clone)]
pub struct GateReport {
    pub passed: bool,
    pub results: Vec<GateResult>,
    /// The evidence behind the latency gate.
    pub latency: Option<latency::LatencyEvidence>,
}

impl GateReport {
    pub fn new(results: Vec<GateResult>, latency: Option<latency::LatencyEvidence>) -> GateReport {
        GateReport {
            passed: results.iter().all(|r| r.passed),
            results,
            latency,
        }
    }

    /// The CLI error for a failed gate (exit 5), naming every failed gate.
    pub fn error(&self) -> Option<OpsError> {
        if self.passed {
            return None;
        }
        let failed: Vec<String> = self
            .results
            .iter()
            .filter(|r| !r.passed)
            .map(|r| format!("{} ({})", r.gate, r.message))
            .collect();
        Some(OpsError::new(
            crate::error::ErrorKind::Gate,
            format!(
                "{} of {} release gates failed: {}",
                failed.len(),
                self.results.len(),
                failed.join("; ")
            ),
        ))
    }
}

fn sci(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.is_finite() {
        format!("{v:.3e}")
    } else {
        v.to_string()
    }
}

/// Accuracy gates on the outputs' agreement. `tensors` (reference, candidate outputs)
/// is needed only by `min_topk_agreement`.
pub fn accuracy(
    cfg: &GatesConfig,
    outputs: &[OutputAgreement],
    tensors: Option<(&[HostTensor], &[HostTensor])>,
) -> Vec<GateResult> {
    let mut out = Vec::new();
    let metrics: [(&str, &PerOutput, bool); 3] = [
        ("min_cosine", &cfg.min_cosine, true),
        ("max_abs", &cfg.max_abs, false),
        ("max_rel", &cfg.max_rel, false),
    ];
    for (name, thresholds, is_min) in metrics {
        for key in thresholds.0.keys() {
            if key != ALL_OUTPUTS && !outputs.iter().any(|o| &o.name == key) {
                out.push(GateResult {
                    gate: format!("{name}@{key}"),
                    kind: GateKind::Accuracy,
                    threshold: thresholds.0[key].to_string(),
                    value: "-".into(),
                    measured: None,
                    passed: false,
                    message: format!(
                        "the model has no output '{key}' (outputs: {})",
                        outputs
                            .iter()
                            .map(|o| o.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
        for o in outputs {
            let Some(t) = thresholds.for_output(&o.name) else {
                continue;
            };
            let gate = format!("{name}@{}", o.name);
            if let Some(issue) = &o.issue {
                out.push(GateResult {
                    gate,
                    kind: GateKind::Accuracy,
                    threshold: t.to_string(),
                    value: "-".into(),
                    measured: None,
                    passed: false,
                    message: format!("the outputs cannot be compared: {issue:?}"),
                });
                continue;
            }
            let v = match name {
                "min_cosine" => o.cosine,
                "max_abs" => o.max_abs,
                _ => o.max_rel,
            };
            let passed = if is_min { v >= t } else { v <= t };
            let (shown, op) = if is_min {
                (format!("{v:.6}"), if passed { ">=" } else { "<" })
            } else {
                (sci(v), if passed { "<=" } else { ">" })
            };
            out.push(GateResult {
                gate,
                kind: GateKind::Accuracy,
                threshold: t.to_string(),
                value: shown.clone(),
                measured: Some(v),
                passed,
                message: format!("{shown} {op} {t}"),
            });
        }
    }
    if let Some(g) = &cfg.min_topk_agreement {
        out.extend(topk_gates(g, tensors));
    }
    out
}

/// Rows agreeing and rows compared: a row agrees when the reference's top-1 class is
/// among the candidate's top `k` (fewer than `k` candidate classes score strictly higher
/// than it). `None` when the tensor is not a float tensor whose last dim is at least 2.
pub fn topk_agreement(
    reference: &HostTensor,
    candidate: &HostTensor,
    k: usize,
) -> Option<(usize, usize)> {
    if !reference.dtype().is_float() || reference.shape() != candidate.shape() {
        return None;
    }
    let classes = *reference.shape().last()?;
    if classes < 2 || reference.is_empty() {
        return None;
    }
    let r = reference.to_f64_vec();
    let c = candidate.to_f64_vec();
    let rows = r.len() / classes;
    let mut agree = 0;
    for (rr, cr) in r.chunks_exact(classes).zip(c.chunks_exact(classes)) {
        // First maximum of the reference; NaN never wins.
        let mut top = 0;
        for (i, v) in rr.iter().enumerate() {
            if *v > rr[top] || rr[top].is_nan() {
                top = i;
            }
        }
        let pivot = cr[top];
        if pivot.is_nan() {
            continue;
        }
        let higher = cr.iter().filter(|v| **v > pivot).count();
        if higher < k {
            agree += 1;
        }
    }
    Some((agree, rows))
}

fn topk_gates(g: &TopKGate, tensors: Option<(&[HostTensor], &[HostTensor])>) -> Vec<GateResult> {
    let label = |o: &str| {
        if g.k == 1 {
            format!("min_topk_agreement@{o}")
        } else {
            format!("min_topk_agreement@{o} (top-{})", g.k)
        }
    };
    let fail = |gate: String, message: String| GateResult {
        gate,
        kind: GateKind::Accuracy,
        threshold: g.min.to_string(),
        value: "-".into(),
        measured: None,
        passed: false,
        message,
    };
    let Some((reference, candidate)) = tensors else {
        return vec![fail(
            "min_topk_agreement".into(),
            "the outputs were not available".into(),
        )];
    };
    let name_of = |t: &HostTensor, i: usize| {
        t.name()
            .map(str::to_string)
            .unwrap_or_else(|| format!("#{i}"))
    };
    let mut out = Vec::new();
    for (i, r) in reference.iter().enumerate() {
        let name = name_of(r, i);
        if g.output.as_ref().is_some_and(|o| *o != name) {
            continue;
        }
        let c = candidate
            .iter()
            .enumerate()
            .find(|(j, c)| name_of(c, *j) == name)
            .map(|(_, c)| c);
        let Some(c) = c else {
            out.push(fail(label(&name), "missing from the candidate".into()));
            continue;
        };
        match topk_agreement(r, c, g.k) {
            Some((agree, rows)) => {
                let frac = agree as f64 / rows as f64;
                let passed = frac >= g.min;
                out.push(GateResult {
                    gate: label(&name),
                    kind: GateKind::Accuracy,
                    threshold: g.min.to_string(),
                    value: format!("{frac:.4}"),
                    measured: Some(frac),
                    passed,
                    message: format!(
                        "{agree} of {rows} rows agree on the top-{} class{}",
                        g.k,
                        if passed { "" } else { " (below the threshold)" }
                    ),
                });
            }
            None if g.output.is_some() => out.push(fail(
                label(&name),
                "not a classifier output: needs a float tensor with a last dimension of at least 2 and the same shape in both models".into(),
            )),
            None => {}
        }
    }
    if out.is_empty() {
        let what = match &g.output {
            Some(o) => format!("the reference has no output '{o}'"),
            None => "no output is a float tensor with a last dimension of at least 2".into(),
        };
        out.push(fail("min_topk_agreement".into(), what));
    }
    out
}

fn all_nodes<'a>(g: &'a infopt_ir::Graph, out: &mut Vec<&'a infopt_ir::Node>) {
    for (_, n) in g.nodes() {
        out.push(n);
        for s in n.subgraphs() {
            all_nodes(s, out);
        }
    }
}

/// Size and structure gates on the candidate model as written (`file_bytes`: the model
/// file plus its external data).
pub fn structure(gates: &Gates, model: &Model, file_bytes: u64) -> Vec<GateResult> {
    let cfg = &gates.config;
    let mut out = Vec::new();
    let mut nodes = Vec::new();
    all_nodes(&model.graph, &mut nodes);
    if let Some(limit) = gates.max_file_size {
        let passed = file_bytes <= limit;
        out.push(GateResult {
            gate: "max_file_size".into(),
            kind: GateKind::Size,
            threshold: cfg
                .max_file_size
                .as_ref()
                .map(|s| s.0.clone())
                .unwrap_or_default(),
            value: file_bytes.to_string(),
            measured: Some(file_bytes as f64),
            passed,
            message: format!(
                "{file_bytes} bytes {} {limit}",
                if passed { "<=" } else { ">" }
            ),
        });
    }
    if let Some(limit) = cfg.max_nodes {
        let n = nodes.len() as u64;
        let passed = n <= limit;
        out.push(GateResult {
            gate: "max_nodes".into(),
            kind: GateKind::Structure,
            threshold: limit.to_string(),
            value: n.to_string(),
            measured: Some(n as f64),
            passed,
            message: format!(
                "{n} nodes (subgraphs included) {} {limit}",
                if passed { "<=" } else { ">" }
            ),
        });
    }
    for forbidden in &cfg.forbid_ops {
        let hits: Vec<&&infopt_ir::Node> = nodes
            .iter()
            .filter(|n| {
                let domain = if n.domain().is_empty() {
                    "ai.onnx"
                } else {
                    n.domain()
                };
                n.op_type == *forbidden || domain == forbidden
            })
            .collect();
        let passed = hits.is_empty();
        let at: Vec<String> = hits
            .iter()
            .take(3)
            .map(|n| format!("'{}' ({})", n.name_or_op(), n.op_type))
            .collect();
        out.push(GateResult {
            gate: format!("forbid_ops@{forbidden}"),
            kind: GateKind::Structure,
            threshold: "0 nodes".into(),
            value: hits.len().to_string(),
            measured: Some(hits.len() as f64),
            passed,
            message: if passed {
                format!("no {forbidden} node")
            } else {
                format!(
                    "{} {forbidden} node(s): {}{}",
                    hits.len(),
                    at.join(", "),
                    if hits.len() > 3 { ", ..." } else { "" }
                )
            },
        });
    }
    if let Some(limit) = cfg.max_opset {
        let v = model.opset("");
        let passed = v.is_none_or(|v| v <= limit);
        out.push(GateResult {
            gate: "max_opset".into(),
            kind: GateKind::Structure,
            threshold: limit.to_string(),
            value: v.map(|v| v.to_string()).unwrap_or_else(|| "none".into()),
            measured: v.map(|v| v as f64),
            passed,
            message: match v {
                Some(v) => format!(
                    "default-domain opset {v} {} {limit}",
                    if passed { "<=" } else { ">" }
                ),
                None => "the model imports no default-domain opset".into(),
            },
        });
    }
    out
}

/// The configuration without `min_topk_agreement` (evaluated separately, on tensors).
pub fn without_topk(cfg: &GatesConfig) -> GatesConfig {
    GatesConfig {
        min_topk_agreement: None,
        ..cfg.clone()
    }
}

/// `optimize`'s latency gate: the original against the optimized model, interleaved;
/// also returns the before/after latency the report shows.
pub fn optimize_latency(
    v: &mut infopt_verify::Verifier,
    optimized: Box<dyn infopt_runtime::LoadedModel>,
    gates: &Gates,
    warmup: usize,
    runs: usize,
) -> OpsResult<(infopt_verify::LatencyComparison, latency::LatencyEvidence)> {
    let plan = gates.latency_plan(warmup, runs, v.chosen.info.transfer);
    let backend = v.chosen.info.name.clone();
    let original = match &gates.baseline {
        Some(_) => None,
        None => Some(v.take_original().map_err(OpsError::from)?),
    };
    let candidate = latency::Timed {
        label: "the optimized model",
        model: optimized.as_ref(),
        inputs: &v.inputs,
    };
    let evidence = match (&gates.baseline, &original) {
        (Some(b), _) => latency::measure_against_baseline(b, candidate, &backend, &plan)?,
        (None, Some(original)) => {
            let reference = latency::Timed {
                label: "the original model",
                model: original.as_ref(),
                inputs: &v.inputs,
            };
            latency::measure_pair("original model", reference, candidate, &backend, &plan)?
        }
        (None, None) => {
            return Err(OpsError::new(
                crate::error::ErrorKind::Internal,
                "the original model is not loaded for timing",
            ));
        }
    };
    let comparison = latency_comparison(v.chosen.info.clone(), &evidence, warmup)?;
    Ok((comparison, evidence))
}

/// Before/after latency summaries from a latency gate's samples.
pub fn latency_comparison(
    backend: infopt_verify::BackendInfo,
    e: &latency::LatencyEvidence,
    warmup: usize,
) -> OpsResult<infopt_verify::LatencyComparison> {
    let summarize = |s: &[f64]| {
        infopt_runtime::Latency::from_samples(warmup, s)
            .map_err(|e| OpsError::new(crate::error::ErrorKind::Internal, e))
    };
    let before = summarize(&e.reference_samples_ms)?;
    let after = summarize(&e.candidate_samples_ms)?;
    let speedup = if after.median_ms > 0.0 {
        before.median_ms / after.median_ms
    } else {
        0.0
    };
    Ok(infopt_verify::LatencyComparison {
        backend,
        before,
        after,
        speedup,
    })
}

/// The candidate model file's size with its external data, and the model.
pub fn load_candidate(path: &std::path::Path) -> OpsResult<(Model, u64)> {
    let model = crate::models::load_model(path)?;
    let src = model.source.clone().unwrap_or_default();
    let external: u64 = src
        .external_files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    Ok((model, src.file_size + external))
}

/// `compare`'s gates: accuracy of B against A, structure of B, latency of B against A
/// (or a baseline).
#[allow(clippy::too_many_arguments)]
pub fn compare_gates(
    gates: &Gates,
    outputs: &[OutputAgreement],
    ya: &[HostTensor],
    yb: &[HostTensor],
    a: (&dyn infopt_runtime::LoadedModel, &[HostTensor]),
    b: (&dyn infopt_runtime::LoadedModel, &[HostTensor]),
    b_path: &std::path::Path,
    backend: &infopt_verify::BackendInfo,
    timing: (usize, usize),
) -> OpsResult<GateReport> {
    let mut results = accuracy(&gates.config, outputs, Some((ya, yb)));
    let mut evidence = None;
    if gates.latency_threshold().is_some() {
        let plan = gates.latency_plan(timing.0, timing.1, backend.transfer);
        let backend = backend.name.as_str();
        let candidate = latency::Timed {
            label: "B",
            model: b.0,
            inputs: b.1,
        };
        let e = match &gates.baseline {
            Some(base) => latency::measure_against_baseline(base, candidate, backend, &plan)?,
            None => {
                let reference = latency::Timed {
                    label: "A",
                    model: a.0,
                    inputs: a.1,
                };
                latency::measure_pair("reference model A", reference, candidate, backend, &plan)?
            }
        };
        results.push(latency::gate_result(&e));
        evidence = Some(e);
    }
    if gates.config.has_structure() {
        let (model, bytes) = load_candidate(b_path)?;
        results.extend(structure(gates, &model, bytes));
    }
    Ok(GateReport::new(results, evidence))
}

/// `bench` has no outputs to compare; its latency gate needs a reference.
pub fn check_bench_gates(gates: &Gates, compared: usize) -> OpsResult {
    if gates.config.has_accuracy() {
        return Err(OpsError::usage(
            "accuracy gates compare two models' outputs: use them with `infopt compare` or `infopt optimize`",
        ));
    }
    if gates.latency_threshold().is_some() {
        match (gates.baseline.is_some(), compared) {
            (true, 0) | (false, 1) => {}
            (true, _) => {
                return Err(OpsError::usage(
                    "with --baseline, bench times MODEL alone: drop --compare",
                ));
            }
            (false, _) => {
                return Err(OpsError::usage(
                    "the max_latency_ratio gate in bench needs one reference: MODEL --compare CANDIDATE.onnx (ratio CANDIDATE / MODEL), or MODEL --baseline EARLIER.json",
                ));
            }
        }
    }
    Ok(())
}

/// `bench`'s latency gate: the last model against MODEL (or a baseline); the latencies
/// the report shows come from the gate's runs (MODEL's and the last model's, or the
/// last model's alone against a baseline).
pub fn bench_latency(
    gates: &Gates,
    loaded: &[crate::models::Loaded],
    backend: &infopt_verify::BackendInfo,
    warmup: usize,
    runs: usize,
) -> OpsResult<(Vec<infopt_runtime::Latency>, latency::LatencyEvidence)> {
    fn timed(m: &crate::models::Loaded) -> latency::Timed<'_> {
        latency::Timed {
            label: "",
            model: m.model.as_ref(),
            inputs: &m.inputs,
        }
    }
    let (Some(first), Some(last)) = (loaded.first(), loaded.last()) else {
        return Err(OpsError::new(
            crate::error::ErrorKind::Internal,
            "no model to time",
        ));
    };
    let plan = gates.latency_plan(warmup, runs, backend.transfer);
    let backend = backend.name.as_str();
    let e = match &gates.baseline {
        Some(b) => latency::measure_against_baseline(b, timed(last), backend, &plan)?,
        None => latency::measure_pair(
            "first model (MODEL)",
            timed(first),
            timed(last),
            backend,
            &plan,
        )?,
    };
    let summarize = |s: &[f64]| {
        infopt_runtime::Latency::from_samples(warmup, s)
            .map_err(|e| OpsError::new(crate::error::ErrorKind::Internal, e))
    };
    let l = if gates.baseline.is_some() {
        vec![summarize(&e.candidate_samples_ms)?]
    } else {
        vec![
            summarize(&e.reference_samples_ms)?,
            summarize(&e.candidate_samples_ms)?,
        ]
    };
    Ok((l, e))
}

/// `bench`'s gate report: the latency gate's row and the structure of `candidate`.
pub fn bench_report(
    gates: &Gates,
    evidence: Option<latency::LatencyEvidence>,
    candidate: &std::path::Path,
) -> OpsResult<GateReport> {
    let mut results: Vec<GateResult> = evidence.iter().map(latency::gate_result).collect();
    if gates.config.has_structure() {
        let (model, bytes) = load_candidate(candidate)?;
        results.extend(structure(gates, &model, bytes));
    }
    Ok(GateReport::new(results, evidence))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(args: &[&str]) -> Result<GatesConfig, String> {
        let mut c = GatesConfig::default();
        for a in args {
            apply_cli(&mut c, a)?;
        }
        check(&c)?;
        Ok(c)
    }

    #[test]
    fn cli_spellings() {
        let c = cfg(&[
            "min_cosine=0.999",
            "max_abs@logits=1e-3",
            "min_topk_agreement@logits=0.99,k=5",
            "forbid_ops=com.microsoft,Loop",
            "max_file_size=10M",
        ])
        .unwrap();
        assert_eq!(c.min_cosine.for_output("anything"), Some(0.999));
        assert_eq!(c.max_abs.for_output("logits"), Some(1e-3));
        assert_eq!(c.max_abs.for_output("other"), None);
        let t = c.min_topk_agreement.unwrap();
        assert_eq!((t.min, t.k, t.output.as_deref()), (0.99, 5, Some("logits")));
        assert_eq!(c.forbid_ops, vec!["com.microsoft", "Loop"]);
    }

    #[test]
    fn misspelled_gate_suggests() {
        let e = cfg(&["min_cosin=0.9"]).unwrap_err();
        assert!(
            e.contains("unknown gate 'min_cosin'; did you mean 'min_cosine'?"),
            "{e}"
        );
        let e = cfg(&["max_latency@x=1.1"]).unwrap_err();
        assert!(e.contains("did you mean 'max_latency_ratio'?"), "{e}");
        assert!(cfg(&["max_nodes@x=3"]).is_err());
        assert!(cfg(&["min_cosine=2"]).is_err());
        assert!(cfg(&["min_topk_agreement=0.9,k=0"]).is_err());
        assert!(cfg(&["max_file_size=ten"]).is_err());
    }

    fn t(shape: Vec<usize>, v: Vec<f32>, name: &str) -> HostTensor {
        HostTensor::from_vec(shape, v).unwrap().named(name)
    }

    #[test]
    fn topk_counts_rows() {
        // Two rows of three classes: row 0 argmax 2 in both; row 1 reference argmax 0,
        // candidate ranks class 0 second.
        let r = t(vec![2, 3], vec![0.1, 0.2, 0.7, 0.9, 0.05, 0.05], "y");
        let c = t(vec![2, 3], vec![0.1, 0.2, 0.7, 0.4, 0.5, 0.1], "y");
        assert_eq!(topk_agreement(&r, &c, 1), Some((1, 2)));
        assert_eq!(topk_agreement(&r, &c, 2), Some((2, 2)));
        let g = GatesConfig {
            min_topk_agreement: Some(TopKGate {
                min: 0.75,
                k: 1,
                output: None,
            }),
            ..Default::default()
        };
        let res = accuracy(
            &g,
            &[],
            Some((std::slice::from_ref(&r), std::slice::from_ref(&c))),
        );
        assert_eq!(res.len(), 1);
        assert!(!res[0].passed);
        assert_eq!(res[0].measured, Some(0.5));
    }
}
