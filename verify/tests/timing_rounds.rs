//! An interleaved timing continued from earlier rounds keeps them, counts
//! them toward its rounds, and runs only what is left.

use std::path::Path;

use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{DataType, Model};
use infopt_runtime::{HostTensor, InputShapes, Transfer};
use infopt_verify::timing::{self, Clock, Continued, Rounds, Timed};
use infopt_verify::{BackendKind, BackendOptions, ChosenBackend};

/// `x [1, 4] -> Relu`.
fn relu() -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "4"]));
    let y = b.op("Relu", &[x], vec![]);
    b.output(y, "y", DataType::Float, Some(dims(&["1", "4"])));
    b.build(13)
}

fn timed(n: usize) -> Vec<Timed> {
    let chosen = ChosenBackend::build(BackendKind::Tract, &BackendOptions::default()).unwrap();
    let bytes = relu().to_bytes().unwrap();
    let x = HostTensor::from_vec(vec![1, 4], vec![1.0f32, -2.0, 3.0, -4.0])
        .unwrap()
        .named("x");
    (0..n)
        .map(|i| Timed {
            label: format!("model {i}"),
            model: chosen
                .backend
                .load(&bytes, Some(Path::new(".")), &InputShapes::default())
                .unwrap(),
            inputs: vec![x.clone()],
        })
        .collect()
}

fn rounds(least: usize, most: usize) -> Rounds {
    Rounds { least, most }
}

#[test]
fn continued_rounds_keep_the_earlier_ones_and_run_the_rest() {
    let models = timed(2);
    let before = vec![vec![1e6, 2e6, 3e6], vec![4e6, 5e6, 6e6]];
    let runs = Continued {
        before: before.clone(),
        warmup: 1,
        rounds: rounds(5, 5),
        repeat: 1,
        clock: Clock::Wall,
    };
    let mut checks = Vec::new();
    let out = timing::time_rounds(
        &models,
        runs,
        Transfer::HostToHost,
        &mut |_| {},
        &mut |ms| {
            checks.push(ms[0].len());
            false
        },
    )
    .unwrap();
    // Two rounds were left: the earlier three stay first, unchanged.
    assert_eq!(out[0].len(), 5);
    assert_eq!(out[1].len(), 5);
    assert_eq!(out[0][..3], before[0][..]);
    assert_eq!(out[1][..3], before[1][..]);
    assert!(out.iter().all(|m| m[3..].iter().all(|&x| x < 1e6)));
    // Settled is asked after a round from `least` on, never after the last.
    assert!(checks.is_empty(), "{checks:?}");
}

#[test]
fn a_timing_settled_after_its_least_rounds_stops_there() {
    let models = timed(2);
    let runs = Continued {
        before: vec![vec![1.0; 2], vec![1.0; 2]],
        warmup: 0,
        rounds: rounds(4, 50),
        repeat: 1,
        clock: Clock::Wall,
    };
    let mut asked = Vec::new();
    let out = timing::time_rounds(
        &models,
        runs,
        Transfer::HostToHost,
        &mut |_| {},
        &mut |ms| {
            asked.push(ms[0].len());
            true
        },
    )
    .unwrap();
    assert_eq!(asked, vec![4]);
    assert_eq!(out[0].len(), 4);
}

#[test]
fn rounds_already_done_run_nothing_and_unequal_ones_are_refused() {
    let models = timed(2);
    let done = vec![vec![7.0; 5], vec![8.0; 5]];
    let runs = Continued {
        before: done.clone(),
        warmup: 2,
        rounds: rounds(5, 5),
        repeat: 1,
        clock: Clock::Wall,
    };
    let out = timing::time_rounds(
        &models,
        runs,
        Transfer::HostToHost,
        &mut |_| {},
        &mut |_| false,
    )
    .unwrap();
    assert_eq!(out, done);

    let unequal = Continued {
        before: vec![vec![1.0; 2], vec![1.0; 3]],
        warmup: 0,
        rounds: rounds(5, 5),
        repeat: 1,
        clock: Clock::Wall,
    };
    let err = timing::time_rounds(
        &models,
        unequal,
        Transfer::HostToHost,
        &mut |_| {},
        &mut |_| false,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("earlier rounds for 2 model(s), of unequal lengths"),
        "{err}"
    );
}

/// A model of no inputs or outputs whose run is `body` (counting its runs,
/// waiting, working).
struct Doing {
    body: Box<dyn Fn() + Send + Sync>,
    resolution: infopt_runtime::ShapeResolution,
}

impl Doing {
    fn boxed(body: impl Fn() + Send + Sync + 'static) -> Box<Doing> {
        Box::new(Doing {
            body: Box::new(body),
            resolution: Default::default(),
        })
    }
}

impl infopt_runtime::LoadedModel for Doing {
    fn inputs(&self) -> &[infopt_runtime::IoSpec] {
        &[]
    }
    fn outputs(&self) -> &[infopt_runtime::IoSpec] {
        &[]
    }
    fn resolution(&self) -> &infopt_runtime::ShapeResolution {
        &self.resolution
    }
    fn run(&self, _inputs: &[HostTensor]) -> infopt_runtime::Result<Vec<HostTensor>> {
        (self.body)();
        Ok(Vec::new())
    }
}

#[test]
fn a_round_runs_each_model_repeat_times_and_records_their_mean() {
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let models: Vec<Timed> = (0..2)
        .map(|i| Timed {
            label: format!("model {i}"),
            model: {
                let runs = runs.clone();
                Doing::boxed(move || {
                    runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                })
            },
            inputs: Vec::new(),
        })
        .collect();
    let out = timing::time_rounds(
        &models,
        Continued {
            before: Vec::new(),
            warmup: 1,
            rounds: rounds(3, 3),
            repeat: 13,
            clock: Clock::Wall,
        },
        Transfer::HostToHost,
        &mut |_| {},
        &mut |_| false,
    )
    .unwrap();
    // One warm-up run each, then 3 rounds of 13 runs each: one figure per
    // round.
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::Relaxed),
        2 * (1 + 3 * 13)
    );
    assert_eq!((out[0].len(), out[1].len()), (3, 3));
}

/// The milliseconds of each of 3 rounds of one model that waits 30 ms and
/// works 10 ms a run, on `clock`.
fn waits_then_works_on(clock: Clock) -> Vec<f64> {
    let models = vec![Timed {
        label: "model".into(),
        model: Doing::boxed(|| {
            // 30 ms off the CPU, then 10 ms of work on it.
            std::thread::sleep(std::time::Duration::from_millis(30));
            let started = std::time::Instant::now();
            let mut x = 0u64;
            while started.elapsed() < std::time::Duration::from_millis(10) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }),
        inputs: Vec::new(),
    }];
    let out = timing::time_rounds(
        &models,
        Continued::fresh(3, 0).on(clock),
        Transfer::HostToHost,
        &mut |_| {},
        &mut |_| false,
    )
    .unwrap();
    out[0].clone()
}

#[test]
fn the_calling_threads_clock_counts_its_work_and_not_its_waiting() {
    // Wall time counts the wait; the thread's CPU time only the work
    // (a thread waiting for a core is off the CPU the same way). The work
    // runs 10 ms of wall time, of which a loaded machine may take some.
    let wall = waits_then_works_on(Clock::Wall);
    assert!(wall.iter().all(|&ms| ms >= 40.0), "{wall:?}");
    let thread = waits_then_works_on(Clock::CallingThread);
    if cfg!(unix) {
        assert!(
            thread.iter().all(|&ms| (1.0..25.0).contains(&ms)),
            "{thread:?}"
        );
    } else {
        assert!(thread.iter().all(|&ms| ms >= 40.0), "{thread:?}");
    }
}
