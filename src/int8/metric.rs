//! Accuracy in the user's terms (issue 32): a metric the caller supplies
//! (the Python API's `infopt.optimize(..., metric=f)`) scores a model's
//! outputs on the judged samples, higher is better, and the INT8 target
//! becomes the float model's score less `--int8-max-drop`: the search keeps
//! in float what it must for the candidate's score to stay there, in place
//! of the cosine and top-1 targets.
//!
//! The metric is installed for the duration of a call, per thread, as the
//! progress sink is (`crate::progress`): a command runs on the thread that
//! called it, and the command line has no way to name one.

use std::cell::RefCell;

pub use infopt_runtime::HostTensor;

/// Scores a model's outputs (higher is better).
pub trait Metric {
    /// `samples[i]` holds the outputs of judged sample `i`, by output name,
    /// in the model's order.
    fn score(&self, samples: &[Vec<(String, HostTensor)>]) -> Result<f64, String>;
}

thread_local! {
    static METRIC: RefCell<Option<Box<dyn Metric>>> = const { RefCell::new(None) };
}

/// Runs `f` with `metric` installed, then restores what was there.
pub fn with_metric<R>(metric: Box<dyn Metric>, f: impl FnOnce() -> R) -> R {
    let previous = METRIC.with(|m| m.replace(Some(metric)));
    struct Restore(Option<Option<Box<dyn Metric>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take().flatten();
            METRIC.with(|m| *m.borrow_mut() = previous);
        }
    }
    let _restore = Restore(Some(previous));
    f()
}

/// Whether a caller installed a metric.
pub fn installed() -> bool {
    METRIC.with(|m| m.borrow().is_some())
}

/// The installed metric's score of `samples` (None when none is installed).
pub fn score(samples: &[Vec<(String, HostTensor)>]) -> Option<Result<f64, String>> {
    METRIC.with(|m| m.borrow().as_ref().map(|m| m.score(samples)))
}

/// A tensor as `(dtype, shape, little-endian bytes)` for a caller in
/// another language: float32 as it is, every other type as float64.
pub fn raw(t: &HostTensor) -> (&'static str, Vec<usize>, Vec<u8>) {
    let shape = t.shape().to_vec();
    match t.as_slice::<f32>() {
        Some(v) => (
            "float32",
            shape,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        None => (
            "float64",
            shape,
            t.to_f64_vec()
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect(),
        ),
    }
}

/// Default `--int8-max-drop` when a metric is given without it: one point
/// of a score in [0, 1].
pub const DEFAULT_MAX_DROP: f64 = 0.01;

/// Whether the candidate's score meets the target: at least the float
/// model's less `max_drop` (false for NaN).
pub fn meets(candidate: f64, original: f64, max_drop: f64) -> bool {
    candidate >= original - max_drop
}

/// The candidate's margin to the target (positive when met; minus infinity
/// for NaN, the worst).
pub fn margin(candidate: f64, original: f64, max_drop: f64) -> f64 {
    let m = candidate - (original - max_drop);
    if m.is_nan() { f64::NEG_INFINITY } else { m }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count;
    impl Metric for Count {
        fn score(&self, samples: &[Vec<(String, HostTensor)>]) -> Result<f64, String> {
            Ok(samples.len() as f64)
        }
    }

    #[test]
    fn a_metric_is_installed_for_the_call_only() {
        assert!(!installed());
        assert!(score(&[]).is_none());
        let inside = with_metric(Box::new(Count), || {
            (installed(), score(&[Vec::new(), Vec::new()]))
        });
        assert_eq!(inside, (true, Some(Ok(2.0))));
        assert!(!installed());
    }

    #[test]
    fn tensors_cross_as_bytes_float32_as_is_the_rest_as_float64() {
        let f = HostTensor::from_vec(vec![2], vec![1.5f32, -2.0]).unwrap();
        let (dt, shape, bytes) = raw(&f);
        assert_eq!((dt, shape), ("float32", vec![2]));
        assert_eq!(bytes[..4], 1.5f32.to_le_bytes());
        let i = HostTensor::from_vec(vec![1, 1], vec![7i64]).unwrap();
        let (dt, shape, bytes) = raw(&i);
        assert_eq!((dt, shape), ("float64", vec![1, 1]));
        assert_eq!(bytes, 7f64.to_le_bytes());
    }

    #[test]
    fn the_target_is_the_float_score_less_the_drop() {
        assert!(meets(0.875, 0.88, 0.01));
        assert!(!meets(0.869, 0.88, 0.01));
        assert!(!meets(f64::NAN, 0.88, 0.01));
        assert!((margin(0.875, 0.88, 0.01) - 0.005).abs() < 1e-12);
        assert_eq!(margin(f64::NAN, 0.88, 0.01), f64::NEG_INFINITY);
    }
}
