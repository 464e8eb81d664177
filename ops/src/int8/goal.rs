//! The INT8 model's accuracy target and how far a judgement is from it:
//! what the search, the judge and the speed check all measure against.

use infopt_verify::evaluate::{self, HeldOut};

/// What is held to the cosine target: every output, and every part of an
/// output judged on its own (a detector's scores beside its boxes).
pub(super) fn judged(h: &HeldOut) -> impl Iterator<Item = &infopt_runtime::OutputAgreement> {
    h.outputs.iter().chain(h.parts.iter().map(|p| &p.agreement))
}

/// Whether output (or part) `name` is held to the cosine target: every one
/// but a class map's, whose values are class indices (its label agreement
/// judges it; see `evaluate::HeldOut::label_judged`).
fn cosine_judged(h: &HeldOut, name: &str) -> bool {
    !h.label_judged.iter().any(|n| n == name)
}

/// Lowest cosine over the held-out outputs and their parts.
pub(super) fn min_cosine(h: &HeldOut) -> f64 {
    judged(h)
        .filter(|o| cosine_judged(h, &o.name))
        .map(|o| o.cosine)
        .fold(1.0, f64::min)
}

/// The accuracy target.
#[derive(Clone, Copy, Debug)]
pub(super) struct Goal {
    pub(super) cosine: f64,
    pub(super) top1: f64,
    /// With a caller's metric (see `metric.rs`): the most its score may
    /// fall below the float model's; that is then the whole target.
    pub(super) max_drop: f64,
}

/// `t >= min`, false for NaN.
pub(super) fn top1_meets(t: f64, min: f64) -> bool {
    t >= min
}

/// The top-1 agreement of classifier output `name` judged against the
/// target: the one measured, or on the calibration samples (which the
/// ranges fit and whose classes are clear) the lower of it and the one
/// expected on unseen rows (see `evaluate::expected_agreement`).
pub(super) fn top1_judged(h: &HeldOut, name: &str) -> Option<f64> {
    let measured = *h.top1_agreement.get(name)?;
    if !h.on_calibration_samples {
        return Some(measured);
    }
    Some(match h.top1_expected.get(name) {
        Some(&e) if e < measured => e,
        _ => measured,
    })
}

/// The score agreement of a part of scores judged against the target
/// (see `evaluate::PartAgreement::score_agreement`): the one measured, or
/// on the calibration samples the lower of it and the one expected with
/// the error doubled.
pub(super) fn scores_judged(h: &HeldOut, p: &evaluate::PartAgreement) -> Option<f64> {
    let measured = p.score_agreement?;
    if !h.on_calibration_samples {
        return Some(measured);
    }
    Some(match p.score_agreement_expected {
        Some(e) if e < measured => e,
        _ => measured,
    })
}

/// The correlation across samples of output `name`'s values with the
/// original's (an output of a few values per sample: see
/// `evaluate::across`), held to the cosine target: the one measured, or on
/// the calibration samples the lower of it and the one expected with the
/// error doubled.
pub(super) fn correlation_judged(h: &HeldOut, name: &str) -> Option<f64> {
    let measured = *h.correlation.get(name)?;
    if !h.on_calibration_samples {
        return Some(measured);
    }
    Some(match h.correlation_expected.get(name) {
        Some(&e) if e < measured || e.is_nan() => e,
        _ => measured,
    })
}

/// What misses the goal: `output (cosine 0.95 < 0.99)`, ...; empty when met.
pub(super) fn misses(h: &HeldOut, goal: Goal) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(m) = h.metric {
        if !super::metric::meets(m.candidate, m.original, goal.max_drop) {
            out.push(format!(
                "the metric ({:.5} < float's {:.5} less {})",
                m.candidate, m.original, goal.max_drop
            ));
        }
        return out;
    }
    for p in &h.parts {
        if let Some(t) = scores_judged(h, p)
            && !top1_meets(t, goal.top1)
        {
            out.push(format!(
                "{} (score agreement {:.4} < {})",
                p.agreement.name, t, goal.top1
            ));
        }
    }
    for o in judged(h) {
        let cosine_ok = o.cosine >= goal.cosine || !cosine_judged(h, &o.name); // false for NaN
        if !cosine_ok {
            out.push(format!(
                "{} (cosine {:.5} < {})",
                o.name, o.cosine, goal.cosine
            ));
        }
        if let Some(r) = correlation_judged(h, &o.name)
            && !top1_meets(r, goal.cosine)
        {
            out.push(format!(
                "{} (correlation across samples {:.5} < {})",
                o.name, r, goal.cosine
            ));
        }
        if let Some(t) = top1_judged(h, &o.name)
            && !top1_meets(t, goal.top1)
        {
            out.push(format!(
                "{} ({} {:.4} < {})",
                o.name,
                h.agreement_kind(&o.name),
                t,
                goal.top1
            ));
        }
    }
    out
}

/// The smallest margin to the target over the outputs (cosine and top-1):
/// positive when the target is met.
pub(super) fn score(h: &HeldOut, goal: Goal) -> f64 {
    let m = margins(h, goal);
    // `f64::min` skips NaN; `margins` never returns one.
    m.counted.min(m.pooled)
}

/// The smallest margins to the target by kind of criterion (see
/// [`margins`]); infinite where there is no criterion of that kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Margins {
    /// Of criteria that count samples (or rows) whose class changed: top-1
    /// and nearest-neighbour agreement, and a caller's metric. On 8 probe
    /// samples one flip moves them by 0.125.
    pub(super) counted: f64,
    /// Of criteria pooled over every value of every sample: cosine,
    /// correlation across samples, score agreement. Every sample moves
    /// them by a few thousandths from the probes' figure.
    pub(super) pooled: f64,
}

/// The smallest margin to the target of each kind of criterion.
pub(super) fn margins(h: &HeldOut, goal: Goal) -> Margins {
    // `f64::min` skips NaN: a NaN margin is the worst, not ignored.
    let worst = |m: f64, x: f64| {
        if x.is_nan() {
            f64::NEG_INFINITY
        } else {
            m.min(x)
        }
    };
    let mut out = Margins {
        counted: f64::INFINITY,
        pooled: f64::INFINITY,
    };
    if let Some(s) = h.metric {
        out.counted = worst(
            out.counted,
            super::metric::margin(s.candidate, s.original, goal.max_drop),
        );
        return out;
    }
    for o in judged(h) {
        if cosine_judged(h, &o.name) {
            out.pooled = worst(out.pooled, o.cosine - goal.cosine);
        }
        if let Some(r) = correlation_judged(h, &o.name) {
            out.pooled = worst(out.pooled, r - goal.cosine);
        }
        if let Some(t) = top1_judged(h, &o.name) {
            out.counted = worst(out.counted, t - goal.top1);
        }
    }
    for p in &h.parts {
        if let Some(t) = scores_judged(h, p) {
            out.pooled = worst(out.pooled, t - goal.top1);
        }
    }
    out
}
