//! Automatic float32 islands for `--fp16` / `--bf16`: the conversion is
//! judged on the verification inputs (the user's `--inputs`, else the
//! seeded ones) by the accuracy target, and while an output misses it the
//! node that adds the most error is kept in float32.
//!
//! First, ranges: the float32 model runs once observing every tensor, and
//! a node the conversion would run in float16 whose output reaches half of
//! float16's largest value (65504) on these inputs stays float32. ONNX
//! Runtime's CPU provider computes most float16 ops in float32 and drops
//! the Casts between them, so it never shows such an overflow; TensorRT and
//! GPUs do (see `ranges`). Then, error: each round compares every tensor of
//! the float32 model with its half-precision twin
//! (`infopt_verify::sensitivity`): a node is charged the
//! SNR its output loses against its cleanest input, so a Mul whose float16
//! result overflows is charged everything and a Conv that only rounds a few
//! dB. The worst node not yet tried is kept in float32 (a precision override
//! with the measurement as its reason), the model converted again and
//! judged again; a node whose keeping does not raise the lowest output
//! cosine is put back to the half type. The search ends when the target
//! holds, or after [`MAX_TRIALS`] trials (or [`MAX_FRUITLESS`] in a row
//! without effect, or [`MAX_SEARCH_SECONDS`]), and then the command refuses
//! the model (exit 4) naming the layers it kept and the worst remaining ones.
//!
//! Nodes inside If/Loop/Scan subgraphs are not ranked one by one: the
//! If/Loop/Scan node is ranked by the error its outputs add and, when
//! kept, stays float32 with its subgraphs whole.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use infopt_ir::Model;
use infopt_passes::precision::{Override, Precision, PrecisionMap, Selector};
use infopt_passes::registry::Numerics;
use infopt_passes::{DriverOptions, PipelineConfig, PipelineRun, SideData, Step};
use infopt_runtime::OutputAgreement;
use infopt_verify::intermediates::Side;
use infopt_verify::sensitivity::{self, NodeError};
use infopt_verify::{Criterion, Verifier};

use crate::error::{ErrorKind, OpsError, OpsResult};
use crate::stages::{self, PassHooks};

mod nodes;
mod quantized;
mod ranges;
mod unseen;

use nodes::half_nodes;
use ranges::{out_of_range, produces, tensor_ranges, tensor_ranges_on};

/// Trials (nodes kept, or tried and put back) before the search gives up.
pub const MAX_TRIALS: usize = 24;
/// Trials in a row without effect before the search gives up.
pub const MAX_FRUITLESS: usize = 8;
/// No trial starts after this long: judged in tract (no ONNX Runtime), one
/// float16 run of a detector takes minutes.
pub const MAX_SEARCH_SECONDS: f64 = 120.0;

pub use crate::report::half::{HalfReport, KeptFor, KeptLayer};

/// Where the search runs.
pub struct Context<'a> {
    pub verifier: &'a Verifier,
    pub options: &'a DriverOptions,
    /// How the verification inputs were made ("generated with seed 0", "from x.npz").
    pub inputs: String,
    /// The inputs are generated, not the user's.
    pub generated_inputs: bool,
    /// `false`: convert once and judge, no islands (`--no-auto-fp32`).
    pub search: bool,
}

/// The converted model and how it was made.
pub struct Outcome {
    pub model: Model,
    pub run: PipelineRun,
    /// `None` when the verifier's backend cannot load the converted model.
    pub report: Option<HalfReport>,
    /// The search's last judgement, when it judged exactly `model` (the same
    /// bytes) in the verifier's backend on its inputs: the command's
    /// verification would load and run the same model on the same inputs
    /// again.
    pub judged: Option<Judged>,
}

/// A candidate as the verifier judged it.
pub struct Judged {
    pub outputs: Vec<OutputAgreement>,
    pub passed: bool,
    /// The candidate loaded in the verifier's backend (for timing).
    pub loaded: Box<dyn infopt_runtime::LoadedModel>,
}

/// The pipeline split at its first half-precision step: the steps before
/// it, and it with everything after. `None` without such a step (a step
/// inside a fixed-point group does not count: it cannot be rerun alone).
pub fn split(config: &PipelineConfig) -> Option<(PipelineConfig, PipelineConfig)> {
    let at = config
        .passes
        .iter()
        .position(|s| matches!(s, Step::Pass(p) if p.info().numerics == Numerics::HalfPrecision))?;
    let mut before = config.clone();
    before.passes.truncate(at);
    let mut from = config.clone();
    from.passes.drain(..at);
    Some((before, from))
}

/// The half type the steps convert to.
fn half_of(config: &PipelineConfig) -> Precision {
    if config.pass_names().contains(&"convert-bfloat16") {
        Precision::Bf16
    } else {
        Precision::Fp16
    }
}

/// Lowest output cosine, an output with infinities, NaN or the wrong shape counting as -2.
pub fn score(outputs: &[OutputAgreement]) -> f64 {
    outputs
        .iter()
        .map(|o| {
            let broken = o.issue.is_some() || o.nan_mismatches > 0 || !o.max_abs.is_finite();
            if broken { -2.0 } else { o.cosine }
        })
        .fold(1.0, f64::min)
}

/// Gives every unnamed node of the main graph a unique name, so that a
/// precision override can address it.
pub(crate) fn name_unnamed(model: &mut Model) {
    let g = &mut model.graph;
    let mut taken: HashSet<String> = g.nodes().filter_map(|(_, n)| n.name.clone()).collect();
    let unnamed: Vec<_> = g
        .nodes()
        .filter(|(_, n)| n.name.as_deref().is_none_or(str::is_empty))
        .map(|(id, _)| id)
        .collect();
    for id in unnamed {
        let node = g.node(id);
        let base = match node.outputs.first().copied().flatten() {
            Some(v) => format!("{}:{}", node.op_type, g.value(v).name),
            None => node.op_type.clone(),
        };
        let mut name = base.clone();
        let mut k = 1;
        while taken.contains(&name) {
            name = format!("{base}#{k}");
            k += 1;
        }
        taken.insert(name.clone());
        g.node_mut(id).name = Some(name);
    }
}

/// Runs `steps` on a copy of `fp32` with `kept` as float32 overrides after
/// the user's (whose word wins).
fn convert(
    fp32: &Model,
    steps: &PipelineConfig,
    kept: &[Override],
    options: &DriverOptions,
) -> OpsResult<(Model, PipelineRun)> {
    let mut config = steps.clone();
    let map = config.precision.get_or_insert_with(PrecisionMap::default);
    map.overrides.extend(kept.iter().cloned());
    let mut model = fp32.clone();
    let run = stages::run_passes(
        &mut model,
        &config,
        options,
        SideData::default(),
        PassHooks::default(),
    )?;
    Ok((model, run))
}

/// Loads and judges a candidate in the verifier's backend.
fn judge(v: &Verifier, candidate: &Model) -> OpsResult<Judged> {
    let loaded = v.load(candidate)?;
    let (outputs, passed) = v.check(loaded.as_ref())?;
    Ok(Judged {
        outputs,
        passed,
        loaded,
    })
}

/// True when `a` and `b` serialize to the same bytes (a conversion rerun
/// with the same overrides and other reasons gives the same graph).
fn same_model(a: &Model, b: &Model) -> bool {
    match (
        a.to_bytes_referencing_sources(),
        b.to_bytes_referencing_sources(),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// The nodes of `fp32` adding the most error in `candidate`, worst first,
/// restricted to nodes the candidate runs in the half type.
fn ranking(
    cx: &Context<'_>,
    fp32: &Model,
    candidate: &Model,
    outputs: &[OutputAgreement],
    to: Precision,
) -> OpsResult<Vec<NodeError>> {
    let v = cx.verifier;
    let side = |m| Side {
        model: m,
        dir: v.dir.clone(),
        inputs: &v.inputs,
    };
    let bits = if to == Precision::Bf16 { 7 } else { 10 };
    let ranked = sensitivity::rank(
        v.chosen.backend.as_ref(),
        &v.shapes,
        side(fp32),
        side(candidate),
        outputs,
        sensitivity::rounding_snr_db(bits),
    )?;
    let half = half_nodes(candidate);
    Ok(ranked
        .into_iter()
        .filter(|r| half.contains(&r.node) && r.added_db > 0.0)
        .collect())
}

/// The nodes that produce `node`'s inputs and run in the half type in
/// `candidate`, with their measured error where the ranking has it.
fn feeders(fp32: &Model, candidate: &Model, node: &str, ranked: &[NodeError]) -> Vec<NodeError> {
    let g = &fp32.graph;
    let Some(id) = g.find_node(node) else {
        return Vec::new();
    };
    let half = half_nodes(candidate);
    let mut out: Vec<NodeError> = Vec::new();
    for v in g.node(id).inputs.iter().flatten() {
        let Some(p) = g.producer(*v) else { continue };
        let Some(name) = p.name.clone().filter(|n| half.contains(n)) else {
            continue;
        };
        if out.iter().any(|o| o.node == name) {
            continue;
        }
        out.push(
            ranked
                .iter()
                .find(|r| r.node == name)
                .cloned()
                .unwrap_or(NodeError {
                    node: name,
                    op: p.op_type.clone(),
                    tensor: g.value(*v).name.clone(),
                    output_snr_db: f64::NAN,
                    added_db: 0.0,
                }),
        );
    }
    out
}

fn describe_loss(e: &NodeError) -> String {
    if e.output_snr_db == f64::NEG_INFINITY {
        format!("its output '{}' overflows (infinity or NaN)", e.tensor)
    } else {
        format!(
            "its output '{}' loses {:.1} dB of SNR against float32 ({:.1} dB left)",
            e.tensor, e.added_db, e.output_snr_db
        )
    }
}

/// The float32 overrides generated inputs call for (see `unseen`): nodes
/// that compute exponentials, powers, squares or a Log/Sqrt argument, and
/// those whose values reach float16's range with the float inputs scaled
/// by [`unseen::HEADROOM`]; none the user forced or already kept.
fn unseen_islands(
    cx: &Context<'_>,
    fp32: &Model,
    candidate: &Model,
    user_map: &PrecisionMap,
    kept: &[Override],
) -> OpsResult<Vec<(Override, KeptLayer)>> {
    let v = cx.verifier;
    let mut picks: Vec<(String, String, String, f64, String)> = Vec::new();
    for (node, op, tensor, why) in unseen::risky_nodes(fp32, candidate) {
        let reason = format!(
            "automatic float32 island (generated inputs): it computes {why}, whose values real inputs may take beyond float16's range where the generated ones ({}) did not",
            cx.inputs
        );
        picks.push((node, op, tensor, f64::NAN, reason));
    }
    let scaled = unseen::scaled_inputs(&v.inputs, unseen::HEADROOM, &unseen::index_inputs(fp32));
    match tensor_ranges_on(v, fp32, &scaled, false) {
        Ok(big) => {
            for (node, op, tensor, max) in out_of_range(fp32, candidate, &big) {
                let reason = format!(
                    "automatic float32 island (generated inputs): its float32 tensor '{tensor}' reaches {max:.4e} with the generated inputs scaled by {}, beyond half of float16's largest value 65504",
                    unseen::HEADROOM
                );
                picks.push((node, op, tensor, max, reason));
            }
        }
        Err(e) => crate::progress::note(
            "half",
            format!(
                "float16: the float32 model did not run on the scaled inputs ({}); only the op rules apply",
                e.message
            ),
        ),
    }
    let mut out: Vec<(Override, KeptLayer)> = Vec::new();
    for (node, op, tensor, max, reason) in picks {
        let forced = fp32
            .graph
            .find_node(&node)
            .is_some_and(|id| user_map.override_for(fp32.graph.node(id)).is_some());
        let done = kept.iter().any(|o| o.selector == Selector::exact(&node))
            || out
                .iter()
                .any(|(o, _)| o.selector == Selector::exact(&node));
        if forced || done {
            continue;
        }
        out.push(kept_by_rule(node, op, KeptFor::Unseen, tensor, max, reason));
    }
    Ok(out)
}

/// Converts `fp32` with `steps` (the half-precision step and what follows)
/// and, while the verifier's criterion fails, keeps the most harmful nodes
/// in float32. The result may still miss the target: `report.reached` says.
pub fn convert_to_target(
    fp32: &mut Model,
    steps: &PipelineConfig,
    cx: &Context<'_>,
) -> OpsResult<Outcome> {
    let started = Instant::now();
    if cx.search {
        name_unnamed(fp32);
    }
    let to = half_of(steps);
    let s = Search {
        fp32,
        steps,
        cx,
        user_map: steps.precision.clone().unwrap_or_default(),
        ty: if to == Precision::Bf16 {
            "bfloat16"
        } else {
            "float16"
        },
        to,
        started,
    };
    if let Some(note) = quantized::quantized_activations(fp32, s.ty) {
        crate::progress::note("half", format!("note: {note}"));
        let mut all_fp32 = steps.clone();
        all_fp32
            .precision
            .get_or_insert_with(PrecisionMap::default)
            .default = Some(Precision::Fp32);
        let (model, mut run) = convert(fp32, &all_fp32, &[], cx.options)?;
        run.notes.push(note);
        return Ok(Outcome {
            model,
            run,
            report: None,
            judged: None,
        });
    }
    let (mut model, mut run) = convert(fp32, steps, &[], cx.options)?;
    let ranges = match cx.search {
        true => tensor_ranges(cx.verifier, fp32)?,
        false => HashMap::new(),
    };
    let (overrides, kept, unseen_kept) = s.rule_islands(&model, &ranges)?;
    if !overrides.is_empty() {
        (model, run) = convert(fp32, steps, &overrides, cx.options)?;
    }
    let warning = s.generated_warning(unseen_kept);
    if let Some(w) = &warning {
        crate::progress::note("half", format!("warning: {w}"));
    }
    // A candidate the verifier's backend cannot load (bfloat16 in tract) is
    // left to the verification's own fallbacks.
    let Ok(first) = judge(cx.verifier, &model) else {
        return Ok(Outcome {
            model,
            run,
            report: None,
            judged: None,
        });
    };
    let converted = score(&first.outputs);
    let mut st = State {
        model,
        run,
        judged: first,
        overrides,
        kept,
        best: converted,
        without_effect: Vec::new(),
        tried: HashSet::new(),
        fruitless: 0,
        trials: 0,
        worst_remaining: Vec::new(),
    };
    while cx.search && !st.judged.passed {
        if !s.step(&mut st, &ranges)? {
            break;
        }
    }
    s.finish(st, converted, warning)
}

/// One conversion to a half type and its search for float32 islands: what
/// every step reads.
struct Search<'a> {
    fp32: &'a Model,
    steps: &'a PipelineConfig,
    cx: &'a Context<'a>,
    /// The user's precision map: the nodes it names are never searched.
    user_map: PrecisionMap,
    /// "float16" or "bfloat16", for the lines.
    ty: &'static str,
    to: Precision,
    started: Instant,
}

/// Where the search stands: the current candidate, judged, and what it
/// keeps in float32 and why.
struct State {
    model: Model,
    run: PipelineRun,
    judged: Judged,
    overrides: Vec<Override>,
    kept: Vec<KeptLayer>,
    /// The lowest output cosine of the current candidate.
    best: f64,
    without_effect: Vec<String>,
    tried: HashSet<String>,
    fruitless: usize,
    trials: usize,
    worst_remaining: Vec<NodeError>,
}

/// One try: the overrides with a block of nodes kept in float32, and its
/// judgement.
struct Attempt {
    trial: Vec<Override>,
    block: Vec<NodeError>,
    model: Model,
    run: PipelineRun,
    judged: Judged,
    after: f64,
}

impl Search<'_> {
    /// Whether the user's precision map decides this node.
    fn forced(&self, name: &str) -> bool {
        self.fp32.graph.find_node(name).is_some_and(|id| {
            self.user_map
                .override_for(self.fp32.graph.node(id))
                .is_some()
        })
    }

    /// The islands kept by rule before any judgement (float16 only): what
    /// overflows on the verification inputs, and with generated inputs what
    /// may overflow on real ones. Returns the overrides, the kept layers and
    /// how many were kept for unseen inputs.
    fn rule_islands(
        &self,
        model: &Model,
        ranges: &HashMap<String, f64>,
    ) -> OpsResult<(Vec<Override>, Vec<KeptLayer>, usize)> {
        let (cx, fp32, ty) = (self.cx, self.fp32, self.ty);
        let mut kept: Vec<KeptLayer> = Vec::new();
        let mut overrides: Vec<Override> = Vec::new();
        if !cx.search || self.to != Precision::Fp16 {
            return Ok((overrides, kept, 0));
        }
        for (node, op, tensor, max) in out_of_range(fp32, model, ranges) {
            if self.forced(&node) {
                continue;
            }
            let reason = format!(
                "automatic float32 island: its float32 {} '{tensor}' reaches {max:.4e} on the verification inputs ({}), beyond half of float16's largest value 65504: float16 overflows there on GPUs and TensorRT",
                if produces(fp32, &node, &tensor) {
                    "output"
                } else {
                    "input"
                },
                cx.inputs
            );
            crate::progress::note(
                "half",
                format!("{ty}: keeping '{node}' ({op}) in float32: {reason}"),
            );
            let (o, k) = kept_by_rule(node, op, KeptFor::Range, tensor, max, reason);
            overrides.push(o);
            kept.push(k);
        }
        let mut unseen_kept = 0;
        if cx.generated_inputs {
            let unseen = unseen_islands(cx, fp32, model, &self.user_map, &overrides)?;
            unseen_kept = unseen.len();
            for (o, k) in unseen {
                crate::progress::note(
                    "half",
                    format!(
                        "{ty}: keeping '{}' ({}) in float32: {}",
                        k.node, k.op, k.reason
                    ),
                );
                overrides.push(o);
                kept.push(k);
            }
        }
        Ok((overrides, kept, unseen_kept))
    }

    /// The warning that the conversion was judged on generated inputs.
    fn generated_warning(&self, unseen_kept: usize) -> Option<String> {
        let (cx, ty) = (self.cx, self.ty);
        cx.generated_inputs.then(|| {
            if self.to == Precision::Bf16 {
                return format!(
                    "{ty} was judged on generated inputs ({}), not on your data; give real inputs with --inputs FILE.npz to judge it on them",
                    cx.inputs
                );
            }
            format!(
                "{ty} was judged on generated inputs ({}), not on your data: values real inputs take (a tone's power, a bright image, a long sum) may leave {ty}'s range where these did not; {} node(s) kept in float32 for that alone (exponentials, powers, squares, a logarithm's or root's argument, and what overflows with the inputs scaled by {}); give real inputs with --inputs FILE.npz to judge it on them",
                cx.inputs,
                unseen_kept,
                unseen::HEADROOM
            )
        })
    }

    /// One round of the search: the worst node not yet tried, kept in
    /// float32 if that helps. False when the search ends.
    fn step(&self, st: &mut State, ranges: &HashMap<String, f64>) -> OpsResult<bool> {
        let ranked = ranking(self.cx, self.fp32, &st.model, &st.judged.outputs, self.to)?;
        let pick = ranked
            .iter()
            .find(|r| !st.tried.contains(&r.node) && !self.forced(&r.node));
        let stop = st.trials >= MAX_TRIALS
            || st.fruitless >= MAX_FRUITLESS
            || self.started.elapsed().as_secs_f64() > MAX_SEARCH_SECONDS;
        let Some(pick) = pick.cloned().filter(|_| !stop) else {
            st.worst_remaining = ranked.into_iter().take(5).collect();
            return Ok(false);
        };
        st.tried.insert(pick.node.clone());
        let Some(a) = self.attempt(st, &pick, &ranked)? else {
            return Ok(false);
        };
        if a.after <= st.best && !a.judged.passed {
            let names = names(&a.block);
            crate::progress::note(
                "half",
                format!(
                    "{}: keeping {names} in float32 does not help (lowest cosine {:.6}); put back",
                    self.ty, a.after
                ),
            );
            st.without_effect.push(format!(
                "{names}: lowest output cosine {:.6} -> {:.6}",
                st.best, a.after
            ));
            st.fruitless += 1;
            return Ok(true);
        }
        self.keep(st, &pick, a, ranges);
        Ok(true)
    }

    /// The node alone; when that does not help, with the half-typed nodes
    /// that feed it (a cancellation needs its sum and its difference in
    /// float32).
    fn attempt(
        &self,
        st: &mut State,
        pick: &NodeError,
        ranked: &[NodeError],
    ) -> OpsResult<Option<Attempt>> {
        let mut block = vec![pick.clone()];
        let mut attempt = None;
        for round in 0..2 {
            if round == 1 {
                let feeders: Vec<NodeError> = feeders(self.fp32, &st.model, &pick.node, ranked)
                    .into_iter()
                    .filter(|f| {
                        !self.forced(&f.node)
                            && !st
                                .overrides
                                .iter()
                                .any(|o| o.selector == Selector::exact(&f.node))
                    })
                    .collect();
                if feeders.is_empty() || st.trials >= MAX_TRIALS {
                    break;
                }
                block.extend(feeders);
            }
            st.trials += 1;
            let mut trial = st.overrides.clone();
            trial.extend(block.iter().map(|b| Override {
                selector: Selector::exact(&b.node),
                to: Precision::Fp32,
                why: None,
            }));
            let (model, run) = convert(self.fp32, self.steps, &trial, self.cx.options)?;
            let judged = judge(self.cx.verifier, &model)?;
            let after = score(&judged.outputs);
            let helps = after > st.best || judged.passed;
            attempt = Some(Attempt {
                trial,
                block: block.clone(),
                model,
                run,
                judged,
                after,
            });
            if helps {
                break;
            }
        }
        Ok(attempt)
    }

    /// Keeps an attempt that helped: its nodes recorded with the measured
    /// reason, its candidate the current one.
    fn keep(&self, st: &mut State, pick: &NodeError, a: Attempt, ranges: &HashMap<String, f64>) {
        st.fruitless = 0;
        let (best, after) = (st.best, a.after);
        let with = if a.block.len() > 1 {
            format!(" (together with {})", names(&a.block))
        } else {
            String::new()
        };
        let mut trial = a.trial;
        for (i, b) in a.block.iter().enumerate() {
            let loss = if i == 0 {
                describe_loss(b)
            } else {
                format!(
                    "its float16 output '{}' feeds '{}', which float32 alone does not repair",
                    b.tensor, pick.node
                )
            };
            let reason = format!(
                "automatic float32 island: {loss}; keeping it in float32{with} raises the lowest output cosine from {best:.6} to {after:.6} on the verification inputs ({})",
                self.cx.inputs
            );
            crate::progress::note(
                "half",
                format!(
                    "{}: keeping '{}' ({}) in float32: {reason}",
                    self.ty, b.node, b.op
                ),
            );
            st.kept.push(KeptLayer {
                node: b.node.clone(),
                op: b.op.clone(),
                kept_for: KeptFor::Error,
                tensor: b.tensor.clone(),
                float32_max: ranges.get(&b.tensor).copied().unwrap_or(f64::NAN),
                output_snr_db: Some(b.output_snr_db).filter(|x| x.is_finite()),
                added_db: Some(b.added_db).filter(|x| x.is_finite()),
                cosine_before: Some(best),
                cosine_after: Some(after),
                reason: reason.clone(),
            });
            let at = trial.len() - a.block.len() + i;
            trial[at].why = Some(reason);
        }
        st.overrides = trial;
        st.best = after;
        (st.model, st.run, st.judged) = (a.model, a.run, a.judged);
    }

    /// The model once more with the measured reasons (so that the pass
    /// reports them), the notes on outputs judged by their absolute error,
    /// and the report.
    fn finish(&self, mut st: State, converted: f64, warning: Option<String>) -> OpsResult<Outcome> {
        let cx = self.cx;
        // The judged model is the one returned unless the rerun below differs.
        let mut judged_exactly = true;
        if !st.overrides.is_empty() {
            let (again, again_run) = convert(self.fp32, self.steps, &st.overrides, cx.options)?;
            judged_exactly = same_model(&again, &st.model);
            (st.model, st.run) = (again, again_run);
        }
        let criterion = cx.verifier.verification(Vec::new(), true).criterion;
        let target_cosine = match criterion {
            Criterion::Scaled { min_cosine, .. } => Some(min_cosine),
            Criterion::Elementwise { .. } => None,
        };
        // An output judged by its absolute error instead of its cosine (see
        // Criterion::judge_bounded) is said: the inputs did not exercise it.
        for o in st
            .judged
            .outputs
            .iter()
            .filter(|o| criterion.passed_below_cosine(o))
        {
            st.run.notes.push(format!(
                "{}: output '{}' stays within the bottom {:.2}% of its fixed range on the verification inputs ({}): judged by its absolute error ({:.3e}), not by its cosine ({:.6}); give inputs that exercise it with --inputs",
                self.ty,
                o.name,
                100.0 * (1.0 - target_cosine.unwrap_or(1.0)),
                cx.inputs,
                o.max_abs,
                o.cosine,
            ));
        }
        let report = HalfReport {
            precision: self.to.as_str().to_string(),
            target_cosine,
            inputs: cx.inputs.clone(),
            generated_inputs: cx.generated_inputs,
            warning,
            cosine_converted: converted,
            cosine_final: score(&st.judged.outputs),
            reached: st.judged.passed,
            searched: cx.search,
            kept_fp32: st.kept,
            without_effect: st.without_effect,
            worst_remaining: st.worst_remaining,
            trials: st.trials,
            seconds: self.started.elapsed().as_secs_f64(),
        };
        Ok(Outcome {
            model: st.model,
            run: st.run,
            judged: judged_exactly.then_some(st.judged),
            report: Some(report),
        })
    }
}

/// "a (Op) + b (Op)": the nodes of a block.
fn names(block: &[NodeError]) -> String {
    block
        .iter()
        .map(|b| format!("{} ({})", b.node, b.op))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The verification of the half model from the float32 island search's
/// last judgement, when that judged exactly this model and it agreed: the
/// verifier would load and run the same bytes on the same inputs in the
/// same backend again. A judgement that disagreed is not reused: the full
/// verification may still excuse it (ONNX Runtime's optimizer, or tract
/// alone seeing a difference).
pub fn reuse_judgement(
    v: &Verifier,
    judged: Option<Judged>,
    notes: &mut Vec<String>,
) -> Option<(
    infopt_verify::Verification,
    Box<dyn infopt_runtime::LoadedModel>,
)> {
    let j = judged.filter(|j| j.passed)?;
    notes.push(format!(
        "verification: the float32 island search's last judgement, in {} on the same inputs, was of exactly this model: reused, not run again",
        v.backend_name()
    ));
    Some((v.verification(j.outputs, true), j.loaded))
}

/// A node kept in float32 by a rule (a value range, an unseen-input guard), not by
/// a measured trial: its override and its report row.
fn kept_by_rule(
    node: String,
    op: String,
    kept_for: KeptFor,
    tensor: String,
    max: f64,
    reason: String,
) -> (Override, KeptLayer) {
    (
        Override {
            selector: Selector::exact(&node),
            to: Precision::Fp32,
            why: Some(reason.clone()),
        },
        KeptLayer {
            node,
            op,
            kept_for,
            tensor,
            float32_max: max,
            output_snr_db: None,
            added_db: None,
            cosine_before: None,
            cosine_after: None,
            reason,
        },
    )
}

/// `a` followed by `b`, as one pipeline run.
pub fn merged(mut a: PipelineRun, b: PipelineRun) -> PipelineRun {
    a.records.extend(b.records);
    a.declined.extend(b.declined);
    a.notes.extend(b.notes);
    a.budget_exhausted.extend(b.budget_exhausted);
    a.stopped_after = a.stopped_after.or(b.stopped_after);
    a
}

/// One output that failed, saying which bound it missed: an output whose cosine
/// meets the target failed the elementwise bound (the half-widened atol/rtol),
/// and saying "misses cosine >= 0.999" next to a cosine of 0.9999 misleads.
fn failing_output(o: &OutputAgreement, target_cosine: Option<f64>) -> String {
    match target_cosine {
        Some(c) if o.issue.is_none() && o.cosine >= c => format!(
            "{} (cosine {:.6} meets it, but {} of {} elements are beyond atol {:.1e} + rtol {:.1e} x |reference|, max abs {:.3e})",
            o.name, o.cosine, o.mismatches, o.elements, o.atol, o.rtol, o.max_abs
        ),
        _ => format!(
            "{} (cosine {:.6}, max abs {:.3e})",
            o.name, o.cosine, o.max_abs
        ),
    }
}

/// The one-line refusal of a half model that misses its target.
pub fn missed_target(report: &HalfReport, outputs: &[OutputAgreement]) -> OpsError {
    let ty = if report.precision == "bf16" {
        "bfloat16"
    } else {
        "float16"
    };
    let target = report
        .target_cosine
        .map_or("its tolerance".to_string(), |c| format!("cosine >= {c}"));
    let failing: Vec<String> = outputs
        .iter()
        .filter(|o| !o.within_tolerance)
        .map(|o| failing_output(o, report.target_cosine))
        .collect();
    let kept: Vec<String> = report
        .kept_fp32
        .iter()
        .map(|k| format!("{} ({})", k.node, k.op))
        .collect();
    let worst: Vec<String> = report
        .worst_remaining
        .iter()
        .map(|w| format!("{} ({})", w.node, w.op))
        .collect();
    let layers = match (kept.is_empty(), worst.is_empty()) {
        _ if !report.searched => {
            "no layer was kept in float32 automatically (--no-auto-fp32)".to_string()
        }
        (true, true) => "no layer kept in float32 helped".to_string(),
        (true, false) => format!(
            "no layer kept in float32 helped; the layers adding the most error: {}",
            worst.join(", ")
        ),
        (false, _) => format!(
            "even with {} layer{} kept in float32 ({}){}",
            kept.len(),
            if kept.len() == 1 { "" } else { "s" },
            kept.join(", "),
            if worst.is_empty() {
                String::new()
            } else {
                format!("; still adding the most error: {}", worst.join(", "))
            }
        ),
    };
    let hint = if report.generated_inputs {
        "; judged on generated inputs: give real ones with --inputs FILE.npz"
    } else {
        ""
    };
    OpsError::new(
        ErrorKind::Verify,
        format!(
            "the {ty} model misses its accuracy target ({target}) on {}: {}; {layers}; output not written{hint} (keep layers with --precision NAME=fp32, or --no-verify to write it anyway)",
            report.inputs,
            failing.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests;
