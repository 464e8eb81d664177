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

/// Statistics from the copying sink (each intermediate copied into a host
/// tensor, observed one by one) and from the view sink (the backend's own
/// buffers, a group at a time, on every core).
fn copied_and_viewed(
    model: &dyn LoadedModel,
    samples: &[Vec<HostTensor>],
) -> (RangeCollector, RangeCollector) {
    let copied = run(model, samples);
    let mut viewed = RangeCollector::new();
    for s in samples {
        model
            .run_observed_views(s, &mut |views| {
                viewed.observe_views(views);
                Ok(())
            })
            .expect("runs");
    }
    (copied, viewed)
}

#[test]
fn reading_the_backends_buffers_in_place_gives_the_same_ranges_as_copying_them() {
    use infopt_runtime::ort_backend::{OrtBackend, OrtOptions};
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models/cnn_bn_relu.onnx");
    let ir = infopt_ir::Model::load(&path).expect("fixture loads");
    // Batch 48: the largest intermediates span several of the pieces that
    // observe_views hands to separate threads.
    let shapes = InputShapes::new().with_default_dim(48);
    let mut backends: Vec<Box<dyn Backend>> = vec![Box::new(TractBackend)];
    match OrtBackend::new(OrtOptions::default()) {
        Ok(b) => backends.push(Box::new(b)),
        Err(e) if std::env::var_os("CI").is_none() => eprintln!("ONNX Runtime skipped: {e}"),
        Err(e) => panic!("CI has ONNX Runtime, but: {e}"),
    }
    for backend in &backends {
        let model = infopt_verify::observe::load_observing(
            backend.as_ref(),
            &ir,
            path.parent().unwrap(),
            &shapes,
            &Observe::All,
        )
        .expect("loads for observation");
        let samples: Vec<Vec<HostTensor>> = (0..2)
            .map(|seed| generate_for_model(model.as_ref(), &InputGen::with_seed(seed)).unwrap())
            .collect();
        let (copied, viewed) = copied_and_viewed(model.as_ref(), &samples);
        let name = backend.name();
        assert!(copied.len() >= 8, "{name}: {} tensors", copied.len());
        let largest = copied.iter().map(|(_, s)| s.elements).max().unwrap_or(0);
        // More than one piece (2^18 elements) per run.
        assert!(largest / 2 > 1 << 18, "{name}: largest {largest}");
        assert_eq!(copied, viewed, "{name}");
        for m in Method::CANDIDATES.into_iter().chain([Method::Auto]) {
            assert_eq!(
                RangeTable::from_collector(&copied, m, b"m").unwrap(),
                RangeTable::from_collector(&viewed, m, b"m").unwrap(),
                "{name} {}",
                m.name()
            );
        }
    }
}
