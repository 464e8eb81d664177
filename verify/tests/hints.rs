//! What the graph says about its inputs: sizes its unbound dims accept
//! (stride chains, Resize scales, kernels, fixed partners) and values for
//! mode-switch inputs (a sample rate compared with a constant).

use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{Attribute, DataType, Graph, Model, Value};
use infopt_runtime::InputShapes;
use infopt_verify::shapes::{self, unbound_dims};
use infopt_verify::size_hints::{SizeHint, hints};
use infopt_verify::value_hints::{branch_inputs, chosen_values};

fn conv(
    b: &mut GraphBuilder,
    x: infopt_ir::ValueId,
    cin: i64,
    cout: i64,
    k: i64,
    s: i64,
) -> infopt_ir::ValueId {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let n = (cout * cin * k * k) as usize;
    let w = b.f32(&format!("w{id}"), &[cout, cin, k, k], &vec![0.01; n]);
    b.op(
        "Conv",
        &[x, w],
        vec![
            Attribute::ints("kernel_shape", vec![k, k]),
            Attribute::ints("strides", vec![s, s]),
            Attribute::ints("pads", vec![k / 2; 4]),
        ],
    )
}

fn hint_of(m: &Model, key: &str) -> SizeHint {
    let unbound = unbound_dims(m, &InputShapes::new());
    hints(m, &unbound).remove(key).expect(key)
}

/// A YOLO-style neck: five stride-2 convs, the last map upsampled x2 and
/// concatenated with the stride-16 one: H and W must be multiples of 32.
fn neck() -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("images", DataType::Float, dims(&["1", "3", "H", "W"]));
    let mut t = x;
    let mut maps = Vec::new();
    for i in 0..5 {
        t = conv(&mut b, t, if i == 0 { 3 } else { 4 }, 4, 3, 2);
        maps.push(t);
    }
    let roi = b.f32("roi", &[0], &[]);
    let scales = b.f32("scales", &[4], &[1.0, 1.0, 2.0, 2.0]);
    let up = b.op(
        "Resize",
        &[t, roi, scales],
        vec![Attribute::string("mode", "nearest")],
    );
    let c = b.op("Concat", &[maps[3], up], vec![Attribute::int("axis", 1)]);
    b.output(c, "features", DataType::Float, None);
    b.build(13)
}

#[test]
fn stride_chain_gives_the_divisor() {
    let m = neck();
    for key in ["H", "W"] {
        let h = hint_of(&m, key);
        assert_eq!(h.divisor, 32, "{key}: {h:?}");
        assert_eq!(h.exact, None);
    }
    // Every candidate after the distinct one runs at multiples of 32, and
    // the distinct one gives H and W different sizes.
    let c = shapes::candidates(&m, &InputShapes::new());
    let h = c[0].shapes.symbols["H"];
    let w = c[0].shapes.symbols["W"];
    assert!(
        h.is_multiple_of(32) && w.is_multiple_of(32) && h != w,
        "{:?}",
        c[0]
    );
    assert!(c[0].label.contains("H a multiple of 32"), "{}", c[0].label);
    // (The last ones, every unbound dim 2, 4 then 8, set no symbol.)
    let choices: Vec<_> = c[1..]
        .iter()
        .filter(|cand| !cand.label.starts_with("every unbound dim"))
        .collect();
    assert!(!choices.is_empty());
    for cand in choices {
        assert_eq!(cand.shapes.symbols["H"] % 32, 0, "{}", cand.label);
    }
    assert!(c.last().unwrap().label.starts_with("every unbound dim 8"));
}

#[test]
fn constant_node_operands_do_not_stop_the_walk() {
    // Scalars from Constant nodes without a declared type (as Paddle writes
    // them) multiplied into the map between two strided convs.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["?", "3", "?", "?"]));
    let c1 = conv(&mut b, x, 3, 4, 3, 2);
    let k = b.op(
        "Constant",
        &[],
        vec![Attribute::tensor(
            "value",
            &infopt_ir::Tensor::from_f32(vec![], &[0.5]),
        )],
    );
    let m = b.op("Mul", &[c1, k], vec![]);
    let c2 = conv(&mut b, m, 4, 4, 3, 2);
    b.output(c2, "y", DataType::Float, None);
    let m = b.build(13);
    assert_eq!(hint_of(&m, "x#2").divisor, 4);
    assert_eq!(hint_of(&m, "x#3").divisor, 4);
}

#[test]
fn resize_scale_below_one_needs_a_multiple_of_its_denominator() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "1", "?", "?"]));
    let roi = b.f32("roi", &[0], &[]);
    let quarter = b.f32("quarter", &[4], &[1.0, 1.0, 0.25, 1.0]);
    let down = b.op("Resize", &[x, roi, quarter], vec![]);
    let four = b.f32("four", &[4], &[1.0, 1.0, 4.0, 1.0]);
    let up = b.op("Resize", &[down, roi, four], vec![]);
    let y = b.op("Add", &[x, up], vec![]);
    b.output(y, "y", DataType::Float, None);
    let m = b.build(13);
    assert_eq!(hint_of(&m, "x#2").divisor, 4);
    // W is not rescaled: nothing divides it.
    assert_eq!(hint_of(&m, "x#3").divisor, 1);
}

#[test]
fn kernels_after_strides_give_a_minimum() {
    // A stride-32 stem then a 7x7 average pool without padding: the input
    // must be at least 224.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["N", "3", "H", "W"]));
    let stem = conv(&mut b, x, 3, 8, 32, 32);
    let p = b.op(
        "AveragePool",
        &[stem],
        vec![Attribute::ints("kernel_shape", vec![7, 7])],
    );
    b.output(p, "y", DataType::Float, None);
    let m = b.build(13);
    let h = hint_of(&m, "H");
    assert_eq!((h.divisor, h.min), (32, 224), "{h:?}");
    assert_eq!(h.fit(64), 224);
    assert_eq!(h.fit(512), 512);
    // The batch is not spatial: no hint.
    assert!(!hint_of(&m, "N").is_informative());
}

#[test]
fn a_fixed_partner_gives_the_exact_size() {
    // An image [1,3,?,?] concatenated with a mask input [1,1,96,80].
    let mut b = GraphBuilder::new();
    let x = b.input("image", DataType::Float, dims(&["1", "3", "?", "?"]));
    let mask = b.input("mask", DataType::Float, dims(&["1", "1", "96", "80"]));
    let c = b.op("Concat", &[x, mask], vec![Attribute::int("axis", 1)]);
    b.output(c, "y", DataType::Float, None);
    let m = b.build(13);
    assert_eq!(hint_of(&m, "image#2").exact.map(|e| e.0), Some(96));
    assert_eq!(hint_of(&m, "image#3").exact.map(|e| e.0), Some(80));
    let c = shapes::candidates(&m, &InputShapes::new());
    assert_eq!(
        c[0].shapes.shapes["image"],
        vec![1, 3, 96, 80],
        "{:?}",
        c[0]
    );

    // Through a stride: a positional table [1,8,7,7] added after a stride-32
    // stem fixes H = W = 224; a broadcast partner of size 1 says nothing.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "H", "W"]));
    let stem = conv(&mut b, x, 3, 8, 32, 32);
    let pos = b.f32("pos", &[1, 8, 7, 1], &[0.5; 56]);
    let y = b.op("Add", &[stem, pos], vec![]);
    b.output(y, "y", DataType::Float, None);
    let m = b.build(13);
    let h = hint_of(&m, "H");
    assert_eq!(h.exact.as_ref().map(|e| e.0), Some(224), "{h:?}");
    assert!(h.exact.unwrap().1.contains("Add"));
    assert_eq!(hint_of(&m, "W").exact, None);
    assert_eq!(hint_of(&m, "W").divisor, 32);
}

#[test]
fn ops_without_a_rule_stop_the_walk() {
    // A Pad (offsets are not tracked) before the strided conv: no hint is
    // made up from what follows it.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "H", "W"]));
    let pads = b.i64("pads", &[8], &[0, 0, 1, 1, 0, 0, 1, 1]);
    let p = b.op("Pad", &[x, pads], vec![]);
    let y = conv(&mut b, p, 3, 4, 3, 2);
    b.output(y, "y", DataType::Float, None);
    let m = b.build(13);
    assert!(!hint_of(&m, "H").is_informative());
}

#[test]
fn suggestion_names_unnamed_dims_apart_and_says_what_the_graph_wants() {
    let m = neck();
    let s = shapes::suggestion(&m, &InputShapes::new()).unwrap();
    assert!(s.starts_with("--input-shape images:1x3xHxW"), "{s}");
    assert!(s.contains("H a multiple of 32"), "{s}");
    // Two inputs with unnamed dims: D0, D1 for the first, D2 for the second.
    let mut b = GraphBuilder::new();
    let x = b.input("input", DataType::Float, dims(&["?", "?"]));
    let st = b.input("state", DataType::Float, dims(&["2", "?", "128"]));
    let y = b.op("Identity", &[x], vec![]);
    let z = b.op("Identity", &[st], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.output(z, "z", DataType::Float, None);
    let m = b.build(13);
    let s = shapes::suggestion(&m, &InputShapes::new()).unwrap();
    // The capitals are placeholders, and a form with numbers follows (a
    // user typed the placeholders as they stood).
    assert_eq!(
        s,
        "--input-shape input:D0xD1 --input-shape state:2xD2x128, a number for each capitalized name (e.g. --input-shape input:1x256 --input-shape state:2x256x128)"
    );
}

/// `If(Equal(sr, 16000))` as silero-vad has it, each branch an Identity of
/// the outer `x`.
fn mode_switch(compare: &str, constant_node: bool) -> Model {
    let branch = |name: &str| {
        let mut g = GraphBuilder::new();
        let x = g.graph_mut().add_value(Value {
            outer: true,
            ..Value::named("x")
        });
        let y = g.op("Identity", &[x], vec![]);
        g.output(y, &format!("{name}_y"), DataType::Float, None);
        g.into_graph()
    };
    let mut b = GraphBuilder::new();
    let _x = b.input("x", DataType::Float, dims(&["1", "4"]));
    let sr = b.input("sr", DataType::Int64, vec![]);
    let k = if constant_node {
        b.op(
            "Constant",
            &[],
            vec![Attribute::tensor(
                "value",
                &infopt_ir::Tensor::from_i64(vec![], &[16000]),
            )],
        )
    } else {
        b.i64("k", &[], &[16000])
    };
    let cast = b.op("Cast", &[sr], vec![Attribute::int("to", 7)]);
    let cond = b.op(compare, &[k, cast], vec![]);
    let then_g: Graph = branch("then");
    let else_g: Graph = branch("else");
    let y = b.op(
        "If",
        &[cond],
        vec![
            Attribute::graph("then_branch", then_g),
            Attribute::graph("else_branch", else_g),
        ],
    );
    b.output(y, "y", DataType::Float, None);
    b.build(13)
}

#[test]
fn a_scalar_compared_with_a_constant_gets_that_constant() {
    for constant_node in [false, true] {
        let m = mode_switch("Equal", constant_node);
        let v = chosen_values(&m);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].input.as_str(), v[0].value), ("sr", 16000.0));
        assert!(v[0].why.contains("Equal"), "{}", v[0].why);
        let deciders = branch_inputs(&m);
        assert_eq!(deciders.len(), 1);
        assert_eq!(deciders[0].0, "sr");
    }
    // Compared by Greater, not Equal: no value is made up for `sr`... except
    // that its name says sample rate and 16000 is in the graph.
    let m = mode_switch("Greater", false);
    let v = chosen_values(&m);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].why.contains("sample rate"), "{}", v[0].why);
    assert_eq!(branch_inputs(&m)[0].0, "sr");
}

#[test]
fn data_inputs_get_no_chosen_value() {
    // `x` [1,4] is not a scalar; `n` is a scalar compared by Less only.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "4"]));
    let n = b.input("n", DataType::Int64, vec![]);
    let k = b.i64("k", &[], &[3]);
    let c = b.op("Less", &[n, k], vec![]);
    let cf = b.op("Cast", &[c], vec![Attribute::int("to", 1)]);
    let y = b.op("Mul", &[x, cf], vec![]);
    b.output(y, "y", DataType::Float, None);
    let m = b.build(13);
    assert!(chosen_values(&m).is_empty());
    assert!(branch_inputs(&m).is_empty());
}

#[test]
fn outputs_of_bounded_ops_are_judged_against_their_range() {
    // prob = Reshape(Sigmoid(x)), tanh = Tanh(x), feat = Relu(x): the first
    // two live in a fixed range (scale at least 1), the last does not.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "4"]));
    let s = b.op("Sigmoid", &[x], vec![]);
    let shape = b.i64("shape", &[1], &[4]);
    let prob = b.op("Reshape", &[s, shape], vec![]);
    let t = b.op("Tanh", &[x], vec![]);
    let r = b.op("Relu", &[x], vec![]);
    b.output(prob, "prob", DataType::Float, None);
    b.output(t, "tanh", DataType::Float, None);
    b.output(r, "feat", DataType::Float, None);
    let m = b.build(13);
    assert_eq!(
        infopt_verify::verifier::range_scales(&m),
        vec![("prob".to_string(), 1.0), ("tanh".to_string(), 1.0)]
    );
}

/// onnx-asr's wespeaker front end: `frames = (samples - 400) % 160`, the
/// samples read by `Shape(waveforms, start=1, end=2)` (or a Gather of the
/// whole shape) and squeezed to a scalar.
fn frame_count(gather: bool) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("waveforms", DataType::Float, dims(&["batch", "N"]));
    let samples = if gather {
        let shape = b.op("Shape", &[x], vec![]);
        let one = b.i64("one", &[], &[1]);
        b.op("Gather", &[shape, one], vec![Attribute::int("axis", 0)])
    } else {
        let shape = b.op(
            "Shape",
            &[x],
            vec![Attribute::int("start", 1), Attribute::int("end", 2)],
        );
        b.op("Squeeze", &[shape], vec![])
    };
    let window = b.i64("window", &[], &[400]);
    let rest = b.op("Sub", &[samples, window], vec![]);
    let hop = b.i64("hop", &[], &[160]);
    let frames = b.op("Div", &[rest, hop], vec![]);
    b.output(frames, "frames", DataType::Int64, None);
    b.build(17)
}

#[test]
fn a_size_less_a_window_gives_the_window_as_the_minimum() {
    for gather in [false, true] {
        let m = frame_count(gather);
        assert_eq!(hint_of(&m, "N").min, 400, "gather: {gather}");
        assert_eq!(hint_of(&m, "batch").min, 1, "gather: {gather}");
        // The first sizes tried give the samples a whole window.
        let first = &shapes::candidates(&m, &InputShapes::new())[0];
        assert_eq!(first.shapes.symbols.get("N"), Some(&400), "{}", first.label);
    }
}
