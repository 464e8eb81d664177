//! Range methods: from a tensor's statistics to `amax`, the clipping threshold of a
//! symmetric INT8 quantizer (`scale = amax / 127`).
//!
//! Notation: the |x| histogram has bins of width `w`, counts `h[0..n)` where `n` is one
//! past the last non-empty bin, and `N = Σ h` finite values; `m = max |x|`. Every method
//! returns at most `m`: a threshold beyond the largest value seen only wastes levels.
//!
//! * **minmax**: `amax = m`.
//! * **percentile** (`p`, default 99.99): `k` = smallest bin with `Σ_{j≤k} h[j] ≥ p/100 · N`;
//!   `amax = min((k + 1) · w, m)` (the upper edge of that bin, so at least `p`% of the
//!   values lie within `[-amax, amax]`).
//! * **entropy** (TensorRT's calibrator, as published in "8-bit Inference with TensorRT",
//!   GTC 2017): for every `i` from `i0` to `n`, `i0` the first bin at or above
//!   `start_bin · m / 2048` (`start_bin` = 128 counts bins of TensorRT's 2048-bin grid
//!   over `[0, m]`, so the search starts at `m / 16` as in TensorRT): `P = h[0..i)` with the
//!   outliers `Σ_{j≥i} h[j]` added to `P[i-1]`; `Q` = `h[0..i)` merged into `L` (128)
//!   levels (bin `j` belongs to level `⌊j·L/i⌋`), each level's count spread evenly over
//!   its non-empty bins (empty bins stay 0); both normalized;
//!   `KL(P‖Q) = Σ_{P_j>0} P_j · ln(P_j / Q_j)` (∞ if some `Q_j = 0 < P_j`). The `i` with
//!   the smallest divergence wins (ties: the larger `i`) and `amax = min((i + 0.5) · w, m)`.
//!   pytorch-quantization's port returns the bin edge `i · w` instead, half a bin lower.
//!   As published, a candidate whose last bin is empty while outliers exist has `D = ∞`;
//!   so when the bulk ends below `m / 16` and the rest is a sparse tail, no clipping
//!   candidate survives and `amax` is the largest value (percentile or mse clip there).
//! * **mse**: for every candidate `a = (i + 0.5) · w`, `i` from `i0` (as for entropy) to
//!   `n - 1`,
//!   with `s = a / 127`: `MSE(a) = Σ_j h[j] · (c_j − s · min(round(c_j / s), 127))² / N`
//!   where `c_j = (j + 0.5) · w` is the bin centre; `amax = min(argmin MSE, m)` (ties: the
//!   smaller `a`).
//!
//! All methods read the same exactly mergeable histogram (see [`crate::histogram`]), so
//! none of them depends on batch size or sample order.

use serde::{Deserialize, Serialize};

use crate::error::{CalibError, Result};
use crate::histogram::AbsHistogram;
use crate::observer::TensorStats;

/// INT8 levels on each side of zero for symmetric quantization.
const QMAX: f64 = 127.0;

/// Bins of TensorRT's histogram, the unit of `start_bin`.
const TRT_BINS: f64 = 2048.0;

/// How `amax` is chosen from a tensor's statistics. Serialized (with its parameters) into
/// range tables, e.g. `{"name": "percentile", "percentile": 99.99}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Method {
    /// `amax = max |x|`.
    MinMax,
    /// The `percentile`-th percentile of |x|.
    Percentile {
        #[serde(default = "default_percentile")]
        percentile: f64,
    },
    /// TensorRT's KL-divergence search.
    Entropy {
        #[serde(default = "default_levels")]
        levels: usize,
        #[serde(default = "default_start_bin")]
        start_bin: usize,
    },
    /// The threshold minimizing the mean squared quantization error.
    Mse {
        #[serde(default = "default_start_bin")]
        start_bin: usize,
    },
    /// Per tensor, from the data: bounded outputs keep their full range;
    /// elsewhere the candidate of minmax, percentile, entropy and mse whose
    /// quantization error on the calibration values is smallest.
    Auto,
}

fn default_percentile() -> f64 {
    99.99
}
fn default_levels() -> usize {
    128
}
fn default_start_bin() -> usize {
    128
}

impl Method {
    pub const PERCENTILE: Method = Method::Percentile { percentile: 99.99 };
    pub const ENTROPY: Method = Method::Entropy {
        levels: 128,
        start_bin: 128,
    };
    pub const MSE: Method = Method::Mse { start_bin: 128 };

    /// Every method name, as accepted by [`Method::from_name`].
    pub const NAMES: [&'static str; 5] = ["auto", "minmax", "percentile", "entropy", "mse"];

    /// The candidates [`Method::Auto`] compares, in order of preference on ties.
    pub const CANDIDATES: [Method; 4] = [
        Method::MinMax,
        Method::PERCENTILE,
        Method::ENTROPY,
        Method::MSE,
    ];

    /// The method's name (`minmax`, `percentile`, `entropy`, `mse`).
    pub fn name(&self) -> &'static str {
        match self {
            Method::MinMax => "minmax",
            Method::Percentile { .. } => "percentile",
            Method::Entropy { .. } => "entropy",
            Method::Mse { .. } => "mse",
            Method::Auto => "auto",
        }
    }

    /// A method with its default parameters, by name.
    pub fn from_name(name: &str) -> Result<Method> {
        match name {
            "minmax" | "min-max" | "max" => Ok(Method::MinMax),
            "percentile" => Ok(Method::PERCENTILE),
            "entropy" | "kl" => Ok(Method::ENTROPY),
            "mse" => Ok(Method::MSE),
            "auto" => Ok(Method::Auto),
            _ => Err(CalibError::Config(format!(
                "unknown range method '{name}'; expected one of {}",
                Method::NAMES.join(", ")
            ))),
        }
    }

    /// Parses `name` or `name:param`: `minmax`, `percentile`, `percentile:99.9`,
    /// `entropy`, `mse` (the command-line form).
    pub fn parse(spec: &str) -> Result<Method> {
        let (name, param) = match spec.split_once(':') {
            Some((n, p)) => (n.trim(), Some(p.trim())),
            None => (spec.trim(), None),
        };
        let method = match (Method::from_name(name)?, param) {
            (m, None) => m,
            (Method::Percentile { .. }, Some(p)) => Method::Percentile {
                percentile: p.parse().map_err(|_| {
                    CalibError::Config(format!(
                        "percentile '{p}' is not a number (e.g. percentile:99.99)"
                    ))
                })?,
            },
            (m, Some(p)) => {
                return Err(CalibError::Config(format!(
                    "range method '{}' takes no parameter, got ':{p}'",
                    m.name()
                )));
            }
        };
        method.validate()?;
        Ok(method)
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Method::Percentile { percentile } if !(percentile > 0.0 && percentile <= 100.0) => Err(
                CalibError::Config(format!("percentile must be in (0, 100], got {percentile}")),
            ),
            Method::Entropy { levels, .. } if levels < 2 => Err(CalibError::Config(format!(
                "entropy levels must be at least 2, got {levels}"
            ))),
            _ => Ok(()),
        }
    }

    /// `amax` for one tensor (0 when it had no finite value). [`Method::Auto`]
    /// here knows nothing of the producer: see [`Method::choose`].
    pub fn amax(&self, stats: &TensorStats) -> f32 {
        self.choose(stats, false).0
    }

    /// `amax` for one tensor and the method that chose it: the method itself,
    /// or for [`Method::Auto`] the winning candidate. `bounded`: the tensor is
    /// the output of an op whose values lie in a fixed interval (Sigmoid,
    /// Softmax, Tanh, ...), whose whole range carries meaning (a gate at 1.0
    /// is not an outlier) and costs no resolution worth saving.
    pub fn choose(&self, stats: &TensorStats, bounded: bool) -> (f32, &'static str) {
        self.choose_keeping(stats, bounded.then_some(crate::full_range::BOUNDED))
    }

    /// As [`Method::choose`], with `keep` the reason the tensor's whole
    /// range carries meaning (see [`crate::full_range`]), if it does: then
    /// [`Method::Auto`] takes the full range, under that name.
    pub fn choose_keeping(
        &self,
        stats: &TensorStats,
        keep: Option<&'static str>,
    ) -> (f32, &'static str) {
        if *self != Method::Auto {
            return (self.amax_of(stats), self.name());
        }
        if let Some(why) = keep {
            return (stats.abs_max(), why);
        }
        let h = &stats.histogram;
        let mut best: Option<(f64, f32, &'static str)> = None;
        for m in Method::CANDIDATES {
            let a = m.amax_of(stats);
            let err = quantization_error(h, f64::from(a), f64::from(stats.abs_max()));
            if best.is_none_or(|(e, _, _)| err < e) {
                best = Some((err, a, m.name()));
            }
        }
        best.map_or((stats.abs_max(), "minmax"), |(_, a, n)| (a, n))
    }

    fn amax_of(&self, stats: &TensorStats) -> f32 {
        let m = stats.abs_max();
        let h = &stats.histogram;
        if m == 0.0 || h.bin_width() == 0.0 {
            return m;
        }
        let a = match *self {
            Method::MinMax | Method::Auto => return m,
            Method::Percentile { percentile } => percentile_amax(h, percentile),
            Method::Entropy { levels, start_bin } => {
                entropy_amax(h, levels, first_candidate(h, m, start_bin))
            }
            Method::Mse { start_bin } => mse_amax(h, first_candidate(h, m, start_bin)),
        };
        match a {
            Some(a) => (a as f32).min(m),
            None => m,
        }
    }
}

/// The first candidate bin for `start_bin`, which is counted in bins of TensorRT's grid
/// (2048 bins over `[0, m]`) so that the search starts at the same threshold, `start_bin ·
/// m / 2048`, whatever the resolution of our power-of-two grid.
fn first_candidate(h: &AbsHistogram, m: f32, start_bin: usize) -> usize {
    let threshold = start_bin as f64 * f64::from(m) / TRT_BINS;
    ((threshold / h.bin_width()).ceil() as usize).max(1)
}

/// `Σ_j h[j] · (c_j − q(c_j))²`, the squared error of quantizing the
/// histogram's values (at their bin centres `c_j`) symmetrically to 127
/// levels with threshold `a` (`q(c) = s · min(round(c / s), 127)`, `s = a /
/// 127`): what [`Method::Auto`] compares candidates by. Values beyond `a`
/// clip to it; `a = 0` loses everything. A bin centre beyond `m`, the largest
/// value seen, counts as `m`.
pub fn quantization_error(h: &AbsHistogram, a: f64, m: f64) -> f64 {
    let w = h.bin_width();
    let counts = &h.counts()[..h.used_bins()];
    if a <= 0.0 {
        return counts
            .iter()
            .enumerate()
            .map(|(j, &c)| c as f64 * ((j as f64 + 0.5) * w).min(m).powi(2))
            .sum();
    }
    let s = a / QMAX;
    counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(j, &c)| {
            let x = ((j as f64 + 0.5) * w).min(m);
            let q = (x / s).round().min(QMAX) * s;
            c as f64 * (x - q) * (x - q)
        })
        .sum()
}

fn percentile_amax(h: &AbsHistogram, percentile: f64) -> Option<f64> {
    let target = percentile / 100.0 * h.total() as f64;
    let mut cum = 0u64;
    for (j, &c) in h.counts().iter().enumerate() {
        cum += c;
        if cum as f64 >= target {
            return Some((j + 1) as f64 * h.bin_width());
        }
    }
    None
}

fn entropy_amax(h: &AbsHistogram, levels: usize, first: usize) -> Option<f64> {
    let counts = &h.counts()[..h.used_bins()];
    let n = counts.len();
    if n <= first {
        return None;
    }
    let prefix = Prefix::new(counts);
    let mut best = (f64::INFINITY, n);
    for i in first..=n {
        let kl = kl_divergence(&prefix, counts, i, levels);
        // `<=`: on ties the larger threshold wins, as in TensorRT's reference code.
        if kl <= best.0 {
            best = (kl, i);
        }
    }
    Some((best.1 as f64 + 0.5) * h.bin_width())
}

/// Prefix sums over the histogram, so each candidate's divergence costs O(levels)
/// instead of O(bins).
struct Prefix {
    /// `count[k] = Σ_{j<k} h[j]`.
    count: Vec<u64>,
    /// Non-empty bins among the first `k`.
    nonempty: Vec<u64>,
    /// `Σ_{j<k} h[j] · ln h[j]`.
    c_ln_c: Vec<f64>,
}

impl Prefix {
    fn new(counts: &[u64]) -> Prefix {
        let n = counts.len();
        let (mut count, mut nonempty, mut c_ln_c) =
            (vec![0; n + 1], vec![0; n + 1], vec![0.0; n + 1]);
        for (j, &c) in counts.iter().enumerate() {
            count[j + 1] = count[j] + c;
            nonempty[j + 1] = nonempty[j] + u64::from(c > 0);
            c_ln_c[j + 1] = c_ln_c[j]
                + if c > 0 {
                    c as f64 * (c as f64).ln()
                } else {
                    0.0
                };
        }
        Prefix {
            count,
            nonempty,
            c_ln_c,
        }
    }
}

/// `KL(P‖Q)` for threshold bin `i`, from `KL = Σ P ln P − Σ P ln Q`: the first sum comes
/// from the prefix of `h ln h`; in the second, `Q` is constant over a level's non-empty
/// bins, so it is `Σ_levels mass · ln(level average / kept)`. Bin `j` is in level
/// `⌊j·L/i⌋`, so level `l` spans bins `[⌈l·i/L⌉, ⌈(l+1)·i/L⌉)`.
fn kl_divergence(pre: &Prefix, counts: &[u64], i: usize, levels: usize) -> f64 {
    let total = pre.count[counts.len()];
    let kept = pre.count[i];
    let outliers = total - kept;
    if kept == 0 || (outliers > 0 && counts[i - 1] == 0) {
        // P[i-1] holds the outliers but Q[i-1] is 0 (or Q is empty): D = inf.
        return f64::INFINITY;
    }
    let t = total as f64;
    let last = (counts[i - 1] + outliers) as f64;
    let sum_p_ln_p = (pre.c_ln_c[i - 1] - pre.count[i - 1] as f64 * t.ln()) / t
        + if last > 0.0 {
            last / t * (last / t).ln()
        } else {
            0.0
        };
    let last_level = (i - 1) * levels / i;
    let mut sum_p_ln_q = 0.0;
    for l in 0..levels {
        let lo = (l * i).div_ceil(levels);
        let hi = ((l + 1) * i).div_ceil(levels);
        let nonempty = pre.nonempty[hi] - pre.nonempty[lo];
        if nonempty == 0 {
            continue;
        }
        let sum = pre.count[hi] - pre.count[lo];
        let mass = sum + if l == last_level { outliers } else { 0 };
        let q = sum as f64 / nonempty as f64 / kept as f64;
        sum_p_ln_q += mass as f64 / t * q.ln();
    }
    sum_p_ln_p - sum_p_ln_q
}

fn mse_amax(h: &AbsHistogram, first: usize) -> Option<f64> {
    let counts = &h.counts()[..h.used_bins()];
    let n = counts.len();
    if n == 0 {
        return None;
    }
    let moments = Moments::new(counts);
    let mut best: Option<(f64, usize)> = None;
    for i in first.min(n - 1)..n {
        // The total squared error in bin units: dividing by N and multiplying by w² is
        // the same for every candidate, so the argmin does not need it.
        let err = match &moments {
            Some(m) => squared_error_bins(m, i),
            None => squared_error_direct(counts, i),
        };
        if best.is_none_or(|(b, _)| err < b) {
            best = Some((err, i));
        }
    }
    best.map(|(_, i)| (i as f64 + 0.5) * h.bin_width())
}

/// The squared error bin by bin, straight from the definition: O(bins) per candidate.
/// Used when the moments would overflow, and as the reference in tests.
fn squared_error_direct(counts: &[u64], i: usize) -> f64 {
    let s = (i as f64 + 0.5) / QMAX;
    counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(j, &c)| {
            let x = j as f64 + 0.5;
            let q = (x / s).round().min(QMAX) * s;
            c as f64 * (x - q) * (x - q)
        })
        .sum()
}

/// Prefix sums of `h[j]·j^k`, k = 0, 1, 2, exact in integers.
struct Moments {
    m: [Vec<u64>; 3],
}

impl Moments {
    /// `None` if `Σ h·j²` overflows u64 (beyond ~4·10^12 values for 2048 bins).
    fn new(counts: &[u64]) -> Option<Moments> {
        let len = counts.len() + 1;
        let mut m = [vec![0u64; len], vec![0; len], vec![0; len]];
        for (j, &c) in counts.iter().enumerate() {
            let jj = j as u64;
            m[0][j + 1] = m[0][j].checked_add(c)?;
            m[1][j + 1] = m[1][j].checked_add(c.checked_mul(jj)?)?;
            m[2][j + 1] = m[2][j].checked_add(c.checked_mul(jj.checked_mul(jj)?)?)?;
        }
        Some(Moments { m })
    }

    /// `(Σ h, Σ h·j, Σ h·j²)` over bins `lo..hi`.
    fn range(&self, lo: usize, hi: usize) -> [u64; 3] {
        [0, 1, 2].map(|k| self.m[k][hi] - self.m[k][lo])
    }
}

/// `Σ_j h[j] · ((j + ½) − q_j)²`, in bin units, for the threshold at the centre of bin
/// `i` (`a = (i + ½)·w`, step `σ = (i + ½) / 127` bins). Bins at or above `i` clip to `a`:
/// their error `(j − i)²` sums exactly from integer moments. Below `i`, value `j + ½`
/// rounds to level `k` for `(k − ½)σ ≤ j + ½ < (k + ½)σ` (halves round up, as
/// `f64::round` does for positive values), and each level's bins sum
/// `h·(j − μ)²` with `μ = kσ − ½` from the same moments: O(levels) per candidate.
fn squared_error_bins(m: &Moments, i: usize) -> f64 {
    let n = m.m[0].len() - 1;
    let [t0, t1, t2] = m.range(i, n);
    // Exact in u128: Σ h·(j − i)² = Σ h·j² + i²·Σ h − 2i·Σ h·j ≥ 0.
    let (t0, t1, t2, ii) = (u128::from(t0), u128::from(t1), u128::from(t2), i as u128);
    let clipped = (t2 + ii * ii * t0 - 2 * ii * t1) as f64;
    let sigma = (i as f64 + 0.5) / QMAX;
    let mut rounded = 0.0;
    let mut lo = 0;
    let mut k = 0.0f64;
    while lo < i {
        let hi = ((((k + 0.5) * sigma - 0.5).ceil().max(0.0)) as usize).min(i);
        if hi > lo {
            let [c0, c1, c2] = m.range(lo, hi);
            let mu = k * sigma - 0.5;
            rounded += c2 as f64 - 2.0 * mu * c1 as f64 + mu * mu * c0 as f64;
            lo = hi;
        }
        k += 1.0;
    }
    clipped + rounded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observer::RangeCollector;
    use infopt_runtime::HostTensor;

    /// Deterministic pseudo-random numbers (SplitMix64), so tests need no dependency.
    pub(crate) struct Rng(u64);
    impl Rng {
        pub(crate) fn new(seed: u64) -> Rng {
            Rng(seed)
        }
        pub(crate) fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        /// Uniform in [0, 1).
        pub(crate) fn uniform(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
        }
        /// Standard normal (Box-Muller).
        pub(crate) fn normal(&mut self) -> f64 {
            let u = self.uniform().max(1e-300);
            let v = self.uniform();
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }
    }

    fn stats_of(values: &[f32]) -> TensorStats {
        let mut c = RangeCollector::new();
        c.observe(
            "t",
            &HostTensor::from_vec(vec![values.len()], values.to_vec()).unwrap(),
        );
        c.get("t").unwrap().clone()
    }

    fn gaussian_with_outliers() -> Vec<f32> {
        let mut rng = Rng::new(1);
        let mut v: Vec<f32> = (0..200_000).map(|_| rng.normal() as f32).collect();
        // A handful of outliers far in the tail, on both sides.
        v.extend([20.0, -25.0, 18.0, -30.0, 28.0]);
        v
    }

    fn all_methods() -> [Method; 4] {
        [
            Method::MinMax,
            Method::PERCENTILE,
            Method::ENTROPY,
            Method::MSE,
        ]
    }

    fn error_of(stats: &TensorStats, a: f32) -> f64 {
        quantization_error(&stats.histogram, f64::from(a), f64::from(stats.abs_max()))
    }

    #[test]
    fn auto_takes_the_candidate_with_the_least_quantization_error() {
        let mut rng = Rng::new(5);
        let laplace: Vec<f32> = (0..100_000)
            .map(|_| {
                let u = rng.uniform() - 0.5;
                (-u.signum() * (1.0 - 2.0 * u.abs()).max(1e-12).ln()) as f32
            })
            .collect();
        let uniform: Vec<f32> = (0..100_000).map(|_| rng.uniform() as f32 * 4.0).collect();
        for values in [gaussian_with_outliers(), laplace, uniform] {
            let st = stats_of(&values);
            let (a, name) = Method::Auto.choose(&st, false);
            let best = Method::CANDIDATES
                .iter()
                .map(|m| error_of(&st, m.amax(&st)))
                .fold(f64::INFINITY, f64::min);
            assert_eq!(error_of(&st, a), best, "{name}");
            let winner = Method::CANDIDATES
                .iter()
                .find(|m| m.name() == name)
                .unwrap();
            assert_eq!(winner.amax(&st), a);
        }
    }

    #[test]
    fn auto_keeps_the_full_range_of_bounded_outputs() {
        // A sigmoid gate: mostly near 0, a few fully open. The open gates
        // are what the gate is for: the range must reach 1.
        let mut rng = Rng::new(9);
        let mut gate: Vec<f32> = (0..100_000)
            .map(|_| (rng.uniform() * 0.05) as f32)
            .collect();
        gate.extend(std::iter::repeat_n(0.999f32, 5));
        let st = stats_of(&gate);
        assert_eq!(
            Method::Auto.choose(&st, true),
            (0.999, "minmax (bounded output)")
        );
        // Without the bound, the rare open gates are clipped by a candidate.
        assert!(Method::PERCENTILE.amax(&st) < 0.5);
    }

    #[test]
    fn auto_does_not_take_a_range_that_destroys_the_tensor() {
        // Most values tiny, a tenth of them large: the KL search keeps the
        // dense bulk and clips the large values away, which is most of the
        // tensor's energy. Auto takes a range that keeps them.
        let mut rng = Rng::new(3);
        let mut v: Vec<f32> = (0..90_000).map(|_| (rng.normal() * 0.01) as f32).collect();
        v.extend((0..10_000).map(|_| (8.0 + rng.uniform() * 2.0) as f32));
        let st = stats_of(&v);
        let entropy = Method::ENTROPY.amax(&st);
        let (a, name) = Method::Auto.choose(&st, false);
        assert!(a >= 9.0, "auto chose {a} ({name}); entropy {entropy}");
        assert!(error_of(&st, a) <= error_of(&st, entropy));
        if entropy < 8.0 {
            assert_ne!(name, "entropy");
        }
    }

    #[test]
    fn auto_parses_and_round_trips_in_a_range_table() {
        assert_eq!(Method::parse("auto").unwrap(), Method::Auto);
        let json = serde_json::to_string(&Method::Auto).unwrap();
        assert_eq!(json, r#"{"name":"auto"}"#);
        assert_eq!(serde_json::from_str::<Method>(&json).unwrap(), Method::Auto);
    }

    #[test]
    fn gaussian_with_outliers_clips_the_tail_except_minmax() {
        let s = stats_of(&gaussian_with_outliers());
        assert_eq!(Method::MinMax.amax(&s), 30.0);
        for m in [Method::PERCENTILE, Method::ENTROPY] {
            let a = m.amax(&s);
            // A standard normal: the useful range is a few sigma; the outliers are at 18+.
            assert!((2.0..8.0).contains(&a), "{}: amax {a}", m.name());
        }
        // MSE weighs the outliers' squared clipping error (~20² each) against the bulk's
        // rounding error (~s²/12): it clips the farthest ones but keeps most of the tail.
        let mse = Method::MSE.amax(&s);
        assert!((10.0..25.0).contains(&mse), "mse amax {mse}");
        // Without the outliers the squared error is all bulk: a few sigma.
        let bulk: Vec<f32> = gaussian_with_outliers()[..200_000].to_vec();
        let mse = Method::MSE.amax(&stats_of(&bulk));
        assert!((2.5..5.0).contains(&mse), "mse amax without outliers {mse}");
        // 99.99th percentile of |N(0,1)| is about 3.9.
        let p = Method::PERCENTILE.amax(&s);
        assert!((3.5..4.5).contains(&p), "percentile {p}");
        // A lower percentile clips more.
        let p99 = Method::Percentile { percentile: 99.0 }.amax(&s);
        assert!((2.4..2.8).contains(&p99), "p99 {p99}");
    }

    #[test]
    fn percentile_is_within_one_bin_of_the_exact_order_statistic() {
        let mut rng = Rng::new(4);
        let v: Vec<f32> = (0..100_000)
            .map(|_| (rng.normal() * (1.0 + rng.uniform() * 3.0)) as f32)
            .collect();
        let s = stats_of(&v);
        let w = s.histogram.bin_width() as f32;
        let mut abs: Vec<f32> = v.iter().map(|x| x.abs()).collect();
        abs.sort_by(f32::total_cmp);
        for p in [50.0, 99.0, 99.9, 99.99, 100.0] {
            // Smallest value with at least p% of the data at or below it.
            let k = ((p / 100.0 * abs.len() as f64).ceil() as usize).max(1) - 1;
            let exact = abs[k];
            let a = Method::Percentile { percentile: p }.amax(&s);
            // The upper edge of the bin holding the exact value: above it, by < 1 bin.
            assert!(
                a >= exact && a - exact <= w,
                "p {p}: amax {a}, exact {exact}, bin {w}"
            );
        }
    }

    #[test]
    fn uniform_keeps_nearly_the_whole_range() {
        let mut rng = Rng::new(2);
        let v: Vec<f32> = (0..200_000)
            .map(|_| (rng.uniform() * 2.0 - 1.0) as f32 * 3.0)
            .collect();
        let s = stats_of(&v);
        let m = s.abs_max();
        for method in all_methods() {
            let a = method.amax(&s);
            assert!(
                a <= m && a > 0.93 * m,
                "{}: amax {a} of max {m}",
                method.name()
            );
        }
    }

    #[test]
    fn entropy_clips_a_sparse_tail_within_its_search_range() {
        let mut rng = Rng::new(3);
        let mut v: Vec<f32> = (0..100_000).map(|_| rng.normal().abs() as f32).collect();
        v.push(20.0);
        let a = Method::ENTROPY.amax(&stats_of(&v));
        assert!((2.5..6.0).contains(&a), "entropy amax {a}");
        // Without the tail value the bulk is kept almost whole.
        v.pop();
        let s = stats_of(&v);
        let a = Method::ENTROPY.amax(&s);
        assert!(
            a > 0.6 * s.abs_max() && a <= s.abs_max(),
            "amax {a}, max {}",
            s.abs_max()
        );
        // Beyond 16x the bulk, the published algorithm cannot clip: every candidate
        // between the bulk (below max/16, where the search starts) and the outlier ends
        // in an empty bin that receives the outliers, so D is infinite there.
        v.push(100.0);
        assert_eq!(Method::ENTROPY.amax(&stats_of(&v)), 100.0);
    }

    /// The divergence transcribed bin by bin from the published pseudocode: the reference
    /// for the prefix-sum version.
    fn kl_direct(counts: &[u64], i: usize, levels: usize) -> f64 {
        let total: u64 = counts.iter().sum();
        let kept: u64 = counts[..i].iter().sum();
        let outliers = total - kept;
        let mut p: Vec<f64> = counts[..i].iter().map(|&c| c as f64).collect();
        p[i - 1] += outliers as f64;
        let (mut sum, mut nonempty) = (vec![0.0; levels], vec![0.0; levels]);
        for (j, &c) in counts[..i].iter().enumerate() {
            if c > 0 {
                sum[j * levels / i] += c as f64;
                nonempty[j * levels / i] += 1.0;
            }
        }
        let q: Vec<f64> = (0..i)
            .map(|j| {
                let l = j * levels / i;
                if counts[j] > 0 {
                    sum[l] / nonempty[l]
                } else {
                    0.0
                }
            })
            .collect();
        let (ps, qs): (f64, f64) = (p.iter().sum(), q.iter().sum());
        let mut kl = 0.0;
        for j in 0..i {
            let (pj, qj) = (p[j] / ps, q[j] / qs);
            if pj > 0.0 {
                if qj == 0.0 {
                    return f64::INFINITY;
                }
                kl += pj * (pj / qj).ln();
            }
        }
        kl
    }

    #[test]
    fn prefix_sum_divergence_matches_the_bin_by_bin_definition() {
        let mut rng = Rng::new(9);
        let mut v: Vec<f32> = (0..50_000).map(|_| rng.normal() as f32).collect();
        v.extend((0..40).map(|k| 4.0 + k as f32 * 0.1));
        let s = stats_of(&v);
        let counts = &s.histogram.counts()[..s.histogram.used_bins()];
        let pre = Prefix::new(counts);
        let mut finite = 0;
        for levels in [128, 16] {
            for i in (1..=counts.len()).step_by(7).chain([counts.len()]) {
                let (fast, direct) = (
                    kl_divergence(&pre, counts, i, levels),
                    kl_direct(counts, i, levels),
                );
                if direct.is_infinite() {
                    assert!(fast.is_infinite(), "i {i}: fast {fast}, direct inf");
                } else {
                    finite += 1;
                    assert!(
                        (fast - direct).abs() <= 1e-9 + 1e-9 * direct.abs(),
                        "i {i} L {levels}: {fast} vs {direct}"
                    );
                }
            }
        }
        assert!(finite > 50, "only {finite} finite candidates compared");
    }

    #[test]
    fn moment_based_mse_matches_the_bin_by_bin_definition() {
        let mut rng = Rng::new(5);
        let mut v: Vec<f32> = (0..50_000).map(|_| (rng.normal() * 2.0) as f32).collect();
        v.extend([15.0, -20.0, 31.0]);
        let s = stats_of(&v);
        let counts = &s.histogram.counts()[..s.histogram.used_bins()];
        let m = Moments::new(counts).expect("small counts");
        for i in (0..counts.len()).step_by(5).chain([counts.len() - 1]) {
            let (fast, direct) = (squared_error_bins(&m, i), squared_error_direct(counts, i));
            assert!(
                (fast - direct).abs() <= 1e-9 * direct.max(1.0),
                "i {i}: {fast} vs {direct}"
            );
        }
        // And the chosen threshold is the direct argmin.
        let first = first_candidate(&s.histogram, s.abs_max(), 128);
        let direct_best = (first..counts.len())
            .map(|i| (squared_error_direct(counts, i), i))
            .fold((f64::INFINITY, 0), |b, c| if c.0 < b.0 { c } else { b });
        let w = s.histogram.bin_width();
        assert_eq!(
            Method::MSE.amax(&s),
            ((direct_best.1 as f64 + 0.5) * w) as f32
        );
        // Moments that do not fit u64 are refused (the direct sum is used instead).
        assert!(Moments::new(&[1, u64::MAX / 2, u64::MAX / 2, 2]).is_none());
        assert!(Moments::new(&[0, 0, u64::MAX / 3]).is_none());
        assert!(Moments::new(&[0, 0, u64::MAX / 4]).is_some());
    }

    #[test]
    fn degenerate_inputs() {
        for m in all_methods() {
            assert_eq!(m.amax(&stats_of(&[0.0, 0.0])), 0.0, "{}", m.name());
            assert_eq!(m.amax(&stats_of(&[f32::NAN])), 0.0, "{}", m.name());
            // One distinct value: nothing to clip.
            let a = m.amax(&stats_of(&[2.5; 10]));
            assert!(a <= 2.5 && a > 2.4, "{}: {a}", m.name());
        }
    }

    #[test]
    fn names_and_params_round_trip() {
        for name in Method::NAMES {
            let m = Method::from_name(name).unwrap();
            assert_eq!(m.name(), name);
            let json = serde_json::to_string(&m).unwrap();
            let back: Method = serde_json::from_str(&json).unwrap();
            assert_eq!(back, m);
        }
        let m: Method = serde_json::from_str(r#"{"name":"percentile","percentile":99.9}"#).unwrap();
        assert_eq!(m, Method::Percentile { percentile: 99.9 });
        assert!(
            Method::from_name("kld")
                .unwrap_err()
                .to_string()
                .contains("entropy")
        );
        assert!(Method::Percentile { percentile: 0.0 }.validate().is_err());
        assert!(Method::Percentile { percentile: 100.0 }.validate().is_ok());
        assert!(serde_json::from_str::<Method>(r#"{"name":"minmax","bins":3}"#).is_err());
        assert_eq!(
            Method::parse("percentile:99.9").unwrap(),
            Method::Percentile { percentile: 99.9 }
        );
        assert_eq!(Method::parse(" entropy ").unwrap(), Method::ENTROPY);
        assert!(Method::parse("percentile:101").is_err());
        assert!(
            Method::parse("percentile:x")
                .unwrap_err()
                .to_string()
                .contains("'x'")
        );
        assert!(
            Method::parse("mse:3")
                .unwrap_err()
                .to_string()
                .contains("no parameter")
        );
        // The explain text documents every method.
        for name in Method::NAMES {
            assert!(
                crate::METHODS_DOC.contains(&format!("\n  {name} ")),
                "{name}"
            );
        }
    }
}
