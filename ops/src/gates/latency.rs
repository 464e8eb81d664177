//! The latency gate, decided so that noise does not flip it.
//!
//! The rule (also in README.md):
//! 1. Both models run in one process, interleaved round by round (the model that goes
//!    first alternates), after warm-up, at least [`MIN_RUNS`] timed runs each.
//! 2. The statistic is the ratio of medians, candidate / reference (or of another
//!    quantile: `max_latency_ratio=1.05,q=0.1` compares 10th percentiles, which on a busy
//!    machine measure the runs nothing interrupted while medians measure the load). Its 95% confidence
//!    interval comes from a bootstrap over rounds: a round's two samples are resampled
//!    together (they saw the same machine state), [`RESAMPLES`] times, with a fixed seed
//!    so the same samples always give the same interval.
//! 3. The gate fails only when the interval's lower bound is above the threshold: the
//!    slowdown is then significant at 95%. While the interval straddles the threshold,
//!    more rounds run (up to [`MAX_RUNS`] each, or until the time budget is spent); if it
//!    still straddles, the gate passes as "not significantly above".
//!
//! Against `--baseline FILE.json` the reference samples come from the earlier report and
//! only the candidate runs; the bootstrap then resamples each side on its own. Such a
//! comparison is only as fair as the two machines and loads are alike.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use infopt_verify::timing::round_order;

use super::result::{GateKind, GateResult};
use crate::error::{ErrorKind, OpsError, OpsResult};

/// Fewest timed runs per model.
pub const MIN_RUNS: usize = 30;
/// Most timed runs per model while the interval straddles the threshold.
pub const MAX_RUNS: usize = 300;
/// Time spent on extra rounds before deciding with what there is.
pub const EXTRA_BUDGET: Duration = Duration::from_secs(90);
pub const CONFIDENCE: f64 = 0.95;
pub const RESAMPLES: usize = 2000;

/// A model ready to time.
#[derive(Clone, Copy)]
pub struct Timed<'a> {
    pub label: &'a str,
    pub model: &'a dyn infopt_runtime::LoadedModel,
    pub inputs: &'a [infopt_runtime::HostTensor],
}

/// How the gate measures.
#[derive(Debug, Clone, Copy)]
pub struct LatencyPlan {
    pub threshold: f64,
    /// The quantile compared: 0.5 for medians.
    pub quantile: f64,
    pub warmup: usize,
    /// Timed runs per model before the first decision (raised to [`MIN_RUNS`]).
    pub runs: usize,
    /// How each timed run moves data (see `infopt_runtime::Transfer`).
    pub transfer: infopt_runtime::Transfer,
}

/// What the latency gate saw: enough to re-derive the verdict, and the candidate's
/// samples for a later `--baseline`.
#[derive(Serialize, Debug, Clone)]
pub struct LatencyEvidence {
    /// "original model", "A", or "baseline FILE".
    pub reference: String,
    pub backend: String,
    /// Rounds were paired (both models timed in each round).
    pub paired: bool,
    pub warmup: usize,
    pub runs: usize,
    pub reference_median_ms: f64,
    pub candidate_median_ms: f64,
    /// The quantile the ratio compares (0.5: medians).
    pub quantile: f64,
    /// "median" or "p10".
    pub statistic: String,
    /// That quantile of each side's samples.
    pub reference_statistic_ms: f64,
    pub candidate_statistic_ms: f64,
    /// candidate / reference, of that quantile.
    pub ratio: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub confidence: f64,
    pub threshold: f64,
    pub passed: bool,
    /// One line: "ratio 1.04 [0.99, 1.09] 95% CI → pass (not significantly above 1.05)".
    pub verdict: String,
    pub reference_samples_ms: Vec<f64>,
    pub candidate_samples_ms: Vec<f64>,
}

/// SplitMix64: a small fixed-seed generator, so intervals are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

pub fn median(v: &mut [f64]) -> f64 {
    quantile(v, 0.5)
}

/// The one quantile rule of every latency figure (see `infopt_runtime::timing`).
pub use infopt_runtime::timing::quantile;

/// "median", "p10".
pub fn statistic_name(q: f64) -> String {
    if (q - 0.5).abs() < 1e-9 {
        "median".into()
    } else {
        format!("p{}", (q * 100.0).round())
    }
}

/// The ratio candidate / reference of the `q` quantiles and its bootstrap percentile
/// interval at `confidence`. `paired` resamples indices shared by both sides (equal
/// lengths).
pub fn ratio_ci(
    reference: &[f64],
    candidate: &[f64],
    q: f64,
    paired: bool,
    confidence: f64,
) -> (f64, f64, f64) {
    let ratio = quantile(&mut candidate.to_vec(), q) / quantile(&mut reference.to_vec(), q);
    let mut rng = Rng(0x1f0_c0de);
    let mut ratios = Vec::with_capacity(RESAMPLES);
    let (nr, nc) = (reference.len(), candidate.len());
    let mut r = vec![0.0; nr];
    let mut c = vec![0.0; nc];
    for _ in 0..RESAMPLES {
        if paired {
            for i in 0..nr.min(nc) {
                let j = rng.below(nr.min(nc));
                r[i] = reference[j];
                c[i] = candidate[j];
            }
        } else {
            for x in r.iter_mut() {
                *x = reference[rng.below(nr)];
            }
            for x in c.iter_mut() {
                *x = candidate[rng.below(nc)];
            }
        }
        ratios.push(quantile(&mut c, q) / quantile(&mut r, q));
    }
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence) / 2.0;
    let at = |q: f64| ratios[((q * (RESAMPLES - 1) as f64).round() as usize).min(RESAMPLES - 1)];
    (ratio, at(tail), at(1.0 - tail))
}

/// One timed run of a prepared model, in milliseconds.
fn run_once(label: &str, runner: &mut dyn infopt_runtime::TimedRun) -> OpsResult<f64> {
    let started = Instant::now();
    runner
        .run_once()
        .map_err(|e| OpsError::new(ErrorKind::Load, format!("{label}: {e}")))?;
    Ok(started.elapsed().as_secs_f64() * 1e3)
}

/// Times `models` in rounds (alternating which goes first) until the interval decides
/// the gate, or the run or time limits are reached. `fixed_reference` holds baseline
/// samples when only the candidate runs.
fn sample(
    models: &[Timed<'_>],
    fixed_reference: Option<&[f64]>,
    plan: &LatencyPlan,
) -> OpsResult<(Vec<f64>, Vec<f64>)> {
    let first_batch = plan.runs.max(MIN_RUNS);
    let mut runners = Vec::with_capacity(models.len());
    for m in models {
        let runner = m
            .model
            .timed_runner(m.inputs, plan.transfer)
            .map_err(|e| OpsError::new(ErrorKind::Load, format!("{}: {e}", m.label)))?;
        runners.push(runner);
    }
    for round in 0..plan.warmup {
        for i in round_order(models.len(), round) {
            run_once(models[i].label, runners[i].as_mut())?;
        }
    }
    let mut samples = vec![Vec::new(); models.len()];
    let mut round = 0;
    let mut target = first_batch;
    let started = Instant::now();
    loop {
        crate::progress::note(
            "bench",
            format!(
                "latency gate: timing {} run(s) per model ({} so far)",
                target - round,
                round
            ),
        );
        while round < target {
            for i in round_order(models.len(), round) {
                samples[i].push(run_once(models[i].label, runners[i].as_mut())?);
            }
            round += 1;
        }
        let (reference, candidate) = match fixed_reference {
            Some(r) => (r.to_vec(), samples[0].clone()),
            None => (samples[0].clone(), samples[1].clone()),
        };
        let (_, lo, hi) = ratio_ci(
            &reference,
            &candidate,
            plan.quantile,
            fixed_reference.is_none(),
            CONFIDENCE,
        );
        let decided = lo > plan.threshold || hi <= plan.threshold;
        if decided || round >= MAX_RUNS.max(first_batch) || started.elapsed() > EXTRA_BUDGET {
            return Ok((reference, candidate));
        }
        target = (round + first_batch).min(MAX_RUNS.max(first_batch));
    }
}

/// Decides the gate from samples.
pub fn decide(
    reference_name: String,
    backend: String,
    reference: Vec<f64>,
    candidate: Vec<f64>,
    paired: bool,
    plan: &LatencyPlan,
) -> LatencyEvidence {
    let (ratio, lo, hi) = ratio_ci(&reference, &candidate, plan.quantile, paired, CONFIDENCE);
    let statistic = statistic_name(plan.quantile);
    let passed = lo <= plan.threshold;
    let t = plan.threshold;
    let why = if !passed {
        format!("significantly above {t}")
    } else if hi <= t {
        format!("within {t}")
    } else {
        format!("not significantly above {t}")
    };
    let verdict = format!(
        "{}ratio {ratio:.3} [{lo:.3}, {hi:.3}] {:.0}% CI → {} ({why})",
        if statistic == "median" {
            String::new()
        } else {
            format!("{statistic} ")
        },
        CONFIDENCE * 100.0,
        if passed { "pass" } else { "fail" }
    );
    LatencyEvidence {
        reference: reference_name,
        backend,
        paired,
        warmup: plan.warmup,
        runs: candidate.len(),
        reference_median_ms: median(&mut reference.clone()),
        candidate_median_ms: median(&mut candidate.clone()),
        quantile: plan.quantile,
        reference_statistic_ms: quantile(&mut reference.clone(), plan.quantile),
        candidate_statistic_ms: quantile(&mut candidate.clone(), plan.quantile),
        statistic,
        ratio,
        ci_low: lo,
        ci_high: hi,
        confidence: CONFIDENCE,
        threshold: t,
        passed,
        verdict,
        reference_samples_ms: reference,
        candidate_samples_ms: candidate,
    }
}

/// Times `candidate` against `reference`, interleaved, and decides the gate.
pub fn measure_pair(
    reference_name: &str,
    reference: Timed<'_>,
    candidate: Timed<'_>,
    backend: &str,
    plan: &LatencyPlan,
) -> OpsResult<LatencyEvidence> {
    let (r, c) = sample(&[reference, candidate], None, plan)?;
    Ok(decide(
        reference_name.into(),
        backend.into(),
        r,
        c,
        true,
        plan,
    ))
}

/// Times `candidate` alone against the samples of an earlier report.
pub fn measure_against_baseline(
    baseline: &Path,
    candidate: Timed<'_>,
    backend: &str,
    plan: &LatencyPlan,
) -> OpsResult<LatencyEvidence> {
    let samples = read_baseline(baseline)?;
    let (r, c) = sample(&[candidate], Some(&samples), plan)?;
    Ok(decide(
        format!("baseline {}", baseline.display()),
        backend.into(),
        r,
        c,
        false,
        plan,
    ))
}

/// The candidate samples of an earlier JSON report (`gates.latency.candidate_samples_ms`).
pub fn read_baseline(path: &Path) -> OpsResult<Vec<f64>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| OpsError::usage(format!("cannot read --baseline {}: {e}", path.display())))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| OpsError::usage(format!("--baseline {}: not JSON: {e}", path.display())))?;
    let samples: Option<Vec<f64>> = json
        .pointer("/gates/latency/candidate_samples_ms")
        .and_then(|v| v.as_array())
        .and_then(|a| a.iter().map(|x| x.as_f64()).collect());
    match samples {
        Some(s) if s.len() >= 2 && s.iter().all(|x| x.is_finite() && *x > 0.0) => Ok(s),
        _ => Err(OpsError::usage(format!(
            "--baseline {}: no latency samples (gates.latency.candidate_samples_ms); write the baseline with --report FILE.json from a run with --gate max_latency_ratio=R",
            path.display()
        ))),
    }
}

/// The gate's row.
pub fn gate_result(e: &LatencyEvidence) -> GateResult {
    GateResult {
        gate: "max_latency_ratio".into(),
        kind: GateKind::Latency,
        threshold: e.threshold.to_string(),
        value: format!("{:.3} [{:.3}, {:.3}]", e.ratio, e.ci_low, e.ci_high),
        measured: Some(e.ratio),
        passed: e.passed,
        message: format!(
            "{} against the {}, {} runs each",
            e.verdict, e.reference, e.runs
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noisy(base: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = Rng(seed);
        (0..n)
            .map(|_| base * (1.0 + (rng.next() % 1000) as f64 / 1000.0 * 0.3))
            .collect()
    }

    #[test]
    fn interval_covers_ratio_and_decides() {
        let plan = LatencyPlan {
            threshold: 1.05,
            quantile: 0.5,
            warmup: 0,
            runs: 30,
            transfer: infopt_runtime::Transfer::HostToHost,
        };
        let a = noisy(10.0, 60, 1);
        let same = noisy(10.0, 60, 2);
        let e = decide("original".into(), "t".into(), a.clone(), same, true, &plan);
        assert!(e.ci_low <= e.ratio && e.ratio <= e.ci_high, "{e:?}");
        assert!(e.passed, "{}", e.verdict);
        // 30% slower: significant.
        let slow: Vec<f64> = noisy(13.0, 60, 3);
        let e = decide("original".into(), "t".into(), a, slow, true, &plan);
        assert!(!e.passed, "{}", e.verdict);
        assert!(e.ci_low > 1.05);
        assert!(
            e.verdict.contains("significantly above 1.05"),
            "{}",
            e.verdict
        );
    }

    #[test]
    fn same_samples_same_interval() {
        let a = noisy(5.0, 40, 7);
        let b = noisy(5.5, 40, 8);
        assert_eq!(
            ratio_ci(&a, &b, 0.5, true, 0.95),
            ratio_ci(&a, &b, 0.5, true, 0.95)
        );
        assert_eq!(quantile(&mut [4.0, 1.0, 3.0, 2.0], 0.5), 2.5);
        assert_eq!(quantile(&mut [5.0, 1.0, 3.0], 0.5), 3.0);
        let mut eleven: Vec<f64> = (1..=11).map(f64::from).collect();
        assert!((quantile(&mut eleven, 0.1) - 2.0).abs() < 1e-12);
        assert_eq!(statistic_name(0.1), "p10");
    }

    #[test]
    fn a_low_quantile_sees_through_interruptions() {
        // Both models are interrupted (x5 to x10) on 70% of runs; the candidate is 10%
        // slower. Medians drown in the interruptions; 10th percentiles do not.
        let mut rng = Rng(11);
        let mut sample = |base: f64| -> Vec<f64> {
            (0..200)
                .map(|_| {
                    let jitter = 1.0 + (rng.next() % 100) as f64 / 5000.0;
                    let hit = rng.next() % 10 < 7;
                    let slow = if hit {
                        5.0 + (rng.next() % 100) as f64 / 20.0
                    } else {
                        1.0
                    };
                    base * jitter * slow
                })
                .collect()
        };
        let a = sample(10.0);
        let b = sample(11.0);
        let q10 = LatencyPlan {
            threshold: 1.05,
            quantile: 0.1,
            warmup: 0,
            runs: 30,
            transfer: infopt_runtime::Transfer::HostToHost,
        };
        let e = decide(
            "original".into(),
            "t".into(),
            a.clone(),
            b.clone(),
            true,
            &q10,
        );
        assert!(!e.passed, "{}", e.verdict);
        assert!(e.verdict.starts_with("p10 ratio "), "{}", e.verdict);
        assert!((1.07..1.13).contains(&e.ratio), "{}", e.verdict);
        let median = LatencyPlan {
            quantile: 0.5,
            ..q10
        };
        let e = decide("original".into(), "t".into(), a, b, true, &median);
        assert!(
            e.ci_high - e.ci_low > 0.1,
            "medians are wide here: {}",
            e.verdict
        );
    }
}
