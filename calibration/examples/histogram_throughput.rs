//! Throughput of the calibration observers and the cost of each range method.
//!
//! Times `RangeCollector::observe` (min/max + exactly mergeable |x| histogram) on
//! synthetic activations, in f32 and f16, and `Method::amax` per tensor for every method.
//! Run optimized (only this crate and `half` need optimizing, so this reuses the debug
//! build of everything else):
//!
//! ```text
//! cargo run -p infopt-calibration --example histogram_throughput \
//!   --config 'profile.dev.package.infopt-calibration.opt-level=3' \
//!   --config 'profile.dev.package.infopt-calibration.debug-assertions=false' \
//!   --config 'profile.dev.package.infopt-calibration.overflow-checks=false' \
//!   --config 'profile.dev.package.half.opt-level=3' -- [ELEMENTS] [REPEATS]
//! ```
//! (or `cargo run --release …`). Defaults: 1M-element tensors ([1, 64, 128, 128]),
//! 20 repeats; the median and the fastest run are reported.

use std::time::{Duration, Instant};

use half::f16;
use infopt_calibration::{Method, RangeCollector};
use infopt_runtime::HostTensor;

/// SplitMix64 for deterministic data.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn normal(&mut self) -> f32 {
        let u = ((self.next() >> 40) as f32 / (1u64 << 24) as f32).max(1e-7);
        let v = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
    }
}

/// (median, fastest): on a shared machine the fastest run is the least disturbed one.
fn summary(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[0])
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let elements: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1 << 20);
    let repeats: usize = args
        .get(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20)
        .max(1);

    let mut rng = Rng(7);
    // ReLU-like activations with a growing scale, so the histogram range widens while
    // collecting (the coarsening path is part of what is timed).
    let batches: Vec<Vec<f32>> = (0..repeats)
        .map(|r| {
            let s = 1.0 + r as f32 * 0.5;
            (0..elements).map(|_| (rng.normal() * s).max(0.0)).collect()
        })
        .collect();
    let f32_tensors: Vec<HostTensor> = batches
        .iter()
        .map(|b| HostTensor::from_vec(vec![b.len()], b.clone()).expect("shape matches"))
        .collect();
    let f16_tensors: Vec<HostTensor> = batches
        .iter()
        .map(|b| {
            let h: Vec<f16> = b.iter().map(|&x| f16::from_f32(x)).collect();
            HostTensor::from_vec(vec![h.len()], h).expect("shape matches")
        })
        .collect();

    println!("observe: {elements} elements per tensor, {repeats} tensors");
    let mut collector = RangeCollector::new();
    for (label, tensors) in [("f32", &f32_tensors), ("f16", &f16_tensors)] {
        let mut c = RangeCollector::new();
        let times: Vec<Duration> = tensors
            .iter()
            .map(|t| {
                let start = Instant::now();
                c.observe("t", t);
                start.elapsed()
            })
            .collect();
        let (m, best) = summary(times);
        let rate = |d: Duration| elements as f64 / d.as_secs_f64() / 1e6;
        println!(
            "  {label}: {:>7.1} M elements/s median, {:>7.1} best ({:.2} ms per tensor, median)",
            rate(m),
            rate(best),
            m.as_secs_f64() * 1e3
        );
        collector = c;
    }

    let stats = collector.get("t").expect("observed above");
    println!(
        "amax per tensor ({} bins, {} used):",
        stats.histogram.bins(),
        stats.histogram.used_bins()
    );
    for method in [
        Method::MinMax,
        Method::PERCENTILE,
        Method::ENTROPY,
        Method::MSE,
    ] {
        let times: Vec<Duration> = (0..5)
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(method.amax(stats));
                start.elapsed()
            })
            .collect();
        let (m, best) = summary(times);
        println!(
            "  {:<10} {:>9.3} ms median, {:>9.3} ms best  (amax {})",
            method.name(),
            m.as_secs_f64() * 1e3,
            best.as_secs_f64() * 1e3,
            method.amax(stats)
        );
    }

    // Merging is what sharded collection costs at the end: one histogram add per tensor.
    let other = collector.clone();
    let start = Instant::now();
    collector.merge(other).expect("same bins");
    println!(
        "merge of one tensor's statistics: {:.1} µs",
        start.elapsed().as_secs_f64() * 1e6
    );
}
