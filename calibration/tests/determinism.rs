//! Ranges must not depend on how the calibration data is batched, ordered or sharded:
//! the same values fed as single samples, as batches of various sizes, in reverse or
//! shuffled order, or split across collectors that are merged afterwards, give
//! bit-identical amax/min/max for every method.

use half::f16;
use infopt_calibration::{Method, RangeCollector, RangeTable};
use infopt_runtime::HostTensor;

/// SplitMix64: deterministic data without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    fn normal(&mut self) -> f32 {
        let u = self.uniform().max(1e-7);
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
    }
}

const SAMPLES: usize = 24;
const PER_SAMPLE: usize = 3000;

/// Sample `i`'s values for three tensors. The scale grows with `i` so that, in forward
/// order, the histograms must widen their range many times (the case re-binning
/// histograms get wrong).
fn sample(i: usize) -> [Vec<f32>; 3] {
    let mut rng = Rng(i as u64 + 1);
    let scale = 0.05 * (1.0 + i as f32).powf(1.7);
    let gauss: Vec<f32> = (0..PER_SAMPLE).map(|_| rng.normal() * scale).collect();
    let relu: Vec<f32> = (0..PER_SAMPLE)
        .map(|_| (rng.normal() * 3.0 - 1.0).max(0.0))
        .collect();
    let mut spiky: Vec<f32> = (0..PER_SAMPLE).map(|_| rng.uniform() - 0.5).collect();
    if i % 7 == 3 {
        spiky[i] = 40.0 + i as f32;
        spiky[i + 1] = f32::NAN;
    }
    [gauss, relu, spiky]
}

fn observe(c: &mut RangeCollector, batch: &[usize]) {
    let samples: Vec<[Vec<f32>; 3]> = batch.iter().map(|&i| sample(i)).collect();
    for t in 0..3 {
        let values: Vec<f32> = samples.iter().flat_map(|s| s[t].iter().copied()).collect();
        let n = batch.len();
        let name = ["gauss", "relu", "spiky"][t];
        let tensor = if t == 1 {
            // One tensor arrives as f16, as in a half-precision model.
            let h: Vec<f16> = values.iter().map(|&x| f16::from_f32(x)).collect();
            HostTensor::from_vec(vec![n, PER_SAMPLE], h).unwrap()
        } else {
            HostTensor::from_vec(vec![n, PER_SAMPLE], values).unwrap()
        };
        c.observe(name, &tensor);
    }
}

fn collect(order: &[usize], batch: usize) -> RangeCollector {
    let mut c = RangeCollector::new();
    for chunk in order.chunks(batch) {
        observe(&mut c, chunk);
    }
    c
}

fn shuffled(seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..SAMPLES).collect();
    let mut rng = Rng(seed);
    for i in (1..v.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

fn methods() -> [Method; 6] {
    [
        Method::MinMax,
        Method::PERCENTILE,
        Method::Percentile { percentile: 99.0 },
        Method::ENTROPY,
        Method::MSE,
        Method::Entropy {
            levels: 64,
            start_bin: 64,
        },
    ]
}

/// (tensor, amax bits, min bits, max bits) for every tensor.
fn fingerprint(c: &RangeCollector, m: Method) -> Vec<(String, u32, u32, u32)> {
    let t = RangeTable::from_collector(c, m, b"model").unwrap();
    t.tensors
        .iter()
        .map(|(n, r)| {
            (
                n.clone(),
                r.amax.to_bits(),
                r.min.to_bits(),
                r.max.to_bits(),
            )
        })
        .collect()
}

#[test]
fn ranges_are_bit_identical_across_batching_order_and_merging() {
    let forward: Vec<usize> = (0..SAMPLES).collect();
    let reverse: Vec<usize> = forward.iter().rev().copied().collect();
    let reference = collect(&forward, 1);

    let mut variants = vec![
        ("forward, batch 4", collect(&forward, 4)),
        ("forward, batch 24", collect(&forward, SAMPLES)),
        ("reverse, batch 1", collect(&reverse, 1)),
        ("reverse, batch 5", collect(&reverse, 5)),
        ("shuffled, batch 3", collect(&shuffled(11), 3)),
        ("shuffled, batch 7", collect(&shuffled(12), 7)),
    ];
    // Three shards (as three threads would), merged in two different orders.
    let order = shuffled(13);
    let shards: Vec<RangeCollector> = order.chunks(8).map(|c| collect(c, 2)).collect();
    let mut merged = RangeCollector::new();
    for s in shards.iter().rev() {
        merged.merge(s.clone()).unwrap();
    }
    variants.push(("three shards, merged in reverse", merged));
    let mut merged = shards[1].clone();
    merged.merge(shards[0].clone()).unwrap();
    merged.merge(shards[2].clone()).unwrap();
    variants.push(("three shards, merged 1-0-2", merged));

    for (what, c) in &variants {
        for (name, stats) in reference.iter() {
            let other = c.get(name).unwrap();
            assert_eq!(
                stats.histogram, other.histogram,
                "{what}: histogram of {name}"
            );
            assert_eq!(stats.elements, other.elements, "{what}: {name}");
        }
        for m in methods() {
            assert_eq!(
                fingerprint(&reference, m),
                fingerprint(c, m),
                "{what}: {} ranges differ",
                m.name()
            );
        }
    }

    // The data is not degenerate: the methods disagree with each other on the spiky and
    // gaussian tensors, so the comparisons above compare something.
    let minmax = fingerprint(&reference, Method::MinMax);
    let pct = fingerprint(&reference, Method::PERCENTILE);
    let ent = fingerprint(&reference, Method::ENTROPY);
    assert_ne!(minmax[2].1, pct[2].1);
    assert_ne!(minmax[0].1, ent[0].1);
    assert_eq!(reference.get("spiky").unwrap().non_finite, 3);
}

#[test]
fn memory_does_not_grow_with_samples() {
    let mut c = RangeCollector::new();
    observe(&mut c, &[0]);
    let bins = c.get("gauss").unwrap().histogram.counts().len();
    for i in 1..SAMPLES {
        observe(&mut c, &[i]);
    }
    // The per-tensor state is the fixed histogram plus a few counters.
    assert_eq!(c.get("gauss").unwrap().histogram.counts().len(), bins);
    assert_eq!(c.len(), 3);
    assert_eq!(c.get("gauss").unwrap().observations, SAMPLES as u64);
}
