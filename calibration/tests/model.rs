//! The observers on a real model: tract streams every intermediate tensor of
//! fixtures/models/cnn_bn_relu.onnx to a RangeCollector; the ranges then go to a range
//! table and a TensorRT cache. Checks that ranges are real (ReLU outputs are >= 0, amax
//! within the observed values), independent of sample order and sharding, and that the
//! cache round-trips.

use std::path::PathBuf;

use infopt_calibration::cache::{self, CacheFormat, TrtCacheHeader};
use infopt_calibration::{Method, RangeCollector, RangeTable};
use infopt_runtime::inputs::{InputGen, generate_for_model};
use infopt_runtime::{Backend, HostTensor, InputShapes, LoadedModel, Observe, TractBackend};

fn model_bytes() -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models/cnn_bn_relu.onnx");
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn run(model: &dyn LoadedModel, samples: &[Vec<HostTensor>]) -> RangeCollector {
    let mut c = RangeCollector::new();
    for s in samples {
        model
            .run_observed(s, &mut |t| {
                c.observe_named(t);
                Ok(())
            })
            .expect("runs");
    }
    c
}

#[test]
fn ranges_from_a_model_run_are_order_independent_and_export() {
    let bytes = model_bytes();
    let shapes = InputShapes::new().with_default_dim(1);
    let model = TractBackend
        .load_observing(&bytes, None, &shapes, &Observe::All)
        .expect("fixture loads");
    assert!(model.observed().len() >= 3, "{:?}", model.observed());
    let samples: Vec<Vec<HostTensor>> = (0..6)
        .map(|seed| generate_for_model(model.as_ref(), &InputGen::with_seed(seed)).unwrap())
        .collect();

    let forward = run(model.as_ref(), &samples);
    let reversed: Vec<_> = samples.iter().rev().cloned().collect();
    let backward = run(model.as_ref(), &reversed);
    let mut sharded = run(model.as_ref(), &samples[3..]);
    sharded.merge(run(model.as_ref(), &samples[..3])).unwrap();

    for name in model.observed() {
        let s = forward
            .get(name)
            .unwrap_or_else(|| panic!("no statistics for observed tensor {name}"));
        assert_eq!(s.observations, 6, "{name}");
    }
    for m in [
        Method::MinMax,
        Method::PERCENTILE,
        Method::ENTROPY,
        Method::MSE,
    ] {
        let t = RangeTable::from_collector(&forward, m, &bytes).unwrap();
        assert_eq!(
            t,
            RangeTable::from_collector(&backward, m, &bytes).unwrap(),
            "{}",
            m.name()
        );
        assert_eq!(
            t,
            RangeTable::from_collector(&sharded, m, &bytes).unwrap(),
            "{}",
            m.name()
        );
        for (name, r) in &t.tensors {
            assert!(
                r.amax > 0.0 && r.amax <= r.min.abs().max(r.max.abs()),
                "{name}: {r:?}"
            );
        }
    }

    // Real values went through: some observed tensor is a ReLU output, never negative.
    let table = RangeTable::from_collector(&forward, Method::ENTROPY, &bytes).unwrap();
    assert!(
        table.tensors.values().any(|r| r.min >= 0.0 && r.max > 0.0),
        "{table:?}"
    );
    assert!(table.tensors.values().any(|r| r.min < 0.0), "{table:?}");
    table.check_model(&bytes, "ranges.json".as_ref()).unwrap();

    // TensorRT cache: written, read back within float32 rounding of amax/127·127.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calib.cache");
    cache::write_trt_cache(&table, TrtCacheHeader::default(), &path).unwrap();
    let back = cache::read_ranges(&path).unwrap();
    assert_eq!(
        back.format,
        CacheFormat::TensorRt(TrtCacheHeader::default())
    );
    assert_eq!(back.ranges.len(), table.tensors.len());
    for (name, r) in &table.tensors {
        let a = back.ranges[name].amax;
        assert!(
            (a - r.amax).abs() <= r.amax * 1e-6,
            "{name}: {a} vs {}",
            r.amax
        );
    }
    assert_eq!(back.to_amax().len(), table.to_amax().len());
}
