//! Observing intermediate tensors: each one reaches the sink as it is
//! computed, from a model prepared once, with memory flat over many runs.

mod common;

use std::path::Path;

use common::*;
use infopt_runtime::inputs::{InputGen, generate_for_model};
use infopt_runtime::ort_backend::{OrtBackend, OrtOptions};
use infopt_runtime::{Backend, HostTensor, InputShapes, Observe, TractBackend};

fn fixture(rel: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/models")
        .join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// Resident memory of this process, in bytes.
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("procfs");
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("statm");
    pages * 4096
}

/// x -> Relu -> a -> Neg -> b (output); a also exposed as an output to observe.
fn relu_neg(expose_a: bool) -> Vec<u8> {
    let mut outputs = vec![value_info("b", 1, &["2", "3"])];
    if expose_a {
        outputs.push(value_info_unshaped("a", 1));
    }
    model(
        graph(
            vec![node("Relu", &["x"], &["a"]), node("Neg", &["a"], &["b"])],
            vec![value_info("x", 1, &["2", "3"])],
            outputs,
        ),
        13,
    )
}

fn x() -> HostTensor {
    HostTensor::from_vec(vec![2, 3], vec![-1.0f32, 2.0, -3.0, 4.0, -5.0, 6.0])
        .unwrap()
        .named("x")
}

#[test]
fn tract_hands_every_intermediate_to_the_sink_in_order() {
    let m = TractBackend
        .load_observing(&relu_neg(false), None, &InputShapes::new(), &Observe::All)
        .expect("loads");
    assert_eq!(m.observed(), ["a".to_string()]);
    let mut seen = Vec::new();
    let out = m
        .run_observed(&[x()], &mut |t| {
            seen.push((t.name().unwrap_or("").to_string(), t.to_f64_vec()));
            Ok(())
        })
        .expect("runs");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, "a");
    assert_eq!(seen[0].1, vec![0.0, 2.0, 0.0, 4.0, 0.0, 6.0]);
    assert_eq!(
        out[0].to_f64_vec(),
        vec![-0.0, -2.0, -0.0, -4.0, -0.0, -6.0]
    );

    // A plain load cannot observe: an error, not silence.
    let plain = TractBackend
        .load(&relu_neg(false), None, &InputShapes::new())
        .unwrap();
    let e = plain.run_observed(&[x()], &mut |_| Ok(())).unwrap_err();
    assert!(e.to_string().contains("not loaded for observation"), "{e}");
}

#[test]
fn tract_observes_named_tensors_of_a_transformer_and_stops_on_sink_error() {
    let bytes = fixture("transformer_block.onnx");
    let shapes = InputShapes::new().with_default_dim(2);
    let all = TractBackend
        .load_observing(&bytes, None, &shapes, &Observe::All)
        .expect("loads");
    assert!(all.observed().len() > 20, "{:?}", all.observed());
    let pick: Vec<String> = all.observed().iter().step_by(5).cloned().collect();
    let some = TractBackend
        .load_observing(&bytes, None, &shapes, &Observe::Names(pick.clone()))
        .expect("loads");
    let mut sorted = some.observed().to_vec();
    sorted.sort();
    let mut wanted = pick.clone();
    wanted.sort();
    assert_eq!(sorted, wanted);
    let inputs = generate_for_model(some.as_ref(), &InputGen::with_seed(1)).unwrap();
    let mut names = Vec::new();
    some.run_observed(&inputs, &mut |t| {
        names.push(t.name().unwrap().to_string());
        Ok(())
    })
    .unwrap();
    assert_eq!(names, some.observed());
    // The outputs are the model's outputs, same as a plain run.
    let plain = TractBackend.load(&bytes, None, &shapes).unwrap();
    let observed_out = some.run_observed(&inputs, &mut |_| Ok(())).unwrap();
    let plain_out = plain.run(&inputs).unwrap();
    for (a, b) in observed_out.iter().zip(&plain_out) {
        let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{x} vs {y}");
        }
    }
    let e = some
        .run_observed(&inputs, &mut |_| {
            Err(infopt_runtime::RuntimeError::InvalidArgument(
                "sink full".into(),
            ))
        })
        .unwrap_err();
    assert!(e.to_string().contains("sink full"), "{e}");
}

#[test]
fn memory_stays_flat_while_observing_every_tensor_over_many_runs() {
    let bytes = fixture("cnn_bn_relu.onnx");
    let shapes = InputShapes::new().with_default_dim(1);
    let m = TractBackend
        .load_observing(&bytes, None, &shapes, &Observe::All)
        .expect("loads");
    let inputs = generate_for_model(m.as_ref(), &InputGen::with_seed(3)).unwrap();
    let mut count = 0usize;
    let mut max = f64::MIN;
    let mut run = |n: usize| {
        for _ in 0..n {
            m.run_observed(&inputs, &mut |t| {
                count += 1;
                max = t.to_f64_vec().into_iter().fold(max, f64::max);
                Ok(())
            })
            .unwrap();
        }
    };
    run(20);
    let warm = rss();
    run(200);
    let grown = rss().saturating_sub(warm);
    assert!(count >= 220 * m.observed().len());
    assert!(
        grown < 8 << 20,
        "RSS grew by {grown} bytes over 200 observed runs"
    );
}

#[test]
fn onnx_runtime_observes_exposed_tensors() {
    let ort = match OrtBackend::new(OrtOptions::default()) {
        Ok(b) => b,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            return;
        }
        Err(e) => panic!("CI has ONNX Runtime, but: {e}"),
    };
    let m = ort
        .load_observing(
            &relu_neg(true),
            None,
            &InputShapes::new(),
            &Observe::Names(vec!["a".into()]),
        )
        .expect("loads");
    assert_eq!(m.observed(), ["a".to_string()]);
    assert_eq!(
        m.outputs().len(),
        1,
        "the observed tensor is not a model output"
    );
    let mut seen = Vec::new();
    for _ in 0..3 {
        let out = m
            .run_observed(&[x()], &mut |t| {
                seen.push(t.to_f64_vec());
                Ok(())
            })
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].name(), Some("b"));
    }
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0], vec![0.0, 2.0, 0.0, 4.0, 0.0, 6.0]);
    let e = ort
        .load_observing(&relu_neg(true), None, &InputShapes::new(), &Observe::All)
        .err()
        .expect("All needs names in ORT");
    assert!(e.to_string().contains("name them"), "{e}");
}
