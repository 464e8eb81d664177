//! A calibration asked after its first sample: stopping there gives the
//! ranges of a calibration on that one sample; going on gives those of a
//! calibration that was never asked.

use std::path::Path;

use infopt_calibration::Method;
use infopt_calibration::run::{
    CalibrateOptions, Calibrated, DataSource, Target, calibrate, calibrate_asking,
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
    let m = model();
    let bytes = m.to_bytes().unwrap();
    let target = Target {
        model: &m,
        file_bytes: &bytes,
        dir: Path::new("."),
    };
    let chosen = ChosenBackend::build(BackendKind::Tract, &BackendOptions::default()).unwrap();
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
        &chosen,
        &InputShapes::default(),
        &DataSource::Random {
            seed: 7,
            count: 6,
            vocab: 16,
        },
        &options,
        &mut |_, _| {},
        &mut |table| {
            asked.push(table.tensors.len());
            Ok(go_on)
        },
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
