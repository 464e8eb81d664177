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
    // Both are largest values, in lanes merged at the end (as `argmax`):
    // every row of a classifier output goes through here, and one running
    // maximum made each class wait for the last.
    const LANES: usize = 4;
    let mut runner_up = [f64::NEG_INFINITY; LANES];
    let mut error = [0f64; LANES];
    let top_error = a[t].wide() - b[t].wide();
    let mut step = |k: usize, x: f64, y: f64| {
        runner_up[k] = runner_up[k].max(y);
        let gain = (x - y) - top_error;
        error[k] = if gain.is_nan() {
            f64::INFINITY
        } else {
            error[k].max(gain)
        };
    };
    let n = b.len().min(a.len());
    let whole = n - n % LANES;
    for c0 in (0..whole).step_by(LANES) {
        for k in 0..LANES {
            let c = c0 + k;
            if c != t {
                step(k, a[c].wide(), b[c].wide());
            }
        }
    }
    for (k, c) in (whole..n).enumerate() {
        if c != t {
            step(k, a[c].wide(), b[c].wide());
        }
    }
    let runner_up = runner_up.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
    let error = error.iter().fold(0f64, |m, &x| m.max(x));
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
    // In lanes, each holding its best value and index, merged at the end:
    // one running best made each step wait for the last (two of these per
    // row over PP-OCRv4 rec's 6625 classes took most of its comparison
    // time). A lane's best is the first of its largest non-NaN values; the
    // lanes' bests merge to the first of the largest overall, and with no
    // non-NaN value at all the answer is the last index, as one pass that
    // lets any value replace a NaN gives.
    const LANES: usize = 8;
    if xs.is_empty() {
        return 0;
    }
    let mut top = [f64::NEG_INFINITY; LANES];
    let mut best = [usize::MAX; LANES];
    let mut step = |k: usize, i: usize, x: f64| {
        if x > top[k] || (best[k] == usize::MAX && !x.is_nan()) {
            top[k] = x;
            best[k] = i;
        }
    };
    let whole = xs.len() - xs.len() % LANES;
    for (c, chunk) in xs[..whole].chunks_exact(LANES).enumerate() {
        for (k, &x) in chunk.iter().enumerate() {
            step(k, c * LANES + k, x.wide());
        }
    }
    for (k, &x) in xs[whole..].iter().enumerate() {
        step(k, whole + k, x.wide());
    }
    let mut found: Option<(f64, usize)> = None;
    for k in 0..LANES {
        if best[k] == usize::MAX {
            continue;
        }
        found = match found {
            Some((t, i)) if t > top[k] || (t == top[k] && i < best[k]) => Some((t, i)),
            _ => Some((top[k], best[k])),
        };
    }
    found.map_or(xs.len() - 1, |(_, i)| i)
}
