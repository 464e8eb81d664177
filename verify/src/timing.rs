//! Interleaved timing: warm-up and timed runs alternate between the models,
//! and the model that goes first alternates from one round to the next, so
//! drift (clock scaling, other load, caches) touches every model alike.

use std::time::{Duration, Instant};

use infopt_runtime::{HostTensor, Latency, LoadedModel, Transfer};

use crate::error::{ErrorKind, Result, VerifyError};

/// A model to time, with its inputs.
pub struct Timed {
    /// Names the model in errors (a path, "original").
    pub label: String,
    pub model: Box<dyn LoadedModel>,
    pub inputs: Vec<HostTensor>,
}

/// Where timing is, for a progress display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// A phase starts: its name and number of rounds.
    Phase(&'static str, usize),
    /// One round of the phase done.
    Round,
    Done,
}

/// Times `models` interleaved, moving data as `transfer` says: each model
/// gets its runner (bindings, buffers) before the first warm-up run, so no
/// timed run pays for setting it up.
pub fn time_interleaved(
    models: &[Timed],
    warmup: usize,
    runs: usize,
    transfer: Transfer,
    progress: &mut dyn FnMut(Progress),
) -> Result<Vec<Latency>> {
    let rounds = Rounds {
        least: runs,
        most: runs,
    };
    time_interleaved_until(models, warmup, rounds, transfer, progress, &mut |_| false)
}

/// How many timed rounds: at least `least`, at most `most`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rounds {
    pub least: usize,
    pub most: usize,
}

/// [`time_interleaved`] that stops after `rounds.least` rounds as soon as
/// `settled` says the milliseconds so far (per model, one per round) have
/// decided what the caller wants to know (see [`settled`]).
pub fn time_interleaved_until(
    models: &[Timed],
    warmup: usize,
    rounds: Rounds,
    transfer: Transfer,
    progress: &mut dyn FnMut(Progress),
    settled: &mut dyn FnMut(&[Vec<f64>]) -> bool,
) -> Result<Vec<Latency>> {
    let runs = Continued {
        before: Vec::new(),
        warmup,
        rounds,
        repeat: 1,
        clock: Clock::Wall,
    };
    let samples = time_rounds(models, runs, transfer, progress, settled)?;
    samples
        .iter()
        .map(|s| {
            Latency::from_samples(warmup, s).map_err(|e| VerifyError::new(ErrorKind::Internal, e))
        })
        .collect()
}

/// Rounds of an interleaved timing that continue earlier ones.
#[derive(Clone, Debug, PartialEq)]
pub struct Continued {
    /// Milliseconds of the rounds already timed, one list per model (all
    /// of one length; empty for a fresh timing). They count toward
    /// `rounds`, and the order the models run in goes on from them.
    pub before: Vec<Vec<f64>>,
    /// Warm-up rounds before the first timed one: a fresh runner's first
    /// run sets up its bindings and output buffers.
    pub warmup: usize,
    pub rounds: Rounds,
    /// Runs of each model in a timed round, back to back; the round's
    /// figure is their mean. A model of tens of microseconds timed one run
    /// a round is timed in the clock's and the machine's noise (MTCNN's
    /// R-Net, 38 us: its INT8 model's 2% loss against float showed in
    /// neither order); 13 runs a round tell it every time.
    pub repeat: usize,
    /// What a round's milliseconds count.
    pub clock: Clock,
}

/// What a timed round's milliseconds count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Wall time: what a caller of the model waits.
    Wall,
    /// CPU time of the thread that times, for a runtime that runs the
    /// model on that thread (ONNX Runtime at one thread): time the thread
    /// spends waiting for a core, to another process or to the caller's
    /// own other threads, does not count. On a shared 2-core host the
    /// placement timing's first three rounds read ULFD's INT8 placements at
    /// 2.3-2.6x their time (6.7 against 2.6 ms) where float ran clean; they
    /// were left out as clearly slower and float was written at once, in 2
    /// of 8 runs beside one busy process. Where the platform has no thread
    /// clock, wall time.
    CallingThread,
}

impl Clock {
    fn start(self) -> Stopwatch {
        Stopwatch {
            wall: Instant::now(),
            thread: match self {
                Clock::Wall => None,
                Clock::CallingThread => thread_cpu_time(),
            },
        }
    }
}

/// A started measurement (see [`Clock::start`]).
struct Stopwatch {
    wall: Instant,
    /// The calling thread's CPU time at the start, where it is read.
    thread: Option<Duration>,
}

impl Stopwatch {
    fn elapsed(&self) -> Duration {
        match (self.thread, thread_cpu_time()) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => self.wall.elapsed(),
        }
    }
}

/// The CPU time the calling thread has used (user and system).
#[cfg(unix)]
fn thread_cpu_time() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

#[cfg(not(unix))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

impl Continued {
    /// A fresh timing of exactly `rounds` rounds after `warmup` warm-up ones.
    pub fn fresh(rounds: usize, warmup: usize) -> Continued {
        Continued {
            before: Vec::new(),
            warmup,
            rounds: Rounds {
                least: rounds,
                most: rounds,
            },
            repeat: 1,
            clock: Clock::Wall,
        }
    }

    /// The same rounds counted on `clock`.
    pub fn on(self, clock: Clock) -> Continued {
        Continued { clock, ..self }
    }
}

/// The milliseconds of every timed round per model (`runs.before` first),
/// timed as [`time_interleaved_until`] times them. A caller that keeps
/// timing the same models after looking at a first few rounds (which ones
/// race on, how many rounds fit its time) continues from those rounds
/// instead of throwing them away with their warm-up.
pub fn time_rounds(
    models: &[Timed],
    runs: Continued,
    transfer: Transfer,
    progress: &mut dyn FnMut(Progress),
    settled: &mut dyn FnMut(&[Vec<f64>]) -> bool,
) -> Result<Vec<Vec<f64>>> {
    let Continued {
        before,
        warmup,
        rounds,
        repeat,
        clock,
    } = runs;
    let repeat = repeat.max(1);
    let total = rounds.most.max(rounds.least);
    let mut samples = if before.is_empty() {
        vec![Vec::with_capacity(total); models.len()]
    } else {
        before
    };
    let done = samples.first().map_or(0, Vec::len);
    if samples.len() != models.len() || samples.iter().any(|s| s.len() != done) {
        return Err(VerifyError::new(
            ErrorKind::Internal,
            format!(
                "earlier rounds for {} model(s), of unequal lengths, continued with {}",
                samples.len(),
                models.len()
            ),
        ));
    }
    if done >= total {
        return Ok(samples);
    }
    let failed = |m: &Timed, e: infopt_runtime::RuntimeError| {
        let kind = if transfer == Transfer::DeviceResident
            && matches!(e, infopt_runtime::RuntimeError::InvalidArgument(_))
        {
            ErrorKind::Usage
        } else {
            ErrorKind::Load
        };
        VerifyError::new(kind, format!("{}: {e}", m.label))
    };
    let mut runners = Vec::with_capacity(models.len());
    for m in models {
        runners.push(
            m.model
                .timed_runner(&m.inputs, transfer)
                .map_err(|e| failed(m, e))?,
        );
    }
    let mut run = |i: usize| runners[i].run_once().map_err(|e| failed(&models[i], e));
    let order = |round: usize| round_order(models.len(), round);
    if warmup > 0 {
        progress(Progress::Phase("warm-up", warmup));
        for round in 0..warmup {
            for i in order(round) {
                run(i)?;
            }
            progress(Progress::Round);
        }
    }
    progress(Progress::Phase("timing", total - done));
    for round in done..total {
        for i in order(round) {
            let started = clock.start();
            for _ in 0..repeat {
                run(i)?;
            }
            samples[i].push(started.elapsed().as_secs_f64() * 1e3 / repeat as f64);
        }
        progress(Progress::Round);
        if round + 1 >= rounds.least && round + 1 < total && settled(&samples) {
            break;
        }
    }
    progress(Progress::Done);
    Ok(samples)
}

/// Whether model `a` against model `b`, timed in the same rounds
/// (`a[k] / b[k]` one paired ratio per round, so that drift between rounds
/// cancels), is settled against `threshold`: either on one side of it
/// beyond doubt (the median ratio at least `gap` (relative) away from it,
/// and further than three standard errors of a median, `1.253 σ / √n`, σ
/// from the median absolute deviation), or within `gap` of it and known
/// to better than the gap (three standard errors inside it): a tie at the
/// resolution the caller asked for, which more rounds would not turn into
/// a decision worth their time. Timing stops there instead of filling its
/// time: on PP-OCRv4 rec the placements ran 14.4, 6.4, 5.9 and 8.7 ms, an
/// order that a few rounds already tell; on magika two placements ran 2.01
/// and 2.02 ms, a tie that never settled on one side and held the timing
/// for its whole budget.
///
/// A tie once asked for the median and its three standard errors all
/// inside the gap: a ratio just inside the gap's edge never settled
/// however many rounds ran (magika's float model against the input, 7.77
/// against 7.76 ms, is 0.999 against the threshold 0.97 with its edge at
/// 0.9991), and each such speed check ran its whole second.
pub fn settled(a: &[f64], b: &[f64], threshold: f64, gap: f64) -> bool {
    let mut ratios: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    if ratios.len() < 3 || ratios.iter().any(|r| !r.is_finite()) {
        return false;
    }
    let med = median(&mut ratios);
    let mut dev: Vec<f64> = ratios.iter().map(|r| (r - med).abs()).collect();
    let sigma = 1.4826 * median(&mut dev);
    let se = 1.253 * sigma / (ratios.len() as f64).sqrt();
    let away = (med - threshold).abs();
    let edge = gap * threshold;
    let beyond = away >= edge && away > 3.0 * se;
    let tie = away < edge && 3.0 * se < edge;
    beyond || tie
}

pub fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// The order `n` interleaved models run in at `round`: forward on even rounds,
/// reversed on odd ones, so none always goes first (every interleaved timing of
/// infopt, the latency gate's included, uses it).
pub fn round_order(n: usize, round: usize) -> Vec<usize> {
    let mut ix: Vec<usize> = (0..n).collect();
    if round % 2 == 1 {
        ix.reverse();
    }
    ix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clear_difference_settles_and_a_close_or_noisy_one_does_not() {
        // 6 ms against 9 ms, little noise: far below 0.97.
        let a = [6.0, 6.1, 5.9, 6.0, 6.2, 6.0, 5.9, 6.1];
        let b = [9.0, 9.1, 8.9, 9.2, 9.0, 8.8, 9.0, 9.1];
        assert!(settled(&a, &b, 0.97, 0.03));
        // Equal models are a tie against 1.0 (ratio exactly 1, no spread) ...
        assert!(settled(&b, &b, 1.0, 0.03));
        // ... and so are models 1% apart under little noise.
        let c: Vec<f64> = b.iter().map(|x| x * 1.01).collect();
        assert!(settled(&c, &b, 1.0, 0.03));
        // Against 0.97, 1.0 is neither beyond the gap of 4% nor surely inside it
        // when the rounds scatter by a few percent.
        let d = [9.3, 8.8, 9.4, 8.7, 9.5, 8.6, 9.2, 8.9];
        assert!(!settled(&d, &b, 0.97, 0.04));
        // A ratio just inside the gap's edge (0.999 against 0.97, the edge at
        // 0.9991) measured to a fraction of the gap is a tie: it once never
        // settled, however many rounds ran.
        let e: Vec<f64> = b
            .iter()
            .enumerate()
            .map(|(k, x)| x * (0.999 + if k % 2 == 0 { 0.001 } else { -0.001 }))
            .collect();
        assert!(settled(&e, &b, 0.97, 0.03));
        // A difference of 10% under rounds that scatter by 40% is noise.
        let noisy_a = [5.0, 9.0, 12.0, 6.0, 11.0, 7.0, 13.0, 6.0];
        let noisy_b = [10.0, 6.0, 9.0, 12.0, 7.0, 11.0, 8.0, 9.0];
        assert!(!settled(&noisy_a, &noisy_b, 1.0, 0.03));
        // Too few rounds, or a broken one, say nothing.
        assert!(!settled(&a[..2], &b[..2], 0.97, 0.03));
        assert!(!settled(&[f64::NAN, 1.0, 1.0], &[2.0, 2.0, 2.0], 1.0, 0.03));
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
