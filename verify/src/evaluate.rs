//! Accuracy of a candidate against the original on held-out samples of a
//! dataset (never the samples a calibration saw): both models run on each
//! sample, and each output is compared over all samples together.

use std::collections::BTreeMap;
use std::path::Path;

use infopt_ir::Model;
use infopt_runtime::compare::{self, Tolerance};
use infopt_runtime::{HostTensor, InputShapes, IoSpec, LoadedModel, OutputAgreement};

use crate::backend::ChosenBackend;
use crate::dataset::Dataset;
use crate::error::{ErrorKind, Result, VerifyError};
use crate::neighbours;
use crate::parts::{self, ACTIVE_FRACTION, Part, PartKind};
pub use crate::top_class::Value;
#[cfg(test)]
use crate::top_class::margin_and_error;
use crate::top_class::{argmax, margin_and_error_at};

pub mod across;
mod heads;
mod side_by_side;
mod together;
pub use heads::{
    Heads, MOST_REGRESSED, classifier_outputs, label_outputs, output_heads, regression_outputs,
};
pub use side_by_side::{
    Fed, held_out_against, held_out_against_fed, held_out_against_keeping,
    held_out_against_side_by_side,
};
pub use together::held_out_together;

/// The shape of every input of one sample.
pub type SampleShapes = Vec<Vec<usize>>;

/// What was evaluated.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HeldOut {
    /// Samples skipped first (the calibration samples).
    pub skipped: usize,
    pub samples: usize,
    pub dataset: String,
    /// False for random data.
    pub meaningful: bool,
    /// The data had no samples beyond the calibration ones, so these are the
    /// calibration samples: the figures say how well the model fits the data
    /// it was calibrated on, not how it generalizes.
    pub on_calibration_samples: bool,
    /// Per output, over every held-out sample.
    pub outputs: Vec<OutputAgreement>,
    /// Per classifier-like output (see [`classifier_outputs`]): the fraction
    /// of rows (positions along all but the last axis, over all samples)
    /// whose largest class is the original's.
    pub top1_agreement: BTreeMap<String, f64>,
    /// Per classifier-like output: the top-1 agreement to expect on rows
    /// like these that were not seen (see [`expected_agreement`]): a smooth
    /// estimate where the count of rows that changed class is all or
    /// nothing on a few samples whose classes are clear.
    pub top1_expected: BTreeMap<String, f64>,
    /// Outputs that hold different quantities side by side (a detector's
    /// boxes and scores), and maps of scores, judged part by part (see
    /// [`crate::parts`]); each part is held to the output's target.
    pub parts: Vec<PartAgreement>,
    /// The caller's own metric on these samples, when it gave one (set by
    /// the caller: this module never scores a task).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<MetricScores>,
    /// Embedding outputs (see [`crate::neighbours`]) whose entries in
    /// `top1_agreement` and `top1_expected` are nearest-neighbour
    /// agreements between the samples' vectors, not class agreements.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub neighbour_judged: Vec<String>,
    /// Class maps (an ArgMax's output, see `heads::label_outputs`) whose
    /// entries in `top1_agreement` are the fraction of elements equal to
    /// the original's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub label_judged: Vec<String>,
    /// Per output of a few values per sample (see [`across`]): the lowest
    /// correlation across the samples of one of its values with the
    /// original's, held to the cosine target.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub correlation: BTreeMap<String, f64>,
    /// The same with every error times [`UNSEEN_ERROR_FACTOR`]: what to
    /// expect on unseen samples when these are the calibration ones.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub correlation_expected: BTreeMap<String, f64>,
}

impl HeldOut {
    /// What `top1_agreement` means for output `name`, for messages.
    pub fn agreement_kind(&self, name: &str) -> &'static str {
        if self.neighbour_judged.iter().any(|n| n == name) {
            "nearest-neighbour agreement"
        } else if self.label_judged.iter().any(|n| n == name) {
            "label agreement"
        } else {
            "top-1 agreement"
        }
    }
}

/// A caller's metric (higher is better) of both models on the same samples.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct MetricScores {
    pub candidate: f64,
    pub original: f64,
}

/// How much larger than on the judged samples the error of a model is taken
/// to be on samples it was not calibrated on, for [`expected_agreement`]:
/// ranges fit the samples they came from (nothing clips there). On magika
/// (64 calibration files, 300 others) the flip rate on the others was 3.4x
/// the estimate from the calibration files' own errors and 1.7x the
/// estimate from twice those errors.
pub const UNSEEN_ERROR_FACTOR: f64 = 2.0;

/// Rows of a classifier output whose margin and error are kept for
/// [`expected_agreement`] (the first ones; enough for a fraction to 1e-4).
const ROWS_KEPT: usize = 1 << 16;

/// The top-1 agreement to expect on unseen rows: a row keeps its class when
/// its margin (the original's top score less its runner-up's) is at least
/// the error that moves another class past the top one. The margins of the
/// rows seen and their errors (times `factor`) are paired every way, so a
/// row with a thin margin is tried against every error seen, not only its
/// own: `1 - mean_{j,k} [margin_j < factor * error_k]`. Rows whose error is
/// not finite count as changing class.
pub fn expected_agreement(margins: &[f32], errors: &[f32], factor: f64) -> f64 {
    if margins.is_empty() || errors.is_empty() {
        return 1.0;
    }
    let mut sorted: Vec<f32> = margins.to_vec();
    sorted.sort_by(f32::total_cmp);
    let mut changed = 0f64;
    for &e in errors {
        let limit = f64::from(e) * factor;
        changed += if limit.is_nan() {
            sorted.len() as f64
        } else {
            sorted.partition_point(|&m| f64::from(m) < limit) as f64
        };
    }
    1.0 - changed / (sorted.len() as f64 * errors.len() as f64)
}

/// The two models and where they run.
pub struct Pair<'a> {
    pub chosen: &'a ChosenBackend,
    pub original: &'a Model,
    pub candidate: &'a Model,
    /// Folder external data is resolved against.
    pub dir: &'a Path,
    pub shapes: &'a InputShapes,
}

/// Sums of one comparison: `a` the candidate's values, `b` the original's.
#[derive(Default, Clone)]
struct Sums {
    dot: f64,
    na: f64,
    nb: f64,
    noise: f64,
    elements: usize,
}

impl Sums {
    fn add(&mut self, x: f64, y: f64) {
        self.elements += 1;
        if x.is_finite() && y.is_finite() {
            self.dot += x * y;
            self.na += x * x;
            self.nb += y * y;
            self.noise += (x - y) * (x - y);
        }
    }

    fn cosine(&self) -> f64 {
        infopt_runtime::compare::cosine_of(self.dot, self.na, self.nb)
    }

    fn snr_db(&self) -> f64 {
        if self.noise == 0.0 {
            f64::INFINITY
        } else {
            10.0 * (self.nb / self.noise).log10()
        }
    }
}

/// Lanes of [`Running::add_elements`].
const LANES: usize = 4;

/// Per lane: the running sums of [`Sums`] (finite pairs only), the largest
/// |original|, difference and relative difference, and NaN mismatches.
#[derive(Default)]
struct Lanes {
    dot: [f64; LANES],
    na: [f64; LANES],
    nb: [f64; LANES],
    noise: [f64; LANES],
    scale: [f64; LANES],
    max_abs: [f64; LANES],
    max_rel: [f64; LANES],
    nan_mismatches: [usize; LANES],
}

impl Lanes {
    /// `x` the candidate's value, `y` the original's, in lane `k`.
    /// Selects, never branches: every figure is computed for every element
    /// and kept by comparison, so the lanes stay in step and the compiler
    /// keeps them in registers (with an early return for NaN and the
    /// quotient computed only where it could be the largest, PP-OCRv6
    /// small rec's 748k-element output took 2.3 ms a comparison, 1.2 ms
    /// without them). The figures are those of the branching form: a NaN
    /// pair and equal values (equal infinities included) differ by zero.
    #[inline(always)]
    fn add(&mut self, k: usize, x: f64, y: f64) {
        let finite = x.is_finite() & y.is_finite();
        let fx = if finite { x } else { 0.0 };
        let fy = if finite { y } else { 0.0 };
        self.dot[k] += fx * fy;
        self.na[k] += fx * fx;
        self.nb[k] += fy * fy;
        self.noise[k] += (fx - fy) * (fx - fy);
        let ay = y.abs();
        let finite_y = if ay < f64::INFINITY { ay } else { 0.0 };
        self.scale[k] = larger(self.scale[k], finite_y);
        let (xn, yn) = (x.is_nan(), y.is_nan());
        self.nan_mismatches[k] += usize::from(xn != yn);
        let diff = if xn | yn | (x == y) {
            0.0
        } else {
            (x - y).abs()
        };
        self.max_abs[k] = larger(self.max_abs[k], diff);
        let denom = if ay > compare::REL_FLOOR {
            ay
        } else {
            compare::REL_FLOOR
        };
        self.max_rel[k] = larger(self.max_rel[k], diff / denom);
    }
}

/// The larger of `kept` and `x`, neither NaN, as a select (`f64::max`'s
/// NaN handling keeps the compiler from it).
#[inline(always)]
fn larger(kept: f64, x: f64) -> f64 {
    if x > kept { x } else { kept }
}

/// An empty agreement named `name`, for figures filled in here.
fn agreement_named(name: &str) -> OutputAgreement {
    compare::compare_values(
        name,
        &[],
        &[],
        Tolerance {
            atol: 0.0,
            rtol: 0.0,
        },
    )
}

/// One part of an output (see [`crate::parts`]) judged on its own.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PartAgreement {
    /// The output it is part of.
    pub output: String,
    pub part: Part,
    /// Its figures, named like `output0[:, 4:22, :] (scores)`; for scores,
    /// over the positions judged only.
    pub agreement: OutputAgreement,
    /// Elements judged: every element of a part of values; for scores, the
    /// positions where either model scores above [`ACTIVE_FRACTION`].
    pub positions: usize,
    /// Elements of the part.
    pub elements: usize,
    /// For scores: how much of the score above any threshold the two
    /// models share, `1 - Σ|a - b| / Σ max(a, b)` over the positions judged
    /// (the IoU of the maps thresholded at t, pooled over every t in
    /// [0, 1]: a detection or a text pixel is a score above a threshold,
    /// and a score that moves by `d` changes the decision at `d` of the
    /// thresholds). Held to the top-1 target, as the fraction of decisions
    /// kept. None for values.
    pub score_agreement: Option<f64>,
    /// The same with the candidate's error doubled (see
    /// [`UNSEEN_ERROR_FACTOR`]): what to expect on samples the ranges were
    /// not fitted to, judged when the samples are the calibration ones.
    pub score_agreement_expected: Option<f64>,
}

/// `1 - Σ|a - b| / Σ max(a, b)` from its sums (1 when nothing scored).
fn shared_score(diff: f64, max: f64) -> f64 {
    if max > 0.0 { 1.0 - diff / max } else { 1.0 }
}

/// A part and its sums so far.
struct RunningPart {
    part: Part,
    sums: Sums,
    elements: usize,
    /// Scores: Σ|a - b| and Σ max(a, b) over the positions judged, and the
    /// same with the error doubled.
    diff: f64,
    max: f64,
    diff_unseen: f64,
    max_unseen: f64,
}

/// One output's agreement accumulated sample by sample, so that the
/// outputs of many samples never sit in memory together; the same figures
/// as [`compare::compare_values`] over the concatenation.
#[derive(Default)]
struct Running {
    max_abs: f64,
    max_rel: f64,
    scale: f64,
    sums: Sums,
    nan_mismatches: usize,
    shape_issue: Option<String>,
    rows: usize,
    rows_agreeing: usize,
    /// The first rows' margins and errors (see [`margin_and_error`]).
    margins: Vec<f32>,
    errors: Vec<f32>,
    /// The parts judged on their own, found on the first sample (None
    /// before it).
    parts: Option<Vec<RunningPart>>,
    /// An output of a few values per sample, not a classifier's: judged
    /// across samples too (see [`across`]); decided on the first sample.
    across: Option<Option<across::Across>>,
    /// A class map: its rows are its elements (see [`Running::add_labels`]).
    labels: bool,
    /// The axis of the classes when it is not the last: they are moved
    /// last before [`Running::add`] (see `heads::class_axis_outputs`).
    class_axis: Option<usize>,
}

impl Running {
    /// `a` the candidate's values, `b` the original's, of `shape`;
    /// `classes` the length of the last axis when top-1 agreement is wanted
    /// (a classifier output, which is not judged as a map of scores);
    /// `batch` the samples' rows (see `parts::find_parts`).
    fn add<T: Value>(
        &mut self,
        a: &[T],
        b: &[T],
        shape: &[usize],
        classes: Option<usize>,
        batch: Option<usize>,
    ) {
        if a.len() != b.len() {
            self.shape_issue = Some(format!("{} elements against {}", a.len(), b.len()));
            return;
        }
        self.add_elements(a, b);
        let few = classes.is_none() && b.len() <= across::MOST_VALUES;
        if let Some(acc) = self
            .across
            .get_or_insert_with(|| few.then(across::Across::default))
        {
            let wide = |v: &[T]| v.iter().map(|x| x.wide()).collect::<Vec<f64>>();
            acc.add(&wide(a), &wide(b), UNSEEN_ERROR_FACTOR);
        }
        // A classifier's class scores are one quantity, judged by top-1
        // agreement (random logits put a class in [0, 1] by chance); a dense
        // one's probabilities (a class per anchor) are judged as scores
        // too, but for the background (see `parts::dense_classifier_parts`).
        let parts = self.parts.get_or_insert_with(|| {
            let wide: Vec<f64> = b.iter().map(|v| v.wide()).collect();
            match classes {
                Some(c) => parts::dense_classifier_parts(shape, &wide, c, batch),
                None => parts::find_parts(shape, &wide, true, batch),
            }
            .into_iter()
            .map(|part| RunningPart {
                part,
                sums: Sums::default(),
                elements: 0,
                diff: 0.0,
                max: 0.0,
                diff_unseen: 0.0,
                max_unseen: 0.0,
            })
            .collect()
        });
        if shape.iter().product::<usize>() == b.len() {
            for p in parts.iter_mut() {
                let scores = p.part.kind == PartKind::Scores;
                p.part.for_each_run(shape, |r| {
                    for (&x, &y) in a[r.clone()].iter().zip(&b[r]) {
                        let (x, y) = (x.wide(), y.wide());
                        p.elements += 1;
                        if !scores {
                            p.sums.add(x, y);
                        } else if x.max(y) > ACTIVE_FRACTION || x.is_nan() {
                            p.sums.add(x, y);
                            // A NaN score shares nothing.
                            let (d, m) = if x.is_finite() {
                                ((x - y).abs(), x.max(y))
                            } else {
                                (y.abs().max(1.0), y.abs().max(1.0))
                            };
                            p.diff += d;
                            p.max += m;
                            // Within [0, 1], or within the original's own
                            // value where a later sample leaves it (the
                            // parts are found on the first): equal outputs
                            // share everything.
                            let unseen =
                                (y + UNSEEN_ERROR_FACTOR * (x - y)).clamp(y.min(0.0), y.max(1.0));
                            let (d, m) = if x.is_finite() {
                                ((unseen - y).abs(), unseen.max(y))
                            } else {
                                (y.abs().max(1.0), y.abs().max(1.0))
                            };
                            p.diff_unseen += d;
                            p.max_unseen += m;
                        }
                    }
                });
            }
        }
        if let Some(c) = classes.filter(|&c| c >= 2 && a.len().is_multiple_of(c)) {
            for (ra, rb) in a.chunks(c).zip(b.chunks(c)) {
                self.rows += 1;
                let top = argmax(rb);
                self.rows_agreeing += usize::from(argmax(ra) == top);
                if self.margins.len() < ROWS_KEPT {
                    let (m, e) = margin_and_error_at(ra, rb, top);
                    self.margins.push(m);
                    self.errors.push(e);
                }
            }
        }
    }

    /// The whole output's figures in one pass: those of
    /// [`compare::compare_values`] (largest differences, scale, NaN
    /// mismatches) and the running sums. In [`LANES`] lanes, folded at the
    /// end: one running sum per figure made every element wait for the
    /// previous one's addition (2.2 ms for PP-OCRv4 rec's 265k-element
    /// output, compared once per sample of every candidate). The largest
    /// values are those of one pass (a maximum does not depend on the
    /// order); the sums differ from one pass only in rounding.
    // Not inlined: inside `Tally::add` the lanes lived on the stack, each
    // figure stored and reloaded per element (one `divsd` then `maxsd`
    // through memory on the critical path).
    #[inline(never)]
    /// A class map's values (see `heads::label_outputs`): the whole
    /// output's figures, and each element a row whose label agrees or not.
    fn add_labels(&mut self, a: &HostTensor, b: &HostTensor) {
        self.labels = true;
        self.parts.get_or_insert_with(Vec::new);
        self.across.get_or_insert(None);
        let (x, y) = (a.to_f64_vec(), b.to_f64_vec());
        if x.len() != y.len() {
            self.shape_issue = Some(format!("{} elements against {}", x.len(), y.len()));
            return;
        }
        self.add_elements(&x, &y);
        self.rows += y.len();
        self.rows_agreeing += x.iter().zip(&y).filter(|(p, q)| p == q).count();
    }

    fn add_elements<T: Value>(&mut self, a: &[T], b: &[T]) {
        let mut lanes = Lanes::default();
        let mut chunks = a.chunks_exact(LANES).zip(b.chunks_exact(LANES));
        for (ca, cb) in &mut chunks {
            for k in 0..LANES {
                lanes.add(k, ca[k].wide(), cb[k].wide());
            }
        }
        let done = a.len() - a.len() % LANES;
        for (k, (&x, &y)) in a[done..].iter().zip(&b[done..]).enumerate() {
            lanes.add(k, x.wide(), y.wide());
        }
        let fold = |v: &[f64; LANES]| v.iter().fold(0.0, |s, x| s + x);
        let top = |v: &[f64; LANES], from: f64| v.iter().fold(from, |m, &x| m.max(x));
        self.sums.elements += a.len().min(b.len());
        self.sums.dot += fold(&lanes.dot);
        self.sums.na += fold(&lanes.na);
        self.sums.nb += fold(&lanes.nb);
        self.sums.noise += fold(&lanes.noise);
        self.scale = top(&lanes.scale, self.scale);
        self.max_abs = top(&lanes.max_abs, self.max_abs);
        self.max_rel = top(&lanes.max_rel, self.max_rel);
        self.nan_mismatches += lanes.nan_mismatches.iter().sum::<usize>();
    }

    fn finish(&self, name: &str) -> OutputAgreement {
        let mut o = agreement_named(name);
        o.max_abs = self.max_abs;
        o.max_rel = self.max_rel;
        o.scale = self.scale;
        o.nan_mismatches = self.nan_mismatches;
        o.mismatches = self.nan_mismatches;
        o.elements = self.sums.elements;
        o.cosine = self.sums.cosine();
        o.snr_db = self.sums.snr_db();
        if self.shape_issue.is_some() || self.nan_mismatches > 0 {
            o.cosine = o.cosine.min(0.0);
        }
        o
    }

    /// The parts' agreements; `rank` the output's rank, for their labels.
    fn finish_parts(&self, name: &str, rank: usize) -> Vec<PartAgreement> {
        let Some(parts) = &self.parts else {
            return Vec::new();
        };
        parts
            .iter()
            .map(|p| {
                // Found with the classes moved last: labelled on the
                // output's own axes.
                let mut part = p.part.clone();
                if let (Some(k), Some(m)) = (self.class_axis, part.axis) {
                    part.axis = Some(match m {
                        m if m + 1 == rank => k,
                        m if m < k => m,
                        m => m + 1,
                    });
                }
                let mut o = agreement_named(&part.label(name, rank));
                o.elements = p.sums.elements;
                o.cosine = p.sums.cosine();
                o.snr_db = p.sums.snr_db();
                o.scale = self.scale;
                o.nan_mismatches = self.nan_mismatches;
                if self.shape_issue.is_some() || self.nan_mismatches > 0 {
                    o.cosine = o.cosine.min(0.0);
                }
                let scores = p.part.kind == PartKind::Scores;
                PartAgreement {
                    output: name.to_string(),
                    part: p.part.clone(),
                    agreement: o,
                    positions: p.sums.elements,
                    elements: p.elements,
                    score_agreement: scores.then(|| shared_score(p.diff, p.max)),
                    score_agreement_expected: scores
                        .then(|| shared_score(p.diff_unseen, p.max_unseen)),
                }
            })
            .collect()
    }
}

/// A model loaded at the shapes of the samples it runs on: loaded again
/// only when the shapes change (a dataset's samples fix every input's
/// shape; the verifier's symbol binding, a batch of 2 say, would
/// contradict them).
struct LoadedAt<'a> {
    chosen: &'a ChosenBackend,
    model: &'a Model,
    dir: &'a Path,
    shapes: &'a InputShapes,
    loaded: Option<(SampleShapes, Box<dyn LoadedModel>)>,
    /// Sessions created and the time they took.
    loads: usize,
    load_seconds: f64,
}

impl<'a> LoadedAt<'a> {
    fn new(
        chosen: &'a ChosenBackend,
        model: &'a Model,
        dir: &'a Path,
        shapes: &'a InputShapes,
    ) -> Self {
        LoadedAt {
            chosen,
            model,
            dir,
            shapes,
            loaded: None,
            loads: 0,
            load_seconds: 0.0,
        }
    }

    fn load(&mut self, at: &InputShapes) -> Result<Box<dyn LoadedModel>> {
        let t = std::time::Instant::now();
        let bytes = self
            .model
            .to_bytes_referencing_sources()
            .map_err(|e| VerifyError::new(ErrorKind::Load, e))?;
        let loaded = self
            .chosen
            .backend
            .load(&bytes, Some(self.dir), at)
            .map_err(|e| VerifyError::runtime(e, ErrorKind::CannotVerify))?;
        self.loads += 1;
        self.load_seconds += t.elapsed().as_secs_f64();
        Ok(loaded)
    }

    /// The model's declared inputs (loaded at the command's shapes).
    fn declared_inputs(&mut self) -> Result<Vec<IoSpec>> {
        let shapes = self.shapes.clone();
        Ok(self.load(&shapes)?.inputs().to_vec())
    }

    /// The model loaded at the shapes of `tensors` (inputs `specs`).
    fn at(&mut self, tensors: &[HostTensor], specs: &[IoSpec]) -> Result<&dyn LoadedModel> {
        let key: SampleShapes = tensors.iter().map(|t| t.shape().to_vec()).collect();
        if self.loaded.as_ref().is_none_or(|(k, _)| *k != key) {
            let mut at = self.shapes.clone();
            at.symbols.clear();
            for (t, spec) in tensors.iter().zip(specs) {
                at.shapes.insert(spec.name.clone(), t.shape().to_vec());
            }
            if !rebound(&mut self.loaded, &key, &at) {
                let loaded = self.load(&at)?;
                self.loaded = Some((key, loaded));
            }
        }
        match &self.loaded {
            Some((_, m)) => Ok(m.as_ref()),
            None => Err(VerifyError::new(
                ErrorKind::Internal,
                "no model loaded for the sample",
            )),
        }
    }
}

/// Whether the model in `loaded` now runs at `at` (shapes `key`) without
/// loading it again (see [`LoadedModel::rebind_shapes`]). A shape it
/// refuses is left to a fresh load, whose error names it.
pub fn rebound(
    loaded: &mut Option<(SampleShapes, Box<dyn LoadedModel>)>,
    key: &SampleShapes,
    at: &InputShapes,
) -> bool {
    let Some((k, m)) = loaded.as_mut() else {
        return false;
    };
    if !m.rebind_shapes(at).unwrap_or(false) {
        return false;
    }
    *k = key.clone();
    true
}

/// Runs `m` on one sample, the error naming the sample.
fn run_sample(m: &dyn LoadedModel, x: &[HostTensor], origin: &str) -> Result<Vec<HostTensor>> {
    m.run(x)
        .map_err(|e| VerifyError::new(ErrorKind::Mismatch, format!("{origin}: {e}")))
}

/// The agreement of every output over the samples seen so far.
#[derive(Default)]
struct Tally {
    names: Vec<String>,
    ranks: Vec<usize>,
    running: Vec<Running>,
    /// Per output: the first rows of an embedding output (see
    /// [`crate::neighbours`]), the candidate's and the original's.
    embeddings: Vec<KeptRows>,
    samples: usize,
}

impl Tally {
    /// One sample's outputs: the original's `expected`, the candidate's `actual`.
    fn add(
        &mut self,
        expected: &[HostTensor],
        actual: &[HostTensor],
        heads: &Heads,
        inputs: &[HostTensor],
    ) {
        let tokens = neighbours::tokens(inputs);
        let batch = parts::batch_of(inputs.iter().map(|t| t.shape()));
        if self.names.is_empty() {
            self.names = expected
                .iter()
                .map(|t| t.name().unwrap_or("").to_string())
                .collect();
            self.ranks = expected.iter().map(|t| t.shape().len()).collect();
            self.running = (0..expected.len()).map(|_| Running::default()).collect();
            self.embeddings = vec![Default::default(); expected.len()];
        }
        let outputs = expected.iter().zip(actual).zip(self.running.iter_mut());
        for (((e, o), r), kept) in outputs.zip(self.embeddings.iter_mut()) {
            let name = e.name().unwrap_or("");
            if heads.is_label_map(name) {
                r.add_labels(o, e);
                continue;
            }
            if let Some(axis) = heads.class_axis(name)
                && axis < e.shape().len()
                && o.shape() == e.shape()
            {
                // Classes along `axis` (a per-pixel softmax over channels):
                // moved last, judged as a classifier's rows are.
                let shape = e.shape();
                r.class_axis = Some(axis);
                let moved = classes_last_shape(shape, axis);
                let classes = Some(shape[axis]);
                match (o.as_slice::<f32>(), e.as_slice::<f32>()) {
                    (Some(a), Some(b)) => {
                        let (a, b) = (classes_last(a, shape, axis), classes_last(b, shape, axis));
                        r.add(&a, &b, &moved, classes, batch);
                    }
                    _ => {
                        let a = classes_last(&o.to_f64_vec(), shape, axis);
                        let b = classes_last(&e.to_f64_vec(), shape, axis);
                        r.add(&a, &b, &moved, classes, batch);
                    }
                }
                continue;
            }
            let classes = heads
                .is_classifier(name)
                .then(|| e.shape().last().copied())
                .flatten();
            let regression = heads.is_regression(name);
            if classes.is_none() && !regression && e.dtype().is_float() {
                keep_rows(kept, o, e, tokens.as_ref());
            }
            if regression {
                // Coordinates and offsets: how each value follows the
                // original's across samples, up to a face mesh's; never a
                // map of scores (landmarks in [0, 1] look like one).
                let values = e.len();
                r.across.get_or_insert_with(|| {
                    (values <= MOST_REGRESSED).then(across::Across::regression)
                });
                r.parts.get_or_insert_with(Vec::new);
            }
            if !e.dtype().is_float() {
                // Integer outputs (labels, indices, counts) are not values
                // whose correlation across samples means anything, nor
                // scores where they fall in [0, 1] (a classifier's labels
                // 0 and 1 next to 2..9 were judged as a score map and
                // failed an INT8 model that quantized nothing).
                r.across.get_or_insert(None);
                r.parts.get_or_insert_with(Vec::new);
            }
            match (o.as_slice::<f32>(), e.as_slice::<f32>()) {
                (Some(a), Some(b)) => r.add(a, b, e.shape(), classes, batch),
                _ => r.add(&o.to_f64_vec(), &e.to_f64_vec(), e.shape(), classes, batch),
            }
        }
        self.samples += 1;
    }

    fn finish(&self, skipped: usize, dataset: String, meaningful: bool) -> HeldOut {
        let (names, running) = (&self.names, &self.running);
        let mut top1_agreement: BTreeMap<String, f64> = names
            .iter()
            .zip(running)
            .filter(|(_, r)| r.rows > 0)
            .map(|(n, r)| (n.clone(), r.rows_agreeing as f64 / r.rows as f64))
            .collect();
        // A class map keeps no margins (its scores are not outputs): no
        // expectation on unseen rows, rather than a 1.0 that says nothing.
        let mut top1_expected: BTreeMap<String, f64> = names
            .iter()
            .zip(running)
            .filter(|(_, r)| r.rows > 0 && !r.labels)
            .map(|(n, r)| {
                let e = expected_agreement(&r.margins, &r.errors, UNSEEN_ERROR_FACTOR);
                (n.clone(), e)
            })
            .collect();
        let label_judged = names
            .iter()
            .zip(running)
            .filter(|(_, r)| r.labels)
            .map(|(n, _)| n.clone())
            .collect();
        let mut neighbour_judged = Vec::new();
        for (n, (a, b)) in names.iter().zip(&self.embeddings) {
            let Some(j) = neighbours::judge(a, b) else {
                continue;
            };
            let e = expected_agreement(&j.margins, &j.errors, neighbours::UNSEEN_ERROR_FACTOR);
            top1_agreement.insert(n.clone(), j.agreeing as f64 / j.rows as f64);
            top1_expected.insert(n.clone(), e);
            neighbour_judged.push(n.clone());
        }
        let outputs = names
            .iter()
            .zip(running)
            .map(|(n, r)| r.finish(n))
            .collect();
        let across: Vec<(String, (f64, f64))> = names
            .iter()
            .zip(running)
            .filter_map(|(n, r)| {
                let lowest = r.across.as_ref()?.as_ref()?.lowest()?;
                Some((n.clone(), lowest))
            })
            .collect();
        let parts = names
            .iter()
            .zip(&self.ranks)
            .zip(running)
            .flat_map(|((n, &rank), r)| r.finish_parts(n, rank))
            .collect();
        HeldOut {
            skipped,
            samples: self.samples,
            dataset,
            meaningful,
            on_calibration_samples: false,
            outputs,
            top1_agreement,
            top1_expected,
            parts,
            metric: None,
            neighbour_judged,
            label_judged,
            correlation: across.iter().map(|(n, (r, _))| (n.clone(), *r)).collect(),
            correlation_expected: across.into_iter().map(|(n, (_, u))| (n, u)).collect(),
        }
    }
}

/// `shape` with `axis` moved last.
fn classes_last_shape(shape: &[usize], axis: usize) -> Vec<usize> {
    let mut moved: Vec<usize> = shape.to_vec();
    let c = moved.remove(axis);
    moved.push(c);
    moved
}

/// `values` of `shape` with `axis` moved last: `[pre, c, post]` read as
/// `[pre, post, c]`, each position's classes one contiguous row.
fn classes_last<T: Copy>(values: &[T], shape: &[usize], axis: usize) -> Vec<T> {
    let c = shape[axis];
    let post: usize = shape[axis + 1..].iter().product();
    let mut out = Vec::with_capacity(values.len());
    if c == 0 || post == 0 {
        return values.to_vec();
    }
    for block in values.chunks_exact(c * post) {
        for j in 0..post {
            out.extend((0..c).map(|k| block[k * post + j]));
        }
    }
    out
}

/// The kept rows of one embedding output: the candidate's and the original's.
type KeptRows = (Vec<Vec<f32>>, Vec<Vec<f32>>);

/// Adds the rows of embedding output `e` (the original's) and `o` (the
/// candidate's) to `kept`, up to [`neighbours::ROWS_KEPT`].
fn keep_rows(
    kept: &mut KeptRows,
    o: &HostTensor,
    e: &HostTensor,
    tokens: Option<&neighbours::Tokens>,
) {
    if kept.1.len() >= neighbours::ROWS_KEPT
        || o.shape() != e.shape()
        || !neighbours::has_rows(e.shape(), tokens)
    {
        return;
    }
    let rows = |t: &HostTensor| neighbours::rows(t.shape(), &t.to_f64_vec(), tokens);
    let (Some(a), Some(b)) = (rows(o), rows(e)) else {
        return;
    };
    let room = neighbours::ROWS_KEPT - kept.1.len();
    kept.0.extend(a.into_iter().take(room));
    kept.1.extend(b.into_iter().take(room));
}

/// Skips up to `skip` samples of `data`; returns how many were skipped.
fn skip_samples(data: &mut dyn Dataset, inputs: &[IoSpec], skip: usize) -> Result<usize> {
    let mut skipped = 0;
    while skipped < skip {
        if data
            .next_sample(inputs)
            .map_err(VerifyError::usage)?
            .is_none()
        {
            break;
        }
        skipped += 1;
    }
    Ok(skipped)
}

/// Runs both models of `pair` on samples `skip..skip+limit` of `data`;
/// `heads` names the outputs judged by top-1 agreement or across samples
/// too. When the
/// data has no sample after the first `skip`, `samples` is 0: the caller
/// decides what to judge on instead. Nothing is kept: for many candidates
/// judged on the same samples, [`Reference`] runs the original once.
pub fn held_out(
    pair: &Pair<'_>,
    data: &mut dyn Dataset,
    skip: usize,
    limit: usize,
    heads: &Heads,
) -> Result<HeldOut> {
    let mut original = LoadedAt::new(pair.chosen, pair.original, pair.dir, pair.shapes);
    let mut candidate = LoadedAt::new(pair.chosen, pair.candidate, pair.dir, pair.shapes);
    let inputs = original.declared_inputs()?;
    let skipped = skip_samples(data, &inputs, skip)?;
    let mut tally = Tally::default();
    while tally.samples < limit {
        let Some(s) = data.next_sample(&inputs).map_err(VerifyError::usage)? else {
            break;
        };
        let expected = run_sample(original.at(&s.tensors, &inputs)?, &s.tensors, &s.origin)?;
        let actual = run_sample(candidate.at(&s.tensors, &inputs)?, &s.tensors, &s.origin)?;
        tally.add(&expected, &actual, heads, &s.tensors);
    }
    Ok(tally.finish(skipped, data.describe(), data.meaningful()))
}

/// One judged sample and the original's outputs on it.
struct ReferenceSample {
    origin: String,
    inputs: Vec<HostTensor>,
    expected: Vec<HostTensor>,
}

/// The judged samples and the original's outputs on them, run once and
/// kept in memory (up to a budget), so that each of many candidates judged
/// on them costs one session and its own runs: the original's figures do
/// not change between candidates, and ONNX Runtime's CPU kernels give the
/// same outputs for the same session options and inputs.
pub struct Reference {
    /// Samples skipped before the judged ones (the calibration samples).
    pub skipped: usize,
    pub dataset: String,
    pub meaningful: bool,
    /// The original's declared inputs (the samples are fitted to them).
    inputs: Vec<IoSpec>,
    samples: Vec<ReferenceSample>,
    /// Every sample asked for is kept (the data ended or the limit was
    /// reached), none left out for the memory budget.
    complete: bool,
    /// What making it cost: sessions of the original, their time, and the
    /// runs of the original and their time.
    pub loads: usize,
    pub load_seconds: f64,
    pub run_seconds: f64,
}

/// Bytes a tensor's elements take.
fn tensor_bytes(t: &HostTensor) -> usize {
    t.len() * t.dtype().size_of().max(1)
}

impl Reference {
    /// The original's declared inputs, which every sample's inputs fit.
    pub fn input_specs(&self) -> &[IoSpec] {
        &self.inputs
    }

    /// Sample `i`'s inputs (fitted to [`Reference::input_specs`]).
    pub fn sample_inputs(&self, i: usize) -> Option<&[HostTensor]> {
        self.samples.get(i).map(|s| s.inputs.as_slice())
    }

    /// Samples kept.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Whether the first `limit` judged samples are all kept here.
    pub fn covers(&self, limit: usize) -> bool {
        self.complete || limit <= self.samples.len()
    }

    /// Bytes the kept inputs and outputs take.
    pub fn bytes(&self) -> usize {
        self.samples
            .iter()
            .flat_map(|s| s.inputs.iter().chain(&s.expected))
            .map(tensor_bytes)
            .sum()
    }

    /// `more`, the samples that follow these (collected after skipping
    /// `self.skipped + self.len()`), added after them: a reference read a
    /// few samples at a time is the one read at once.
    pub fn append(&mut self, more: Reference) {
        self.samples.extend(more.samples);
        self.complete = more.complete;
        self.loads += more.loads;
        self.load_seconds += more.load_seconds;
        self.run_seconds += more.run_seconds;
    }

    /// Why no candidate can be judged on a kept sample, if one gives a
    /// reason: an input holding NaN or infinite values that reach the
    /// original's outputs. Its outputs are then no reference (a quantized
    /// model turns NaN into some integer, and top-1 or cosine against NaN
    /// says nothing), and a search on them ends at exit 4 blaming the
    /// model. Non-finite inputs the original handles (an imputer's NaN for
    /// a missing value) leave finite outputs and are judged as they are.
    pub fn non_finite_sample(&self) -> Option<String> {
        let non_finite = |t: &HostTensor| {
            if !t.dtype().is_float() {
                return 0;
            }
            t.to_f64_vec().iter().filter(|v| !v.is_finite()).count()
        };
        self.samples.iter().find_map(|s| {
            let (input, count) = s
                .inputs
                .iter()
                .map(|t| (t, non_finite(t)))
                .find(|(_, n)| *n > 0)?;
            let output = s.expected.iter().find(|t| non_finite(t) > 0)?;
            Some(format!(
                "{}: input `{}` holds {count} NaN or infinite value(s), and the float model's output `{}` is not finite there, so no quantized model can be judged against it: clean or drop that sample",
                s.origin,
                input.name().unwrap_or("?"),
                output.name().unwrap_or("?"),
            ))
        })
    }

    /// The inputs and the original's outputs of kept sample `i`.
    pub fn sample(&self, i: usize) -> Option<(&[HostTensor], &[HostTensor])> {
        self.samples
            .get(i)
            .map(|s| (s.inputs.as_slice(), s.expected.as_slice()))
    }

    /// The samples that follow these, with outputs computed elsewhere (the
    /// calibration's runs of the same samples, `(origin, inputs, outputs)`):
    /// what [`Reference::collect`] after skipping `self.skipped +
    /// self.len()` would read, to [`Reference::append`]. `complete` as
    /// there: every sample asked for is in `samples`.
    pub fn following(
        &self,
        samples: Vec<(String, Vec<HostTensor>, Vec<HostTensor>)>,
        complete: bool,
    ) -> Reference {
        Reference {
            skipped: self.skipped + self.samples.len(),
            dataset: self.dataset.clone(),
            meaningful: self.meaningful,
            inputs: self.inputs.clone(),
            samples: samples
                .into_iter()
                .map(|(origin, inputs, expected)| ReferenceSample {
                    origin,
                    inputs,
                    expected,
                })
                .collect(),
            complete,
            loads: 0,
            load_seconds: 0.0,
            run_seconds: 0.0,
        }
    }

    /// The original's outputs on the first `limit` samples kept.
    pub fn expected(&self, limit: usize) -> Vec<&[HostTensor]> {
        self.samples
            .iter()
            .take(limit)
            .map(|s| s.expected.as_slice())
            .collect()
    }
}

/// A candidate judged against a [`Reference`], and what it cost.
pub struct Judged {
    pub held_out: HeldOut,
    /// Sessions of the candidate created, and their time.
    pub loads: usize,
    pub load_seconds: f64,
    /// The candidate's runs and their time.
    pub runs: usize,
    pub run_seconds: f64,
    /// Comparing its outputs with the original's.
    pub compare_seconds: f64,
    /// The candidate's outputs per sample, when asked for (a caller's
    /// metric scores them); empty otherwise.
    pub outputs: Vec<Vec<HostTensor>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_largest_and_steps_past_nan() {
        // What it was: the best read back through its index each step.
        let by_index = |xs: &[f64]| {
            let mut best = 0;
            for (i, &x) in xs.iter().enumerate() {
                if x > xs[best] || xs[best].is_nan() {
                    best = i;
                }
            }
            best
        };
        let cases: [&[f64]; 6] = [
            &[0.1, 0.5, 0.5, 0.2],
            &[f64::NAN, 1.0, 2.0],
            &[1.0, f64::NAN, 0.5],
            &[f64::NAN, f64::NAN],
            &[-1.0],
            &[],
        ];
        for xs in cases {
            assert_eq!(argmax(xs), by_index(xs), "{xs:?}");
        }
        assert_eq!(argmax(&[0.1f32, 0.5, 0.5, 0.2]), 1);
        // Longer rows (several lanes and a remainder) of few distinct
        // values: ties, NaN, infinities, in every position.
        let values = [
            0.5,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.5,
            2.0,
        ];
        let mut state = 7u32;
        for len in 0..70 {
            for _ in 0..40 {
                let xs: Vec<f64> = (0..len)
                    .map(|_| {
                        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                        values[(state >> 24) as usize % values.len()]
                    })
                    .collect();
                assert_eq!(argmax(&xs), by_index(&xs), "{xs:?}");
                let narrow: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
                assert_eq!(argmax(&narrow), by_index(&xs), "{xs:?}");
            }
        }
        let all_nan = vec![f64::NAN; 19];
        assert_eq!(argmax(&all_nan), 18);
    }

    #[test]
    fn a_sample_is_refused_only_where_its_non_finite_input_reaches_the_outputs() {
        let t =
            |name: &str, v: Vec<f32>| HostTensor::from_vec(vec![v.len()], v).unwrap().named(name);
        let empty = Reference {
            skipped: 0,
            dataset: String::new(),
            meaningful: true,
            inputs: Vec::new(),
            samples: Vec::new(),
            complete: true,
            loads: 0,
            load_seconds: 0.0,
            run_seconds: 0.0,
        };
        let sample = |origin: &str, x: Vec<f32>, y: Vec<f32>| {
            (origin.to_string(), vec![t("x", x)], vec![t("y", y)])
        };
        // An imputer's NaN (a missing value) leaves its outputs finite.
        let imputed = empty.following(vec![sample("a.npz", vec![f32::NAN, 1.0], vec![0.5])], true);
        assert_eq!(imputed.non_finite_sample(), None);
        // An output that is not finite on a finite input is the model's own.
        let own = empty.following(vec![sample("b.npz", vec![1.0], vec![f32::INFINITY])], true);
        assert_eq!(own.non_finite_sample(), None);
        let bad = empty.following(
            vec![
                sample("c.npz", vec![1.0], vec![1.0]),
                sample("d.npz", vec![f32::NAN, f32::INFINITY, 2.0], vec![f32::NAN]),
            ],
            true,
        );
        assert_eq!(
            bad.non_finite_sample().as_deref(),
            Some(
                "d.npz: input `x` holds 2 NaN or infinite value(s), and the float model's output `y` is not finite there, so no quantized model can be judged against it: clean or drop that sample"
            )
        );
    }

    #[test]
    fn one_pass_over_f32_gives_the_figures_of_widened_copies_to_the_bit() {
        // Values of every kind: ordinary, tiny, equal infinities, a NaN on
        // one side and on both, a class row whose top class moves, an
        // infinity against a finite value on either side.
        let b: Vec<f32> = vec![
            0.5,
            -1.25,
            3.0e-8,
            f32::INFINITY,
            f32::NAN,
            f32::NAN,
            7.0,
            0.1,
            0.3,
            0.2,
            f32::INFINITY,
            3.0,
            2.0,
            -0.0,
            1.0e-30,
        ];
        let a: Vec<f32> = vec![
            0.49,
            -1.0,
            0.0,
            f32::INFINITY,
            1.0,
            f32::NAN,
            6.5,
            0.25,
            0.2,
            0.2,
            1.0,
            3.0,
            f32::INFINITY,
            0.0,
            0.0,
        ];
        let wide = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
        let (aw, bw) = (wide(&a), wide(&b));
        let shape = [3, 5];
        let mut narrow = Running::default();
        narrow.add(&a, &b, &shape, Some(5), None);
        let mut widened = Running::default();
        widened.add(&aw, &bw, &shape, Some(5), None);
        let (n, w) = (narrow.finish("y"), widened.finish("y"));
        assert_eq!(n.cosine.to_bits(), w.cosine.to_bits());
        assert_eq!(n.snr_db.to_bits(), w.snr_db.to_bits());
        assert_eq!(
            (n.max_abs, n.max_rel, n.scale),
            (w.max_abs, w.max_rel, w.scale)
        );
        assert_eq!(narrow.margins, widened.margins);
        assert_eq!(narrow.errors, widened.errors);
        assert_eq!(narrow.rows_agreeing, widened.rows_agreeing);
        // And the largest differences, scale and NaN count are those of
        // compare_values over the same values.
        let tol = Tolerance {
            atol: 0.0,
            rtol: 0.0,
        };
        let c = compare::compare_values("y", &aw, &bw, tol);
        assert_eq!(
            (n.max_abs, n.max_rel, n.scale),
            (c.max_abs, c.max_rel, c.scale)
        );
        assert_eq!(n.nan_mismatches, c.nan_mismatches);
        assert_eq!(n.nan_mismatches, 1);
    }

    #[test]
    fn a_row_keeps_its_class_while_its_margin_beats_the_error() {
        // Original: class 1 ahead by 0.3; the candidate moves class 2 up by
        // 0.2 and class 1 down by 0.1: the error against the top class is 0.3.
        let (m, e) = margin_and_error(&[0.1, 0.5, 0.4], &[0.1, 0.6, 0.2]);
        assert!((m - 0.4).abs() < 1e-6, "margin {m}");
        assert!((e - 0.3).abs() < 1e-6, "error {e}");
        // No class gains: no error.
        assert_eq!(margin_and_error(&[0.0, 1.0], &[0.0, 0.9]).1, 0.0);
        // A NaN in the candidate is an infinite error.
        assert!(
            margin_and_error(&[f64::NAN, 1.0], &[0.0, 0.9])
                .1
                .is_infinite()
        );
        // Long rows, in lanes: the figures of one pass over the classes.
        let one_pass = |a: &[f64], b: &[f64], t: usize| {
            let (mut up, mut err) = (f64::NEG_INFINITY, 0f64);
            let top_error = a[t] - b[t];
            for c in (0..b.len()).filter(|&c| c != t) {
                up = up.max(b[c]);
                let gain = (a[c] - b[c]) - top_error;
                err = if gain.is_nan() {
                    f64::INFINITY
                } else {
                    err.max(gain)
                };
            }
            ((b[t] - up) as f32, err as f32)
        };
        let mut state = 11u32;
        let mut next = || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            f64::from(state >> 8) / f64::from(1u32 << 24) - 0.5
        };
        for len in 1..40 {
            for t in 0..len {
                let b: Vec<f64> = (0..len).map(|_| next()).collect();
                let mut a: Vec<f64> = b.iter().map(|v| v + 0.1 * next()).collect();
                if len > 5 && t % 3 == 0 {
                    a[len - 2] = f64::NAN;
                }
                let (m, e) = margin_and_error_at(&a, &b, t);
                let (m1, e1) = one_pass(&a, &b, t);
                assert_eq!((m.to_bits(), e.to_bits()), (m1.to_bits(), e1.to_bits()));
            }
        }
    }

    #[test]
    fn scores_are_judged_on_the_positions_that_score_and_by_what_they_share() {
        // [1, 3, 2]: a box row in pixels, two score rows. The candidate's
        // boxes are exact; one score moves from 0.6 to 0.4, and a near-zero
        // score moves by 0.02, which is not a position judged.
        let shape = [1, 3, 2];
        let b = [100.0, 200.0, 0.6, 0.01, 0.9, 0.0];
        let a = [100.0, 200.0, 0.4, 0.03, 0.9, 0.0];
        let mut r = Running::default();
        r.add(&a, &b, &shape, None, None);
        let whole = r.finish("y");
        assert!(whole.cosine > 0.99999, "{}", whole.cosine);
        let parts = r.finish_parts("y", 3);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].agreement.name, "y[:, 0:1, :] (values)");
        assert_eq!(parts[0].agreement.cosine, 1.0);
        assert_eq!(parts[0].score_agreement, None);
        let s = &parts[1];
        assert_eq!(s.agreement.name, "y[:, 1:3, :] (scores)");
        assert_eq!((s.positions, s.elements), (2, 4));
        // Σ|a-b| = 0.2 over Σmax = 0.6 + 0.9.
        let shared = s.score_agreement.unwrap();
        assert!((shared - (1.0 - 0.2 / 1.5)).abs() < 1e-12, "{shared}");
        // Doubled, the 0.6 falls to 0.2: Σ|a-b| = 0.4 over 1.5.
        let unseen = s.score_agreement_expected.unwrap();
        assert!((unseen - (1.0 - 0.4 / 1.5)).abs() < 1e-12, "{unseen}");
        // The cosine of the scores judged sees the error the whole hides.
        assert!(s.agreement.cosine < 0.99, "{}", s.agreement.cosine);
    }

    #[test]
    fn expected_agreement_pairs_every_margin_with_every_error() {
        // No row changed class on its own (each margin beats its own error),
        // but the thin margin (0.01) loses to the large error (0.05).
        let margins = [0.9, 0.8, 0.01, 0.7];
        let errors = [0.001, 0.05, 0.0, 0.002];
        for (m, e) in margins.iter().zip(&errors) {
            assert!(m > e);
        }
        // Pairs (j, k) with margin_j < factor * error_k: only (0.01, 0.05) at
        // factors 1 and 2; at 20 the errors are 0.02, 1, 0, 0.04: the thin
        // margin loses to three of them and every margin to the 1.
        assert!((expected_agreement(&margins, &errors, 1.0) - (1.0 - 1.0 / 16.0)).abs() < 1e-12);
        assert!((expected_agreement(&margins, &errors, 2.0) - (1.0 - 1.0 / 16.0)).abs() < 1e-12);
        assert!((expected_agreement(&margins, &errors, 20.0) - (1.0 - 6.0 / 16.0)).abs() < 1e-12);
        // Exact models agree everywhere; an infinite error changes every row.
        assert_eq!(expected_agreement(&margins, &[0.0; 4], 2.0), 1.0);
        assert_eq!(expected_agreement(&margins, &[f32::INFINITY], 2.0), 0.0);
        assert_eq!(expected_agreement(&[], &[], 2.0), 1.0);
    }
}

#[cfg(test)]
mod neighbour_tests {
    use super::*;

    /// One sample's `[1, 8]` embedding output named `emb`.
    fn row(v: [f32; 8]) -> Vec<HostTensor> {
        vec![
            HostTensor::from_vec(vec![1, 8], v.to_vec())
                .unwrap()
                .named("emb"),
        ]
    }

    #[test]
    fn classes_along_the_channels_are_judged_per_position() {
        // `[1, 3, 2, 2]` probabilities, the classes on axis 1: position
        // (0, 1) changes its top class (0.5 -> 0.3 for class 2 against 0.4
        // for class 0); along the last axis the same data reads as six rows
        // of two "classes", none of which changed its larger value.
        let original: Vec<f32> = vec![
            0.6, 0.4, 0.1, 0.2, // class 0 at the four positions
            0.3, 0.1, 0.1, 0.7, // class 1
            0.1, 0.5, 0.8, 0.1, // class 2
        ];
        let mut candidate = original.clone();
        candidate[9] = 0.3;
        candidate[5] = 0.3;
        let t = |v: &[f32]| {
            vec![
                HostTensor::from_vec(vec![1, 3, 2, 2], v.to_vec())
                    .unwrap()
                    .named("seg"),
            ]
        };
        let heads = Heads {
            class_axes: vec![("seg".to_string(), 1)],
            ..Heads::default()
        };
        let mut tally = Tally::default();
        tally.add(&t(&original), &t(&candidate), &heads, &[]);
        let h = tally.finish(0, "test".into(), true);
        assert_eq!(h.top1_agreement["seg"], 0.75);
        assert_eq!(h.agreement_kind("seg"), "top-1 agreement");
        assert_eq!(
            classes_last(&original, &[1, 3, 2, 2], 1)[..6],
            [0.6, 0.3, 0.1, 0.4, 0.1, 0.5]
        );
        assert_eq!(classes_last_shape(&[1, 3, 2, 2], 1), [1, 2, 2, 3]);
    }

    #[test]
    fn a_class_map_is_judged_by_the_labels_it_keeps() {
        let t = |v: Vec<i64>| {
            vec![
                HostTensor::from_vec(vec![1, 2, 2], v)
                    .unwrap()
                    .named("labels"),
            ]
        };
        let heads = Heads {
            labels: vec!["labels".to_string()],
            ..Heads::default()
        };
        let mut tally = Tally::default();
        tally.add(&t(vec![0, 2, 2, 1]), &t(vec![0, 2, 1, 1]), &heads, &[]);
        tally.add(&t(vec![3, 3, 3, 3]), &t(vec![3, 3, 3, 3]), &heads, &[]);
        let h = tally.finish(0, "test".into(), true);
        assert_eq!(h.top1_agreement["labels"], 7.0 / 8.0);
        assert_eq!(h.label_judged, ["labels"]);
        assert_eq!(h.agreement_kind("labels"), "label agreement");
        assert!(
            !h.top1_expected.contains_key("labels"),
            "{:?}",
            h.top1_expected
        );
        // No parts, no correlation across samples: labels are not values.
        assert!(h.parts.is_empty() && h.correlation.is_empty(), "{h:?}");
    }

    #[test]
    fn a_float_score_is_judged_by_its_correlation_across_samples_and_a_label_is_not() {
        // A score about 4.0 whose candidate is off by +-0.05 in turn, and an
        // int64 label beside it that flips once.
        let sample = |score: f32, label: i64| {
            vec![
                HostTensor::from_vec(vec![1, 1], vec![score])
                    .unwrap()
                    .named("score"),
                HostTensor::from_vec(vec![1], vec![label])
                    .unwrap()
                    .named("label"),
            ]
        };
        let mut tally = Tally::default();
        for i in 0..8 {
            let y = 4.0 + 0.2 * ((i as f32) * 1.3).sin();
            let e = if i % 2 == 0 { 0.05 } else { -0.05 };
            let label = (i % 3) as i64;
            let flipped = if i == 3 { (label + 1) % 3 } else { label };
            tally.add(
                &sample(y, label),
                &sample(y + e, flipped),
                &Heads::default(),
                &[],
            );
        }
        let h = tally.finish(0, "test".into(), true);
        assert!(h.outputs[0].cosine > 0.999, "{}", h.outputs[0].cosine);
        let r = h.correlation["score"];
        assert!(r < 0.99 && r > 0.8, "{r}");
        assert!(h.correlation_expected["score"] < r);
        assert!(!h.correlation.contains_key("label"), "{:?}", h.correlation);
    }

    #[test]
    fn an_embedding_output_is_judged_by_nearest_neighbour_across_samples() {
        // A large direction every row shares, as sentence embeddings do.
        let original = [
            [1.0, 0.1, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0],
            [1.0, 0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0],
            [1.0, 0.5, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0],
            [0.0, 0.0, 1.0, 0.3, 2.0, 2.0, 2.0, 2.0],
        ];
        // Sample 0 moves toward sample 2: its neighbour changes while the
        // output's cosine stays above 0.999.
        let mut candidate = original;
        candidate[0][1] = 0.42;
        let mut tally = Tally::default();
        for (a, b) in candidate.iter().zip(&original) {
            tally.add(&row(*b), &row(*a), &Heads::default(), &[]);
        }
        let h = tally.finish(0, "test".into(), true);
        assert_eq!(h.neighbour_judged, ["emb"]);
        assert!(h.outputs[0].cosine > 0.999, "{}", h.outputs[0].cosine);
        assert_eq!(h.top1_agreement["emb"], 0.75);
        assert_eq!(h.agreement_kind("emb"), "nearest-neighbour agreement");
        // A classifier output of the same shape is judged by its classes.
        let mut tally = Tally::default();
        for (a, b) in candidate.iter().zip(&original) {
            tally.add(
                &row(*b),
                &row(*a),
                &Heads::classifiers(vec!["emb".to_string()]),
                &[],
            );
        }
        let h = tally.finish(0, "test".into(), true);
        assert!(h.neighbour_judged.is_empty());
        assert_eq!(h.agreement_kind("emb"), "top-1 agreement");
    }

    #[test]
    fn a_dense_classifier_is_judged_by_its_foreground_scores_beside_top1() {
        // An SSD's [1, 300, 2] anchors: background, face. Six anchors on a
        // face, whose probability the candidate moves by 0.2 (one crosses
        // 0.5); every other anchor agrees.
        let probs = |moved: f32| -> Vec<HostTensor> {
            let mut v = Vec::new();
            for i in 0..300 {
                let face = match i % 50 {
                    0 => 0.6 - moved,
                    _ => 0.01,
                };
                v.extend([1.0 - face, face]);
            }
            vec![
                HostTensor::from_vec(vec![1, 300, 2], v)
                    .unwrap()
                    .named("scores"),
            ]
        };
        let image = [HostTensor::from_vec(vec![1, 3], vec![0.0f32; 3]).unwrap()];
        let heads = Heads::classifiers(vec!["scores".to_string()]);
        let mut tally = Tally::default();
        tally.add(&probs(0.0), &probs(0.2), &heads, &image);
        let h = tally.finish(0, "test".into(), false);
        // Top-1 over the anchors misses the six: 294 of 300 agree.
        assert_eq!(h.top1_agreement["scores"], 0.98);
        assert_eq!(h.parts.len(), 1, "{:?}", h.parts);
        let p = &h.parts[0];
        assert_eq!(p.agreement.name, "scores[:, :, 1:2] (scores)");
        // The six face anchors (and none of the 294 at 0.01) are judged.
        assert_eq!(p.positions, 6);
        let shared = p.score_agreement.unwrap();
        assert!((shared - (1.0 - 0.2 / 0.6)).abs() < 1e-6, "{shared}");
        // One answer per sample: top-1 alone, as before.
        let mut tally = Tally::default();
        let one = |p: f32| {
            vec![
                HostTensor::from_vec(vec![1, 2], vec![1.0 - p, p])
                    .unwrap()
                    .named("scores"),
            ]
        };
        tally.add(&one(0.6), &one(0.4), &heads, &image);
        assert!(tally.finish(0, "test".into(), false).parts.is_empty());
    }

    #[test]
    fn a_regression_output_is_judged_across_samples_not_as_classes_neighbours_or_scores() {
        // Ten landmark coordinates in [0, 1] per face crop (O-Net's shape),
        // each moved by 0.004 in the candidate: a point that stays put.
        let sample = |i: usize, moved: f32| {
            let v: Vec<f32> = (0..10)
                .map(|k| 0.2 + 0.06 * k as f32 + 0.05 * ((i * 7 + k) as f32).sin() + moved)
                .collect();
            vec![HostTensor::from_vec(vec![1, 10], v).unwrap().named("lm")]
        };
        let heads = Heads {
            regressions: vec!["lm".to_string()],
            ..Heads::default()
        };
        let judge = |heads: &Heads| {
            let mut tally = Tally::default();
            for i in 0..16 {
                let moved = if i % 2 == 0 { 0.004 } else { -0.004 };
                tally.add(&sample(i, 0.0), &sample(i, moved), heads, &[]);
            }
            tally.finish(0, "test".into(), true)
        };
        let h = judge(&heads);
        assert!(h.top1_agreement.is_empty(), "{:?}", h.top1_agreement);
        assert!(h.neighbour_judged.is_empty());
        assert!(h.parts.is_empty(), "{:?}", h.parts.len());
        let r = h.correlation["lm"];
        assert!(r > 0.99 && r < 1.0, "{r}");
        // Without the head known, the same output is an embedding and a
        // map of scores.
        let h = judge(&Heads::default());
        assert_eq!(h.neighbour_judged, ["lm"]);
        assert!(!h.parts.is_empty());
    }
}
