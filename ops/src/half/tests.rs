//! The automatic float32 islands on small graphs, judged in tract (which
//! computes float16 natively, so an overflow shows as infinity).

use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{DataType, Model};
use infopt_passes::{DriverOptions, PipelineConfig, Precision};
use infopt_runtime::compare::Tolerance;
use infopt_verify::{BackendKind, BackendOptions, Criterion, Inputs, Verifier, VerifyPolicy};

use super::*;

fn weights(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    // A small deterministic generator: values in [-scale, scale).
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
            (unit * 2.0 - 1.0) * scale
        })
        .collect()
}

/// x [1,8,16] -> MatMul -> Relu -> MatMul (products ~1e2..1e3) -> the
/// square (Mul of the product with itself, ~1e5..1e6: overflows float16)
/// -> ReduceSum (kept in float32 by the pass) -> `sums`.
fn overflow_model() -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "8", "16"]));
    let w1 = b.f32("w1", &[16, 16], &weights(1, 256, 1.0));
    let w2 = b.f32("w2", &[16, 16], &weights(2, 256, 100.0));
    let h1 = b.op("MatMul", &[x, w1], vec![]);
    let r1 = b.op("Relu", &[h1], vec![]);
    let h2 = b.op("MatMul", &[r1, w2], vec![]);
    let sq = b.op("Mul", &[h2, h2], vec![]);
    let axes = b.i64("axes", &[1], &[2]);
    let sums = b.op(
        "ReduceSum",
        &[sq, axes],
        vec![infopt_ir::Attribute::int("keepdims", 0)],
    );
    b.output(sums, "sums", DataType::Float, None);
    b.build(13)
}

/// x [1,8,16]: h = MatMul(x, W) (about ±1), big = MatMul(x, W2) + 3000,
/// y = (h + big) - big. In float16 the sum keeps h to the nearest 2 (the
/// spacing at 3000): only the sum and the difference in float32 recover it.
fn cancellation_model() -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "8", "16"]));
    let w = b.f32("w", &[16, 16], &weights(3, 256, 0.5));
    let w2 = b.f32("w2", &[16, 16], &weights(4, 256, 0.5));
    let c = b.f32("c", &[1], &[3000.0]);
    let h = b.op("MatMul", &[x, w], vec![]);
    let g = b.op("MatMul", &[x, w2], vec![]);
    let big = b.op("Add", &[g, c], vec![]);
    let sum = b.op("Add", &[h, big], vec![]);
    let y = b.op("Sub", &[sum, big], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.build(13)
}

/// `cancellation_model`'s computation inside the then branch of an If on
/// a constant true condition (the else branch passes `h` on), reading `x`
/// and the weights from the main graph: converted, the branch loses `h`,
/// and the island search can only repair it by keeping the If float32
/// with its subgraphs.
fn cancellation_in_if_model() -> Model {
    fn outer(b: &mut GraphBuilder, name: &str) -> infopt_ir::ValueId {
        b.graph_mut().add_value(infopt_ir::Value {
            outer: true,
            ..infopt_ir::Value::named(name)
        })
    }
    let mut t = GraphBuilder::new();
    let (x, w, w2, c) = (
        outer(&mut t, "x"),
        outer(&mut t, "w"),
        outer(&mut t, "w2"),
        outer(&mut t, "c"),
    );
    let h = t.op("MatMul", &[x, w], vec![]);
    let g = t.op("MatMul", &[x, w2], vec![]);
    let big = t.op("Add", &[g, c], vec![]);
    let sum = t.op("Add", &[h, big], vec![]);
    let y = t.op("Sub", &[sum, big], vec![]);
    t.output(y, "then_y", DataType::Float, None);
    let mut e = GraphBuilder::new();
    let (x, w) = (outer(&mut e, "x"), outer(&mut e, "w"));
    let h = e.op("MatMul", &[x, w], vec![]);
    e.output(h, "else_y", DataType::Float, None);

    let mut b = GraphBuilder::new();
    b.input("x", DataType::Float, dims(&["1", "8", "16"]));
    b.f32("w", &[16, 16], &weights(3, 256, 0.5));
    b.f32("w2", &[16, 16], &weights(4, 256, 0.5));
    b.f32("c", &[1], &[3000.0]);
    let cond = b.initializer(
        "cond",
        infopt_ir::Tensor::from_raw(DataType::Bool, vec![], vec![1u8].into()),
    );
    let y = b.op(
        "If",
        &[cond],
        vec![
            infopt_ir::Attribute::graph("then_branch", t.into_graph()),
            infopt_ir::Attribute::graph("else_branch", e.into_graph()),
        ],
    );
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(13);
    if let Some((id, _)) = m.graph.value(y).producer {
        m.graph.node_mut(id).name = Some("If".into());
    }
    m
}

fn steps() -> PipelineConfig {
    let mut cfg = PipelineConfig::from_yaml("version: 1\npasses:\n  - convert-float16\n", "test")
        .expect("a valid pipeline");
    infopt_passes::precision::apply_to_pipeline(&mut cfg, &[], Some(Precision::Fp16))
        .expect("the precision default applies");
    cfg
}

fn verifier(model: &Model) -> Verifier {
    let inputs = Inputs::new(vec![], None, 0, 16).expect("generated inputs");
    let policy = VerifyPolicy {
        prefer: vec![BackendKind::Tract],
        explicit: Some(BackendKind::Tract),
        options: BackendOptions::default(),
        criterion: Criterion::Scaled {
            max_scaled_error: f64::INFINITY,
            min_cosine: 0.999,
        },
        tolerance: Tolerance {
            rtol: 2e-2,
            atol: 2e-2,
        },
        keep_original: false,
        half_io: false,
    };
    Verifier::new(model, std::env::temp_dir(), &inputs, policy).expect("tract runs the model")
}

fn search(model: &Model, search: bool) -> Outcome {
    let v = verifier(model);
    let options = DriverOptions::default();
    let cx = Context {
        verifier: &v,
        options: &options,
        inputs: "seeded".into(),
        generated_inputs: true,
        search,
    };
    let mut fp32 = model.clone();
    convert_to_target(&mut fp32, &steps(), &cx).expect("the search runs")
}

fn report(o: &Outcome) -> &HalfReport {
    o.report.as_ref().expect("tract judges the float16 model")
}

fn kept(o: &Outcome) -> Vec<(&str, KeptFor)> {
    report(o)
        .kept_fp32
        .iter()
        .map(|k| (k.node.as_str(), k.kept_for))
        .collect()
}

#[test]
fn an_overflowing_square_is_the_one_node_kept_in_float32() {
    // Converted as usual, the square overflows: infinite sums, target missed.
    let plain = search(&overflow_model(), false);
    assert!(!report(&plain).reached, "{:?}", report(&plain));
    assert_eq!(
        report(&plain).cosine_final,
        -2.0,
        "an infinite output scores -2"
    );
    assert!(report(&plain).kept_fp32.is_empty());

    let o = search(&overflow_model(), true);
    assert!(report(&o).reached, "{:?}", report(&o));
    assert_eq!(kept(&o), vec![("mul_4", KeptFor::Range)]);
    let k = &report(&o).kept_fp32[0];
    assert!(k.float32_max > 65504.0, "{k:?}");
    assert!(
        k.reason.contains("reaches") && k.reason.contains("65504"),
        "{}",
        k.reason
    );
    assert!(report(&o).cosine_final >= 0.999, "{:?}", report(&o));
    // Everything else still converts: both MatMuls and the Relu run in float16.
    let g = &o.model.graph;
    let half = half_nodes(&o.model);
    for name in ["matmul_1", "relu_2", "matmul_3"] {
        assert!(half.contains(name), "{name} should be float16: {half:?}");
    }
    assert!(!half.contains("mul_4"));
    // The pass reports the measured reason for the node it kept.
    assert!(
        o.run
            .declined
            .iter()
            .any(|d| d.at == "mul_4" && d.reason.contains("automatic float32 island")),
        "{:?}",
        o.run.declined
    );
    assert!(g.find_node("mul_4").is_some());
}

#[test]
fn a_reader_of_the_overflowing_tensor_stays_float32_too() {
    // The square also feeds a Sqrt (back to ~1e3): read through a Cast to
    // float16, its input would overflow.
    let mut model = overflow_model();
    let g = &mut model.graph;
    let sq = g.find_value("mul_4_out").expect("the square");
    let id = g.add_node(
        infopt_ir::Node {
            name: Some("root".into()),
            op_type: "Sqrt".into(),
            inputs: vec![Some(sq)],
            ..Default::default()
        },
        &["roots"],
    );
    let out = g.node(id).outputs[0].expect("an output");
    let info = g.outputs[0].info.clone();
    g.outputs.push(infopt_ir::GraphIo {
        value: out,
        info: infopt_ir::proto::ValueInfoProto {
            name: Some("roots".into()),
            ..info
        },
    });
    let o = search(&model, true);
    assert!(report(&o).reached, "{:?}", o.report);
    let mut names: Vec<(&str, KeptFor)> = kept(&o);
    names.sort_by_key(|(n, _)| *n);
    assert_eq!(
        names,
        vec![("mul_4", KeptFor::Range), ("root", KeptFor::Range)]
    );
    let root = report(&o)
        .kept_fp32
        .iter()
        .find(|k| k.node == "root")
        .unwrap();
    assert!(
        root.reason.contains("float32 input 'mul_4_out'"),
        "{}",
        root.reason
    );
}

#[test]
fn a_cancellation_is_repaired_by_keeping_the_sum_and_the_difference() {
    let o = search(&cancellation_model(), true);
    assert!(report(&o).reached, "{:?}", report(&o));
    let names: Vec<&str> = kept(&o).iter().map(|(n, _)| *n).collect();
    // The difference alone does not help (it reads the rounded sum); the
    // search then keeps it with the nodes feeding it.
    assert!(
        names.contains(&"sub_5") && names.contains(&"add_4"),
        "{names:?}"
    );
    assert!(kept(&o).iter().all(|(_, why)| *why == KeptFor::Error));
    assert!(report(&o).cosine_converted < 0.999, "{:?}", report(&o));
    for k in &report(&o).kept_fp32 {
        assert!(k.cosine_after.unwrap() > k.cosine_before.unwrap(), "{k:?}");
        assert!(
            k.reason.contains("raises the lowest output cosine"),
            "{}",
            k.reason
        );
    }
    // The MatMuls stay in float16.
    let half = half_nodes(&o.model);
    assert!(
        half.contains("matmul_1") && half.contains("matmul_2"),
        "{half:?}"
    );
}

#[test]
fn a_node_the_user_forces_to_float16_is_never_kept_and_the_target_is_missed() {
    let model = overflow_model();
    let v = verifier(&model);
    let options = DriverOptions::default();
    let cx = Context {
        verifier: &v,
        options: &options,
        inputs: "seeded".into(),
        generated_inputs: true,
        search: true,
    };
    let mut cfg = steps();
    cfg.precision
        .as_mut()
        .expect("the half default set a map")
        .add_arg("mul_4=fp16")
        .expect("a valid override");
    let mut fp32 = model.clone();
    let o = convert_to_target(&mut fp32, &cfg, &cx).expect("the search runs");
    assert!(!report(&o).reached);
    assert!(report(&o).kept_fp32.iter().all(|k| k.node != "mul_4"));
    assert_eq!(
        report(&o).worst_remaining.first().map(|w| w.node.as_str()),
        Some("mul_4"),
        "{:?}",
        o.report
    );
    let e = missed_target(report(&o), &[]);
    assert_eq!(e.kind, ErrorKind::Verify);
    assert!(e.message.contains("mul_4 (Mul)"), "{}", e.message);
    assert!(e.message.contains("--inputs"), "{}", e.message);
}

#[test]
fn split_cuts_at_the_first_half_step_and_unnamed_nodes_get_names() {
    let mut cfg = PipelineConfig::from_yaml(
        "version: 1\npasses:\n  - eliminate-identity\n  - convert-float16\n  - eliminate-dead\n",
        "test",
    )
    .unwrap();
    cfg.precision = None;
    let (before, from) = split(&cfg).expect("a half step");
    assert_eq!(before.pass_names(), vec!["eliminate-identity"]);
    assert_eq!(from.pass_names(), vec!["convert-float16", "eliminate-dead"]);
    let plain =
        PipelineConfig::from_yaml("version: 1\npasses:\n  - eliminate-identity\n", "t").unwrap();
    assert!(split(&plain).is_none());

    let mut m = overflow_model();
    let ids: Vec<_> = m.graph.nodes().map(|(id, _)| id).collect();
    m.graph.node_mut(ids[0]).name = None;
    m.graph.node_mut(ids[1]).name = Some(String::new());
    name_unnamed(&mut m);
    let names: Vec<String> = m
        .graph
        .nodes()
        .filter_map(|(_, n)| n.name.clone())
        .collect();
    assert_eq!(names.len(), ids.len());
    assert!(
        names[0].starts_with("MatMul:") && names[1].starts_with("Relu:"),
        "{names:?}"
    );
}

#[test]
fn an_if_whose_branch_adds_the_error_is_kept_float32_whole() {
    let model = cancellation_in_if_model();
    // Converted, the then branch computes in float16 and loses h.
    let plain = search(&model, false);
    assert!(!report(&plain).reached, "{:?}", report(&plain));
    let branch = |o: &Outcome| {
        let g = &o.model.graph;
        let id = g.find_node("If").expect("the If keeps its name");
        half_nodes_of(&g.node(id).attr("then_branch").expect("a branch").subgraphs[0])
    };
    assert!(branch(&plain) > 0);
    // The search charges the If with the error of its output and keeps it
    // in float32, with its branches.
    let o = search(&model, true);
    let r = report(&o);
    assert!(r.reached, "{r:?}");
    assert_eq!(kept(&o), vec![("If", KeptFor::Error)]);
    assert_eq!(branch(&o), 0);
    assert!(r.cosine_final >= 0.999, "{r:?}");
}

/// Nodes of `g` whose first output is of a half type.
fn half_nodes_of(g: &infopt_ir::Graph) -> usize {
    g.nodes()
        .filter(|(_, n)| {
            n.outputs.first().copied().flatten().is_some_and(|v| {
                g.value_type(v)
                    .is_some_and(|t| matches!(t.dtype, DataType::Float16 | DataType::Bfloat16))
            })
        })
        .count()
}

#[test]
fn a_failing_output_names_the_bound_it_missed() {
    let reference: Vec<f64> = (0..100).map(|i| f64::from(i) / 10.0).collect();
    let mut close = reference.clone();
    close[7] += 0.05;
    let tight = Tolerance {
        atol: 1e-4,
        rtol: 1e-3,
    };
    let elementwise = infopt_runtime::compare::compare_values("logits", &close, &reference, tight);
    assert!(!elementwise.within_tolerance && elementwise.cosine >= 0.999);
    assert_eq!(
        failing_output(&elementwise, Some(0.999)),
        "logits (cosine 1.000000 meets it, but 1 of 100 elements are beyond atol 1.0e-4 + rtol 1.0e-3 x |reference|, max abs 5.000e-2)"
    );
    let mut far = reference.clone();
    far.reverse();
    let cosine = infopt_runtime::compare::compare_values("logits", &far, &reference, tight);
    assert!(cosine.cosine < 0.999);
    assert_eq!(
        failing_output(&cosine, Some(0.999)),
        format!(
            "logits (cosine {:.6}, max abs {:.3e})",
            cosine.cosine, cosine.max_abs
        )
    );
}
