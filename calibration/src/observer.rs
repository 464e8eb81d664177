//! Streaming observers: per-tensor running min/max and an exactly mergeable |x| histogram.
//!
//! The model runner hands every intermediate float tensor to
//! [`RangeCollector::observe`]; collectors filled on different threads or shards combine
//! with [`RangeCollector::merge`]. Memory is `O(tensors × bins)`, independent of the
//! number of samples, and the statistics depend only on the multiset of values seen (see
//! [`crate::histogram`]), so ranges do not change with batch size or sample order.

use std::collections::BTreeMap;

use half::slice::HalfFloatSliceExt;
use infopt_runtime::{DataView, HostTensor, TensorView};

use crate::error::Result;
use crate::histogram::{AbsHistogram, DEFAULT_BINS};

/// Elements processed at a time: f16/bf16/f64 tensors are converted to f32 this many
/// elements at a time (never copied whole), and the min/max pass and the binning pass
/// over a chunk run while it is in cache.
const CHUNK: usize = 1 << 16;

/// Everything known about one tensor's values.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorStats {
    /// Smallest and largest finite value (`+inf`/`-inf` while none was seen).
    pub min: f32,
    pub max: f32,
    /// How many times the tensor was observed (one per model run).
    pub observations: u64,
    /// Finite elements counted.
    pub elements: u64,
    /// NaN and ±inf elements, skipped by every statistic.
    pub non_finite: u64,
    pub histogram: AbsHistogram,
}

impl TensorStats {
    fn new(histogram: AbsHistogram) -> TensorStats {
        TensorStats {
            min: f32::INFINITY,
            max: f32::NEG_INFINITY,
            observations: 0,
            elements: 0,
            non_finite: 0,
            histogram,
        }
    }

    /// Largest finite |x| seen (0 when no finite value was seen).
    pub fn abs_max(&self) -> f32 {
        if self.elements == 0 {
            0.0
        } else {
            self.min.abs().max(self.max.abs())
        }
    }

    /// Counts `xs`; `histogram` false leaves the histogram untouched.
    fn add(&mut self, xs: &[f32], histogram: bool) {
        let (lo, hi, finite) = finite_min_max(xs);
        self.elements += finite;
        self.non_finite += xs.len() as u64 - finite;
        if finite > 0 {
            self.min = self.min.min(lo);
            self.max = self.max.max(hi);
        }
        if !histogram {
            return;
        }
        let batch_abs_max = if finite > 0 {
            lo.abs().max(hi.abs())
        } else {
            0.0
        };
        self.histogram.add_with_max(xs, batch_abs_max);
    }

    /// Counts the elements of float data (other dtypes are ignored).
    fn add_data(&mut self, data: DataView<'_>, histogram: bool) {
        let h = histogram;
        match data {
            // In chunks too: the binning pass then re-reads data still in cache.
            DataView::F32(v) => v.chunks(CHUNK).for_each(|c| self.add(c, h)),
            DataView::F16(v) => add_converted(self, v, h, |c, buf| c.convert_to_f32_slice(buf)),
            DataView::BF16(v) => add_converted(self, v, h, |c, buf| c.convert_to_f32_slice(buf)),
            DataView::F64(v) => add_converted(self, v, h, |c, buf| {
                for (o, &x) in buf.iter_mut().zip(c) {
                    *o = x as f32;
                }
            }),
            _ => {}
        }
    }

    fn merge(&mut self, other: &TensorStats) -> Result<()> {
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.observations += other.observations;
        self.elements += other.elements;
        self.non_finite += other.non_finite;
        self.histogram.merge(&other.histogram)
    }
}

/// Statistics of every float tensor observed, by tensor name.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeCollector {
    /// An empty histogram of the chosen size, cloned for each new tensor.
    empty: AbsHistogram,
    /// Whether values are binned (see [`RangeCollector::without_histograms`]).
    histograms: bool,
    /// Tensors whose histogram nothing reads (see
    /// [`RangeCollector::without_histograms_of`]).
    unbinned: std::sync::Arc<std::collections::BTreeSet<String>>,
    tensors: BTreeMap<String, TensorStats>,
}

impl Default for RangeCollector {
    fn default() -> Self {
        RangeCollector {
            empty: AbsHistogram::new(DEFAULT_BINS).expect("the default bin count is valid"),
            histograms: true,
            unbinned: Default::default(),
            tensors: BTreeMap::new(),
        }
    }
}

impl RangeCollector {
    /// A collector with [`DEFAULT_BINS`] histogram bins.
    pub fn new() -> RangeCollector {
        RangeCollector::default()
    }

    /// A collector whose histograms have `bins` bins (a power of two, 128..=2^20).
    pub fn with_bins(bins: usize) -> Result<RangeCollector> {
        Ok(RangeCollector {
            empty: AbsHistogram::new(bins)?,
            histograms: true,
            unbinned: Default::default(),
            tensors: BTreeMap::new(),
        })
    }

    /// The collector without its histograms: min, max and the counts only,
    /// for the min-max method, which reads nothing else. Binning is most of
    /// the work a collector does per element; the histograms stay empty (a
    /// histogram method on this collector sees no values and falls back to
    /// the min-max range).
    pub fn without_histograms(mut self) -> RangeCollector {
        self.histograms = false;
        self
    }

    /// The collector without the histograms of `names`: min, max and the
    /// counts only for those. For tensors whose range is their full range
    /// whatever their values ([`crate::Method::Auto`] on the bounded and
    /// softmax-decided tensors of `crate::full_range`): their histograms
    /// were binned and never read (magika: most of a calibration's time).
    pub fn without_histograms_of(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.unbinned = std::sync::Arc::new(names.into_iter().collect());
        self
    }

    /// Whether values are binned into histograms.
    pub fn keeps_histograms(&self) -> bool {
        self.histograms
    }

    /// Whether the values of `name` are binned into its histogram.
    fn bins_values_of(&self, name: &str) -> bool {
        self.histograms && !self.unbinned.contains(name)
    }

    pub fn bins(&self) -> usize {
        self.empty.bins()
    }

    /// Records one observation of tensor `name`. Float tensors (f16, bf16, f32, f64, read
    /// as f32) are counted; integer and bool tensors are not quantized and are ignored.
    pub fn observe(&mut self, name: &str, t: &HostTensor) {
        self.observe_data(name, DataView::of(t.data()));
    }

    /// [`observe`](Self::observe) for a borrowed tensor (a backend's own buffer), under
    /// its own name; unnamed tensors are ignored.
    pub fn observe_view(&mut self, v: &TensorView<'_>) {
        if !v.name().is_empty() {
            self.observe_data(v.name(), v.data());
        }
    }

    /// Observes a group of borrowed tensors (one run's intermediates, a
    /// `ViewSink` call), splitting the work over the CPU's threads. The statistics are
    /// exactly those of observing the tensors one by one: each thread fills partial
    /// statistics of whole pieces of a tensor, and partial statistics merge exactly (see
    /// [`crate::histogram`]), so neither the thread count nor the split can change a
    /// range.
    pub fn observe_views(&mut self, views: &[TensorView<'_>]) {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.observe_views_on(views, threads);
    }

    /// [`observe_views`](Self::observe_views) on at most `threads` threads
    /// (a session among several side by side has its share of them).
    pub fn observe_views_on(&mut self, views: &[TensorView<'_>], threads: usize) {
        let floats: Vec<&TensorView<'_>> = views
            .iter()
            .filter(|v| v.dtype().is_float() && !v.name().is_empty())
            .collect();
        let elements: usize = floats.iter().map(|v| v.len()).sum();
        if threads < 2 || elements < PARALLEL_MIN {
            floats.iter().for_each(|v| self.observe_view(v));
            return;
        }
        let pieces: Vec<(usize, std::ops::Range<usize>)> = floats
            .iter()
            .enumerate()
            .flat_map(|(i, v)| {
                let n = v.len();
                (0..n.div_ceil(PIECE)).map(move |k| (i, k * PIECE..((k + 1) * PIECE).min(n)))
            })
            .collect();
        let binned: Vec<bool> = floats
            .iter()
            .map(|v| self.bins_values_of(v.name()))
            .collect();
        let partials = parallel_pieces(&pieces, threads, &|(i, range)| {
            let mut partial = TensorStats::new(self.empty.clone());
            partial.add_data(slice_of(floats[*i].data(), range.clone()), binned[*i]);
            partial
        });
        for v in &floats {
            self.stats_mut(v.name()).observations += 1;
        }
        for ((i, _), partial) in pieces.iter().zip(partials) {
            // Same bins on both sides: the merge cannot fail.
            let _ = self.stats_mut(floats[*i].name()).merge(&partial);
        }
    }

    /// A collector holding `tensors` (statistics read back from a shard's part, see
    /// [`crate::shard`]); every histogram must have `bins` bins.
    pub fn from_stats(
        bins: usize,
        histograms: bool,
        tensors: BTreeMap<String, TensorStats>,
    ) -> Result<RangeCollector> {
        let empty = AbsHistogram::new(bins)?;
        if let Some((name, _)) = tensors.iter().find(|(_, t)| t.histogram.bins() != bins) {
            return Err(crate::CalibError::Config(format!(
                "tensor `{name}`: its histogram does not have {bins} bins"
            )));
        }
        Ok(RangeCollector {
            empty,
            histograms,
            unbinned: Default::default(),
            tensors,
        })
    }

    /// A collector configured as this one (bins, histograms or not) with
    /// nothing observed yet: one for each of several sessions, merged back.
    pub fn emptied(&self) -> RangeCollector {
        RangeCollector {
            empty: self.empty.clone(),
            histograms: self.histograms,
            unbinned: self.unbinned.clone(),
            tensors: BTreeMap::new(),
        }
    }

    /// The statistics of `name`, created empty on first sight.
    fn stats_mut(&mut self, name: &str) -> &mut TensorStats {
        let empty = &self.empty;
        self.tensors
            .entry(name.to_string())
            .or_insert_with(|| TensorStats::new(empty.clone()))
    }

    fn observe_data(&mut self, name: &str, data: DataView<'_>) {
        if !data.dtype().is_float() {
            return;
        }
        let histograms = self.bins_values_of(name);
        let stats = self.stats_mut(name);
        stats.observations += 1;
        stats.add_data(data, histograms);
    }

    /// [`observe`](Self::observe) under the tensor's own name, the shape of a runtime
    /// `TensorSink` (`|t| { c.observe_named(t); Ok(()) }`); unnamed tensors are ignored.
    pub fn observe_named(&mut self, t: &HostTensor) {
        if let Some(name) = t.name() {
            self.observe(name, t);
        }
    }

    /// Adds another collector's statistics (built with the same number of bins).
    pub fn merge(&mut self, other: RangeCollector) -> Result<()> {
        if other.bins() != self.bins() {
            return Err(crate::CalibError::Config(format!(
                "cannot merge collectors with {} and {} histogram bins",
                self.bins(),
                other.bins()
            )));
        }
        for (name, stats) in other.tensors {
            match self.tensors.get_mut(&name) {
                Some(mine) => mine.merge(&stats)?,
                None => {
                    self.tensors.insert(name, stats);
                }
            }
        }
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&TensorStats> {
        self.tensors.get(name)
    }

    /// Tensors in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &TensorStats)> {
        self.tensors.iter().map(|(n, s)| (n.as_str(), s))
    }

    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}

/// Lanes of the min/max pass: independent running minima and maxima, four
/// SSE registers each.
const LANES: usize = 16;

/// Smallest and largest finite value of `xs` and how many are finite, in one
/// pass. A zero counts as +0, so which of ±0 comes first cannot change the
/// result (`x + 0.0` is `x` for every other value).
///
/// The pass takes every non-NaN value (a select `x < lo`, which NaN fails,
/// is one `minps`) and counts the non-finite ones; only when an infinity
/// reached the minimum or the maximum does [`finite_min_max_exact`] run
/// again, skipping them. Filtering infinities inside the loop (a select on
/// `|x| < inf && x < lo`) kept it scalar, 1.1 ns an element against 0.25:
/// on EfficientNet-B0 the min/max pass was 39% of `calibrate --method
/// minmax`'s CPU time.
fn finite_min_max(xs: &[f32]) -> (f32, f32, u64) {
    let mut lo = [f32::INFINITY; LANES];
    let mut hi = [f32::NEG_INFINITY; LANES];
    let mut non_finite = 0u64;
    // u32 lane counters: a block of 2^28 elements per lane cannot overflow them.
    for block in xs.chunks(LANES << 28) {
        let mut bad = [0u32; LANES];
        let mut lanes = block.chunks_exact(LANES);
        for c in &mut lanes {
            for k in 0..LANES {
                let x = c[k] + 0.0;
                lo[k] = if x < lo[k] { x } else { lo[k] };
                hi[k] = if x > hi[k] { x } else { hi[k] };
                bad[k] += u32::from(!x.is_finite());
            }
        }
        for (k, &x) in lanes.remainder().iter().enumerate() {
            let x = x + 0.0;
            lo[k] = if x < lo[k] { x } else { lo[k] };
            hi[k] = if x > hi[k] { x } else { hi[k] };
            bad[k] += u32::from(!x.is_finite());
        }
        non_finite += bad.iter().map(|&b| u64::from(b)).sum::<u64>();
    }
    let lo = fold_min(&lo);
    let hi = fold_max(&hi);
    if lo == f32::NEG_INFINITY || hi == f32::INFINITY {
        return finite_min_max_exact(xs);
    }
    (lo, hi, xs.len() as u64 - non_finite)
}

fn fold_min(lanes: &[f32]) -> f32 {
    lanes
        .iter()
        .fold(f32::INFINITY, |a, &b| if b < a { b } else { a })
}

fn fold_max(lanes: &[f32]) -> f32 {
    lanes
        .iter()
        .fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a })
}

/// [`finite_min_max`] with the infinities filtered inside the loop (NaN and
/// ±inf fail `|x| < inf`): the slow pass, for data with an infinity.
fn finite_min_max_exact(xs: &[f32]) -> (f32, f32, u64) {
    let (mut lo, mut hi, mut finite) = (f32::INFINITY, f32::NEG_INFINITY, 0u64);
    for &x in xs {
        let x = x + 0.0;
        if x.abs() < f32::INFINITY {
            lo = if x < lo { x } else { lo };
            hi = if x > hi { x } else { hi };
            finite += 1;
        }
    }
    (lo, hi, finite)
}

/// Elements of one tensor a thread takes at a time in
/// [`RangeCollector::observe_views`]: large enough that a piece's own histogram
/// (zeroed, then merged) costs little next to binning it.
const PIECE: usize = 1 << 18;

/// Groups smaller than this are observed on the calling thread: starting
/// threads would cost more than it saves.
const PARALLEL_MIN: usize = 1 << 17;

/// Elements `range` of float data.
fn slice_of(data: DataView<'_>, range: std::ops::Range<usize>) -> DataView<'_> {
    match data {
        DataView::F32(v) => DataView::F32(&v[range]),
        DataView::F16(v) => DataView::F16(&v[range]),
        DataView::BF16(v) => DataView::BF16(&v[range]),
        DataView::F64(v) => DataView::F64(&v[range]),
        other => other,
    }
}

/// `work` applied to every item, on up to `threads` threads (the calling thread is one
/// of them), results in item order. Threads take the next item from a shared counter,
/// so a slow item does not hold up the others.
pub(crate) fn parallel_pieces<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    work: &(dyn Fn(&T) -> R + Sync),
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let drain = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else {
                return done;
            };
            done.push((i, work(item)));
        }
    };
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        // A thread that cannot be started leaves its share to the others.
        let helpers: Vec<_> = (1..threads.min(items.len()))
            .filter_map(|_| std::thread::Builder::new().spawn_scoped(scope, drain).ok())
            .collect();
        let mut all = drain();
        for h in helpers {
            match h.join() {
                Ok(part) => all.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        all
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Converts `v` to f32 a chunk at a time (`convert` fills a buffer of the chunk's length;
/// half's slice conversion uses the CPU's f16 instructions where available).
fn add_converted<T>(
    stats: &mut TensorStats,
    v: &[T],
    histogram: bool,
    convert: impl Fn(&[T], &mut [f32]),
) {
    let mut buf = vec![0f32; CHUNK.min(v.len())];
    for chunk in v.chunks(CHUNK) {
        let out = &mut buf[..chunk.len()];
        convert(chunk, out);
        stats.add(out, histogram);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    #[test]
    fn tensors_without_histograms_keep_their_extremes_and_counts() {
        let xs: Vec<f32> = (0..100_000)
            .map(|i| ((i % 977) as f32 - 400.0) * 0.01)
            .collect();
        let t = |name: &str| {
            HostTensor::from_vec(vec![xs.len()], xs.clone())
                .unwrap()
                .named(name)
        };
        let mut c = RangeCollector::new().without_histograms_of(["gate".to_string()]);
        let mut plain = RangeCollector::new();
        for _ in 0..2 {
            for name in ["gate", "x"] {
                c.observe_named(&t(name));
                plain.observe_named(&t(name));
            }
        }
        let (gate, x) = (c.get("gate").unwrap(), c.get("x").unwrap());
        assert_eq!(gate.histogram.total(), 0, "the gate is not binned");
        assert_eq!(x.histogram, plain.get("x").unwrap().histogram);
        let p = plain.get("gate").unwrap();
        assert_eq!(
            (gate.min, gate.max, gate.elements, gate.observations),
            (p.min, p.max, p.elements, p.observations)
        );
        // A collector for another session is configured the same.
        let mut other = c.emptied();
        other.observe_named(&t("gate"));
        assert_eq!(other.get("gate").unwrap().histogram.total(), 0);
    }

    #[test]
    fn observes_floats_of_every_width_and_ignores_integers() {
        let mut c = RangeCollector::new();
        c.observe(
            "a",
            &HostTensor::from_vec(vec![3], vec![-1.5f32, 0.25, 2.0]).unwrap(),
        );
        c.observe(
            "a",
            &HostTensor::from_vec(vec![2], vec![f16::from_f32(-3.0), f16::from_f32(1.0)]).unwrap(),
        );
        c.observe(
            "b",
            &HostTensor::from_vec(vec![2], vec![bf16::from_f32(0.5), bf16::NAN]).unwrap(),
        );
        c.observe("c", &HostTensor::from_vec(vec![1], vec![7.0f64]).unwrap());
        c.observe("i", &HostTensor::from_vec(vec![2], vec![1i64, 99]).unwrap());
        assert_eq!(c.len(), 3);
        let a = c.get("a").unwrap();
        assert_eq!(
            (a.min, a.max, a.observations, a.elements),
            (-3.0, 2.0, 2, 5)
        );
        assert_eq!(a.abs_max(), 3.0);
        let b = c.get("b").unwrap();
        assert_eq!((b.elements, b.non_finite, b.histogram.total()), (1, 1, 1));
        assert_eq!(c.get("c").unwrap().max, 7.0);
        assert!(c.get("i").is_none());
    }

    #[test]
    fn merge_combines_and_checks_bins() {
        let t = HostTensor::from_vec(vec![2], vec![-1.0f32, 4.0]).unwrap();
        let mut a = RangeCollector::new();
        a.observe("x", &t);
        let mut b = RangeCollector::new();
        b.observe("x", &HostTensor::from_vec(vec![1], vec![-9.0f32]).unwrap());
        b.observe("y", &t);
        a.merge(b).unwrap();
        let x = a.get("x").unwrap();
        assert_eq!(
            (x.min, x.max, x.observations, x.elements),
            (-9.0, 4.0, 2, 3)
        );
        assert!(a.get("y").is_some());
        assert!(a.merge(RangeCollector::with_bins(4096).unwrap()).is_err());
    }

    #[test]
    fn chunked_conversion_counts_every_element() {
        let n = CHUNK * 2 + 5;
        let v: Vec<f16> = (0..n)
            .map(|i| f16::from_f32((i % 100) as f32 - 50.0))
            .collect();
        let mut c = RangeCollector::new();
        c.observe("h", &HostTensor::from_vec(vec![n], v).unwrap());
        let h = c.get("h").unwrap();
        assert_eq!(h.elements, n as u64);
        assert_eq!(h.histogram.total(), n as u64);
        assert_eq!((h.min, h.max), (-50.0, 49.0));
    }

    #[test]
    fn observing_a_group_in_parallel_equals_observing_one_by_one() {
        // Several pieces per tensor, mixed widths, an integer tensor, an
        // unnamed one, values that widen the histogram from piece to piece.
        let n = PIECE * 2 + 12_345;
        let big: Vec<f32> = (0..n)
            .map(|i| ((i as f32 * 0.37).sin() * (1.0 + (i / 9000) as f32)).max(-0.5))
            .collect();
        let halves: Vec<f16> = (0..PIECE + 7)
            .map(|i| f16::from_f32((i % 977) as f32 * 0.25 - 60.0))
            .collect();
        let tensors = [
            HostTensor::from_vec(vec![n], big).unwrap().named("big"),
            HostTensor::from_vec(vec![PIECE + 7], halves)
                .unwrap()
                .named("half"),
            HostTensor::from_vec(vec![3], vec![f32::NAN, 1e-40, -2.0])
                .unwrap()
                .named("small"),
            HostTensor::from_vec(vec![2], vec![5i64, 6])
                .unwrap()
                .named("int"),
            HostTensor::from_vec(vec![2], vec![9.0f32, 1.0]).unwrap(),
        ];
        let views: Vec<TensorView<'_>> = tensors.iter().map(TensorView::of).collect();
        let mut one_by_one = RangeCollector::new();
        for _ in 0..2 {
            for t in &tensors {
                one_by_one.observe_named(t);
            }
        }
        assert_eq!(one_by_one.len(), 3);
        for threads in [1, 2, 3, 8] {
            let mut grouped = RangeCollector::new();
            grouped.observe_views_on(&views, threads);
            grouped.observe_views_on(&views, threads);
            assert_eq!(grouped, one_by_one, "{threads} threads");
        }
    }

    #[test]
    fn without_histograms_the_min_max_ranges_are_the_same() {
        let n = PIECE * 2 + 99;
        let big: Vec<f32> = (0..n).map(|i| (i as f32 * 0.013).sin() * 7.0).collect();
        let tensors = [
            HostTensor::from_vec(vec![n], big).unwrap().named("big"),
            HostTensor::from_vec(vec![3], vec![f16::from_f32(-4.5), f16::NAN, f16::ONE])
                .unwrap()
                .named("half"),
        ];
        let views: Vec<TensorView<'_>> = tensors.iter().map(TensorView::of).collect();
        let (mut full, mut bare) = (
            RangeCollector::new(),
            RangeCollector::new().without_histograms(),
        );
        assert!(full.keeps_histograms() && !bare.keeps_histograms());
        for threads in [1, 2] {
            full.observe_views_on(&views, threads);
            bare.observe_views_on(&views, threads);
        }
        full.observe_named(&tensors[1]);
        bare.observe_named(&tensors[1]);
        for (name, f) in full.iter() {
            let b = bare.get(name).unwrap();
            assert_eq!(
                (b.min, b.max, b.observations, b.elements, b.non_finite),
                (f.min, f.max, f.observations, f.elements, f.non_finite),
                "{name}"
            );
            assert!(f.histogram.total() > 0, "{name}");
            assert_eq!(b.histogram.total(), 0, "{name}: binned anyway");
        }
        let table = |c: &RangeCollector| {
            crate::RangeTable::from_collector_bounded(
                c,
                crate::Method::MinMax,
                String::new(),
                &|_| None,
            )
            .unwrap()
            .tensors
        };
        assert_eq!(table(&bare), table(&full));
    }

    #[test]
    fn lane_min_max_equals_the_scalar_definition() {
        // Each kind of non-finite value alone (NaN stays on the fast pass, an
        // infinity sends it to the exact one), all of them, and none.
        let specials: [&[f32]; 5] = [
            &[f32::NAN],
            &[f32::INFINITY],
            &[f32::NEG_INFINITY],
            &[f32::NAN, f32::NEG_INFINITY, f32::INFINITY],
            &[],
        ];
        for special in specials {
            for n in [0, 1, 7, 8, 9, 15, 16, 17, 33, 1000, 1003] {
                let xs: Vec<f32> = (0..n)
                    .map(|i| match (i % 11, special.get(i % 3)) {
                        (0, Some(&v)) => v,
                        (2, _) => -0.0,
                        _ => ((i * 37 % 101) as f32 - 50.0) * 0.5,
                    })
                    .collect();
                let finite: Vec<f32> = xs.iter().copied().filter(|x| x.is_finite()).collect();
                let lo = finite.iter().copied().fold(f32::INFINITY, f32::min);
                let hi = finite.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let got = finite_min_max(&xs);
                assert_eq!(got, (lo, hi, finite.len() as u64), "n {n} {special:?}");
                assert_eq!(got, finite_min_max_exact(&xs), "n {n} {special:?}");
            }
            // Nothing finite at all.
            let only: Vec<f32> = special.iter().cycle().take(40).copied().collect();
            let (lo, hi, finite) = finite_min_max(&only);
            assert_eq!((lo, hi, finite), (f32::INFINITY, f32::NEG_INFINITY, 0));
        }
        // ±0 both count as +0, whichever comes first.
        assert_eq!(finite_min_max(&[-0.0, 0.0]).0.to_bits(), 0);
        assert_eq!(finite_min_max(&[0.0, -0.0]).1.to_bits(), 0);
    }
}
