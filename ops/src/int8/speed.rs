//! An INT8 model slower than the float one is not the default command's
//! answer (issue 32). After the accuracy search, the INT8 model is timed
//! against the float model in ONNX Runtime CPU at one thread, interleaved,
//! on one judged sample. When it is not faster, the placements that put
//! fewer Q/DQ pairs where ONNX Runtime has no winning integer kernel are
//! built with the same keep-set, judged and timed too, and the fastest
//! candidate that meets the accuracy target is written, the float model
//! included; the report says which and why.
//!
//! Why measure rather than predict: whether an integer chain wins depends on
//! what the search kept float (each float layer inside a chain costs a DQ
//! before it and a Q after it) and on the runtime's kernels (ONNX Runtime's
//! QLinearSigmoid/QLinearMul and depthwise QLinearConv win on some models
//! and lose on others). EfficientNet-B0 with real weights ran at 0.89x of
//! FP32 with the integer chain the search had broken in places.

use infopt_calibration::int8;
use infopt_ir::Model;
use infopt_passes::{PipelineConfig, Target};
use infopt_runtime::{HostTensor, InputShapes, Transfer};
use infopt_verify::timing::{self, Clock, Timed};
use infopt_verify::{BackendKind, ChosenBackend};

use infopt_calibration::Amax;
use infopt_passes::PipelineRun;
use infopt_verify::evaluate::HeldOut;

use super::context::Context;
use super::fallback::{Candidate, Search};
use super::goal::{Goal, misses};
use super::judge::Judge;
use crate::error::{OpsError, OpsResult};
use crate::report::int8::{SpeedCheck, SpeedTimed};

/// Seconds of interleaved timing (all models together) per check.
const TIMING_SECONDS: f64 = 1.0;
/// How much more output noise (on the probe samples, every layer in INT8)
/// than the target's own placement another placement may have to compete.
const ACCURACY_SLACK: f64 = 1.5;
/// Where the target's own placement is no faster than float, its noise is
/// no yardstick (float is the alternative): another placement faster than
/// float competes when, with every layer in INT8, it comes within this of
/// the accuracy target (a margin, see `goal::score`), which the search can
/// close by keeping a few layers in float. PLCMOS: ONNX Runtime's placement
/// at 0.03 below the target, 135x the portable placement's noise, met it
/// with 2 of 16 layers in float at 1.52x float's speed; DNSMOS's, 0.77
/// below, never did.
const NEAR: f64 = 0.05;

/// A placement's accuracy with every layer in INT8 on the probe samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Noise {
    /// Its noise (see `fallback::relative_noise`).
    pub loss: f64,
    /// Its margin to the accuracy target (positive when met).
    pub margin: f64,
}

/// Seconds of interleaved timing of the placements before the search.
const PLACEMENT_SECONDS: f64 = 1.5;

/// An INT8 model counts as faster than float below this share of its time
/// (3%: the noise of interleaved timing at one thread on a shared machine).
pub(super) const FASTER: f64 = 0.97;

/// Float models faster than this at one thread are not checked: their
/// timing is mostly per-op overhead (most of the tests' fixtures run in 4
/// to 30 microseconds). Real models below a millisecond are checked: the
/// wake-word embedding CNN of openwakeword (0.79 ms float) was written in
/// the portable placement at 0.79x float's speed when this was 1 ms;
/// MTCNN's O-Net (0.24-0.27 ms float, run once per face crop) at 0.29x
/// and silero-vad 16k (0.07 ms a chunk) at 0.98x when it was 0.25 ms;
/// MTCNN's R-Net (0.038 ms) on the onnxruntime target at 0.98x (one Gemm
/// of six in INT8) when it was 0.05 ms. Below 5 microseconds a run is
/// ONNX Runtime's call overhead, whatever the model holds.
const MIN_FLOAT_MS: f64 = 0.005;

/// A timed round runs each model back to back for at least this long (see
/// `timing::Continued::repeat`), at most [`MOST_RUNS_PER_ROUND`] times.
const ROUND_RUN_MS: f64 = 0.5;
const MOST_RUNS_PER_ROUND: usize = 100;

/// Milliseconds to three significant figures at least (two decimals from
/// 1 ms up): a model of 38 microseconds reads 0.0380, not 0.04.
pub(super) fn ms_text(ms: f64) -> String {
    match ms.abs() {
        m if m >= 1.0 || m == 0.0 || !m.is_finite() => format!("{ms:.2}"),
        m if m >= 0.1 => format!("{ms:.3}"),
        _ => format!("{ms:.4}"),
    }
}

/// Runs of each model per timed round when the fastest runs in `run_ms`.
fn runs_per_round(run_ms: f64) -> usize {
    if run_ms.is_nan() || run_ms <= 0.0 {
        return 1;
    }
    ((ROUND_RUN_MS / run_ms).ceil() as usize).clamp(1, MOST_RUNS_PER_ROUND)
}

/// [`MIN_FLOAT_MS`], or in a debug build `INFOPT_TEST_MIN_FLOAT_MS`: the
/// test suite sets 0.25 ms, so that its fixtures (4 to 60 microseconds
/// alone, several times that beside the other tests) are never timed and
/// their INT8 never gives way to float on the noise of a loaded machine.
fn min_float_ms() -> f64 {
    #[cfg(debug_assertions)]
    if let Some(ms) = std::env::var("INFOPT_TEST_MIN_FLOAT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return ms;
    }
    MIN_FLOAT_MS
}

/// Before calibrating on every sample: the model with every layer in INT8
/// in each placement worth trying (`from`'s own first, then
/// [`alternatives`]), built with `amax` (ranges from the first sample: a
/// model's speed does not depend on its scales), timed with the float model
/// at one thread. Milliseconds per placement, the float model's last; None
/// when not timed (no other placement, ONNX Runtime missing, a model too
/// fast to time). No placement faster than float means no INT8 model can
/// be (keeping layers in float only adds float work): DNSMOS spent 26 of
/// its 47 s calibrating on all 64 samples to learn what this tells.
#[allow(clippy::too_many_arguments)]
pub(super) fn time_placements(
    cx: &Context<'_>,
    from: &PipelineConfig,
    mid: &Model,
    amax: &Amax,
    sample: &[HostTensor],
    shapes: &InputShapes,
    costs: &super::costs::Costs,
) -> OpsResult<Option<TimedPlacements>> {
    let others = alternatives(from);
    #[cfg(debug_assertions)]
    if let Some(ms) = test_timed(others.len() + 1) {
        return Ok(Some(TimedPlacements {
            ms,
            built: Vec::new(),
        }));
    }
    if others.is_empty() {
        return Ok(None);
    }
    let Ok(backend) = one_thread_ort(cx)? else {
        return Ok(None);
    };
    if too_fast_to_time(&backend, cx, shapes, mid, sample)? {
        return Ok(None);
    }
    crate::progress::note(
        "int8",
        format!(
            "int8: timing {} INT8 placement(s) against float before calibrating on every sample (ONNX Runtime CPU, 1 thread)",
            others.len() + 1
        ),
    );
    let built = build_each(cx, mid, amax, with_target(from, &others), costs)?;
    let labels = labels_of(&others);
    let placements = Placements {
        labels: &labels,
        built: &built,
    };
    let ms = costs.time(
        "placement timing: the timed runs and their sessions",
        || time_every_placement(&backend, cx, shapes, &placements, mid, sample),
    )?;
    Ok(Some(TimedPlacements { ms, built }))
}

/// Each model's faster figure of two timings of the same models (`first`
/// and `again`, float's last): a busy host only slows a run. `first` where
/// the two differ in length.
pub(super) fn faster_of(first: &[f64], again: &[f64]) -> Vec<f64> {
    if first.len() != again.len() {
        return first.to_vec();
    }
    first.iter().zip(again).map(|(a, b)| a.min(*b)).collect()
}

/// What [`time_placements`] measured: milliseconds per placement, float's
/// last, and the placements it built (the target's first; empty when the
/// figures came from elsewhere), which the accuracy probe with the same
/// ranges takes as they are (see [`placements_noise`]).
pub(super) struct TimedPlacements {
    pub ms: Vec<f64>,
    pub built: Vec<Model>,
}

/// Before the search: the placement the search runs in, the fastest with
/// every layer in INT8 of those whose noise on the probe samples competes
/// with the target's, by `timed` (see [`time_placements`]). Returns the
/// configuration and a note when another placement than `from`'s won by
/// more than the timing noise; None to keep `from` (also when the
/// placements were not timed).
/// `early`: the placements' noise measured after the first sample (see
/// [`placements_noise`]), which then stands for this probe.
#[allow(clippy::too_many_arguments)]
pub(super) fn pick_placement(
    cx: &Context<'_>,
    from: &PipelineConfig,
    mid: &Model,
    amax: &Amax,
    (timed, early): (Option<&[f64]>, Option<&[Noise]>),
    costs: &super::costs::Costs,
    (judge, goal): (&mut Judge<'_>, Goal),
) -> OpsResult<Picked> {
    let none = Picked::default();
    let others = alternatives(from);
    let Some(timed) = timed.filter(|t| t.len() == others.len() + 2) else {
        return Ok(none);
    };
    let labels = labels_of(&others);
    let loss = match early.filter(|l| l.len() == others.len() + 1) {
        Some(l) => l.to_vec(),
        None => placements_noise(cx, (from, mid, amax), Vec::new(), costs, (judge, goal))?,
    };
    let competes = competing(&loss, target_faster(timed));
    // Only the placements that compete are taken; their figures were
    // timed before calibration, beside the others'.
    let ms: Vec<f64> = timed
        .iter()
        .enumerate()
        .map(|(i, &m)| match competes.get(i) {
            Some(false) => f64::NAN,
            _ => m,
        })
        .collect();
    let float_ms = ms[ms.len() - 1];
    let line = labels
        .iter()
        .zip(timed)
        .zip(&competes)
        .map(|((l, m), c)| match c {
            false => format!(
                "{l} {} ms, not taken (noisier on the probe samples)",
                ms_text(*m)
            ),
            true => format!("{l} {} ms", ms_text(*m)),
        })
        .collect::<Vec<_>>()
        .join(", ");
    crate::progress::note(
        "int8",
        format!(
            "int8: every layer in INT8: {line}; float {} ms",
            ms_text(float_ms)
        ),
    );
    let mut eligible = ms[..labels.len()].to_vec();
    for (e, c) in eligible.iter_mut().zip(&competes) {
        if !c {
            *e = f64::INFINITY;
        }
    }
    let line = format!(
        "{line}; noise on the probe samples: {}",
        labels
            .iter()
            .zip(&loss)
            .map(|(l, n)| format!("{l} {:.2e}", n.loss))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let Some(best) = fastest_placement(&eligible) else {
        return Ok(Picked {
            switch: None,
            timed: Some((ms[0], float_ms)),
        });
    };
    let switch = others.into_iter().nth(best - 1).map(|p| {
        (
            p.config,
            format!(
                "placement: {}, the fastest with every layer in INT8 in ONNX Runtime CPU at one thread ({line}; float {} ms)",
                p.label,
                ms_text(float_ms)
            ),
        )
    });
    Ok(Picked {
        switch,
        timed: Some((ms[best], float_ms)),
    })
}

/// Each placement's noise on the probe samples with every layer in INT8
/// at `amax` (the target's first, then [`alternatives`]); `built`: those
/// placements already built with `amax` (the placement timing's), else
/// they are built here.
pub(super) fn placements_noise(
    cx: &Context<'_>,
    (from, mid, amax): (&PipelineConfig, &Model, &Amax),
    built: Vec<Model>,
    costs: &super::costs::Costs,
    (judge, goal): (&mut Judge<'_>, Goal),
) -> OpsResult<Vec<Noise>> {
    let others = alternatives(from);
    if built.len() == others.len() + 1 {
        return noise_on_probes(judge, &built, goal);
    }
    let built = build_each(cx, mid, amax, with_target(from, &others), costs)?;
    noise_on_probes(judge, &built, goal)
}

/// The target's configuration `from`, then each of `others`'.
fn with_target<'c>(
    from: &'c PipelineConfig,
    others: &'c [Placement],
) -> impl Iterator<Item = &'c PipelineConfig> {
    std::iter::once(from).chain(others.iter().map(|p| &p.config))
}

/// `mid` quantized at `amax` in each of `configs` (every layer in INT8).
fn build_each<'c>(
    cx: &Context<'_>,
    mid: &Model,
    amax: &Amax,
    configs: impl Iterator<Item = &'c PipelineConfig>,
    costs: &super::costs::Costs,
) -> OpsResult<Vec<Model>> {
    configs
        .map(|c| Ok(super::context::quantize_rest(mid, c, amax, cx, costs)?.0))
        .collect()
}

/// The placements' labels, the target's first, then `others`'.
fn labels_of(others: &[Placement]) -> Vec<&'static str> {
    let mut labels = vec!["the target's placement"];
    labels.extend(others.iter().map(|p| p.label));
    labels
}

/// Which placements compete, by their noise `loss` (the target's first):
/// a placement that loses much more accuracy would have the search keep
/// more layers float, and be slower in the end (PP-OCRv4 rec: ONNX
/// Runtime's placement, faster with every layer in INT8, kept 36 of 37
/// layers float where TensorRT's kept 8), so only those whose noise on the
/// probe samples is within ACCURACY_SLACK of the target's compete, or,
/// where the target's placement is no faster than float (`target_faster`
/// false), those within NEAR of the accuracy target. NaN noise never
/// competes; the target's placement always does.
fn competing(noise: &[Noise], target_faster: bool) -> Vec<bool> {
    let Some(target) = noise.first() else {
        return Vec::new();
    };
    noise
        .iter()
        .enumerate()
        .map(|(i, n)| {
            i == 0
                || n.loss <= target.loss * ACCURACY_SLACK
                || (!target_faster && n.margin >= -NEAR)
        })
        .collect()
}

/// The placements other than the target's that ran faster than float by
/// `ms` (the target's first, float's last), built with every layer in INT8
/// at `amax` and judged on the probe samples: each one's label and margin
/// to the accuracy target. Where the target's own placement is slower than
/// float its accuracy decides nothing, so it is not run again (DNSMOS: 2 s
/// of its 250 ms runs).
pub(super) fn faster_margins(
    cx: &Context<'_>,
    (from, mid, amax): (&PipelineConfig, &Model, &Amax),
    ms: &[f64],
    costs: &super::costs::Costs,
    (judge, goal): (&mut Judge<'_>, Goal),
) -> OpsResult<Vec<(&'static str, f64)>> {
    let Some(&float) = ms.last() else {
        return Ok(Vec::new());
    };
    let faster: Vec<Placement> = alternatives(from)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i + 2 < ms.len() && ms[i + 1] < float * FASTER)
        .map(|(_, p)| p)
        .collect();
    let built = build_each(cx, mid, amax, faster.iter().map(|p| &p.config), costs)?;
    let labels = faster.iter().map(|p| p.label);
    let noise = noise_on_probes(judge, &built, goal)?;
    Ok(labels
        .into_iter()
        .zip(noise.iter().map(|n| n.margin))
        .collect())
}

/// Whether one of `margins` (see [`faster_margins`]) comes within NEAR of
/// the accuracy target.
pub(super) fn one_comes_near(margins: &[(&'static str, f64)]) -> bool {
    margins.iter().any(|(_, m)| *m >= -NEAR)
}

/// Each placement's margin to the accuracy target on the probe samples
/// (the target's first), for notes: `the target's placement -0.012, ...`.
pub(super) fn margins_line(from: &PipelineConfig, noise: &[Noise]) -> String {
    labels_of(&alternatives(from))
        .iter()
        .zip(noise)
        .map(|(l, n)| format!("{l} {:.3}", n.margin))
        .collect::<Vec<_>>()
        .join(", ")
}

/// On placement figures `ms` (the target's first, float's last): whether
/// the target's placement ran faster than float.
fn target_faster(ms: &[f64]) -> bool {
    match (ms.first(), ms.last()) {
        (Some(&t), Some(&f)) if ms.len() >= 2 => t < f * FASTER,
        _ => false,
    }
}

/// No placement (milliseconds per placement, float's last) ran faster than
/// float: then no INT8 model can (keeping layers in float only adds float
/// work).
pub(super) fn never_faster(ms: &[f64]) -> bool {
    let Some((float_ms, placements)) = ms.split_last() else {
        return false;
    };
    // Faster by more than the timing's noise, as the speed check after the
    // search asks (SLANet: ONNX Runtime's placement 92.3 ms against
    // float's 92.6 ms went on to calibrate, judge and search for 28-48 s,
    // where the check would then write float anyway).
    !placements.is_empty() && placements.iter().all(|m| *m >= *float_ms * FASTER)
}

/// On the placement timing's figures `ms` (the target's placement first,
/// float last): the target's placement is no faster than float, and some
/// other one is. Only then does the accuracy of the others decide whether
/// any INT8 model can pay, and it is probed after the first sample.
pub(super) fn only_others_faster(ms: &[f64]) -> bool {
    let Some((&float, placements)) = ms.split_last() else {
        return false;
    };
    let faster = |m: f64| m < float * FASTER;
    placements.first().is_some_and(|&t| !faster(t)) && placements[1..].iter().any(|&m| faster(m))
}

/// Whether a placement faster than float (by `ms`, float last) competes in
/// accuracy (by `loss`, see [`competing`]); else the note that says why no
/// INT8 model pays.
pub(super) fn faster_one_competes(
    from: &PipelineConfig,
    ms: &[f64],
    loss: &[Noise],
) -> Result<(), String> {
    let Some((&float, placements)) = ms.split_last() else {
        return Ok(());
    };
    let competes = competing(loss, target_faster(ms));
    let faster = |i: usize| placements.get(i).is_some_and(|&m| m < float * FASTER);
    if (0..placements.len()).any(|i| faster(i) && competes.get(i) == Some(&true)) {
        return Ok(());
    }
    let others = alternatives(from);
    let noisier: Vec<String> = (1..placements.len())
        .filter(|&i| faster(i))
        .filter_map(|i| {
            let p = others.get(i - 1)?;
            Some(format!(
                "{} ran {:.2} ms with every layer in INT8 but lost more accuracy (noise {:.2e} on the probe samples against the target's placement's {:.2e}, {:.3} from the accuracy target)",
                p.label,
                placements[i],
                loss.get(i).map_or(f64::NAN, |n| n.loss),
                loss[0].loss,
                loss.get(i).map_or(f64::NAN, |n| n.margin),
            ))
        })
        .collect();
    Err(format!(
        "no INT8 placement both runs faster than float ({float:.2} ms at one thread) and keeps the accuracy: the target's placement ran {:.2} ms; {}",
        placements[0],
        noisier.join("; ")
    ))
}

/// The placements built with every layer in INT8, by label.
struct Placements<'a> {
    labels: &'a [&'a str],
    built: &'a [Model],
}

/// Milliseconds of each placement and of the float model `mid`, last.
fn time_every_placement(
    backend: &ChosenBackend,
    cx: &Context<'_>,
    shapes: &InputShapes,
    p: &Placements<'_>,
    mid: &Model,
    sample: &[HostTensor],
) -> OpsResult<Vec<f64>> {
    // A placement that builds the same model as an earlier one (magika
    // has no Sigmoid/Mul nor depthwise Conv for the third to leave out) is
    // not timed again: the two would tie and hold the timing for its whole
    // time. It gets the earlier one's figure.
    let prints: Vec<Option<u64>> = p.built.iter().map(super::judge::fingerprint).collect();
    let same_as = |i: usize| (0..i).find(|&j| prints[i].is_some() && prints[j] == prints[i]);
    let timed_ix: Vec<usize> = (0..p.built.len())
        .filter(|&i| same_as(i).is_none())
        .collect();
    let mut models: Vec<(&str, &Model)> = timed_ix
        .iter()
        .map(|&i| (p.labels[i], &p.built[i]))
        .collect();
    models.push(("float", mid));
    let needed: Vec<Needed> = placement_decides(&vec![true; timed_ix.len()])
        .into_iter()
        .map(Needed::always)
        .collect();
    let timed_ms = time_models_with(
        backend,
        cx,
        shapes,
        &models,
        sample,
        (PLACEMENT_SECONDS, Some(CLEARLY_SLOWER)),
        &needed,
    )?;
    let mut ms = vec![f64::NAN; p.built.len()];
    for (k, &i) in timed_ix.iter().enumerate() {
        ms[i] = timed_ms[k];
    }
    for i in 0..p.built.len() {
        if let Some(j) = same_as(i) {
            ms[i] = ms[j];
        }
    }
    ms.push(timed_ms[timed_ms.len() - 1]);
    Ok(ms)
}

/// Test hook (debug builds only): INFOPT_TEST_INT8_TIMED=INT8_MS,FLOAT_MS
/// (every placement at INT8_MS) or one figure per placement then float's
/// stands for the placement timing's answer, for the end-to-end test of
/// what the command does with it (real timings of a test model decide
/// nothing). Answers separated by `;` stand for the first timing, the
/// second, ... (the last for any after it).
#[cfg(debug_assertions)]
fn test_timed(placements: usize) -> Option<Vec<f64>> {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let v = std::env::var("INFOPT_TEST_INT8_TIMED").ok()?;
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let answers: Vec<&str> = v.split(';').collect();
    let answer = answers.get(call).or(answers.last())?;
    let ms: Vec<f64> = answer.split(',').filter_map(|x| x.parse().ok()).collect();
    match ms.len() {
        2 => {
            let mut all = vec![ms[0]; placements];
            all.push(ms[1]);
            Some(all)
        }
        n if n == placements + 1 => Some(ms),
        _ => None,
    }
}

/// The comparisons the placement timing decides, for placements that
/// `compete` (the first, the target's, always; the float model last):
/// each other placement against the first (faster by more than the noise),
/// the others against each other (which is fastest), and each against
/// float (whether INT8 was faster).
fn placement_decides(compete: &[bool]) -> Vec<Decides> {
    let float = compete.len();
    let others: Vec<usize> = (1..compete.len()).filter(|&i| compete[i]).collect();
    let mut out: Vec<Decides> = others.iter().map(|&i| (i, 0, FASTER)).collect();
    for (k, &i) in others.iter().enumerate() {
        out.extend(others[k + 1..].iter().map(|&j| (i, j, 1.0)));
    }
    out.extend(
        (0..compete.len())
            .filter(|&i| compete[i])
            .map(|i| (i, float, FASTER)),
    );
    out
}

/// What [`pick_placement`] found.
#[derive(Default)]
pub(super) struct Picked {
    /// Another placement than the target's, and the note saying why.
    pub switch: Option<(PipelineConfig, String)>,
    /// Milliseconds of the placement taken with every layer in INT8, and
    /// of the float model, when timed.
    pub timed: Option<(f64, f64)>,
}

impl Picked {
    /// Whether the model with every layer in INT8 in the placement taken
    /// was timed faster than float: then, with nothing kept float, the
    /// check after the search would time the same model again.
    pub fn int8_was_faster(&self) -> bool {
        self.timed.is_some_and(|(q, f)| q < f * FASTER)
    }
}

/// Another placement wins when it is faster than the first (the target's)
/// by more than 3% (the noise of interleaved timing at one thread): its
/// index, None to keep the first.
fn fastest_placement(ms: &[f64]) -> Option<usize> {
    let first = *ms.first()?;
    let (i, best) = ms
        .iter()
        .enumerate()
        .skip(1)
        .min_by(|a, b| a.1.total_cmp(b.1))?;
    (*best < first * 0.97).then_some(i)
}

/// What the check decided: the model to write instead of the INT8 one
/// (None: the INT8 model stays), and the figures for the report.
pub(super) struct Checked {
    pub replace: Option<(Model, PipelineRun, HeldOut)>,
    pub report: SpeedCheck,
    pub note: Option<String>,
}

/// The speed check's figures: milliseconds at one thread of the INT8
/// model, the float model and the input (in that order), and the backend
/// they ran in (the other placements are timed there too).
pub(super) struct Answer {
    backend: ChosenBackend,
    pub ms: [f64; 3],
    /// The other placements with the same keep-set, timed against float
    /// where INT8 was slower (see [`Gate`]); empty when not timed yet.
    others: Vec<OtherTimed>,
}

/// Another placement timed against float: its label, and milliseconds of
/// it and of the float model timed beside it.
#[derive(Clone, Debug)]
struct OtherTimed {
    label: &'static str,
    ms: [f64; 2],
}

impl OtherTimed {
    /// Faster than float beyond the timing's noise.
    fn faster(&self) -> bool {
        self.ms[0] < self.ms[1] * FASTER
    }
}

/// The INT8 model `quantized` timed against the float model `float` and the
/// input at one thread. None when not timed: ONNX Runtime missing, or a
/// float model too fast to time. `slower_matters`: whether it matters that
/// INT8 is slower than float rather than at a tie (other placements to try
/// then); a tie settles no such question, and held magika's check for its
/// whole second.
pub(super) fn time_answer(
    cx: &Context<'_>,
    quantized: &Model,
    float: &Model,
    (sample, shapes): (&[HostTensor], &InputShapes),
    slower_matters: bool,
) -> OpsResult<Option<Answer>> {
    match answer_timer(cx, float, sample, shapes)? {
        Some(backend) => {
            let models = (quantized, float);
            time_answer_in(backend, cx, models, (sample, shapes), slower_matters).map(Some)
        }
        None => Ok(None),
    }
}

/// The backend the speed check times in: None when ONNX Runtime is missing
/// or `float` is too fast to time.
fn answer_timer(
    cx: &Context<'_>,
    float: &Model,
    sample: &[HostTensor],
    shapes: &InputShapes,
) -> OpsResult<Option<ChosenBackend>> {
    let backend = match one_thread_ort(cx)? {
        Ok(b) => b,
        Err(why) => {
            crate::progress::note(
                "int8",
                format!("int8: speed check skipped: ONNX Runtime is not available ({why})"),
            );
            return Ok(None);
        }
    };
    #[cfg(debug_assertions)]
    if test_answer().is_some() {
        return Ok(Some(backend));
    }
    // A model of well under a millisecond is timed mostly in per-op
    // overhead and the machine's noise: not checked (nor do the tests'
    // small fixtures spend seconds here).
    if too_fast_to_time(&backend, cx, shapes, float, sample)? {
        return Ok(None);
    }
    Ok(Some(backend))
}

/// [`time_answer`] in `backend` (see [`answer_timer`]).
fn time_answer_in(
    backend: ChosenBackend,
    cx: &Context<'_>,
    (quantized, float): (&Model, &Model),
    (sample, shapes): (&[HostTensor], &InputShapes),
    slower_matters: bool,
) -> OpsResult<Answer> {
    #[cfg(debug_assertions)]
    if let Some(ms) = test_answer() {
        return Ok(Answer {
            backend,
            ms,
            others: Vec::new(),
        });
    }
    crate::progress::note(
        "int8",
        "int8: timing the INT8 model against the float one (ONNX Runtime CPU, 1 thread)",
    );
    // The input model too: at the calibration data's sizes the float graph
    // has static shapes, and ONNX Runtime's own load-time rewrites of a
    // static graph can make it slower than the input, which ONNX Runtime
    // runs dynamic (all-MiniLM-L6-v2, TorchScript export: 17.2 ms as
    // exported, 19.6 ms at static [1, 128]).
    let ms = time_models_with(
        &backend,
        cx,
        shapes,
        &[
            ("int8", quantized),
            ("float", float),
            ("input", cx.original),
        ],
        sample,
        (TIMING_SECONDS, None),
        &speed_check_needs(slower_matters),
    )?;
    crate::progress::note(
        "int8",
        format!(
            "int8: {} ms against float {} ms at one thread ({:.2}x); the input {} ms",
            ms_text(ms[0]),
            ms_text(ms[1]),
            ms[1] / ms[0],
            ms_text(ms[2])
        ),
    );
    Ok(Answer {
        backend,
        ms: [ms[0], ms[1], ms[2]],
        others: Vec::new(),
    })
}

/// Test hook (debug builds only): INFOPT_TEST_INT8_ANSWER=INT8,FLOAT,INPUT
/// stands for the speed check's figures (the tests' models run too fast
/// to time, and real timings of them decide nothing).
#[cfg(debug_assertions)]
fn test_answer() -> Option<[f64; 3]> {
    let v = std::env::var("INFOPT_TEST_INT8_ANSWER").ok()?;
    let ms: Vec<f64> = v.split(',').filter_map(|x| x.parse().ok()).collect();
    (ms.len() == 3).then(|| [ms[0], ms[1], ms[2]])
}

/// The other placements (see [`alternatives`]) built with `keep` in float
/// and ranges `amax`, less those that build `quantized` itself: magika has
/// no Sigmoid/Mul nor depthwise Conv for the lean placement to leave out,
/// and judging and timing the same model again can only tie.
fn distinct_alternatives(
    search: &Search<'_>,
    keep: &[Candidate],
    amax: &Amax,
    quantized: &Model,
) -> OpsResult<Vec<(Placement, Model, PipelineRun)>> {
    let print = super::judge::fingerprint(quantized);
    let mut out = Vec::new();
    for p in alternatives(search.from) {
        let alt = Search {
            from: &p.config,
            multiply_adds: search.multiply_adds.clone(),
            run_seconds: search.run_seconds.clone(),
            ..*search
        };
        let (m, r) = alt.build(keep, amax)?;
        if print.is_none() || super::judge::fingerprint(&m) != print {
            out.push((p, m, r));
        }
    }
    Ok(out)
}

/// Each of `alternatives` timed against `float` at one thread on
/// `sample`, in order.
fn time_others(
    backend: &ChosenBackend,
    cx: &Context<'_>,
    alternatives: &[(Placement, Model, PipelineRun)],
    float: &Model,
    (sample, shapes): (&[HostTensor], &InputShapes),
) -> OpsResult<Vec<OtherTimed>> {
    #[cfg(debug_assertions)]
    if let Some(ms) = test_others() {
        return Ok(alternatives
            .iter()
            .map(|(p, _, _)| OtherTimed { label: p.label, ms })
            .collect());
    }
    alternatives
        .iter()
        .map(|(p, m, _)| {
            let t = time_models(
                backend,
                cx,
                shapes,
                &[(p.label, m), ("float", float)],
                sample,
                TIMING_SECONDS,
                &[(0, 1, FASTER)],
            )?;
            Ok(OtherTimed {
                label: p.label,
                ms: [t[0], t[1]],
            })
        })
        .collect()
}

/// Test hook (debug builds only): INFOPT_TEST_INT8_OTHERS=OTHER,FLOAT
/// stands for every other placement's timing against float after the
/// speed check found INT8 slower (see `INFOPT_TEST_INT8_ANSWER`).
#[cfg(debug_assertions)]
fn test_others() -> Option<[f64; 2]> {
    let v = std::env::var("INFOPT_TEST_INT8_OTHERS").ok()?;
    let ms: Vec<f64> = v.split(',').filter_map(|x| x.parse().ok()).collect();
    (ms.len() == 2).then(|| [ms[0], ms[1]])
}

/// Whether the check on the figures `ms` could keep an INT8 model with at
/// least as much in float as the one timed: keeping more in float only
/// adds float work and breaks integer chains, so a model no faster than
/// float stays so. Also true where INT8 is slower than float and one of
/// the other placements, timed with the same keep-set (`others`), is
/// faster than float, and where a figure is missing.
fn may_pay(ms: &[f64; 3], others: &[OtherTimed]) -> bool {
    let [int8, float, input] = *ms;
    if ms.iter().any(|m| !m.is_finite()) {
        return true;
    }
    if int8 < float * FASTER {
        return !input_wins(input, int8);
    }
    int8 >= float && others.iter().any(OtherTimed::faster)
}

/// The speed check before the search judges its finalists on every sample
/// (see `search::run`): the keep-set the probes settled on is timed, and
/// when even it is no faster than float, no finalist, which keeps at least
/// as much in float, can be the answer (magika: two judgements on every
/// sample, 0.6 s, to reach a model that then ran at a tie with float).
/// The figures are kept for the check after the search, which needs no
/// timing of its own when the search ends on the same keep-set.
pub(super) struct Gate<'a> {
    pub cx: &'a Context<'a>,
    pub float: &'a Model,
    pub sample: Vec<HostTensor>,
    pub shapes: InputShapes,
    pub costs: &'a super::costs::Costs,
    /// The keep-set timed, and its figures.
    timed: Option<(Vec<Candidate>, Answer)>,
    /// Whether the float model can be timed (asked once).
    timeable: Option<bool>,
}

impl<'a> Gate<'a> {
    pub fn new(
        cx: &'a Context<'a>,
        float: &'a Model,
        (sample, shapes): (Vec<HostTensor>, InputShapes),
        costs: &'a super::costs::Costs,
    ) -> Self {
        Gate {
            cx,
            float,
            sample,
            shapes,
            costs,
            timed: None,
            timeable: None,
        }
    }

    /// The backend the gate times in; whether the float model can be timed
    /// at all is asked once (a load and two runs).
    fn timer(&mut self) -> OpsResult<Option<ChosenBackend>> {
        match self.timeable {
            Some(false) => Ok(None),
            Some(true) => Ok(one_thread_ort(self.cx)?.ok()),
            None => {
                let b = answer_timer(self.cx, self.float, &self.sample, &self.shapes)?;
                self.timeable = Some(b.is_some());
                Ok(b)
            }
        }
    }

    /// The speed check's figures for `quantized`, the model with `keep` in
    /// float: those the gate measured when it timed that keep-set, else
    /// timed now on the gate's sample. None: not timed (see
    /// [`time_answer`]).
    pub fn answer(
        &mut self,
        keep: &[Candidate],
        quantized: &Model,
        slower_matters: bool,
    ) -> OpsResult<Option<Answer>> {
        if let Some((k, a)) = self.timed.take()
            && k == keep
        {
            return Ok(Some(a));
        }
        let Some(backend) = self.timer()? else {
            return Ok(None);
        };
        let models = (quantized, self.float);
        let at = (self.sample.as_slice(), &self.shapes);
        time_answer_in(backend, self.cx, models, at, slower_matters).map(Some)
    }
}

impl super::fallback::PayGate for Gate<'_> {
    /// Times the model `search` builds with `keep` in float; whether the
    /// search should go on (see [`may_pay`]).
    fn may_pay(&mut self, search: &Search<'_>, keep: &[Candidate]) -> OpsResult<bool> {
        let Some(backend) = self.timer()? else {
            return Ok(true);
        };
        let (cx, float, sample, shapes) = (self.cx, self.float, &self.sample, &self.shapes);
        let (quantized, _) = search.build(keep, search.amax)?;
        let alternatives = distinct_alternatives(search, keep, search.amax, &quantized)?;
        let others = !alternatives.is_empty();
        let mut answer = self.costs.time("speed check (one thread)", || {
            time_answer_in(backend, cx, (&quantized, float), (sample, shapes), others)
        })?;
        let [int8_ms, float_ms, _] = answer.ms;
        if others && int8_ms >= float_ms {
            // Slower than float: only another placement can be the answer,
            // so they are timed here, and the finalists are judged on every
            // sample only where one of them is faster (MediaPipe's hand
            // landmarks: its finalist and the other placement judged on
            // every sample, 0.6 s, to write float).
            let at = (sample.as_slice(), shapes);
            answer.others = self.costs.time("speed check (one thread)", || {
                time_others(&answer.backend, cx, &alternatives, float, at)
            })?;
        }
        let pays = may_pay(&answer.ms, &answer.others);
        self.timed = Some((keep.to_vec(), answer));
        Ok(pays)
    }
}

/// The INT8 model `quantized` (with `keep` in float and ranges `amax`, as
/// `search` builds it) against the float model `float`, on the figures
/// `answer` (see [`time_answer`], [`Gate::answer`]); when it is not faster,
/// the other placements are built with the same keep-set, judged on every
/// sample and timed on `sample`, and the fastest that meets the target and
/// beats float is the answer, else the float model.
#[allow(clippy::too_many_arguments)]
pub(super) fn check(
    cx: &Context<'_>,
    search: &Search<'_>,
    keep: &[Candidate],
    amax: &Amax,
    judge: &mut Judge<'_>,
    (quantized, float): (&Model, &Model),
    (sample, shapes): (&[HostTensor], &InputShapes),
    answer: Answer,
) -> OpsResult<Checked> {
    let backend = answer.backend;
    let [int8_ms, float_ms, input_ms] = answer.ms;
    let mut measured = vec![Measured {
        label: "int8".into(),
        ms: int8_ms,
        met: true,
    }];
    let mut built = Vec::new();
    if int8_ms >= float_ms {
        let alternatives = distinct_alternatives(search, keep, amax, quantized)?;
        // The gate's figures where it timed these placements (same keep-set).
        let same = answer.others.len() == alternatives.len()
            && answer
                .others
                .iter()
                .zip(&alternatives)
                .all(|(o, (p, _, _))| o.label == p.label);
        let timed = match same {
            true => answer.others,
            false => time_others(&backend, cx, &alternatives, float, (sample, shapes))?,
        };
        for ((p, m, r), t) in alternatives.into_iter().zip(timed) {
            // Judged on every sample only where it is faster than float:
            // no other can be the answer.
            let h = match t.faster() {
                true => Some(judge.judge(&m)?),
                false => None,
            };
            let met = h
                .as_ref()
                .is_some_and(|h| misses(h, search.goal).is_empty());
            crate::progress::note(
                "int8",
                format!(
                    "int8: tried {}: {} ms against float {} ms ({})",
                    p.label,
                    ms_text(t.ms[0]),
                    ms_text(t.ms[1]),
                    match (&h, met) {
                        (None, _) => "not faster, so not judged",
                        (Some(_), true) => "meets the target",
                        (Some(_), false) => "misses the target",
                    }
                ),
            );
            // Against the float model timed beside it: the two timings of
            // float differ by the machine's drift, the ratio less.
            measured.push(Measured {
                label: p.label.to_string(),
                ms: t.ms[0] * float_ms / t.ms[1],
                met,
            });
            built.push((m, r, h));
        }
    }
    let mut checked = verdict(judge, float, measured, built, int8_ms, float_ms)?;
    prefer_input(cx, judge, &mut checked, input_ms)?;
    Ok(checked)
}

/// What the speed check (INT8, float, the input: models 0, 1, 2) decides:
/// INT8 faster than float by more than the noise. Where it is, the input
/// against INT8 (the answer unless the input beats it); where it is not,
/// whether INT8 is slower (then the other placements are tried) and the
/// input against float.
const SPEED_CHECK_NEEDS: [Needed; 4] = [
    Needed {
        cmp: (0, 1, FASTER),
        when: None,
    },
    Needed {
        cmp: (2, 0, FASTER),
        when: Some(((0, 1, FASTER), true)),
    },
    Needed {
        cmp: (0, 1, 1.0),
        when: Some(((0, 1, FASTER), false)),
    },
    Needed {
        cmp: (2, 1, FASTER),
        when: Some(((0, 1, FASTER), false)),
    },
];

/// [`SPEED_CHECK_NEEDS`], less whether INT8 is slower than float where
/// that does not matter (see [`time_answer`]).
fn speed_check_needs(slower_matters: bool) -> Vec<Needed> {
    SPEED_CHECK_NEEDS
        .iter()
        .filter(|n| slower_matters || n.cmp != (0, 1, 1.0))
        .copied()
        .collect()
}

/// The input model is the answer when it ran faster than the chosen one by
/// more than the noise (NaN never wins).
fn input_wins(input_ms: f64, answer_ms: f64) -> bool {
    input_ms < answer_ms * FASTER
}

/// Writes the input model unchanged when it ran faster than the answer
/// the check chose by more than the noise (see [`FASTER`]): no rewrite of
/// it pays at one thread in ONNX Runtime.
fn prefer_input(
    cx: &Context<'_>,
    judge: &mut Judge<'_>,
    checked: &mut Checked,
    input_ms: f64,
) -> OpsResult<()> {
    let chosen = &checked.report.chosen;
    let Some(answer) = checked.report.timed.iter().find(|t| &t.label == chosen) else {
        return Ok(());
    };
    let answer_ms = answer.ms;
    checked.report.timed.push(SpeedTimed {
        label: "input".into(),
        ms: input_ms,
        met: true,
    });
    if !input_wins(input_ms, answer_ms) {
        return Ok(());
    }
    let h = judge.judge_float(cx.original, super::fallback::PROBE_SAMPLES)?;
    let note = format!(
        "the input model ran {input_ms:.2} ms against {answer_ms:.2} ms for the best answer found ({chosen}) in ONNX Runtime CPU at one thread: neither INT8 nor the optimized float graph (its shapes fixed to the calibration data's) is faster here, so the input was written unchanged"
    );
    crate::progress::note("int8", format!("int8: {note}"));
    checked.replace = Some((cx.original.clone(), PipelineRun::default(), h));
    checked.report.chosen = "input".into();
    checked.note = Some(match checked.note.take() {
        Some(n) => format!("{n}; {note}"),
        None => note,
    });
    Ok(())
}

/// What the timings decide: the search's INT8 model, a faster placement
/// that meets the target, or the float model; with the note that says so.
fn verdict(
    judge: &mut Judge<'_>,
    float: &Model,
    measured: Vec<Measured>,
    built: Vec<(Model, PipelineRun, Option<HeldOut>)>,
    int8_ms: f64,
    float_ms: f64,
) -> OpsResult<Checked> {
    let float_m = Measured {
        label: "float".into(),
        ms: float_ms,
        met: true,
    };
    let choice = choose(&measured, &float_m);
    let mut timed: Vec<SpeedTimed> = measured
        .iter()
        .map(|m| SpeedTimed {
            label: m.label.clone(),
            ms: m.ms,
            met: m.met,
        })
        .collect();
    timed.push(SpeedTimed {
        label: "float".into(),
        ms: float_ms,
        met: true,
    });
    let (replace, chosen, note) = match choice {
        None => (None, "int8".to_string(), None),
        Some(i) if i >= 1 && i <= built.len() => {
            let label = measured[i].label.clone();
            let note = format!(
                "INT8 with the search's placement ran {} ms against float's {} ms in ONNX Runtime CPU at one thread: slower, so the faster placement was written: {label} ({} ms, meets the target)",
                ms_text(int8_ms),
                ms_text(float_ms),
                ms_text(measured[i].ms)
            );
            // Only a placement judged (and meeting the target) is chosen.
            let judged = built
                .into_iter()
                .nth(i - 1)
                .and_then(|(m, r, h)| Some((m, r, h?)));
            (judged, label, Some(note))
        }
        Some(_) => {
            let h = judge.judge_float(float, super::fallback::PROBE_SAMPLES)?;
            let note = format!(
                "INT8 ran {} ms against float's {} ms in ONNX Runtime CPU at one thread{}: no INT8 model here is faster than float, so the float model was written (INT8 does not pay on this model and runtime)",
                ms_text(int8_ms),
                ms_text(float_ms),
                if measured.len() > 1 {
                    format!(
                        ", and the other placements tried ({}) were not faster or missed the target",
                        measured[1..]
                            .iter()
                            .map(|m| format!("{}: {} ms", m.label, ms_text(m.ms)))
                            .collect::<Vec<_>>()
                            .join("; ")
                    )
                } else {
                    String::new()
                }
            );
            (
                Some((float.clone(), PipelineRun::default(), h)),
                "float".to_string(),
                Some(note),
            )
        }
    };
    if let Some(n) = &note {
        crate::progress::note("int8", format!("int8: {n}"));
    }
    Ok(Checked {
        replace,
        report: SpeedCheck {
            float_ms,
            timed,
            chosen,
        },
        note,
    })
}

/// A placement tried when the INT8 model is slower than float: its label
/// for the report and the quantize step's configuration.
pub(super) struct Placement {
    pub label: &'static str,
    pub config: PipelineConfig,
}

/// The placements worth trying after `from` (the quantize step and the
/// passes after it) gave a model slower than float: on the portable target,
/// ONNX Runtime's own placement (layer outputs quantized, so that its QDQ
/// fusions make QLinearConv / QLinearMatMul), then that without integer
/// elementwise ops and depthwise convolutions; on ONNX Runtime, the latter.
/// TensorRT's placement is TensorRT's business (no CPU timing says anything
/// about it): nothing.
pub(super) fn alternatives(from: &PipelineConfig) -> Vec<Placement> {
    let lean = |mut c: PipelineConfig| {
        if let Some(o) = int8::options_mut(&mut c, 0) {
            o.float_depthwise = true;
            o.float_elementwise = true;
        }
        c
    };
    match from.target {
        Target::Tensorrt => Vec::new(),
        Target::Portable => {
            let mut ort = from.clone();
            ort.target = Target::Onnxruntime;
            vec![
                Placement {
                    label: "ONNX Runtime's placement (QLinearConv chains)",
                    config: ort.clone(),
                },
                Placement {
                    label: "ONNX Runtime's placement without integer Sigmoid/Mul and depthwise Conv",
                    config: lean(ort),
                },
            ]
        }
        Target::Onnxruntime => {
            let already =
                int8::options(from, 0).is_some_and(|o| o.float_depthwise && o.float_elementwise);
            if already {
                Vec::new()
            } else {
                vec![Placement {
                    label: "without integer Sigmoid/Mul and depthwise Conv",
                    config: lean(from.clone()),
                }]
            }
        }
    }
}

/// Each of `built`'s noise on the probe samples, probed side by side where
/// the machine allows (see `judge/side_by_side.rs`).
fn noise_on_probes(judge: &mut Judge<'_>, built: &[Model], goal: Goal) -> OpsResult<Vec<Noise>> {
    Ok(judge
        .probe_each(
            built.len(),
            &mut |i| Ok(built[i].clone()),
            super::fallback::PROBE_SAMPLES,
            &mut |_, _| {},
        )?
        .iter()
        .map(|h| Noise {
            loss: super::fallback::relative_noise(h),
            margin: super::goal::score(h, goal),
        })
        .collect())
}

/// Whether `float` runs in under [`min_float_ms`] at one thread: one run
/// after a warm-up tells a model far above it (a 160 ms model spent seven
/// runs here when every answer took a full timing), the fastest of five the
/// ones near it. The fastest, not the median: on a loaded machine (the test
/// suite's models, tens of microseconds, ran at several times that beside
/// other tests) the median of a model far below the bound can cross it,
/// and its timings then decide what only noise says.
fn too_fast_to_time(
    backend: &ChosenBackend,
    cx: &Context<'_>,
    shapes: &InputShapes,
    float: &Model,
    sample: &[HostTensor],
) -> OpsResult<bool> {
    // The first run, and where it comes near the bound the fastest of
    // five, as the run's record of what decided (see `timings.rs`).
    let least = min_float_ms();
    let what = vec![format!(
        "too fast to time: {}",
        super::timings::named("float", float)
    )];
    let ms = cx.timings.answer(what, || {
        measure_too_fast(backend, cx, shapes, float, sample, least)
    })?;
    Ok(match ms.as_slice() {
        [_, fastest] => *fastest < least,
        _ => false,
    })
}

/// [`too_fast_to_time`]'s measurement: the first run's milliseconds, and
/// the fastest of five after it where the first is under 40x `least`.
fn measure_too_fast(
    backend: &ChosenBackend,
    cx: &Context<'_>,
    shapes: &InputShapes,
    float: &Model,
    sample: &[HostTensor],
    least: f64,
) -> OpsResult<Vec<f64>> {
    let timed = load_timed(backend, cx, shapes, &[("float", float)], sample)?;
    let time = |runs| {
        timing::time_rounds(
            &timed,
            timing::Continued::fresh(runs, 1).on(Clock::CallingThread),
            Transfer::HostToHost,
            &mut |_| {},
            &mut |_| false,
        )
        .map(|r| r[0].iter().copied().fold(f64::INFINITY, f64::min))
        .map_err(OpsError::from)
    };
    let first = time(1)?;
    if first >= 40.0 * least {
        return Ok(vec![first]);
    }
    Ok(vec![first, time(5)?])
}

/// ONNX Runtime on the CPU at one thread, or why not.
pub(super) fn one_thread_ort(cx: &Context<'_>) -> OpsResult<Result<ChosenBackend, String>> {
    let mut options = cx.backend_args.options()?;
    options.threads = Some(1);
    options.execution_providers.clear();
    Ok(ChosenBackend::build(BackendKind::Ort, &options).map_err(|e| e.message))
}

/// A comparison that a timing decides: model `.0` against model `.1`
/// (indices into the models timed) on either side of the ratio `.2`.
pub(super) type Decides = (usize, usize, f64);

/// How far (relative) beyond its threshold a comparison's median ratio must
/// be to stop timing early (see `timing::settled`).
const SETTLED_GAP: f64 = 0.03;

/// Timed rounds before a timing may stop early.
const LEAST_ROUNDS: usize = 8;

/// Median milliseconds of each of `models` on `inputs`, timed interleaved
/// in `backend` for about `seconds` in all (at least 5 and at most 50
/// rounds, after 2 warm-up rounds); stopped after [`LEAST_ROUNDS`] once
/// every comparison of `decides` is settled (see `timing::settled`).
pub(super) fn time_models(
    backend: &ChosenBackend,
    cx: &Context<'_>,
    shapes: &InputShapes,
    models: &[(&str, &Model)],
    inputs: &[HostTensor],
    seconds: f64,
    decides: &[Decides],
) -> OpsResult<Vec<f64>> {
    let needed: Vec<Needed> = decides.iter().map(|&d| Needed::always(d)).collect();
    time_models_with(
        backend,
        cx,
        shapes,
        models,
        inputs,
        (seconds, None),
        &needed,
    )
}

/// A comparison a timing has to settle, and when: always, or only while
/// the median ratio of another pair lies on one side of its threshold
/// (`(pair, true)`: below it). The speed check needs the input against
/// float only where float may be the answer: with INT8 surely faster it is
/// the input against INT8 that counts, and the input against float (a tie
/// on most models, which no number of rounds settles) held every check
/// for its whole time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Needed {
    pub cmp: Decides,
    pub when: Option<(Decides, bool)>,
}

impl Needed {
    pub(super) fn always(cmp: Decides) -> Needed {
        Needed { cmp, when: None }
    }

    /// Whether this comparison counts on the rounds `ms`.
    fn counts(&self, ms: &[Vec<f64>]) -> bool {
        let Some(((a, b, t), below)) = self.when else {
            return true;
        };
        match (ms.get(a), ms.get(b)) {
            (Some(x), Some(y)) => (median_ratio(x, y) < t) == below,
            _ => true,
        }
    }
}

/// Median of the paired ratios `x[k] / y[k]`.
fn median_ratio(x: &[f64], y: &[f64]) -> f64 {
    let mut r: Vec<f64> = x.iter().zip(y).map(|(a, b)| a / b).collect();
    if r.is_empty() {
        return f64::NAN;
    }
    timing::median(&mut r)
}

/// A model more than this many times slower than the fastest after the
/// first rounds is out of the race (see [`still_racing`]). With every
/// layer in INT8, the target's placement ran 2.7 times ONNX Runtime's on
/// EfficientNet-B0 (17.0 against 6.2 ms) and took half of every round; no
/// number of rounds would have changed the order.
const CLEARLY_SLOWER: f64 = 1.5;

/// [`time_models`] with `prune`: a model other than the last (the float
/// model) that ran more than `prune` times the fastest in the first rounds
/// is timed no further; its figure is those rounds', and what `decides`
/// asks of it is taken as settled.
fn time_models_with(
    backend: &ChosenBackend,
    cx: &Context<'_>,
    shapes: &InputShapes,
    models: &[(&str, &Model)],
    inputs: &[HostTensor],
    limits: (f64, Option<f64>),
    needed: &[Needed],
) -> OpsResult<Vec<f64>> {
    // What decides the bytes written: recorded, or answered from an
    // earlier run's record (see `timings.rs`).
    let what = models
        .iter()
        .map(|(label, m)| super::timings::named(label, m))
        .collect();
    cx.timings.answer(what, || {
        measure_models(backend, cx, shapes, models, inputs, limits, needed)
    })
}

/// [`time_models_with`]'s measurement.
fn measure_models(
    backend: &ChosenBackend,
    cx: &Context<'_>,
    shapes: &InputShapes,
    models: &[(&str, &Model)],
    inputs: &[HostTensor],
    (seconds, prune): (f64, Option<f64>),
    needed: &[Needed],
) -> OpsResult<Vec<f64>> {
    let timed = load_timed(backend, cx, shapes, models, inputs)?;
    // Every timing here is ONNX Runtime at one thread (`one_thread_ort`),
    // which runs on this thread: its CPU time is counted, not the time it
    // waited for a core (see `timing::Clock::CallingThread`).
    // One round first, to size the rest to the time allowed; three when
    // it also decides which models race on (a median, not one run). The
    // rest continue from those rounds, after one warm-up run of their new
    // runners: a float model of 160 ms (DNSMOS) spent 11 rounds on the
    // placement timing when the first rounds were thrown away, 7 now.
    let sizing = if prune.is_some() { 3 } else { 1 };
    let first = timing::time_rounds(
        &timed,
        timing::Continued::fresh(sizing, 1).on(Clock::CallingThread),
        Transfer::HostToHost,
        &mut |_| {},
        &mut |_| false,
    )
    .map_err(OpsError::from)?;
    let medians = |rounds: &[Vec<f64>]| -> Vec<f64> {
        rounds
            .iter()
            .map(|r| timing::median(&mut r.clone()))
            .collect()
    };
    let first_ms = medians(&first);
    let kept = still_racing(&first_ms, prune);
    let mut ms = first_ms.clone();
    let mut before = Vec::with_capacity(kept.len());
    let mut racing = Vec::with_capacity(kept.len());
    for (i, (t, rounds)) in timed.into_iter().zip(first).enumerate() {
        if kept.contains(&i) {
            racing.push(t);
            before.push(rounds);
        }
    }
    let position = |i: usize| kept.iter().position(|&k| k == i);
    let moved = |(a, b, t): Decides| Some((position(a)?, position(b)?, t));
    // A comparison with a model no longer timed is settled; one whose
    // condition reads such a model always counts.
    let needed: Vec<Needed> = needed
        .iter()
        .filter_map(|n| {
            Some(Needed {
                cmp: moved(n.cmp)?,
                when: n.when.and_then(|(d, below)| Some((moved(d)?, below))),
            })
        })
        .collect();
    let fastest = kept
        .iter()
        .map(|&i| first_ms[i])
        .fold(f64::INFINITY, f64::min);
    let repeat = runs_per_round(fastest);
    let round_ms: f64 = kept.iter().map(|&i| first_ms[i]).sum::<f64>() * repeat as f64;
    let most = rounds(seconds, round_ms.max(1e-3));
    let runs = timing::Continued {
        before,
        warmup: 1,
        rounds: timing::Rounds {
            least: LEAST_ROUNDS.min(most),
            most,
        },
        repeat,
        clock: Clock::CallingThread,
    };
    let mut settled = |ms: &[Vec<f64>]| all_settled(ms, &needed);
    let timed_rounds = timing::time_rounds(
        &racing,
        runs,
        Transfer::HostToHost,
        &mut |_| {},
        &mut settled,
    )
    .map_err(OpsError::from)?;
    for (&i, m) in kept.iter().zip(medians(&timed_rounds)) {
        ms[i] = m;
    }
    Ok(ms)
}

/// Each of `models` loaded in `backend`, with `inputs`, for timing. The
/// sessions are built side by side, one per core: building an ONNX Runtime
/// session runs its graph rewrites on one thread, and EfficientNet-B0's
/// four (three placements and float) took half its placement timing.
fn load_timed(
    backend: &ChosenBackend,
    cx: &Context<'_>,
    shapes: &InputShapes,
    models: &[(&str, &Model)],
    inputs: &[HostTensor],
) -> OpsResult<Vec<Timed>> {
    let load = |(label, m): &(&str, &Model)| -> OpsResult<Timed> {
        let bytes = m
            .to_bytes_referencing_sources()
            .map_err(OpsError::from_ir)?;
        let loaded = backend
            .backend
            .load(&bytes, Some(cx.dir), shapes)
            .map_err(|e| {
                OpsError::from(
                    infopt_verify::VerifyError::runtime(e, infopt_verify::ErrorKind::Load)
                        .context(format!("timing {label} at one thread")),
                )
            })?;
        Ok(Timed {
            label: label.to_string(),
            model: loaded,
            inputs: inputs.to_vec(),
        })
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = cores.min(models.len());
    if workers < 2 {
        return models.iter().map(load).collect();
    }
    // Worker `w` builds models w, w + workers, ...; results in model order.
    let built: Vec<Vec<OpsResult<Timed>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let load = &load;
                scope.spawn(move || models.iter().skip(w).step_by(workers).map(load).collect())
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    vec![Err(OpsError::new(
                        crate::error::ErrorKind::Internal,
                        "a thread building a timing session panicked",
                    ))]
                })
            })
            .collect()
    });
    let mut per_worker: Vec<std::vec::IntoIter<OpsResult<Timed>>> =
        built.into_iter().map(Vec::into_iter).collect();
    let mut timed = Vec::with_capacity(models.len());
    for i in 0..models.len() {
        let next = per_worker[i % workers].next().ok_or_else(|| {
            OpsError::new(
                crate::error::ErrorKind::Internal,
                "a timing session was not built",
            )
        })?;
        timed.push(next?);
    }
    Ok(timed)
}

/// The models still timed after a first round that ran `first`: all of
/// them, or with `prune`, those within `prune` times the fastest, and the
/// last one (the float model) always.
fn still_racing(first: &[f64], prune: Option<f64>) -> Vec<usize> {
    let fastest = first.iter().copied().fold(f64::INFINITY, f64::min);
    let last = first.len().saturating_sub(1);
    (0..first.len())
        .filter(|&i| i == last || prune.is_none_or(|r| first[i] <= r * fastest))
        .collect()
}

/// Every comparison of `needed` that counts settled on the rounds `ms`
/// (none: never, the timing fills its time).
fn all_settled(ms: &[Vec<f64>], needed: &[Needed]) -> bool {
    !needed.is_empty()
        && needed.iter().filter(|n| n.counts(ms)).all(|n| {
            let (a, b, t) = n.cmp;
            match (ms.get(a), ms.get(b)) {
                (Some(x), Some(y)) => timing::settled(x, y, t, SETTLED_GAP),
                _ => false,
            }
        })
}

/// Rounds of at least this many milliseconds are timed 3 times, not 5:
/// their runs' noise is a small share of them, and each costs seconds
/// (ISNet at 1024x1024: four models at 1.7 s a run, 61 s of a 126 s
/// command in the placement timing).
const SLOW_ROUND_MS: f64 = 300.0;

/// Timed rounds for `seconds` when one round takes `round_ms`.
fn rounds(seconds: f64, round_ms: f64) -> usize {
    let n = (seconds * 1e3 / round_ms).floor();
    if n.is_nan() {
        return 5;
    }
    let least = if round_ms >= SLOW_ROUND_MS { 3 } else { 5 };
    (n as usize).clamp(least, 50)
}

/// A candidate answer and what it measured.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Measured {
    pub label: String,
    pub ms: f64,
    /// It meets the accuracy target (the float model always does).
    pub met: bool,
}

/// The answer among `measured` (the INT8 model first, then the other
/// placements, the float model last): the INT8 model when it is faster than
/// float; otherwise the fastest that meets the target and is faster than
/// float, or the float model. None when the INT8 model stays.
pub(super) fn choose(measured: &[Measured], float: &Measured) -> Option<usize> {
    let first = measured.first()?;
    // Faster means beyond the noise of interleaved timing at one thread.
    let faster = |ms: f64| ms < float.ms * FASTER;
    if faster(first.ms) {
        return None;
    }
    let best = measured
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, m)| m.met && faster(m.ms))
        .min_by(|a, b| a.1.ms.total_cmp(&b.1.ms))
        .map(|(i, _)| i);
    Some(best.unwrap_or(measured.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(label: &str, ms: f64, met: bool) -> Measured {
        Measured {
            label: label.into(),
            ms,
            met,
        }
    }

    #[test]
    fn the_input_is_written_only_when_faster_than_the_answer_beyond_the_noise() {
        assert!(input_wins(17.0, 18.0));
        assert!(!input_wins(17.6, 18.0));
        assert!(!input_wins(18.5, 18.0));
        assert!(!input_wins(f64::NAN, 18.0));
        assert!(!input_wins(17.0, f64::NAN));
    }

    #[test]
    fn the_gate_stops_the_search_only_where_the_check_would_write_float_or_the_input() {
        // Faster than float beyond the noise, the input slower: go on.
        // Another placement timed faster than float with the same keep-set,
        // or none.
        let one_faster = [OtherTimed {
            label: "other",
            ms: [5.0, 10.0],
        }];
        let none: [OtherTimed; 0] = [];
        assert!(may_pay(&[8.0, 10.0, 10.0], &none));
        // Faster than float, but the input faster still: the input wins
        // whatever stays in INT8.
        assert!(!may_pay(&[8.0, 10.0, 7.0], &one_faster));
        // A tie with float (magika: 3.83 against 3.93 ms): float.
        assert!(!may_pay(&[9.8, 10.0, 10.0], &one_faster));
        // Slower: the check tries the other placements, if any.
        assert!(may_pay(&[12.0, 10.0, 10.0], &one_faster));
        assert!(!may_pay(&[12.0, 10.0, 10.0], &none));
        // A figure missing decides nothing.
        assert!(may_pay(&[f64::NAN, 10.0, 10.0], &none));
        // The same rule as the check's choice.
        for (int8, alt) in [(8.0, false), (9.8, false), (9.8, true), (12.0, false)] {
            let kept = choose(&[m("int8", int8, true)], &m("float", 10.0, true)).is_none();
            let others: &[OtherTimed] = if alt { &one_faster } else { &none };
            assert_eq!(may_pay(&[int8, 10.0, 10.0], others), kept, "{int8} {alt}");
        }
    }

    #[test]
    fn a_placement_at_a_tie_with_float_is_not_faster() {
        // SLANet: ONNX Runtime's placement 92.26 ms, float 92.63 ms.
        assert!(never_faster(&[128.22, 92.26, 94.42, 92.63]));
        assert!(!never_faster(&[15.8, 5.6, 7.0, 6.2]));
        // A placement not timed decides nothing.
        assert!(!never_faster(&[f64::NAN, 92.63]));
        assert!(!never_faster(&[92.63]));
    }

    #[test]
    fn a_second_timing_keeps_each_models_faster_figure() {
        // ULFD in a slow phase of the host: ONNX Runtime's placement read
        // 3.62 ms against float's 3.45 ms; timed again, 2.50 against 2.85.
        let slow = [10.39, 3.62, 4.50, 3.45];
        let quiet = [7.30, 2.50, 2.95, 2.85];
        assert!(never_faster(&slow));
        assert_eq!(faster_of(&slow, &quiet), quiet.to_vec());
        assert!(!never_faster(&faster_of(&slow, &quiet)));
        let mixed = [7.30, 3.70, 2.95, 3.00];
        assert_eq!(faster_of(&slow, &mixed), vec![7.30, 3.62, 2.95, 3.00]);
        assert!(never_faster(&faster_of(&slow, &mixed)));
        // Timings of different models: the first stands.
        assert_eq!(faster_of(&slow, &quiet[..3]), slow.to_vec());
    }

    #[test]
    fn accuracy_decides_after_the_first_sample_only_where_other_placements_alone_are_faster() {
        // DNSMOS: the target's placement 239 ms, ONNX Runtime's 52 and 53,
        // float 159.
        assert!(only_others_faster(&[239.0, 52.0, 53.0, 159.0]));
        // The target's placement faster: it is searched whatever the others do.
        assert!(!only_others_faster(&[5.0, 4.0, 4.0, 6.0]));
        // Nothing faster (beyond the noise): the timing alone stops it.
        assert!(!only_others_faster(&[239.0, 158.0, 160.0, 159.0]));
        assert!(!only_others_faster(&[159.0]));
    }

    #[test]
    fn a_faster_placement_that_loses_too_much_accuracy_does_not_pay() {
        let from =
            PipelineConfig::from_pass_names(&["eliminate-dead".to_string()], Target::Portable)
                .unwrap();
        let ms = [239.0, 52.0, 53.0, 159.0];
        // Far from the target (a margin of 0.2 below it), and noisier
        // than 1.5x the target's placement.
        let far = |loss: &[f64]| -> Vec<Noise> {
            loss.iter()
                .enumerate()
                .map(|(i, &loss)| Noise {
                    loss,
                    margin: if i == 0 { 0.005 } else { -0.2 },
                })
                .collect()
        };
        let why = faster_one_competes(&from, &ms, &far(&[1e-4, 2e-3, 1.6e-4])).unwrap_err();
        assert!(why.starts_with("no INT8 placement both runs faster than float (159.00 ms at one thread) and keeps the accuracy: the target's placement ran 239.00 ms; ONNX Runtime's placement (QLinearConv chains) ran 52.00 ms with every layer in INT8 but lost more accuracy (noise 2.00e-3 on the probe samples against the target's placement's 1.00e-4, -0.200 from the accuracy target)"), "{why}");
        // One of them within the slack: it may pay.
        assert!(faster_one_competes(&from, &ms, &far(&[1e-4, 2e-3, 1.4e-4])).is_ok());
        // NaN noise never competes.
        assert!(faster_one_competes(&from, &ms, &far(&[1e-4, f64::NAN, f64::NAN])).is_err());
        // Noisier by far, but near the target, where the target's own
        // placement is no faster than float: it competes.
        let mut near = far(&[1e-4, 2e-3, 2e-3]);
        near[2].margin = -0.03;
        assert!(faster_one_competes(&from, &ms, &near).is_ok());
        assert_eq!(competing(&near, false), [true, false, true]);
        // Not where the target's placement is faster than float itself:
        // then its noise is the yardstick (PP-OCRv4 rec).
        assert!(target_faster(&[100.0, 52.0, 53.0, 159.0]));
        assert_eq!(competing(&near, true), [true, false, false]);
    }

    #[test]
    fn an_int8_model_faster_than_float_stays() {
        let float = m("float", 10.0, true);
        assert_eq!(choose(&[m("int8", 8.0, true)], &float), None);
    }

    #[test]
    fn a_slower_int8_model_gives_way_to_the_fastest_placement_that_meets_and_beats_float() {
        let float = m("float", 10.0, true);
        let tried = [
            m("int8", 11.0, true),
            m("ort", 7.0, false), // fastest, but misses the target
            m("lean", 9.0, true),
            m("other", 9.6, true),
        ];
        assert_eq!(choose(&tried, &float), Some(2));
    }

    #[test]
    fn with_nothing_faster_than_float_the_float_model_is_the_answer() {
        let float = m("float", 10.0, true);
        let tried = [m("int8", 12.0, true), m("lean", 10.5, true)];
        // Index past the placements: the float model.
        assert_eq!(choose(&tried, &float), Some(2));
        // Equal is not faster, nor within the timing noise.
        assert_eq!(choose(&[m("int8", 10.0, true)], &float), Some(1));
        assert_eq!(choose(&[m("int8", 9.8, true)], &float), Some(1));
    }

    #[test]
    fn another_placement_wins_only_beyond_the_timing_noise() {
        assert_eq!(fastest_placement(&[10.0, 9.0, 9.5]), Some(1));
        assert_eq!(fastest_placement(&[10.0, 9.8]), None);
        assert_eq!(fastest_placement(&[10.0, 12.0, 11.0]), None);
        assert_eq!(fastest_placement(&[10.0]), None);
        assert_eq!(fastest_placement(&[]), None);
    }

    #[test]
    fn the_placement_timing_settles_only_what_the_competing_placements_decide() {
        // Placements 0 (the target's), 1, 2; float is 3. Placement 1 lost
        // too much accuracy: nothing about it is waited for.
        assert_eq!(
            placement_decides(&[true, false, true]),
            vec![(2, 0, FASTER), (0, 3, FASTER), (2, 3, FASTER)]
        );
        assert_eq!(
            placement_decides(&[true, true, true]),
            vec![
                (1, 0, FASTER),
                (2, 0, FASTER),
                (1, 2, 1.0),
                (0, 3, FASTER),
                (1, 3, FASTER),
                (2, 3, FASTER)
            ]
        );
        assert_eq!(placement_decides(&[true]), vec![(0, 1, FASTER)]);
    }

    #[test]
    fn timing_stops_early_only_once_every_comparison_is_settled() {
        let fast = vec![6.0, 6.1, 5.9, 6.0, 6.2, 6.0, 5.9, 6.1];
        let slow = vec![9.0, 9.1, 8.9, 9.2, 9.0, 8.8, 9.0, 9.1];
        // A third model 3-9% off the slow one, round by round: neither
        // surely faster nor surely within 3% of it.
        let wobbly = vec![9.5, 8.6, 9.6, 8.5, 9.7, 8.4, 9.5, 8.6];
        let ms = vec![fast.clone(), slow.clone(), wobbly];
        let always = |d: &[Decides]| d.iter().map(|&c| Needed::always(c)).collect::<Vec<_>>();
        assert!(all_settled(&ms, &always(&[(0, 1, FASTER)])));
        // 1 against 2 is not settled: the timing goes on.
        assert!(!all_settled(&ms, &always(&[(0, 1, FASTER), (1, 2, 1.0)])));
        // Two equal models are a tie, settled: it would not pay to time on.
        let tie = vec![fast.clone(), slow.clone(), slow.clone()];
        assert!(all_settled(&tie, &always(&[(0, 1, FASTER), (1, 2, 1.0)])));
        // Nothing to decide: fill the time.
        assert!(!all_settled(&ms, &[]));
    }

    #[test]
    fn a_comparison_needed_only_on_one_side_of_another_waits_for_nothing_else() {
        let fast = vec![6.0, 6.1, 5.9, 6.0, 6.2, 6.0, 5.9, 6.1];
        let slow = vec![9.0, 9.1, 8.9, 9.2, 9.0, 8.8, 9.0, 9.1];
        let wobbly = vec![9.5, 8.6, 9.6, 8.5, 9.7, 8.4, 9.5, 8.6];
        // INT8 (0) surely faster than float (1): the wobbly input (2)
        // against float does not count, against INT8 it is settled.
        let ms = vec![fast.clone(), slow.clone(), wobbly];
        let check = SPEED_CHECK_NEEDS;
        assert!(all_settled(&ms, &check));
        // INT8 slower than float: now the input against float counts, and
        // with the input a few percent either side of float it is not
        // settled.
        let near_fast = vec![6.3, 5.7, 6.4, 5.6, 6.5, 5.5, 6.3, 5.7];
        let ms = vec![slow.clone(), fast.clone(), near_fast];
        assert!(!all_settled(&ms, &check));
        let ms = vec![slow.clone(), fast.clone(), slow];
        assert!(
            all_settled(&ms, &check),
            "the input surely slower than float"
        );
    }

    #[test]
    fn a_model_far_slower_in_the_first_round_is_timed_no_further() {
        // EfficientNet-B0, every layer in INT8: the target's placement,
        // ONNX Runtime's two, float.
        let first = [17.0, 6.2, 6.3, 6.8];
        assert_eq!(still_racing(&first, Some(CLEARLY_SLOWER)), vec![1, 2, 3]);
        assert_eq!(still_racing(&first, None), vec![0, 1, 2, 3]);
        // The float model stays, however slow: the others are timed
        // against it.
        assert_eq!(still_racing(&[2.0, 5.0], Some(CLEARLY_SLOWER)), vec![0, 1]);
        // A model 1.4x the fastest may still win or lose by the noise.
        assert_eq!(
            still_racing(&[8.4, 6.0, 7.0], Some(CLEARLY_SLOWER)),
            vec![0, 1, 2]
        );
    }

    #[test]
    fn a_fast_model_runs_back_to_back_for_half_a_millisecond_a_round() {
        // R-Net's 38 microseconds: 14 runs a round.
        assert_eq!(runs_per_round(0.038), 14);
        assert_eq!(runs_per_round(0.5), 1);
        assert_eq!(runs_per_round(12.0), 1);
        assert_eq!(runs_per_round(0.001), 100);
        assert_eq!(runs_per_round(f64::NAN), 1);
        assert_eq!(runs_per_round(0.0), 1);
    }

    #[test]
    fn timing_rounds_fill_the_time_allowed_within_bounds() {
        assert_eq!(rounds(2.0, 100.0), 20);
        assert_eq!(rounds(2.0, 1.0), 50);
        assert_eq!(rounds(2.0, 1000.0), 3);
        assert_eq!(rounds(2.0, 299.0), 6);
        assert_eq!(rounds(1.0, 299.0), 5);
        assert_eq!(rounds(f64::NAN, 1.0), 5);
    }
}
