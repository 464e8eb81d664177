//! The one precision search (DESIGN.md, "One precision search"): build
//! with a keep-set, judge, rank, keep more. Deciding is kept apart from
//! running: the loop below sees candidates only through [`Trials`], which
//! builds the model with a keep-set in float and judges it, on a few probe
//! samples or on every sample. The INT8 fallback implements it with weighted
//! layers and activation Q/DQ pairs as candidates (`fallback.rs`); the unit
//! tests implement it with arithmetic, so the ranking and stopping rules are
//! tested without a runtime.
//!
//! The rules, in order:
//! 1. **Bound.** The keep-set of every candidate is judged first (on the
//!    probe samples, confirmed on all when it misses there). When even that
//!    misses, no keep-set can meet the target: the search stops after one or
//!    two judgements, not after ranking every candidate.
//! 2. **Rank.** A primary candidate (a weighted layer) is probed alone in
//!    INT8 among the primaries, the others quantized; its harm is the
//!    outputs' noise then less the noise with every primary in float. A
//!    secondary one (an activation Q/DQ, which on ONNX Runtime exists only
//!    around quantized layers) is probed kept in float with every primary
//!    in float; its harm is what that removes. Candidates are ranked by
//!    harm (ties: the given order, so weighted layers come before the
//!    activations that would float them too), except that primaries whose
//!    probe alone missed the target come first: no answer leaves one of them
//!    in INT8. From 64 candidates, all primary, they are ranked in groups
//!    (`rank_in_groups`): a group probed alone in INT8 is split only while
//!    its harm matters or it missed; when most groups miss alone, each
//!    candidate is probed alone after all.
//! 3. **Keep more.** The best 1, 2, 4, ... (from the count of those that
//!    missed alone, 2x, 4x, ...) are kept until the probe samples meet the
//!    target, then a bisection finds the fewest that do.
//! 4. **Finalists** are judged on every sample; one that misses there gives
//!    way to the fewest keep-set whose probe, shifted by what the finalist
//!    lost from its probes to every sample, still meets (when that is less
//!    than a quarter more; where step 3 probed none such, keep-sets above
//!    the finalist are probed for it, growing by a quarter and bisected);
//!    when that one misses too, the keep-set grows by a quarter at a time,
//!    on every sample, from where it stood, then a bisection to within a
//!    thirty-second of the candidates.
//! 5. A keep-set of every candidate leaves nothing worth calling a result
//!    (nothing left in INT8): met only there is a failure, said as such,
//!    and where the probes already say so no finalist is judged.

use std::ops::Range;

use crate::error::OpsResult;

/// A judgement of one keep-set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict {
    /// The outputs' relative noise power (lower is better; infinite for NaN).
    pub loss: f64,
    /// The smallest margin to the target (positive when met).
    pub margin: f64,
    /// Whether the target is met.
    pub met: bool,
    /// The lowest output cosine.
    pub cosine: f64,
}

/// What a probe is for: ranking probes are many (one per candidate) and
/// may look at fewer samples than the probes that decide how many to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    Rank,
    Decide,
}

/// Builds and judges keep-sets of candidates `C`.
pub trait Trials<C> {
    /// What a judgement on every sample leaves (the model, its pass run, ...).
    type Built;
    /// The model with `keep` in float on the first few judged samples.
    fn probe(&mut self, keep: &[C], why: Probe) -> OpsResult<Verdict>;
    /// Probes each keep-set of `keeps` as [`Trials::probe`] does; they do
    /// not depend on each other, so trials may run them side by side.
    /// `done` gets each verdict in the order of `keeps`, and returns the
    /// progress line said for it.
    fn probe_each(
        &mut self,
        keeps: &[Vec<C>],
        why: Probe,
        done: &mut dyn FnMut(usize, &Verdict) -> String,
    ) -> OpsResult<Vec<Verdict>> {
        let mut out = Vec::with_capacity(keeps.len());
        for (i, keep) in keeps.iter().enumerate() {
            let v = self.probe(keep, why)?;
            let line = done(i, &v);
            self.say(line);
            out.push(v);
        }
        Ok(out)
    }
    /// The model with `keep` in float on every judged sample.
    fn judge(&mut self, keep: &[C]) -> OpsResult<(Verdict, Self::Built)>;
    /// Makes the model with `keep` in float the base of the probes for
    /// `why` after it: what a candidate computes the same as the base need
    /// not run again (a cost, never a verdict).
    fn keep_base(&mut self, _keep: &[C], _why: Probe) -> OpsResult<()> {
        Ok(())
    }
    /// Whether a model with at least `keep` in float may still be the
    /// answer (the speed check, asked before the finalists are judged on
    /// every sample: keeping more in float never makes a model faster).
    fn may_pay(&mut self, _keep: &[C]) -> OpsResult<bool> {
        Ok(true)
    }
    /// A progress line (one per step of the search).
    fn say(&mut self, _line: String) {}
}

/// A candidate and what it did alone in INT8 (every other candidate in
/// float) on the probe samples.
#[derive(Clone, Debug)]
pub struct Ranked<C> {
    pub candidate: C,
    /// The loss with only it quantized.
    pub loss: f64,
    /// `loss` less the loss with every candidate in float: its harm alone,
    /// what keeping it in float is expected to buy.
    pub gain: f64,
    /// The lowest output cosine with only it quantized.
    pub cosine: f64,
    /// A primary probed on its own: whether the target is met with only it
    /// in INT8 among the primaries. Ranked in a group (`rank_in_groups`):
    /// false when the group it was last probed in missed alone in INT8, or
    /// every first group did (a guess the search confirms before acting on
    /// it), else None. None for secondaries.
    pub met: Option<bool>,
}

/// Why the search ended without meeting the target.
#[derive(Clone, Debug, PartialEq)]
pub enum Missed {
    /// No candidates to keep.
    Nothing,
    /// Every candidate in float still misses (judged on every sample).
    Unreachable(Verdict),
    /// Only every candidate in float meets it: nothing would stay quantized.
    OnlyAll,
    /// The keep-set the probes settled on is no faster than float (see
    /// [`Trials::may_pay`]): no finalist was judged.
    NotFaster,
}

/// What the search found.
pub struct Outcome<C, B> {
    /// Every candidate probed, best first (empty when the bound stopped it).
    pub ranking: Vec<Ranked<C>>,
    /// The candidates kept (a prefix of the ranking, or all when it stopped).
    pub kept: Vec<C>,
    /// The last judgement on every sample of the keep-set `kept`, and what
    /// it built.
    pub judged: Option<(Verdict, B)>,
    /// None when the target is met.
    pub missed: Option<Missed>,
    /// Probes and judgements made (for tests and the report's costs).
    pub probes: usize,
    pub judgements: usize,
}

/// The last judgement on every sample, and what it built.
type LastJudged<B> = Option<(Verdict, B)>;

struct Counted<'t, T> {
    inner: &'t mut T,
    probes: usize,
    judgements: usize,
}

impl<T> Counted<'_, T> {
    /// What the search found, with the counts so far.
    fn outcome<C, B>(
        &self,
        ranking: Vec<Ranked<C>>,
        kept: Vec<C>,
        judged: Option<(Verdict, B)>,
        missed: Option<Missed>,
    ) -> Outcome<C, B> {
        Outcome {
            ranking,
            kept,
            judged,
            missed,
            probes: self.probes,
            judgements: self.judgements,
        }
    }

    fn probe<C>(&mut self, keep: &[C], why: Probe) -> OpsResult<Verdict>
    where
        T: Trials<C>,
    {
        self.probes += 1;
        self.inner.probe(keep, why)
    }
    fn probe_each<C>(
        &mut self,
        keeps: &[Vec<C>],
        why: Probe,
        done: &mut dyn FnMut(usize, &Verdict) -> String,
    ) -> OpsResult<Vec<Verdict>>
    where
        T: Trials<C>,
    {
        self.probes += keeps.len();
        self.inner.probe_each(keeps, why, done)
    }
    fn judge<C>(&mut self, keep: &[C]) -> OpsResult<(Verdict, T::Built)>
    where
        T: Trials<C>,
    {
        self.judgements += 1;
        self.inner.judge(keep)
    }
}

/// Orders candidates by what keeping each alone buys, most first; a NaN
/// gain (a broken measurement) last, ties in the given order.
pub fn rank_by_gain<C>(mut measured: Vec<Ranked<C>>) -> Vec<Ranked<C>> {
    let key = |g: f64| if g.is_nan() { f64::NEG_INFINITY } else { g };
    // Stable: equal gains keep the given order.
    measured.sort_by(|a, b| key(b.gain).total_cmp(&key(a.gain)));
    measured
}

/// The fewest `k` in `lo+1..=hi` for which `met(k)`, knowing `met(hi)` and
/// not `met(lo)` (a bisection; `met` is assumed to grow with `k`).
fn fewest(lo: usize, hi: usize, met: &mut dyn FnMut(usize) -> OpsResult<bool>) -> OpsResult<usize> {
    fewest_within(lo, hi, 1, met)
}

/// [`fewest`] to within `within`: a `k` for which `met(k)`, at most
/// `within` more than the fewest.
fn fewest_within(
    mut lo: usize,
    mut hi: usize,
    within: usize,
    met: &mut dyn FnMut(usize) -> OpsResult<bool>,
) -> OpsResult<usize> {
    while hi - lo > within.max(1) {
        let mid = lo + (hi - lo) / 2;
        if met(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

/// The first `k` of `from*2, from*4, ... n` (capped at `n`) for which
/// `met(k)`, with the last `k` that missed; None when none of them met.
fn doubling(
    from: usize,
    n: usize,
    met: &mut dyn FnMut(usize) -> OpsResult<bool>,
) -> OpsResult<(usize, Option<usize>)> {
    growing(from, n, &|k| (k * 2).max(1), met)
}

/// `k` and a quarter more, and at least a sixteenth of the `n` candidates
/// (at least one): how the keep-set grows on every sample after a
/// finalist missed there. The probes put it close (PP-OCRv4 rec: 13 met on
/// the probes, 15 needed on every sample), and each step is a judgement on
/// every sample: doubling went 26, 19, 16, 14, 15. The sixteenth is for a
/// finalist of few among many, where a quarter is less than one: PP-OCRv6
/// small rec's finalist of 1 in 70 grew one at a time, seven judgements on
/// every sample to reach 7 (now 1, 5, 9, then 7 and 6 by bisection).
fn by_a_quarter(k: usize, n: usize) -> usize {
    k + (k / 4).max(n / 16).max(1)
}

/// How close to the fewest the bisection on every sample goes: a
/// thirty-second of the `n` candidates (at least one). Each step is a
/// judgement on every sample; PP-OCRv4 det (64 layers, 640x640, 3 s a
/// judgement) bisected 32..40 to 36, 38, 39 to keep 40, where stopping
/// within two keeps the same 40 one judgement sooner.
fn on_every_sample_within(n: usize) -> usize {
    (n / 32).max(1)
}

/// The first `k` of `next(from), next(next(from)), ... n` (capped at `n`)
/// for which `met(k)`, with the last `k` that missed; None when none met.
fn growing(
    from: usize,
    n: usize,
    next: &dyn Fn(usize) -> usize,
    met: &mut dyn FnMut(usize) -> OpsResult<bool>,
) -> OpsResult<(usize, Option<usize>)> {
    let mut lo = from;
    let mut k = next(from);
    loop {
        let k_now = k.min(n);
        if met(k_now)? {
            return Ok((lo, Some(k_now)));
        }
        lo = k_now;
        if k_now == n {
            return Ok((lo, None));
        }
        k = next(k_now).max(k_now + 1);
    }
}

/// From this many candidates, all primary, they are ranked in groups.
pub const GROUPED_FROM: usize = 64;
/// Groups the candidates are first split into.
const GROUPS: usize = 8;
/// A group doing less than this share of the groups' summed harm is not
/// split further: its members are ranked by its harm shared out.
const NEGLIGIBLE: f64 = 1.0 / 64.0;

/// Ranks primary `candidates` by their harm alone in INT8 without a probe
/// each: groups of neighbours are probed alone in INT8 (the others float);
/// a group whose harm matters is split in two, its first half probed and
/// the second's harm taken as the rest (harm adds up in noise power), down
/// to single candidates; a group whose harm is negligible and that met the
/// target alone shares it out among its members. Where a few layers do the harm (EfficientNet-B0: its
/// head and last convolutions) this costs a few probes per harmful layer
/// instead of one per layer.
///
/// None when most groups missed alone in INT8: the target then allows less
/// than most groups' harm, the order that matters is among the least
/// harmful layers, which sharing out and differences cannot tell apart, and
/// the caller probes each candidate alone (nudenet's YOLOv8n: ranked in
/// groups, the 16 layers it left in INT8 included ones each missing alone,
/// and float was written; probed one by one, 17 stay in INT8 at 1.16x).
fn rank_in_groups<C: Clone, T: Trials<C>>(
    t: &mut Counted<'_, T>,
    candidates: &[C],
    context: &Verdict,
    label: &dyn Fn(&C) -> String,
) -> OpsResult<Option<Vec<Ranked<C>>>> {
    let n = candidates.len();
    let size = n.div_ceil(GROUPS);
    let groups: Vec<std::ops::Range<usize>> = (0..n)
        .step_by(size.max(1))
        .map(|start| start..(start + size).min(n))
        .collect();
    let keeps: Vec<Vec<C>> = groups.iter().map(|r| all_but(candidates, r)).collect();
    let harm_of = |v: &Verdict| (v.loss - context.loss).max(0.0);
    let mut line = |i: usize, v: &Verdict| {
        format!(
            "ranking group {}..{} of {n} alone in INT8: harm {:.3e}",
            groups[i].start + 1,
            groups[i].end,
            harm_of(v)
        )
    };
    let verdicts = t.probe_each(&keeps, Probe::Rank, &mut line)?;
    let missed = verdicts.iter().filter(|v| !v.met).count();
    if missed * 2 > verdicts.len() {
        t.inner.say(format!(
            "{missed} of {} groups missed the target alone in INT8: probing each of the {n} layers alone",
            verdicts.len()
        ));
        return Ok(None);
    }
    let mut stack: Vec<Split> = groups
        .iter()
        .zip(verdicts)
        .map(|(r, v)| (r.clone(), harm_of(&v), v, true))
        .collect();
    let total: f64 = stack
        .iter()
        .map(|(_, h, _, _)| if h.is_finite() { *h } else { 0.0 })
        .sum();
    let floor = total * NEGLIGIBLE;
    let mut out = Vec::with_capacity(n);
    while let Some((r, harm, v, own)) = stack.pop() {
        let single = r.len() == 1;
        // A group that missed alone in INT8 (or a half of one, by
        // difference) is split however small its share of the harm: the
        // target allows less than it did.
        let negligible = harm.is_finite() && harm < floor && v.met;
        if single || negligible {
            let share = harm / r.len() as f64;
            for i in r {
                out.push(Ranked {
                    candidate: candidates[i].clone(),
                    loss: context.loss + share,
                    gain: share,
                    cosine: v.cosine,
                    // A group that missed alone in INT8 says its members
                    // may miss alone too (a guess: see `Ranked::met`).
                    met: (own && !v.met).then_some(false),
                });
            }
            continue;
        }
        let [a, b] = split(t, candidates, context, label, r, harm, v)?;
        stack.push(b);
        stack.push(a);
    }
    Ok(Some(out))
}

/// Every candidate but those in `r`: `r` alone in INT8.
fn all_but<C: Clone>(candidates: &[C], r: &Range<usize>) -> Vec<C> {
    candidates
        .iter()
        .enumerate()
        .filter(|(j, _)| !r.contains(j))
        .map(|(_, c)| c.clone())
        .collect()
}

/// A range of the grouped ranking with its harm and a verdict: its own
/// (probed alone, `own`), or for a second half, whose harm is by
/// difference, the group's it was split from (whose miss may be the first
/// half's doing).
type Split = (Range<usize>, f64, Verdict, bool);

/// Splits `r` (harm `harm`, verdict `v`) in two halves: the first probed
/// alone in INT8, the second's harm by difference, or probed too where the
/// difference says nothing.
fn split<C: Clone, T: Trials<C>>(
    t: &mut Counted<'_, T>,
    candidates: &[C],
    context: &Verdict,
    label: &dyn Fn(&C) -> String,
    r: Range<usize>,
    harm: f64,
    v: Verdict,
) -> OpsResult<[Split; 2]> {
    let mid = r.start + r.len() / 2;
    let (a, b) = (r.start..mid, mid..r.end);
    let va = t.probe(&all_but(candidates, &a), Probe::Rank)?;
    let harm_a = (va.loss - context.loss).max(0.0);
    let name = |r: &Range<usize>| {
        if r.len() == 1 {
            label(&candidates[r.start])
        } else {
            format!("group {}..{}", r.start + 1, r.end)
        }
    };
    // The first half alone doing at least the whole's harm says the harms
    // did not add up here: the difference (nudenet: 0 for a layer whose own
    // probe misses) says nothing, so the second half is probed too.
    if harm.is_finite() && harm_a >= harm && harm > 0.0 {
        let vb = t.probe(&all_but(candidates, &b), Probe::Rank)?;
        let harm_b = (vb.loss - context.loss).max(0.0);
        t.inner.say(format!(
            "ranking: {} alone in INT8: harm {harm_a:.3e}; {} alone (the halves' harms do not add up): {harm_b:.3e}",
            name(&a),
            name(&b)
        ));
        return Ok([(a, harm_a, va, true), (b, harm_b, vb, true)]);
    }
    let harm_b = if harm.is_finite() {
        (harm - harm_a).max(0.0)
    } else {
        harm
    };
    t.inner.say(format!(
        "ranking: {} alone in INT8: harm {harm_a:.3e}{}",
        name(&a),
        if b.len() == 1 {
            format!("; {} by difference: {harm_b:.3e}", name(&b))
        } else {
            String::new()
        }
    ));
    Ok([(a, harm_a, va, true), (b, harm_b, v, false)])
}

/// Step 2, the ranking: a primary candidate (a weighted layer) is probed alone in
/// INT8 among the primaries (every other one in float, the secondary
/// ones quantized): its harm alone does not depend on which others are
/// quantized with it, so keeping more of the ranking does not undo what
/// fewer did (ranked by what keeping each alone in float bought against
/// the quantized model, PP-OCRv4 rec got worse with the best 2, 4 and 8
/// in float than with none). A secondary candidate (an activation Q/DQ)
/// is probed kept in float with every primary in float: what it costs
/// where the layers no longer hide it.
fn rank<C: Clone, T: Trials<C>>(
    t: &mut Counted<'_, T>,
    candidates: &[C],
    primary: &dyn Fn(&C) -> bool,
    label: &dyn Fn(&C) -> String,
) -> OpsResult<(Vec<Ranked<C>>, usize)> {
    let n = candidates.len();
    let primaries: Vec<C> = candidates.iter().filter(|c| primary(c)).cloned().collect();
    let context = t.probe(&primaries, Probe::Rank)?;
    // Every probe of the ranking is this context but for one candidate.
    t.inner.keep_base(&primaries, Probe::Rank)?;
    let mut measured = Vec::with_capacity(n);
    let mut best: Option<(String, f64)> = None;
    let mut grouped = false;
    if primaries.len() == n
        && n >= GROUPED_FROM
        && let Some(ranked) = rank_in_groups(t, candidates, &context, label)?
    {
        measured = ranked;
        grouped = true;
    }
    // Each candidate's probe: a weighted layer alone in INT8 among the
    // primaries, an activation in float with every primary.
    let keeps: Vec<Vec<C>> = if grouped {
        Vec::new()
    } else {
        candidates
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if primary(c) {
                    candidates
                        .iter()
                        .enumerate()
                        .filter(|(j, x)| *j != i && primary(x))
                        .map(|(_, x)| x.clone())
                        .collect()
                } else {
                    let mut keep = primaries.clone();
                    keep.push(c.clone());
                    keep
                }
            })
            .collect()
    };
    let gain_of = |c: &C, v: &Verdict| {
        if primary(c) {
            (v.loss - context.loss, "alone in INT8")
        } else {
            (context.loss - v.loss, "in float with every layer")
        }
    };
    let mut line = |i: usize, v: &Verdict| {
        let c = &candidates[i];
        let (gain, how) = gain_of(c, v);
        if best.as_ref().is_none_or(|(_, g)| gain > *g) {
            best = Some((label(c), gain));
        }
        format!(
            "ranking {}/{n}: {} {how}: loss {:.3e} (harm {:.3e}); most harmful so far {}",
            i + 1,
            label(c),
            v.loss,
            gain,
            best.as_ref()
                .map(|(l, g)| format!("{l} ({g:.3e})"))
                .unwrap_or_default()
        )
    };
    let verdicts = t.probe_each(&keeps, Probe::Rank, &mut line)?;
    for (c, v) in candidates.iter().zip(&verdicts) {
        measured.push(Ranked {
            candidate: c.clone(),
            loss: v.loss,
            gain: gain_of(c, v).0,
            cosine: v.cosine,
            met: primary(c).then_some(v.met),
        });
    }
    // A primary's miss alone is its own only where every primary in float
    // met (the secondaries quantized in both), and ranked in groups the
    // misses are the group's.
    if grouped || !context.met {
        return Ok((rank_by_gain(measured), 0));
    }
    Ok(missed_alone_first(rank_by_gain(measured)))
}

/// Primaries whose own probe missed the target alone in INT8 first (by
/// gain among themselves), with their count: no keep-set that leaves one
/// of them in INT8 can meet it, so every answer keeps them all, whatever
/// their noise ranks (nudenet: a layer of noise 1.3e-4 missed on its
/// scores' agreement where one of 3.5e-4 met on its boxes' cosine).
fn missed_alone_first<C>(ranking: Vec<Ranked<C>>) -> (Vec<Ranked<C>>, usize) {
    let (mut first, rest): (Vec<_>, Vec<_>) =
        ranking.into_iter().partition(|r| r.met == Some(false));
    let must = first.len();
    first.extend(rest);
    (first, must)
}

/// Step 5, the finalists on every sample: a miss there first tries the
/// fewest keep-set the probes predict to meet on every sample (see
/// [`predicted_to_meet`], [`predicted_by_probing`]), then grows by a
/// quarter from where it stood and
/// bisects (to within [`on_every_sample_within`]), on every sample; every
/// judgement that meets replaces
/// `last_judged`, and the bisection's upper end only moves on one that
/// meets, so the last one kept is the keep-set returned. `probed`: the
/// keep-sets step 3 probed, by size.
fn finalists<C: Clone, T: Trials<C>>(
    t: &mut Counted<'_, T>,
    order: &[C],
    mut k: usize,
    probed: &[(usize, Verdict)],
) -> OpsResult<Finalists<T::Built>> {
    let n = order.len();
    let (v, built) = t.judge(&order[..k])?;
    t.inner.say(format!(
        "finalist: best {k} of {n} in float on every sample: lowest cosine {:.5}, margin {:.5}: {}",
        v.cosine,
        v.margin,
        if v.met { "met" } else { "missed" }
    ));
    let predicted = if v.met {
        None
    } else {
        predicted_to_meet(probed, k, v.margin).filter(|&j| j < by_a_quarter(k, n))
    };
    // None predicted from what step 3 probed: probe above `k` for one,
    // where `k`'s shift from its probes to every sample is known.
    let by_probing = match (v.met, predicted, shift_of(probed, k, v.margin)) {
        (false, None, Some(shift)) if k < n => predicted_by_probing(t, order, k, shift)?,
        _ => None,
    };
    // The keep-set the probing predicts is the answer when it meets (those
    // below it are not judged): whether it may still be faster than float
    // is asked before it is judged on every sample, and the check after
    // the search takes the figures (PP-OCRv4 det: 41 of 64 in float judged
    // on every sample, 3 s, then timed at 0.94x float). Not so for one
    // step 3's probes predict: a bisection below it may follow, and the
    // check would time another keep-set again (PP-OCRv4 rec: 18 predicted,
    // 17 kept; one more timing, 1 s).
    // (`predicted_by_probing` names fewer than all: there is a model left
    // in INT8 to time.)
    if let Some((j, _)) = by_probing
        && !t.inner.may_pay(&order[..j])?
    {
        return Ok(Finalists::NotFaster(j));
    }
    let mut last_judged = Some((v, built));
    if !v.met && k < n {
        let mut judge_met = |k: usize| -> OpsResult<bool> {
            let (v, built) = t.judge(&order[..k])?;
            t.inner.say(format!(
                "best {k} of {n} in float on every sample: lowest cosine {:.5}, margin {:.5}: {}",
                v.cosine,
                v.margin,
                if v.met { "met" } else { "missed" }
            ));
            if v.met || k == n {
                last_judged = Some((v, built));
            }
            Ok(v.met)
        };
        let mut lo = k;
        let mut hi = None;
        if let Some(j) = predicted {
            if judge_met(j)? {
                hi = Some(j);
            } else {
                lo = j;
            }
        } else if let Some((j, below)) = by_probing {
            // The keep-sets below `j` were probed and predicted to miss:
            // they are not judged on every sample.
            if judge_met(j)? {
                hi = Some(j);
                lo = below;
            } else {
                lo = j;
            }
        }
        if hi.is_none() && lo < n {
            let (l, h) = growing(lo, n, &|k| by_a_quarter(k, n), &mut judge_met)?;
            lo = l;
            hi = h;
        }
        k = match hi {
            Some(hi) => fewest_within(lo, hi, on_every_sample_within(n), &mut judge_met)?,
            None => n,
        };
    }
    Ok(Finalists::Judged(k, last_judged))
}

/// What step 5 ended on: the keep-set and its last judgement on every
/// sample, or the keep-set predicted to meet, which the speed gate said
/// is no faster than float (not judged).
enum Finalists<B> {
    Judged(usize, LastJudged<B>),
    NotFaster(usize),
}

/// After the finalist `k` missed on every sample with `margin`: the fewest
/// keep-set larger than `k` that step 3 probed whose probe margin, less
/// what `k` lost from its probes to every sample, still meets. The probes
/// of nearby keep-sets see the same samples, so their margins shift alike
/// (nudenet: 40 met on the probes by 0.0015 and missed on every sample by
/// 0.0054; 41 met on the probes by 0.0089, so by 0.0021 predicted, 0.0047
/// judged): one judgement instead of a quarter's growth and a bisection
/// back. Only taken when it is fewer than a quarter's growth, which would
/// judge that many anyway. None when `k` was not probed or did not meet there (nothing to
/// measure the shift by) or no probed keep-set is predicted to meet.
fn predicted_to_meet(probed: &[(usize, Verdict)], k: usize, margin: f64) -> Option<usize> {
    let shift = shift_of(probed, k, margin)?;
    probed
        .iter()
        .filter(|(j, v)| *j > k && v.met && v.margin - shift >= 0.0)
        .map(|(j, _)| *j)
        .min()
}

/// What the finalist `k` lost from its probe margin to its `margin` on
/// every sample; None when `k` was not probed or did not meet there.
fn shift_of(probed: &[(usize, Verdict)], k: usize, margin: f64) -> Option<f64> {
    let at_k = probed.iter().find(|(j, v)| *j == k && v.met)?;
    let shift = at_k.1.margin - margin;
    shift.is_finite().then_some(shift)
}

/// After the finalist `k` missed on every sample, having lost `shift`
/// from its probes, and no keep-set step 3 probed is predicted to meet:
/// keep-sets above `k` probed, growing by a quarter and then bisected, for
/// the fewest whose probe margin less `shift` meets. Probes are a few
/// samples; each step of the growth on every sample is all of them
/// (PP-OCRv4 det: 32 missed on every sample where it met on the probes,
/// then 40, 36, 38 judged there, 3 s each). Returns it and the largest
/// keep-set predicted to miss; None when only all of them are predicted
/// to meet.
fn predicted_by_probing<C: Clone, T: Trials<C>>(
    t: &mut Counted<'_, T>,
    order: &[C],
    k: usize,
    shift: f64,
) -> OpsResult<Option<(usize, usize)>> {
    let n = order.len();
    let mut predicted_met = |j: usize| -> OpsResult<bool> {
        let v = t.probe(&order[..j], Probe::Decide)?;
        let predicted = v.margin - shift;
        let met = v.met && predicted >= 0.0;
        t.inner.say(format!(
            "best {j} of {n} in float: margin {:.5} on the probe samples, {predicted:.5} predicted on every sample: {}",
            v.margin,
            if met { "predicted to meet" } else { "predicted to miss" }
        ));
        Ok(met)
    };
    let (lo, hi) = growing(k, n, &|j| by_a_quarter(j, n), &mut predicted_met)?;
    let Some(hi) = hi.filter(|&hi| hi < n) else {
        return Ok(None);
    };
    let fewest = fewest(lo, hi, &mut predicted_met)?;
    Ok(Some((fewest, fewest - 1)))
}

/// Runs the search over `candidates` (the user's fixed keep-set is the
/// Trials' business: it is in every build); `primary` says which are ranked
/// alone in INT8 (weighted layers) rather than kept in float with every
/// primary in float (activations: see step 2); `label` names a candidate in
/// the progress lines.
pub fn run<C: Clone, T: Trials<C>>(
    trials: &mut T,
    candidates: &[C],
    primary: &dyn Fn(&C) -> bool,
    label: &dyn Fn(&C) -> String,
) -> OpsResult<Outcome<C, T::Built>> {
    let n = candidates.len();
    let mut t = Counted {
        inner: trials,
        probes: 0,
        judgements: 0,
    };
    let stop = |t: Counted<'_, T>, kept: Vec<C>, judged, missed| Outcome {
        ranking: Vec::new(),
        kept,
        judged,
        missed: Some(missed),
        probes: t.probes,
        judgements: t.judgements,
    };
    if n == 0 {
        return Ok(stop(t, Vec::new(), None, Missed::Nothing));
    }
    // 1. The bound: everything in float.
    let bound = t.probe(candidates, Probe::Decide)?;
    t.inner.say(format!(
        "all {n} candidate(s) in float: lowest cosine {:.5}, margin {:.5} on the probe samples",
        bound.cosine, bound.margin
    ));
    if !bound.met {
        let (v, built) = t.judge(candidates)?;
        if !v.met {
            t.inner.say(format!(
                "even all {n} candidate(s) in float miss the target (lowest cosine {:.5}): stopping",
                v.cosine
            ));
            return Ok(stop(
                t,
                candidates.to_vec(),
                Some((v, built)),
                Missed::Unreachable(v),
            ));
        }
    }
    let (ranking, must) = rank(&mut t, candidates, primary, label)?;
    keep_more(t, ranking, must, bound)
}

/// Steps 3 to 5 after the ranking: keep more of it on the probe samples,
/// then the finalists on every sample. `must`: the first `must` of the
/// ranking each missed alone in INT8 (fewer cannot meet); `bound`: every
/// candidate in float, on the probe samples.
fn keep_more<C: Clone, T: Trials<C>>(
    mut t: Counted<'_, T>,
    ranking: Vec<Ranked<C>>,
    must: usize,
    bound: Verdict,
) -> OpsResult<Outcome<C, T::Built>> {
    let n = ranking.len();
    let order: Vec<C> = ranking.iter().map(|r| r.candidate.clone()).collect();
    // 3. Keep more, on the probe samples.
    let mut probed: Vec<(usize, Verdict)> = vec![(n, bound)];
    let mut probe_met = |k: usize| -> OpsResult<bool> {
        let v = t.probe(&order[..k], Probe::Decide)?;
        probed.push((k, v));
        t.inner.say(format!(
            "best {k} of {n} in float: lowest cosine {:.5}, margin {:.5} on the probe samples: {}",
            v.cosine,
            v.margin,
            if v.met { "met" } else { "missed" }
        ));
        Ok(v.met)
    };
    // Even the least harmful primary alone in INT8 missed in the ranking
    // (ranked in groups: the group it was last probed in missed): when all
    // but it in float miss here too (and all in float met here:
    // the probes can tell), no fewer can meet, and only all of them are
    // left for the finalists (DNSMOS on ONNX Runtime probed 1, 2, 4, 8, 10
    // and 11 of its 12 layers to learn it).
    let hopeless = n >= 2
        && bound.met
        && ranking.last().is_some_and(|r| r.met == Some(false))
        && !probe_met(n - 1)?;
    let (lo, hi) = if hopeless {
        (n - 1, Some(n))
    } else if must > 0 && must < n {
        // Fewer than `must` cannot meet: start there (nudenet: 41 missed
        // alone, 46 met on the probes).
        if probe_met(must)? {
            (must - 1, Some(must))
        } else {
            doubling(must, n, &mut probe_met)?
        }
    } else {
        doubling(0, n, &mut probe_met)?
    };
    // None only when the bound met on every sample but not on the probes
    // (harder samples): the probes cannot tell, every sample decides.
    let k = match hi {
        Some(hi) => fewest(lo, hi, &mut probe_met)?,
        None => 1,
    };
    // Only all of them met on the probe samples: nothing would stay in
    // INT8, and a judgement of that keep-set on every sample (DNSMOS on
    // ONNX Runtime: 64 runs of the original and of a model as slow, 11 s)
    // could only confirm it. The caller writes the float model instead.
    if k == n && bound.met {
        t.inner.say(format!(
            "only all {n} in float meet the target on the probe samples: nothing would stay in INT8, so no finalist is judged"
        ));
        return Ok(t.outcome(ranking, order, None, Some(Missed::OnlyAll)));
    }
    // 4. Only a keep-set that may still be faster than float is worth
    // judging on every sample.
    if k < n && !t.inner.may_pay(&order[..k])? {
        t.inner.say(format!(
            "best {k} of {n} in float is no faster than float at one thread: keeping more in float would not make it faster, so no finalist is judged"
        ));
        let kept = order[..k].to_vec();
        return Ok(t.outcome(ranking, kept, None, Some(Missed::NotFaster)));
    }
    let (k, last_judged) = match finalists(&mut t, &order, k, &probed)? {
        Finalists::Judged(k, last_judged) => (k, last_judged),
        Finalists::NotFaster(j) => {
            t.inner.say(format!(
                "best {j} of {n} in float, predicted to meet on every sample, is no faster than float at one thread: it is not judged there"
            ));
            let kept = order[..j].to_vec();
            return Ok(t.outcome(ranking, kept, None, Some(Missed::NotFaster)));
        }
    };
    let met = last_judged.as_ref().is_some_and(|(v, _)| v.met);
    let missed = if !met {
        Some(Missed::Unreachable(
            last_judged.as_ref().map(|(v, _)| *v).unwrap_or(bound),
        ))
    } else if k == n {
        Some(Missed::OnlyAll)
    } else {
        None
    };
    let kept = order[..k].to_vec();
    Ok(t.outcome(ranking, kept, last_judged, missed))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Candidates are indices; each adds `noise[i]` when quantized; the
    /// target is met when the summed noise is at most `limit`. The probe
    /// samples see `probe_scale` times the noise of every sample.
    struct Noise {
        noise: Vec<f64>,
        limit: f64,
        probe_scale: f64,
        /// Noise no candidate removes (what stays quantized regardless).
        floor: f64,
        probes: Vec<Vec<usize>>,
        judged: Vec<Vec<usize>>,
        /// The speed gate: a keep-set of more than this many is no faster
        /// than float.
        pays_up_to: usize,
        gated: Vec<Vec<usize>>,
        /// Sizes of the keep-sets probed to decide how many to keep.
        decided: Vec<usize>,
        /// Candidates that miss the target whenever quantized, however
        /// little noise they add (a detector's scores: another criterion
        /// than the noise).
        breaks: Vec<usize>,
        /// `(a, b)`: while `a` is quantized, `b`'s noise is hidden by it
        /// (harms that do not add up).
        hides: Option<(usize, usize)>,
        /// Noise every sample adds to the probe samples' (harder samples
        /// outside the probes).
        judge_extra: f64,
    }

    impl Noise {
        fn new(noise: &[f64], limit: f64) -> Self {
            Noise {
                noise: noise.to_vec(),
                limit,
                probe_scale: 1.0,
                floor: 0.0,
                probes: Vec::new(),
                judged: Vec::new(),
                pays_up_to: usize::MAX,
                gated: Vec::new(),
                decided: Vec::new(),
                breaks: Vec::new(),
                hides: None,
                judge_extra: 0.0,
            }
        }
        fn verdict(&self, keep: &[usize], scale: f64) -> Verdict {
            let hidden = self
                .hides
                .filter(|(a, _)| !keep.contains(a))
                .map(|(_, b)| b);
            let loss = scale
                * (self.floor
                    + self
                        .noise
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| !keep.contains(i) && Some(*i) != hidden)
                        .map(|(_, n)| n)
                        .sum::<f64>());
            let broken = self.breaks.iter().any(|b| !keep.contains(b));
            Verdict {
                loss,
                margin: self.limit - loss,
                met: loss <= self.limit && !broken,
                cosine: 1.0 - loss / 2.0,
            }
        }
    }

    impl Trials<usize> for Noise {
        type Built = Vec<usize>;
        fn probe(&mut self, keep: &[usize], why: Probe) -> OpsResult<Verdict> {
            if why == Probe::Decide {
                self.decided.push(keep.len());
            }
            self.probes.push(keep.to_vec());
            Ok(self.verdict(keep, self.probe_scale))
        }
        fn judge(&mut self, keep: &[usize]) -> OpsResult<(Verdict, Vec<usize>)> {
            self.judged.push(keep.to_vec());
            let mut v = self.verdict(keep, 1.0);
            v.loss += self.judge_extra;
            v.margin -= self.judge_extra;
            v.met = v.met && v.margin >= 0.0;
            Ok((v, keep.to_vec()))
        }
        fn may_pay(&mut self, keep: &[usize]) -> OpsResult<bool> {
            self.gated.push(keep.to_vec());
            Ok(keep.len() <= self.pays_up_to)
        }
    }

    fn label(c: &usize) -> String {
        format!("c{c}")
    }

    fn all(n: usize) -> Vec<usize> {
        (0..n).collect()
    }

    #[test]
    fn many_candidates_are_ranked_in_groups_with_fewer_probes_and_the_same_keep_set() {
        // 80 layers, 3 of which carry the noise.
        let mut noise = vec![1e-5; 80];
        noise[7] = 0.3;
        noise[42] = 0.2;
        noise[71] = 0.15;
        let mut t = Noise::new(&noise, 0.1);
        let o = run(&mut t, &all(80), &|_| true, &label).unwrap();
        assert_eq!(o.missed, None);
        let mut kept = o.kept.clone();
        kept.sort();
        assert_eq!(kept, vec![7, 42, 71]);
        assert_eq!(o.ranking.len(), 80);
        let top: Vec<usize> = o.ranking.iter().take(3).map(|r| r.candidate).collect();
        assert_eq!(top, vec![7, 42, 71]);
        // The bound, the context, 8 groups and a few splits per harmful
        // group: far fewer than the 80 probes of one per layer.
        assert!(o.probes < 40, "{} probes", o.probes);
    }

    #[test]
    fn the_fewest_most_harmful_candidates_are_kept() {
        // Candidate 3 and 5 carry most of the noise; keeping both is needed.
        let mut t = Noise::new(&[0.01, 0.0, 0.02, 0.5, 0.01, 0.3, 0.0, 0.0], 0.1);
        let o = run(&mut t, &all(8), &|_| true, &label).unwrap();
        assert_eq!(o.missed, None);
        let mut kept = o.kept.clone();
        kept.sort();
        assert_eq!(kept, vec![3, 5]);
        // Ranked by what each buys, with the measured loss of each.
        assert_eq!(o.ranking[0].candidate, 3);
        assert_eq!(o.ranking[1].candidate, 5);
        // Alone in INT8: its own noise is all the model has.
        assert!((o.ranking[0].gain - 0.5).abs() < 1e-12);
        assert!((o.ranking[0].loss - 0.5).abs() < 1e-12);
        assert_eq!(o.ranking.len(), 8);
        // The last judgement on every sample is of exactly the kept set.
        assert_eq!(o.judged.as_ref().unwrap().1, o.kept);
        assert!(o.judged.unwrap().0.met);
    }

    #[test]
    fn a_target_out_of_reach_stops_after_the_bound_without_ranking() {
        // Noise no candidate removes: even everything in float misses.
        let mut t = Noise::new(&[0.1; 40], 0.05);
        t.floor = 0.2;
        let o = run(&mut t, &all(40), &|_| true, &label).unwrap();
        assert!(matches!(o.missed, Some(Missed::Unreachable(_))));
        // One probe of the bound and one confirmation: not 40 rankings.
        assert_eq!(t.probes, vec![all(40)]);
        assert_eq!(t.judged, vec![all(40)]);
        assert!(o.ranking.is_empty());
        assert_eq!((o.probes, o.judgements), (1, 1));
    }

    #[test]
    fn a_bound_that_misses_on_the_probes_but_meets_on_all_goes_on() {
        // The probe samples are harder than the rest.
        let mut t = Noise::new(&[0.3, 0.01], 0.1);
        t.floor = 0.06;
        t.probe_scale = 2.0; // bound on probes 0.12 > 0.1, on all 0.06
        let o = run(&mut t, &all(2), &|_| true, &label).unwrap();
        assert!(t.judged.len() >= 2, "{:?}", t.judged);
        assert_eq!(o.missed, None, "{:?}", t.judged);
        assert_eq!(o.kept, vec![0]);
    }

    #[test]
    fn met_only_with_every_candidate_in_float_is_a_failure() {
        let mut t = Noise::new(&[0.2, 0.2, 0.2, 0.2, 0.2, 0.2], 0.1);
        let o = run(&mut t, &all(6), &|_| true, &label).unwrap();
        assert_eq!(o.missed, Some(Missed::OnlyAll));
        assert_eq!(o.kept.len(), 6);
        // Every layer alone in INT8 missed in the ranking, and so did all
        // but the least harmful in float: no doubling (1, 2, 4 in float)
        // and no bisection, only the bound and that probe; and no
        // judgement on every sample of the keep-set of all.
        assert_eq!(t.decided, vec![6, 5], "{:?}", t.probes);
        assert!(t.judged.is_empty(), "{:?}", t.judged);
        assert!(o.judged.is_none());
    }

    #[test]
    fn met_only_with_every_candidate_in_float_is_found_without_doubling_when_ranked_in_groups() {
        // 80 layers, each enough alone in INT8 to miss: every group misses
        // alone, so the least harmful is tried alone (all but it in float)
        // before any doubling.
        let mut t = Noise::new(&[0.2; 80], 0.1);
        let o = run(&mut t, &all(80), &|_| true, &label).unwrap();
        assert_eq!(o.missed, Some(Missed::OnlyAll));
        assert_eq!(t.decided, vec![80, 79], "{:?}", t.decided);
        assert!(t.judged.is_empty(), "{:?}", t.judged);
        // Where the groups meet alone, the ranking guesses nothing and the
        // doubling runs as before.
        let mut noise = vec![1e-4; 80];
        noise[3] = 0.3;
        let mut t = Noise::new(&noise, 0.1);
        let o = run(&mut t, &all(80), &|_| true, &label).unwrap();
        assert_eq!(o.missed, None);
        assert_eq!(o.kept, vec![3]);
        assert_eq!(t.decided.first(), Some(&80));
        assert!(!t.decided.contains(&79), "{:?}", t.decided);
    }

    #[test]
    fn a_layer_that_misses_alone_is_kept_whatever_its_noise_and_the_keep_set_starts_there() {
        // Candidate 2 adds little noise but misses whenever quantized; 0 is
        // too noisy alone; 1 and 3 can stay in INT8 together.
        let mut t = Noise::new(&[0.5, 0.1, 0.01, 0.1], 0.25);
        t.breaks = vec![2];
        let o = run(&mut t, &all(4), &|_| true, &label).unwrap();
        assert_eq!(o.missed, None);
        let first: Vec<usize> = o.ranking.iter().take(2).map(|r| r.candidate).collect();
        assert_eq!(first, vec![0, 2]);
        assert_eq!(o.kept, vec![0, 2]);
        // The bound, then straight to the two that missed alone.
        assert_eq!(t.decided, vec![4, 2], "{:?}", t.decided);
        // Ranked by noise alone, 2 came last and only all four met.
        let mut t = Noise::new(&[0.5, 0.1, 0.01, 0.1], 0.25);
        let o = run(&mut t, &all(4), &|_| true, &label).unwrap();
        assert_eq!(o.kept, vec![0]);
    }

    #[test]
    fn most_groups_missing_alone_rank_every_layer_alone() {
        // 64 layers of the same small noise: any 8 together miss, so 7 of 8
        // groups miss alone (the last holds the 8 quietest), and sharing
        // out cannot order them: each is probed alone.
        let mut noise = vec![0.01; 64];
        for n in noise.iter_mut().skip(56) {
            *n = 0.001;
        }
        noise[20] = 0.3;
        let mut t = Noise::new(&noise, 0.05);
        let o = run(&mut t, &all(64), &|_| true, &label).unwrap();
        assert_eq!(o.missed, None);
        // The context, 8 groups, then one probe per layer.
        assert_eq!(t.probes.len() - t.decided.len(), 1 + 8 + 64);
        assert_eq!(o.ranking[0].candidate, 20);
        // The quietest stay in INT8: 8 of 0.001 and 4 of 0.01 make 0.048.
        let mut int8: Vec<usize> = (0..64).filter(|i| !o.kept.contains(i)).collect();
        int8.sort();
        assert!(int8.iter().filter(|&&i| i >= 56).count() == 8, "{int8:?}");
        assert_eq!(int8.len(), 12, "{int8:?}");
    }

    #[test]
    fn a_half_doing_more_than_its_whole_has_its_other_half_probed_too() {
        // 80 layers; layer 5, quantized, hides its neighbour 6's noise:
        // ranked in groups, 6's harm by difference from the pair's would be
        // 0 (and it would stay in INT8); probed, it is 0.2.
        let mut noise = vec![1e-5; 80];
        noise[5] = 0.3;
        noise[6] = 0.2;
        let mut t = Noise::new(&noise, 0.1);
        t.hides = Some((5, 6));
        let o = run(&mut t, &all(80), &|_| true, &label).unwrap();
        assert_eq!(o.missed, None);
        let mut kept = o.kept.clone();
        kept.sort();
        assert_eq!(kept, vec![5, 6]);
        let six = o.ranking.iter().find(|r| r.candidate == 6).unwrap();
        assert!((six.gain - 0.2).abs() < 1e-9, "{}", six.gain);
    }

    #[test]
    fn a_finalist_that_misses_on_every_sample_keeps_more() {
        // The probe samples see a quarter of the noise: 1 candidate meets
        // there, 2 are needed on every sample.
        let mut t = Noise::new(&[0.4, 0.3, 0.05, 0.05], 0.12);
        t.probe_scale = 0.25;
        let o = run(&mut t, &all(4), &|_| true, &label).unwrap();
        assert_eq!(o.missed, None);
        assert_eq!(o.kept, vec![0, 1]);
        // The finalist judged first kept 1 (on the probes' word), then 2.
        assert_eq!(t.judged.first().unwrap().len(), 1);
        assert_eq!(o.judged.unwrap().1, vec![0, 1]);
    }

    #[test]
    fn a_keep_set_no_faster_than_float_stops_the_search_before_any_finalist() {
        // The probes settle on 1 in float; that model is no faster than
        // float, so nothing is judged on every sample.
        let mut t = Noise::new(&[0.4, 0.3, 0.05, 0.05], 0.12);
        t.probe_scale = 0.25;
        t.pays_up_to = 0;
        let o = run(&mut t, &all(4), &|_| true, &label).unwrap();
        assert_eq!(o.missed, Some(Missed::NotFaster));
        assert_eq!(o.kept, vec![0]);
        assert_eq!(t.gated, vec![vec![0]]);
        assert!(t.judged.is_empty(), "{:?}", t.judged);
        assert!(o.judged.is_none());
        // Where it is faster, the search goes on as before: the gate is
        // asked once, and the finalists grow past the keep-set it timed.
        let mut t = Noise::new(&[0.4, 0.3, 0.05, 0.05], 0.12);
        t.probe_scale = 0.25;
        t.pays_up_to = 1;
        let o = run(&mut t, &all(4), &|_| true, &label).unwrap();
        assert_eq!(o.missed, None);
        assert_eq!(o.kept, vec![0, 1]);
        assert_eq!(t.gated, vec![vec![0]]);
    }

    #[test]
    fn after_a_finalist_misses_the_keep_set_grows_by_a_quarter_on_every_sample() {
        // 20 equal candidates: the probe samples see half the noise, so 10
        // in float meet there; 15 are needed on every sample.
        let mut t = Noise::new(&[0.1; 20], 0.5 + 1e-9);
        t.probe_scale = 0.5;
        let o = run(&mut t, &all(20), &|_| true, &label).unwrap();
        assert_eq!(o.missed, None);
        assert_eq!(o.kept.len(), 15);
        let sizes: Vec<usize> = t.judged.iter().map(Vec::len).collect();
        // The finalist (10), then 12 and 15 (met), then the bisection.
        assert_eq!(sizes, vec![10, 12, 15, 13, 14]);
    }

    /// 70 candidates: one harmful (1.0), the rest 0.01 each, the target
    /// 0.7; every sample adds `judge_extra` to the probes' noise.
    fn one_harmful_of_70(judge_extra: f64) -> Noise {
        let mut noise = vec![1.0];
        noise.extend([0.01; 69]);
        let mut t = Noise::new(&noise, 0.7 + 1e-9);
        t.judge_extra = judge_extra;
        t
    }

    #[test]
    fn a_finalist_of_few_among_many_grows_by_a_sixteenth_of_the_candidates() {
        // 70 candidates: one harmful, the rest 0.01 each. The probes meet
        // with the harmful one in float; every sample adds 0.065, so 7 are
        // needed there. Growth by a quarter (at least one) would judge
        // 1, 2, 3, 4, 5, 6, 7; by a sixteenth of 70 (4): 1, 5, 9, then the
        // bisection 7. That growth now runs on the probes, shifted by what
        // 1 lost on every sample (0.065): 5 and 9 probed, then 7 and 6;
        // 7 is the one judgement on every sample after the finalist.
        let mut t = one_harmful_of_70(0.065);
        let o = run(&mut t, &all(70), &|_| true, &label).unwrap();
        assert_eq!(o.missed, None);
        assert_eq!(o.kept.len(), 7);
        assert_eq!(o.kept[0], 0);
        let sizes: Vec<usize> = t.judged.iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![1, 7]);
        assert!(t.decided.ends_with(&[5, 9, 7, 6]), "{:?}", t.decided);
        // The probes' prediction too hopeful: they see a quarter more of
        // the noise than every sample, so what 14 (the probes' fewest)
        // lost on every sample, 0.06, is less than what 19 loses (0.0725).
        // 19 is predicted by 0.0025 and misses by 0.01; the growth by a
        // sixteenth goes on on every sample from there (23), and the
        // bisection back stops within a thirty-second of 70 (2): 21, where
        // 20 is the fewest.
        let mut t = one_harmful_of_70(0.2);
        t.probe_scale = 1.25;
        let o = run(&mut t, &all(70), &|_| true, &label).unwrap();
        assert_eq!(o.missed, None);
        assert_eq!(o.kept.len(), 21);
        let sizes: Vec<usize> = t.judged.iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![14, 19, 23, 21]);
    }

    #[test]
    fn a_keep_set_predicted_to_meet_is_timed_before_it_is_judged() {
        // The finalist (1) missed on every sample; the probes predict 7.
        // Up to 5 in float may pay: 1 was worth judging, 7 is not, and the
        // search ends there without judging it.
        let mut t = one_harmful_of_70(0.065);
        t.pays_up_to = 5;
        let o = run(&mut t, &all(70), &|_| true, &label).unwrap();
        assert_eq!(o.missed, Some(Missed::NotFaster));
        assert_eq!(o.kept.len(), 7);
        assert!(o.judged.is_none());
        let judged: Vec<usize> = t.judged.iter().map(Vec::len).collect();
        assert_eq!(judged, vec![1]);
        let gated: Vec<usize> = t.gated.iter().map(Vec::len).collect();
        assert_eq!(gated, vec![1, 7]);
    }

    #[test]
    fn a_finalist_judged_on_every_sample_needs_no_exact_fewest_there() {
        // With 6 needed on every sample the probes predict 6 exactly and
        // it is the one judgement after the finalist. A bisection on every
        // sample (after a prediction that missed) goes to within a
        // thirty-second of 70 (2): between 1 and 9, 7, where 6 is the fewest.
        let mut t = one_harmful_of_70(0.055);
        let o = run(&mut t, &all(70), &|_| true, &label).unwrap();
        assert_eq!(o.missed, None);
        assert_eq!(o.kept.len(), 6);
        let sizes: Vec<usize> = t.judged.iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![1, 6]);
        assert_eq!(fewest_within(1, 9, 2, &mut |k| Ok(k >= 6)).unwrap(), 7);
        assert_eq!(fewest_within(1, 9, 1, &mut |k| Ok(k >= 6)).unwrap(), 6);
    }

    #[test]
    fn a_missed_finalist_is_followed_by_the_keep_set_its_probes_predict() {
        // Every sample adds 0.025 to the probes' noise: 11 in float meet on
        // the probes by 0.01 and miss on every sample by 0.015; the probes
        // met with 12 by 0.03, so 12 is predicted to meet by 0.005, and is
        // judged next (a quarter's growth would judge 13, then 12).
        let mut noise = vec![0.3, 0.2, 0.1];
        noise.extend([0.02; 13]);
        let mut t = Noise::new(&noise, 0.11);
        t.judge_extra = 0.025;
        let o = run(&mut t, &all(16), &|_| true, &label).unwrap();
        assert_eq!(o.missed, None);
        assert_eq!(o.kept.len(), 12);
        let sizes: Vec<usize> = t.judged.iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![11, 12]);
        // A prediction past a quarter's growth is not taken: with every
        // sample 0.03 harder, only all 16 are predicted by step 3's probes.
        // Probing above 11 then predicts 13 (12 misses by 1e-9 predicted,
        // as it does on every sample): 13 is judged and met, and 12, whose
        // prediction missed, is not judged (the quarter's growth judged 13
        // and then 12 on every sample).
        let mut t = Noise::new(&noise, 0.11);
        t.judge_extra = 0.03 + 1e-9;
        let o = run(&mut t, &all(16), &|_| true, &label).unwrap();
        let sizes: Vec<usize> = t.judged.iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![11, 13]);
        assert_eq!(o.kept.len(), 13);
        assert!(t.decided.ends_with(&[13, 12]), "{:?}", t.decided);
    }

    #[test]
    fn judgements_on_every_sample_are_few_and_probes_scale_with_candidates() {
        let noise: Vec<f64> = (0..64).map(|i| if i == 17 { 1.0 } else { 1e-4 }).collect();
        let mut t = Noise::new(&noise, 0.01);
        let o = run(&mut t, &all(64), &|_| true, &label).unwrap();
        assert_eq!(o.kept, vec![17]);
        // bound + floor + 64 alone + doubling/bisection.
        assert!(o.probes <= 64 + 2 + 2, "{}", o.probes);
        assert_eq!(o.judgements, 1);
    }

    #[test]
    fn secondary_candidates_are_ranked_by_what_they_cost_with_every_primary_in_float() {
        // 0..3 primaries (layers), 4 and 5 secondaries (activations): the
        // noise model is additive, so each harm is its own noise.
        let mut t = Noise::new(&[0.01, 0.02, 0.01, 0.0, 0.6, 0.001], 0.1);
        let o = run(&mut t, &all(6), &|c: &usize| *c < 4, &label).unwrap();
        assert_eq!(o.missed, None);
        assert_eq!(o.kept, vec![4]);
        let harm = |c: usize| o.ranking.iter().find(|r| r.candidate == c).unwrap().gain;
        assert!((harm(4) - 0.6).abs() < 1e-12);
        assert!((harm(1) - 0.02).abs() < 1e-12);
        assert!((harm(5) - 0.001).abs() < 1e-12);
        // The context (every primary in float) was probed: primaries
        // alone keep the other three float, secondaries join all four.
        assert!(t.probes.contains(&vec![0, 1, 2, 3]));
        assert!(t.probes.contains(&vec![1, 2, 3]));
        assert!(t.probes.contains(&vec![0, 1, 2, 3, 4]));
    }

    #[test]
    fn ranking_puts_nan_gains_last_and_keeps_ties_in_order() {
        let r = |c: usize, gain: f64| Ranked {
            candidate: c,
            loss: 0.0,
            gain,
            cosine: 1.0,
            met: None,
        };
        let ranked = rank_by_gain(vec![r(0, 0.1), r(1, f64::NAN), r(2, 0.3), r(3, 0.1)]);
        let order: Vec<usize> = ranked.iter().map(|x| x.candidate).collect();
        assert_eq!(order, vec![2, 0, 3, 1]);
    }

    #[test]
    fn no_candidates_is_said_as_such() {
        let mut t = Noise::new(&[], 0.1);
        let o = run(&mut t, &[], &|_| true, &label).unwrap();
        assert_eq!(o.missed, Some(Missed::Nothing));
    }
}
