//! A calibration asked after its first sample: stopping there gives the
//! ranges of a calibration on that one sample; going on gives those of a
//! calibration that was never asked. In one session (tract) it is asked
//! before the rest run; in ONNX Runtime with two threads, the first of two
//! sessions side by side calibrates on while it is asked (see
//! `run/side_by_side.rs`, `Hold`), which changes neither answer.

use std::path::Path;

use infopt_calibration::Method;
use infopt_calibration::run::{
    AfterFirst, CalibrateOptions, Calibrated, DataSource, ProgressFn, Target, calibrate,
    calibrate_asking,
};
use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{DataType, Model};
use infopt_runtime::InputShapes;
use infopt_verify::{BackendKind, BackendOptions, ChosenBackend};

/// `x [1, 4] -> Relu -> Mul(2)`.
fn model() -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "4"]));
    let two = b.f32("two", &[1], &[2.0]);
    let r = b.op("Relu", &[x], vec![]);
    let y = b.op("Mul", &[r, two], vec![]);
    b.output(y, "y", DataType::Float, Some(dims(&["1", "4"])));
    b.build(13)
}

fn run(samples: usize, asked: &mut Vec<usize>, go_on: bool) -> Calibrated {
    let chosen = ChosenBackend::build(BackendKind::Tract, &BackendOptions::default()).unwrap();
    run_in(&chosen, (samples, 6), asked, go_on)
}

/// `samples` of `count` random samples calibrated in `chosen`, asked after
/// the first whether to go on (`go_on`); `asked` gets the tensor count of
/// each table it was asked with.
fn run_in(
    chosen: &ChosenBackend,
    samples_of: (usize, usize),
    asked: &mut Vec<usize>,
    go_on: bool,
) -> Calibrated {
    calibrate_random(chosen, samples_of, &mut |_, _| {}, &mut |table| {
        asked.push(table.tensors.len());
        Ok(go_on)
    })
}

/// `samples` of `count` random samples calibrated (min-max) in `chosen`,
/// saying its progress to `progress` and asking `ask` after the first.
fn calibrate_random(
    chosen: &ChosenBackend,
    (samples, count): (usize, usize),
    progress: &mut ProgressFn<'_>,
    ask: &mut AfterFirst<'_>,
) -> Calibrated {
    let m = model();
    let bytes = m.to_bytes().unwrap();
    let target = Target {
        model: &m,
        file_bytes: &bytes,
        dir: Path::new("."),
    };
    let options = CalibrateOptions {
        method: Method::MinMax,
        samples: Some(samples),
        batch: 1,
        bins: 2048,
        keep_runs: 0,
        quantizable: None,
    };
    calibrate_asking(
        &target,
        chosen,
        &InputShapes::default(),
        &DataSource::Random {
            seed: 7,
            count,
            vocab: 16,
        },
        &options,
        progress,
        ask,
    )
    .unwrap()
}

fn ranges(c: &Calibrated) -> Vec<(String, f32, f32)> {
    c.table
        .tensors
        .iter()
        .map(|(n, r)| (n.clone(), r.min, r.max))
        .collect()
}

#[test]
fn stopping_after_the_first_sample_calibrates_on_it_alone() {
    let mut asked = Vec::new();
    let stopped = run(6, &mut asked, false);
    assert_eq!(stopped.samples, 1);
    assert_eq!(asked.len(), 1, "asked once");
    assert!(asked[0] >= 2, "the first sample's ranges: {asked:?}");
    let one = run(1, &mut Vec::new(), true);
    assert_eq!(ranges(&stopped), ranges(&one));
}

#[test]
fn going_on_gives_the_calibration_never_asked() {
    let mut asked = Vec::new();
    let went_on = run(6, &mut asked, true);
    assert_eq!((went_on.samples, asked.len()), (6, 1));
    let m = model();
    let bytes = m.to_bytes().unwrap();
    let plain = calibrate(
        &Target {
            model: &m,
            file_bytes: &bytes,
            dir: Path::new("."),
        },
        &ChosenBackend::build(BackendKind::Tract, &BackendOptions::default()).unwrap(),
        &InputShapes::default(),
        &DataSource::Random {
            seed: 7,
            count: 6,
            vocab: 16,
        },
        &CalibrateOptions {
            method: Method::MinMax,
            samples: Some(6),
            batch: 1,
            bins: 2048,
            keep_runs: 0,
            quantizable: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(ranges(&went_on), ranges(&plain));
    // A calibration of one sample has nothing left to ask about.
    let mut never = Vec::new();
    run(1, &mut never, false);
    assert!(never.is_empty(), "{never:?}");
}

/// ONNX Runtime with `threads` threads, where its library is found (under
/// CI it must be).
fn ort(threads: usize) -> Option<ChosenBackend> {
    let options = BackendOptions {
        threads: Some(threads),
        ..BackendOptions::default()
    };
    match ChosenBackend::build(BackendKind::Ort, &options) {
        Ok(b) => Some(b),
        Err(e) if std::env::var_os("CI").is_some() => panic!("ONNX Runtime is needed: {e:?}"),
        Err(_) => {
            eprintln!("skipped: ONNX Runtime not found");
            None
        }
    }
}

#[test]
fn side_by_side_the_first_session_calibrates_on_while_asked_and_the_answers_stand() {
    let (Some(two), Some(one)) = (ort(2), ort(1)) else {
        return;
    };
    // 80 samples: asked once 64 are queued (inputs of a few bytes: as many
    // as are queued at most); 6: asked when the data ended.
    for count in [80, 6] {
        let mut asked = Vec::new();
        let stopped = run_in(&two, (count, count), &mut asked, false);
        assert_eq!((stopped.samples, asked.len()), (1, 1), "{count}");
        let first_only = run_in(&one, (1, count), &mut Vec::new(), true);
        assert_eq!(ranges(&stopped), ranges(&first_only), "{count}");

        let mut asked = Vec::new();
        let went_on = run_in(&two, (count, count), &mut asked, true);
        assert_eq!((went_on.samples, asked.len()), (count, 1), "{count}");
        // One thread, one session: nothing runs while it is asked.
        let alone = run_in(&one, (count, count), &mut Vec::new(), true);
        assert_eq!(ranges(&went_on), ranges(&alone), "{count}");
    }
}

#[test]
fn side_by_side_samples_are_calibrated_while_asked() {
    let Some(two) = ort(2) else {
        return;
    };
    // The first progress said after the answer, which comes 300 ms after
    // the question.
    let answered = std::cell::Cell::new(false);
    let after_answer = std::cell::Cell::new(None::<usize>);
    let c = calibrate_random(
        &two,
        (40, 40),
        &mut |n, _| {
            if answered.get() && after_answer.get().is_none() {
                after_answer.set(Some(n));
            }
        },
        &mut |_| {
            std::thread::sleep(std::time::Duration::from_millis(300));
            answered.set(true);
            Ok(true)
        },
    );
    assert_eq!(c.samples, 40);
    // The first sample, then the 39 queued before the question (inputs of
    // a few bytes: all of them), ran while it was asked: the first session
    // did not wait for the answer (16 of them at least, on a slow machine).
    let done = after_answer.get().unwrap_or(0);
    assert!(done >= 17, "{done}");
}
