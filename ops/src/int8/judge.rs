//! Judging a candidate INT8 model against the original on the data: the
//! samples after the calibration ones, or the calibration samples when the
//! data has no others (the first judgement finds out which, and every later
//! one uses the same samples, so that candidates are compared on one set).
//!
//! The judged samples and the original's outputs on them are read and run
//! once, at the first judgement, and kept (see [`evaluate::Reference`]):
//! the search judges dozens of candidates on the same samples, and before
//! that every judgement read the data again and ran the original again.
//! Samples beyond the memory budget are streamed as before.

use infopt_calibration::run::DataSource;
use infopt_ir::Model;
use infopt_verify::ChosenBackend;
use infopt_verify::evaluate::{self, Heads, HeldOut, Reference};

use super::context::{Context, open_again};
use super::costs::Costs;
use crate::error::{ErrorKind, OpsError, OpsResult};

mod from_calibration;
mod prefix;
mod side_by_side;
mod together;

/// The judged samples one judge read, handed to the next.
pub(super) struct Seed {
    reference: Reference,
    asked: usize,
    on_calibration: bool,
    calibrated: usize,
}

/// Memory the kept samples and outputs may take at most: a quarter of what
/// is available, and never more than this.
const REFERENCE_BUDGET: u64 = 2 << 30;

/// Probes run side by side at most (see [`Judge::probe_each`]).
const MOST_SIDE_BY_SIDE: usize = 4;

pub(super) struct Judge<'a> {
    pub src: &'a DataSource,
    pub backend: &'a ChosenBackend,
    pub cx: &'a Context<'a>,
    /// The model at the quantize step (the data is opened for its inputs).
    pub mid: &'a Model,
    pub heads: &'a Heads,
    /// Samples calibration used.
    pub calibrated: usize,
    /// Samples judged at most.
    pub limit: usize,
    pub costs: &'a Costs,
    /// The judged samples and the original's outputs, once read.
    reference: Option<Reference>,
    /// Samples the reference was asked for so far (it holds fewer only
    /// where the data ended or the memory budget did).
    reference_asked: usize,
    /// Whether the judged samples are the calibration ones.
    on_calibration: bool,
    /// With a caller's metric installed (see `metric.rs`): the float
    /// model's score by number of samples judged, computed once each.
    original_scores: std::collections::HashMap<usize, f64>,
    /// Probes by the candidate's bytes and sample count (see
    /// [`fingerprint`]): a candidate built again the same way (the
    /// placement timing's probe of the placement taken is the range
    /// choice's probe; the search's builds that one activation or layer
    /// leaves unchanged) costs no session and no run.
    probed: std::collections::HashMap<(u64, usize), HeldOut>,
    /// A judgement so far held an output to nearest-neighbour agreement
    /// (see `infopt_verify::neighbours`).
    pub judges_neighbours: bool,
    /// How independent probes run side by side, once decided.
    side_by_side: Option<SideBySide>,
    /// The calibration's runs of its samples (see `from_calibration.rs`).
    calibration_runs: Vec<infopt_calibration::run::KeptRun>,
    /// Whether a union of probes loads in no more time than its members'
    /// sessions apart, once one has loaded (see `together.rs`).
    unions_pay: Option<bool>,
    /// A base model's tensors on the probe samples, which probes of
    /// candidates computing part of the same take instead (see `prefix.rs`).
    prefix: Option<prefix::Prefix>,
}

/// Independent probes run side by side: `count` at once, each in its own
/// session of `backend` (ONNX Runtime with its share of the threads) or of
/// the judge's own backend (tract, one thread each).
struct SideBySide {
    count: usize,
    backend: Option<ChosenBackend>,
}

/// A hash of `model`'s serialized bytes (None when it does not serialize:
/// then it is probed as it is).
pub(super) fn fingerprint(model: &Model) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let bytes = model.to_bytes_referencing_sources().ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    Some(h.finish())
}

/// The budget for the kept samples (see [`REFERENCE_BUDGET`]).
pub(super) fn reference_budget() -> usize {
    let available = infopt_verify::memory::available_bytes().unwrap_or(REFERENCE_BUDGET * 4);
    usize::try_from((available / 4).min(REFERENCE_BUDGET)).unwrap_or(usize::MAX)
}

impl<'a> Judge<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        src: &'a DataSource,
        backend: &'a ChosenBackend,
        cx: &'a Context<'a>,
        mid: &'a Model,
        heads: &'a Heads,
        calibrated: usize,
        limit: usize,
        costs: &'a Costs,
    ) -> Self {
        Judge {
            src,
            backend,
            cx,
            mid,
            heads,
            calibrated,
            limit,
            costs,
            reference: None,
            reference_asked: 0,
            on_calibration: false,
            original_scores: std::collections::HashMap::new(),
            probed: std::collections::HashMap::new(),
            judges_neighbours: false,
            side_by_side: None,
            calibration_runs: Vec::new(),
            unions_pay: None,
            prefix: None,
        }
    }

    /// What this judge read of the judged samples, for another judge of the
    /// same samples (see [`Judge::seeded`]).
    pub fn into_reference(self) -> Option<Seed> {
        let reference = self.reference?;
        Some(Seed {
            reference,
            asked: self.reference_asked,
            on_calibration: self.on_calibration,
            calibrated: self.calibrated,
        })
    }

    /// Starts from what another judge of the same data read (the placement
    /// probes after the calibration's first sample), where it judged the
    /// same samples: it skipped as many calibration samples, or both judge
    /// on the calibration samples (that judge counted the samples the
    /// calibration would run on, this one those it ran on).
    pub fn seeded(mut self, seed: Option<Seed>) -> OpsResult<Self> {
        let Some(s) = seed else {
            return Ok(self);
        };
        let same = match s.on_calibration {
            true => !self.has_held_out()?,
            false => s.calibrated == self.calibrated,
        };
        if same {
            self.reference = Some(s.reference);
            self.reference_asked = s.asked.min(self.limit);
            self.on_calibration = s.on_calibration;
        }
        Ok(self)
    }

    /// A float model written in INT8's place (or the input): on the first
    /// `probe_samples`. It is the float passes' output, which `optimize` without
    /// `--int8` verifies on one run of generated inputs, and judging it on
    /// every sample ran the original on all of them for a model with no
    /// INT8 in it (DNSMOS: 10 s of its 23). With a caller's metric, on
    /// every sample: the report gives the caller's score of what was
    /// written on all of their data.
    pub fn judge_float(&mut self, float: &Model, probe_samples: usize) -> OpsResult<HeldOut> {
        if super::metric::installed() {
            return self.judge(float);
        }
        self.probe(float, probe_samples)
    }

    /// `candidate` on every judged sample.
    pub fn judge(&mut self, candidate: &Model) -> OpsResult<HeldOut> {
        self.costs.count("judged on every sample", 1);
        self.judge_on(candidate, self.limit)
    }

    /// `candidate` on the first `limit` judged samples.
    /// The same model probed on as many samples again is answered from the
    /// first probe (the same session options and inputs give ONNX
    /// Runtime's CPU kernels the same outputs).
    pub fn probe(&mut self, candidate: &Model, limit: usize) -> OpsResult<HeldOut> {
        let key = fingerprint(candidate).map(|f| (f, limit));
        if let Some(h) = key.and_then(|k| self.probed.get(&k)) {
            self.costs.count("probes answered by an identical model", 1);
            return Ok(h.clone());
        }
        self.costs.count("probed on a few samples", 1);
        let h = self.judge_on(candidate, limit)?;
        if let Some(k) = key {
            self.probed.insert(k, h.clone());
        }
        Ok(h)
    }

    fn pair<'b>(&'b self, candidate: &'b Model) -> evaluate::Pair<'b> {
        evaluate::Pair {
            chosen: self.backend,
            original: self.cx.original,
            candidate,
            dir: self.cx.dir,
            shapes: self.cx.shapes,
        }
    }

    /// Reads the judged samples and runs the original on them: the first
    /// `want` of those after the calibration samples, or of these when
    /// there are none, and later more as they are wanted. Probes want a
    /// few: a command that ends on probes (DNSMOS: the float model written
    /// after the placements' probes) runs the original on those alone, not
    /// on every judged sample (64 runs of 137 ms).
    fn read_reference(&mut self, want: usize) -> OpsResult<()> {
        let want = want.min(self.limit);
        if let Some(r) = &self.reference
            && (self.reference_asked >= want || r.len() < self.reference_asked)
        {
            return Ok(());
        }
        if self.reference.is_none() {
            crate::progress::note(
                "int8",
                format!(
                    "int8: running the original on the judged samples (up to {want}), kept for every candidate"
                ),
            );
        }
        let budget = reference_budget();
        self.decide_side_by_side(self.cx.original)?;
        let (runner, sessions) = self.sessions();
        let collect = |skip: usize, limit: usize, budget: usize| -> OpsResult<Reference> {
            let mut data = open_again(self.src, self.backend, self.cx, self.mid)?;
            let r = Reference::collect_side_by_side(
                &self.pair(self.cx.original),
                data.as_mut(),
                (skip, limit, budget),
                runner,
                sessions,
            )?;
            self.costs
                .add("original: sessions", r.loads, r.load_seconds);
            self.costs.add("original: runs", r.len(), r.run_seconds);
            Ok(r)
        };
        let kept = self
            .reference
            .as_ref()
            .map(|r| (r.skipped + r.len(), r.len(), r.bytes()));
        let (more, on_calibration) = match kept {
            Some((skip, len, bytes)) => {
                let room = budget.saturating_sub(bytes).max(1);
                match self.calibration_outputs(want, room) {
                    Some(more) => (more, true),
                    None => (collect(skip, want - len, room)?, self.on_calibration),
                }
            }
            // No sample beyond the calibration ones: judge on those.
            None if !self.has_held_out()? => (collect(0, want, budget)?, true),
            None => {
                let r = collect(self.calibrated, want, budget)?;
                match r.is_empty() {
                    true => (collect(0, want, budget)?, true),
                    false => (r, false),
                }
            }
        };
        if let Some(why) = more.non_finite_sample() {
            return Err(OpsError::usage(why));
        }
        match self.reference.as_mut() {
            Some(r) => r.append(more),
            None => self.reference = Some(more),
        }
        self.on_calibration = on_calibration;
        self.reference_asked = want;
        Ok(())
    }

    /// The positions in the data of the samples read so far (the probe
    /// samples once a probe ran); None before any.
    pub fn samples_read(&self) -> Option<std::ops::Range<usize>> {
        let r = self.reference.as_ref()?;
        Some(r.skipped..r.skipped + r.len())
    }

    /// Whether the data may have samples after the calibration ones (false
    /// only where it says how many it has): then the original is not
    /// loaded only to find none.
    fn has_held_out(&self) -> OpsResult<bool> {
        let data = open_again(self.src, self.backend, self.cx, self.mid)?;
        Ok(data.sample_count().is_none_or(|n| n > self.calibrated))
    }

    /// Keeps `base`'s tensors on the first `limit` judged samples, for the
    /// probes after it to take what they compute the same (see
    /// `prefix.rs`); replaces the base kept before. Not where probes go
    /// together (a union computes what its members share once: on
    /// magika, PP-OCRv4 rec and XFeat the cut probes instead of unions
    /// took 3-18% longer, where PP-OCRv4 det's ranking, whose runs are too
    /// long for unions, took a median 11.0 s against 13.9), not with a
    /// caller's metric (it scores every output of the whole model), nor
    /// where the tensors would take more than [`prefix::budget`].
    pub fn keep_prefix(&mut self, base: &Model, limit: usize) -> OpsResult<()> {
        self.prefix = None;
        if !self.wants_prefix(limit)? {
            return Ok(());
        }
        let Some(reference) = self.reference.as_ref().filter(|r| r.covers(limit)) else {
            return Ok(());
        };
        crate::progress::note(
            "int8",
            format!(
                "int8: running the ranking's context on {limit} probe sample(s), keeping its tensors for the probes after it"
            ),
        );
        let t = std::time::Instant::now();
        let kept = prefix::Prefix::capture(
            self.backend,
            base,
            self.cx.dir,
            reference,
            limit,
            prefix::budget(),
        )?;
        self.costs.add(
            "base tensors kept for cut probes",
            usize::from(kept.is_some()),
            t.elapsed().as_secs_f64(),
        );
        self.prefix = kept;
        Ok(())
    }

    /// Whether probes on `limit` samples would take a base's tensors (see
    /// [`Judge::keep_prefix`]): asked before the base is built.
    pub fn wants_prefix(&mut self, limit: usize) -> OpsResult<bool> {
        if super::metric::installed() {
            return Ok(false);
        }
        self.read_reference(limit)?;
        Ok(!self.unions_may_go())
    }

    /// Books a candidate's sessions, runs and comparisons.
    fn book_judged(&self, judged: &evaluate::Judged) {
        self.costs
            .add("candidate: sessions", judged.loads, judged.load_seconds);
        self.costs
            .add("candidate: runs", judged.runs, judged.run_seconds);
        self.costs.add(
            "candidate: outputs compared",
            judged.runs,
            judged.compare_seconds,
        );
    }

    fn judge_on(&mut self, candidate: &Model, limit: usize) -> OpsResult<HeldOut> {
        self.read_reference(limit)?;
        self.decide_side_by_side(candidate)?;
        let Some(reference) = self.reference.as_ref() else {
            return Err(OpsError::new(
                ErrorKind::Internal,
                "the judged samples were not read",
            ));
        };
        let scored = super::metric::installed();
        // No base is kept with a caller's metric (see `keep_prefix`).
        let (backend, sessions) = self.sessions();
        let cut_judged = self.prefix.as_ref().and_then(|p| {
            let dir = self.cx.dir;
            p.judge_cut(
                backend, sessions, candidate, dir, reference, limit, self.heads,
            )
        });
        let mut h = if let Some(judged) = cut_judged {
            self.costs.count(prefix::CUT_PROBES, 1);
            self.book_judged(&judged);
            judged.held_out
        } else if reference.covers(limit) {
            let judged = evaluate::held_out_against_side_by_side(
                backend,
                sessions,
                candidate,
                self.cx.dir,
                self.cx.shapes,
                reference,
                limit,
                self.heads,
                scored,
            )?;
            let metric = if scored {
                let t = std::time::Instant::now();
                let names = output_names(self.cx.original);
                let candidate = metric_of(&names, judged.outputs.iter().map(Vec::as_slice))?;
                let original = match self.original_scores.get(&limit) {
                    Some(&s) => s,
                    None => {
                        let s = metric_of(&names, reference.expected(limit).into_iter())?;
                        self.original_scores.insert(limit, s);
                        s
                    }
                };
                self.costs
                    .add("metric (the caller's)", 1, t.elapsed().as_secs_f64());
                Some(evaluate::MetricScores {
                    candidate,
                    original,
                })
            } else {
                None
            };
            self.book_judged(&judged);
            let mut h = judged.held_out;
            h.metric = metric;
            h
        } else if scored {
            return Err(OpsError::usage(format!(
                "the metric scores the outputs of every judged sample, and {limit} of them do not fit in memory beside the original's: give fewer --held-out samples"
            )));
        } else {
            // More samples than the memory budget keeps: both models run
            // on each, read from the data again.
            let t = std::time::Instant::now();
            let mut data = open_again(self.src, self.backend, self.cx, self.mid)?;
            let h = evaluate::held_out(
                &self.pair(candidate),
                data.as_mut(),
                reference.skipped,
                limit,
                self.heads,
            )?;
            self.costs.add(
                "streamed judgements (both models)",
                1,
                t.elapsed().as_secs_f64(),
            );
            h
        };
        h.on_calibration_samples = self.on_calibration;
        self.judges_neighbours |= !h.neighbour_judged.is_empty();
        Ok(h)
    }
}

/// The names of `model`'s outputs, in order.
fn output_names(model: &Model) -> Vec<String> {
    let g = &model.graph;
    g.outputs
        .iter()
        .map(|io| g.value(io.value).name.clone())
        .collect()
}

/// The caller's metric of `samples` (outputs in the model's order).
fn metric_of<'s>(
    names: &[String],
    samples: impl Iterator<Item = &'s [infopt_runtime::HostTensor]>,
) -> OpsResult<f64> {
    let named: Vec<Vec<(String, infopt_runtime::HostTensor)>> = samples
        .map(|outs| names.iter().cloned().zip(outs.iter().cloned()).collect())
        .collect();
    match super::metric::score(&named) {
        Some(Ok(s)) => Ok(s),
        Some(Err(e)) => Err(OpsError::new(
            ErrorKind::Verify,
            format!(
                "the metric failed on the outputs of {} sample(s): {e}",
                named.len()
            ),
        )),
        None => Err(OpsError::new(ErrorKind::Internal, "no metric installed")),
    }
}
