//! A classifier row's top class, its margin over the runner-up and the
//! error that works against it: how the held-out judgement
//! ([`crate::evaluate`]) scores a classifier's rows, and how
//! [`crate::neighbours`] scores an embedding's rows (each row's
//! similarities to the other rows as its class scores).

/// A row's margin (the original's top score less the runner-up's) and the
/// error that works against it: the most any other class gains on the top
/// class in the candidate (0 when none gains). `a` the candidate's row, `b`
/// the original's.
#[cfg(test)]
pub(crate) fn margin_and_error<T: Value>(a: &[T], b: &[T]) -> (f32, f32) {
    margin_and_error_at(a, b, argmax(b))
}

/// [`margin_and_error`] with the original's top class `t` known.
pub(crate) fn margin_and_error_at<T: Value>(a: &[T], b: &[T], t: usize) -> (f32, f32) {
    let mut runner_up = f64::NEG_INFINITY;
    let mut error = 0f64;
    let top_error = a[t].wide() - b[t].wide();
    for c in (0..b.len()).filter(|&c| c != t) {
        runner_up = runner_up.max(b[c].wide());
        let gain = (a[c].wide() - b[c].wide()) - top_error;
        if gain.is_nan() {
            error = f64::INFINITY;
        } else {
            error = error.max(gain);
        }
    }
    ((b[t].wide() - runner_up) as f32, error as f32)
}

/// An output element compared in `f64`: the original's outputs are kept
/// as the runtime gave them and each element is widened where it is read.
/// Widening whole outputs per candidate cost PP-OCRv4 rec 11.7 s of its
/// 40.8 s (856 comparisons of 265k elements: two `Vec<f64>` each, and a
/// second pass over both for a scale the running sums never used).
pub trait Value: Copy {
    fn wide(self) -> f64;
}

impl Value for f64 {
    fn wide(self) -> f64 {
        self
    }
}

impl Value for f32 {
    fn wide(self) -> f64 {
        f64::from(self)
    }
}

/// The index of the largest value (the first of equals); NaN never stays
/// the largest.
pub(crate) fn argmax<T: Value>(xs: &[T]) -> usize {
    // The best value so far is held, not read back through its index: that
    // read made each step wait for the last (three of these per row over
    // PP-OCRv4 rec's 6625 classes took most of its comparison time).
    let Some(first) = xs.first() else {
        return 0;
    };
    let (mut best, mut top) = (0, first.wide());
    for (i, &x) in xs.iter().enumerate() {
        let x = x.wide();
        if x > top || top.is_nan() {
            best = i;
            top = x;
        }
    }
    best
}
