//! Latency measurement of a loaded model.

use std::time::Instant;

use serde::Serialize;

use crate::backend::LoadedModel;
use crate::error::{Result, RuntimeError};
use crate::tensor::HostTensor;
use crate::transfer::Transfer;

/// Latency of `runs` timed runs after `warmup` untimed ones, in milliseconds; what a
/// run includes is the timing's [`Transfer`](crate::Transfer) (reports say which).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latency {
    pub warmup: usize,
    pub runs: usize,
    pub median_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

impl Latency {
    /// Summarizes raw samples (milliseconds) with [`quantile`], the one rule every
    /// latency figure of infopt uses (bench, `--bench`, build-engine, the latency gate).
    pub fn from_samples(warmup: usize, samples: &[f64]) -> Result<Latency> {
        if samples.is_empty() {
            return Err(RuntimeError::InvalidArgument(
                "latency needs at least one timed run".into(),
            ));
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        Ok(Latency {
            warmup,
            runs: n,
            median_ms: quantile(&mut s, 0.5),
            p90_ms: quantile(&mut s, 0.9),
            p99_ms: quantile(&mut s, 0.99),
            min_ms: s[0],
            max_ms: s[n - 1],
            mean_ms: s.iter().sum::<f64>() / n as f64,
        })
    }
}

/// The `q` quantile (0..=1) of `v`, interpolating linearly between order statistics
/// (numpy's default; the median of an even count is the mean of the two middle
/// values). Sorts `v`; NaN for no samples.
pub fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// Runs the model `warmup` times untimed, then `runs` times timed, on the same inputs,
/// host to host (through [`LoadedModel::timed_runner`], like every timing of infopt).
pub fn time_model(
    model: &dyn LoadedModel,
    inputs: &[HostTensor],
    warmup: usize,
    runs: usize,
) -> Result<Latency> {
    if runs == 0 {
        return Err(RuntimeError::InvalidArgument(
            "latency needs at least one timed run".into(),
        ));
    }
    let mut runner = model.timed_runner(inputs, Transfer::HostToHost)?;
    for _ in 0..warmup {
        runner.run_once()?;
    }
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        runner.run_once()?;
        samples.push(start.elapsed().as_secs_f64() * 1e3);
    }
    Latency::from_samples(warmup, &samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let samples: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let l = Latency::from_samples(3, &samples).unwrap();
        assert_eq!(l.runs, 100);
        assert_eq!(l.warmup, 3);
        assert_eq!(l.min_ms, 1.0);
        assert_eq!(l.max_ms, 100.0);
        assert_eq!(l.median_ms, 50.5);
        // Linear interpolation: position 0.9 * 99 = 89.1 between 90 and 91.
        assert!((l.p90_ms - 90.1).abs() < 1e-9, "{}", l.p90_ms);
        assert!((l.p99_ms - 99.01).abs() < 1e-9, "{}", l.p99_ms);
        assert_eq!(l.mean_ms, 50.5);
        let one = Latency::from_samples(0, &[2.5]).unwrap();
        assert_eq!((one.median_ms, one.p90_ms, one.p99_ms), (2.5, 2.5, 2.5));
        assert!(Latency::from_samples(0, &[]).is_err());
    }
}
