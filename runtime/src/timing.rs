//! Latency measurement of a loaded model.

use std::time::Instant;

use serde::Serialize;

use crate::backend::LoadedModel;
use crate::error::{Result, RuntimeError};
use crate::tensor::HostTensor;

/// Latency of `runs` timed runs after `warmup` untimed ones, in milliseconds. Each run
/// includes the conversion of inputs and outputs between host and backend tensors.
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
    /// Summarizes raw samples (milliseconds). Percentiles use the nearest-rank method;
    /// the median of an even count is the mean of the two middle samples.
    pub fn from_samples(warmup: usize, samples: &[f64]) -> Result<Latency> {
        if samples.is_empty() {
            return Err(RuntimeError::InvalidArgument(
                "latency needs at least one timed run".into(),
            ));
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let nearest_rank = |p: f64| {
            let rank = ((p / 100.0) * n as f64).ceil() as usize;
            s[rank.clamp(1, n) - 1]
        };
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Ok(Latency {
            warmup,
            runs: n,
            median_ms: median,
            p90_ms: nearest_rank(90.0),
            p99_ms: nearest_rank(99.0),
            min_ms: s[0],
            max_ms: s[n - 1],
            mean_ms: s.iter().sum::<f64>() / n as f64,
        })
    }
}

/// Runs the model `warmup` times untimed, then `runs` times timed, on the same inputs.
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
    for _ in 0..warmup {
        model.run(inputs)?;
    }
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let out = model.run(inputs)?;
        samples.push(start.elapsed().as_secs_f64() * 1e3);
        drop(out);
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
        assert_eq!(l.p90_ms, 90.0);
        assert_eq!(l.p99_ms, 99.0);
        assert_eq!(l.mean_ms, 50.5);
        let one = Latency::from_samples(0, &[2.5]).unwrap();
        assert_eq!((one.median_ms, one.p90_ms, one.p99_ms), (2.5, 2.5, 2.5));
        assert!(Latency::from_samples(0, &[]).is_err());
    }
}
