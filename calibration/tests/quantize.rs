//! quantize-int8: exact placement per target, per-channel axes, scales and
//! INT8 weights bit for bit, exclusions, opset upgrade, and closeness to the
//! FP32 model in tract with ranges measured on the test data.

use std::collections::BTreeMap;

use infopt_calibration::Amax;
use infopt_calibration::quantize::{self, qdq};
use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::proto::ValueInfoProto;
use infopt_ir::{Attribute, DataType, Graph, GraphIo, Model, Node, TensorType, ValueId};
use infopt_passes::{DriverOptions, Flow, PipelineConfig, PipelineRun, SideData, Target};
use infopt_runtime::inputs::{InputGen, generate_for_model};
use infopt_runtime::{Backend, HostTensor, InputShapes, TractBackend};

fn values(n: usize, seed: u32, scale: f32) -> Vec<f32> {
    // A small deterministic generator: no test depends on a RNG crate.
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            ((s % 2001) as f32 / 1000.0 - 1.0) * scale
        })
        .collect()
}

/// x[1,3,8,8] → conv1 → Relu → MaxPool → conv2 → Add(conv2, pool) → Relu →
/// GlobalAveragePool → Flatten → { Gemm(transB) → y1, MatMul → Softmax → y2 }.
fn net(opset: i64) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "8", "8"]));
    let w1 = b.f32("w1", &[4, 3, 3, 3], &values(108, 1, 0.4));
    let b1 = b.f32("b1", &[4], &values(4, 2, 0.1));
    let c1 = b.op(
        "Conv",
        &[x, w1, b1],
        vec![
            Attribute::ints("pads", vec![1, 1, 1, 1]),
            Attribute::ints("kernel_shape", vec![3, 3]),
        ],
    );
    let r1 = b.op("Relu", &[c1], vec![]);
    let p = b.op(
        "MaxPool",
        &[r1],
        vec![
            Attribute::ints("kernel_shape", vec![2, 2]),
            Attribute::ints("strides", vec![2, 2]),
        ],
    );
    let w2 = b.f32("w2", &[4, 4, 1, 1], &values(16, 3, 0.5));
    let b2 = b.f32("b2", &[4], &values(4, 4, 0.1));
    let c2 = b.op("Conv", &[p, w2, b2], vec![]);
    let a = b.op("Add", &[c2, p], vec![]);
    let r2 = b.op("Relu", &[a], vec![]);
    let g = b.op("GlobalAveragePool", &[r2], vec![]);
    let f = b.op("Flatten", &[g], vec![Attribute::int("axis", 1)]);
    let wg = b.f32("wg", &[5, 4], &values(20, 5, 0.6));
    let bg = b.f32("bg", &[5], &values(5, 6, 0.1));
    let y1 = b.op("Gemm", &[f, wg, bg], vec![Attribute::int("transB", 1)]);
    let wm = b.f32("wm", &[4, 6], &values(24, 7, 0.6));
    let m = b.op("MatMul", &[f, wm], vec![]);
    let y2 = b.op("Softmax", &[m], vec![Attribute::int("axis", -1)]);
    b.output(y1, "y1", DataType::Float, Some(dims(&["1", "5"])));
    b.output(y2, "y2", DataType::Float, Some(dims(&["1", "6"])));
    b.build(opset)
}

fn shapes() -> InputShapes {
    InputShapes::new().with_default_dim(1)
}

fn inputs_for(model: &Model, seed: u64) -> Vec<HostTensor> {
    let loaded = TractBackend
        .load(&model.to_bytes().unwrap(), None, &shapes())
        .expect("loads in tract");
    generate_for_model(loaded.as_ref(), &InputGen::with_seed(seed)).unwrap()
}

fn run(model: &Model, inputs: &[HostTensor]) -> Vec<Vec<f64>> {
    let loaded = TractBackend
        .load(&model.to_bytes().unwrap(), None, &shapes())
        .unwrap_or_else(|e| panic!("tract load: {e}"));
    loaded
        .run(inputs)
        .expect("runs")
        .iter()
        .map(|t| t.to_f64_vec())
        .collect()
}

/// max|x| of every float tensor over the seeds' inputs: every node output
/// is exposed as a graph output and the model run in tract (min/max calibration).
fn minmax_ranges(model: &Model, seeds: &[u64]) -> Amax {
    let mut probe = model.clone();
    let g = &mut probe.graph;
    let mut exposed: Vec<ValueId> = g.inputs.iter().map(|i| i.value).collect();
    for id in g.node_ids() {
        for v in g.node(id).outputs.clone().into_iter().flatten() {
            if !g.is_graph_output(v) {
                g.outputs.push(GraphIo {
                    value: v,
                    info: ValueInfoProto {
                        r#type: Some(
                            TensorType {
                                dtype: DataType::Float,
                                shape: None,
                            }
                            .to_proto(None),
                        ),
                        ..Default::default()
                    },
                });
            }
            exposed.push(v);
        }
    }
    let names: Vec<String> = probe
        .graph
        .outputs
        .iter()
        .map(|o| probe.graph.value(o.value).name.clone())
        .collect();
    let mut amax = BTreeMap::<String, f32>::new();
    for &seed in seeds {
        let inputs = inputs_for(model, seed);
        for (i, input) in inputs.iter().enumerate() {
            let name = probe.graph.value(probe.graph.inputs[i].value).name.clone();
            let m = input.to_f64_vec().iter().fold(0f64, |a, v| a.max(v.abs()));
            let e = amax.entry(name).or_default();
            *e = e.max(m as f32);
        }
        for (name, out) in names.iter().zip(run(&probe, &inputs)) {
            let m = out.iter().fold(0f64, |a, v| a.max(v.abs()));
            let e = amax.entry(name.clone()).or_default();
            *e = e.max(m as f32);
        }
    }
    Amax(amax)
}

fn quantize_with(
    model: &mut Model,
    target: Target,
    options: &str,
    amax: Option<Amax>,
) -> Result<PipelineRun, String> {
    quantize::register();
    let yaml =
        format!("version: 1\ntarget: {target}\npasses:\n  - quantize-int8: {{ {options} }}\n");
    let config = PipelineConfig::from_yaml(&yaml, "test").map_err(|e| e.to_string())?;
    let mut side = SideData::default();
    if let Some(a) = amax {
        side.insert(a);
    }
    let options = DriverOptions {
        validate: true,
        ..Default::default()
    };
    infopt_passes::run_pipeline_with(model, &config, &options, side, &mut |_, _| {
        Ok(Flow::Continue)
    })
    .map_err(|e| e.to_string())
}

fn ops(model: &Model, op: &str) -> usize {
    model.graph.nodes().filter(|(_, n)| n.op_type == op).count()
}

fn node<'a>(g: &'a Graph, name: &str) -> &'a Node {
    g.node(
        g.find_node(name)
            .unwrap_or_else(|| panic!("no node {name}")),
    )
}

/// Name of the value input `slot` of node `name` reads.
fn reads(g: &Graph, name: &str, slot: usize) -> String {
    let v = node(g, name).inputs[slot].expect("input present");
    g.value(v).name.clone()
}

fn init_f32(g: &Graph, name: &str) -> Vec<f32> {
    let v = g
        .find_value(name)
        .unwrap_or_else(|| panic!("no value {name}"));
    g.constant(v)
        .expect("initializer")
        .to_f64_vec()
        .unwrap()
        .iter()
        .map(|&x| x as f32)
        .collect()
}

fn init_i64(g: &Graph, name: &str) -> Vec<i64> {
    let v = g
        .find_value(name)
        .unwrap_or_else(|| panic!("no value {name}"));
    g.constant(v).expect("initializer").to_i64_vec().unwrap()
}

fn dq_axis(g: &Graph, name: &str) -> Option<i64> {
    node(g, name).attr_int("axis").unwrap()
}

fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    dot / (na * nb)
}

fn assert_close_to_fp32(before: &Model, after: &Model) {
    for seed in [11u64, 12, 13] {
        let inputs = inputs_for(before, seed);
        let want = run(before, &inputs);
        let got = run(after, &inputs);
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            let c = cosine(w, g);
            assert!(c >= 0.99, "output {i} seed {seed}: cosine {c}");
        }
    }
}

#[test]
fn tensorrt_placement_is_exact() {
    let fp32 = net(13);
    let amax = minmax_ranges(&fp32, &[1, 2, 3]);
    let mut m = fp32.clone();
    let run = quantize_with(&mut m, Target::Tensorrt, "", Some(amax.clone())).expect("quantizes");
    let g = &m.graph;
    // Activations: x (conv1), relu_2_out (MaxPool), maxpool_3_out (conv2 and
    // the Add's residual input: one shared pair), relu_7_out (pool), the
    // Flatten output (Gemm and MatMul: one pair). Weights: INT8 + DQ.
    assert_eq!(ops(&m, "QuantizeLinear"), 5, "{:?}", run.notes);
    assert_eq!(ops(&m, "DequantizeLinear"), 9);
    assert_eq!(reads(g, "conv_1", 0), "x_dq");
    assert_eq!(reads(g, "maxpool_3", 0), "relu_2_out_dq");
    assert_eq!(reads(g, "conv_4", 0), "maxpool_3_out_dq");
    // The Add reads the conv output in float (TensorRT fuses it into conv_4)
    // and the residual branch quantized.
    assert_eq!(reads(g, "add_5", 0), "conv_4_out");
    assert_eq!(reads(g, "add_5", 1), "maxpool_3_out_dq");
    assert_eq!(reads(g, "globalaveragepool_7", 0), "relu_6_out_dq");
    assert_eq!(reads(g, "gemm_9", 0), "flatten_8_out_dq");
    assert_eq!(reads(g, "matmul_10", 0), "flatten_8_out_dq");
    // Outputs and Softmax stay float; biases stay float.
    assert_eq!(reads(g, "softmax_11", 0), "matmul_10_out");
    assert_eq!(reads(g, "conv_1", 2), "b1");
    // Per-channel axes: Conv 0, Gemm with transB 0, MatMul [K, N] 1.
    assert_eq!(reads(g, "conv_1", 1), "w1_dq");
    assert_eq!(dq_axis(g, "w1_DequantizeLinear"), Some(0));
    assert_eq!(dq_axis(g, "wg_DequantizeLinear"), Some(0));
    assert_eq!(dq_axis(g, "wm_DequantizeLinear"), Some(1));
    assert_eq!(init_f32(g, "wm_scale").len(), 6);
    assert_eq!(init_f32(g, "wg_scale").len(), 5);
    // Activation scale = amax / 127 bit for bit, zero point 0 (INT8).
    let x_amax = amax.get("x").unwrap();
    assert_eq!(
        init_f32(g, "x_scale")[0].to_bits(),
        (x_amax / 127.0).to_bits()
    );
    assert_eq!(init_i64(g, "x_zero_point"), vec![0]);
    let zp = g.constant(g.find_value("x_zero_point").unwrap()).unwrap();
    assert_eq!(zp.dtype(), DataType::Int8);
    // Float weights are gone (INT8 storage).
    assert!(g.find_value("w1").is_none());
    assert_close_to_fp32(&fp32, &m);
}

#[test]
fn int8_weights_are_what_quantize_linear_computes() {
    let fp32 = net(13);
    let amax = minmax_ranges(&fp32, &[1]);
    let mut m = fp32.clone();
    quantize_with(&mut m, Target::Portable, "", Some(amax)).unwrap();
    let g = &m.graph;
    let w1 = init_f32(&fp32.graph, "w1");
    let scales = init_f32(g, "w1_scale");
    let q = init_i64(g, "w1_quantized");
    assert_eq!(
        g.constant(g.find_value("w1_quantized").unwrap())
            .unwrap()
            .dtype(),
        DataType::Int8
    );
    for c in 0..4 {
        let ch = &w1[c * 27..(c + 1) * 27];
        let a = ch.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert_eq!(scales[c].to_bits(), (a / 127.0).to_bits(), "channel {c}");
        for (i, &w) in ch.iter().enumerate() {
            let expect = (w / scales[c]).round_ties_even().clamp(-127.0, 127.0) as i64;
            assert_eq!(q[c * 27 + i], expect, "w1[{c}][{i}]");
        }
    }
    // The same weights through QuantizeLinear give the same model output.
    let mut qdq_model = fp32.clone();
    quantize_with(
        &mut qdq_model,
        Target::Portable,
        "weights: qdq",
        Some(minmax_ranges(&fp32, &[1])),
    )
    .unwrap();
    assert_eq!(ops(&qdq_model, "QuantizeLinear"), 5 + 4);
    assert_eq!(ops(&qdq_model, "DequantizeLinear"), 5 + 4);
    assert_eq!(dq_axis(&qdq_model.graph, "w1_QuantizeLinear"), Some(0));
    let inputs = inputs_for(&fp32, 5);
    let a = run(&m, &inputs);
    let b = run(&qdq_model, &inputs);
    for (x, y) in a.iter().zip(&b) {
        for (u, v) in x.iter().zip(y) {
            assert!((u - v).abs() <= 1e-5 * (1.0 + v.abs()), "{u} vs {v}");
        }
    }
}

#[test]
fn rounding_is_half_to_even_and_saturates() {
    assert_eq!(qdq::quantize_value(2.5, 1.0, 0, -127, 127), 2);
    assert_eq!(qdq::quantize_value(3.5, 1.0, 0, -127, 127), 4);
    assert_eq!(qdq::quantize_value(-2.5, 1.0, 0, -127, 127), -2);
    assert_eq!(qdq::quantize_value(-300.0, 1.0, 0, -127, 127), -127);
    assert_eq!(qdq::quantize_value(300.0, 1.0, 0, -127, 127), 127);
    // Channel of [127, 2.5, -3.5, -0.5]: scale 1 exactly.
    let w = qdq::quantize_weight(&[127.0, 2.5, -3.5, -0.5, 0.0, 0.0, 0.0, 0.0], &[2, 4], 0);
    assert_eq!(w.scales, vec![1.0, 1.0], "all-zero channel gets scale 1");
    assert_eq!(w.values, vec![127, 2, -4, 0, 0, 0, 0, 0]);
    // Axis 1 of a [2, 3] matrix: columns.
    let w = qdq::quantize_weight(&[1.0, 2.0, 4.0, -1.0, 1.0, 0.0], &[2, 3], 1);
    assert_eq!(w.scales, vec![1.0 / 127.0, 2.0 / 127.0, 4.0 / 127.0]);
    assert_eq!(w.values, vec![127, 127, 127, -127, 64, 0]);
}

/// The weights quantized in runs of a channel give what
/// `QuantizeLinear` gives value by value: ties, both signs, values far out
/// of range, NaN and infinities included.
#[test]
fn weight_rounding_matches_quantize_linear_value_by_value() {
    let mut w: Vec<f32> = (-600..=600).map(|k| k as f32 * 0.25).collect();
    w.extend([
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e30,
        -1e30,
        1e-30,
    ]);
    let mut state = 0x2545_f491_u32;
    for _ in 0..4000 {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        w.push((state as f32 / u32::MAX as f32 - 0.5) * 300.0);
    }
    // Three channels along axis 0; the first holds the extremes.
    let n = w.len() - w.len() % 3;
    let w = &w[..n];
    let dims = [3, (n / 3) as i64];
    let q = qdq::quantize_weight(w, &dims, 0);
    for (i, (&v, &got)) in w.iter().zip(&q.values).enumerate() {
        let want = qdq::quantize_value(v, q.scales[i / (n / 3)], 0, -127, 127);
        assert_eq!(i32::from(got), want, "value {v} at {i}");
    }
    // Scale 1 exactly (largest 127): every half is a tie.
    let halves: Vec<f32> = (-254..=254).map(|k| k as f32 * 0.5).collect();
    let q = qdq::quantize_weight(&halves, &[1, halves.len() as i64], 0);
    assert_eq!(q.scales, vec![1.0]);
    for (&v, &got) in halves.iter().zip(&q.values) {
        assert_eq!(
            i32::from(got),
            qdq::quantize_value(v, 1.0, 0, -127, 127),
            "{v}"
        );
    }
}

#[test]
fn onnxruntime_placement_quantizes_layer_outputs_and_biases() {
    let fp32 = net(13);
    let amax = minmax_ranges(&fp32, &[1, 2, 3]);
    let mut m = fp32.clone();
    let run = quantize_with(&mut m, Target::Onnxruntime, "", Some(amax.clone())).unwrap();
    let g = &m.graph;
    // x, relu_2_out (after conv_1's Relu), maxpool_3_out (MaxPool, input's
    // parameters), conv_4_out (read by the Add), relu_6_out (Add → Relu),
    // the pool output, the Flatten output, matmul_10_out (read by Softmax).
    // The Gemm output is a graph output: QGemm with a float output.
    assert_eq!(ops(&m, "QuantizeLinear"), 8, "{:?}", run.notes);
    // + 4 weights + 3 INT32 biases (conv_1, conv_4, gemm_9).
    assert_eq!(ops(&m, "DequantizeLinear"), 8 + 4 + 3);
    assert_eq!(
        reads(g, "relu_2", 0),
        "conv_1_out",
        "Relu kept; ORT drops it in front of the Q"
    );
    assert_eq!(reads(g, "maxpool_3", 0), "relu_2_out_dq");
    assert_eq!(reads(g, "add_5", 0), "conv_4_out_dq");
    assert_eq!(reads(g, "add_5", 1), "maxpool_3_out_dq");
    assert_eq!(reads(g, "softmax_11", 0), "matmul_10_out_dq");
    assert_eq!(reads(g, "conv_1", 2), "b1_conv_1_dq");
    // Relu output: UINT8, zero point 0, scale amax/255.
    let r = amax.get("relu_2_out").unwrap();
    assert_eq!(
        init_f32(g, "relu_2_out_scale")[0].to_bits(),
        (r / 255.0).to_bits()
    );
    let zp = g
        .constant(g.find_value("relu_2_out_zero_point").unwrap())
        .unwrap();
    assert_eq!(zp.dtype(), DataType::Uint8);
    assert_eq!(init_i64(g, "relu_2_out_zero_point"), vec![0]);
    // MaxPool's output shares its input's parameters (ORT drops the pair).
    assert_eq!(
        init_f32(g, "maxpool_3_out_scale"),
        init_f32(g, "relu_2_out_scale")
    );
    // A signed tensor: UINT8 with zero point 128, scale amax/127.
    assert_eq!(init_i64(g, "conv_4_out_zero_point"), vec![128]);
    // INT32 bias = round(b / (s_x * s_w[c])).
    let b1 = init_f32(&fp32.graph, "b1");
    let s_x = init_f32(g, "x_scale")[0];
    let s_w = init_f32(g, "w1_scale");
    let bias_scale = init_f32(g, "b1_conv_1_scale");
    let bias_q = init_i64(g, "b1_conv_1_quantized");
    for c in 0..4 {
        assert_eq!(bias_scale[c].to_bits(), (s_x * s_w[c]).to_bits());
        assert_eq!(
            bias_q[c],
            (b1[c] as f64 / bias_scale[c] as f64).round_ties_even() as i64
        );
    }
    assert_close_to_fp32(&fp32, &m);
}

/// Conv with bias; `[cout, cin, k, group]`.
fn conv(b: &mut GraphBuilder, x: ValueId, name: &str, spec: [i64; 4], seed: u32) -> ValueId {
    let [cout, cin, k, group] = spec;
    let n = (cout * cin / group * k * k) as usize;
    let w = b.f32(
        &format!("{name}.w"),
        &[cout, cin / group, k, k],
        &values(n, seed, 1.0 / ((cin / group * k * k) as f32).sqrt()),
    );
    let bias = b.f32(
        &format!("{name}.b"),
        &[cout],
        &values(cout as usize, seed + 100, 0.1),
    );
    let p = k / 2;
    b.op(
        "Conv",
        &[x, w, bias],
        vec![
            Attribute::ints("pads", vec![p, p, p, p]),
            Attribute::ints("kernel_shape", vec![k, k]),
            Attribute::int("group", group),
        ],
    )
}

fn silu(b: &mut GraphBuilder, x: ValueId) -> ValueId {
    let s = b.op("Sigmoid", &[x], vec![]);
    b.op("Mul", &[x, s], vec![])
}

/// An EfficientNet MBConv block: 1x1 expand + SiLU, depthwise 3x3 + SiLU,
/// squeeze-excite (GlobalAveragePool, 1x1 + SiLU, 1x1 + Sigmoid, Mul),
/// 1x1 project, residual Add.
fn mbconv() -> Model {
    mbconv_with(silu, silu)
}

/// [`mbconv`] with `dw_act` after the depthwise convolution and `se_act`
/// after the squeeze-excite's first 1x1.
fn mbconv_with(
    dw_act: fn(&mut GraphBuilder, ValueId) -> ValueId,
    se_act: fn(&mut GraphBuilder, ValueId) -> ValueId,
) -> Model {
    let pool = |b: &mut GraphBuilder, d: ValueId| b.op("GlobalAveragePool", &[d], vec![]);
    mbconv_pooled(dw_act, se_act, &pool, 16, 13)
}

/// [`mbconv_with`] whose squeeze-excite pools with `pool` into
/// `pooled_channels` channels, at `opset`.
fn mbconv_pooled(
    dw_act: fn(&mut GraphBuilder, ValueId) -> ValueId,
    se_act: fn(&mut GraphBuilder, ValueId) -> ValueId,
    pool: &dyn Fn(&mut GraphBuilder, ValueId) -> ValueId,
    pooled_channels: i64,
    opset: i64,
) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "8", "6", "6"]));
    let e = conv(&mut b, x, "expand", [16, 8, 1, 1], 21);
    let e = silu(&mut b, e);
    let d = conv(&mut b, e, "dw", [16, 16, 3, 16], 22);
    let d = dw_act(&mut b, d);
    let g = pool(&mut b, d);
    let s1 = conv(&mut b, g, "se1", [4, pooled_channels, 1, 1], 23);
    let s1 = se_act(&mut b, s1);
    let s2 = conv(&mut b, s1, "se2", [16, 4, 1, 1], 24);
    let s2 = b.op("Sigmoid", &[s2], vec![]);
    let m = b.op("Mul", &[d, s2], vec![]);
    let p = conv(&mut b, m, "project", [8, 16, 1, 1], 25);
    let y = b.op("Add", &[p, x], vec![]);
    b.output(y, "y", DataType::Float, Some(dims(&["1", "8", "6", "6"])));
    b.build(opset)
}

#[test]
fn onnxruntime_placement_chains_silu_and_squeeze_excite() {
    let fp32 = mbconv();
    let amax = minmax_ranges(&fp32, &[1, 2, 3]);
    let mut m = fp32.clone();
    let run = quantize_with(&mut m, Target::Onnxruntime, "", Some(amax.clone())).unwrap();
    let g = &m.graph;
    // Every Conv, Sigmoid and Mul output, the pool output and x: 15 pairs;
    // the final Add's output is the graph output, so the Add stays float.
    assert_eq!(ops(&m, "QuantizeLinear"), 15, "{:?}", run.notes);
    assert_eq!(ops(&m, "DequantizeLinear"), 15 + 5 + 5);
    assert_eq!(reads(g, "sigmoid_2", 0), "conv_1_out_dq");
    assert_eq!(reads(g, "mul_3", 0), "conv_1_out_dq");
    assert_eq!(reads(g, "mul_3", 1), "sigmoid_2_out_dq");
    assert_eq!(
        reads(g, "conv_4", 0),
        "mul_3_out_dq",
        "depthwise conv quantized"
    );
    assert_eq!(reads(g, "globalaveragepool_7", 0), "mul_6_out_dq");
    assert_eq!(reads(g, "mul_13", 1), "sigmoid_12_out_dq");
    // The Add writes the graph output: it stays float and reads x unquantized.
    assert_eq!(reads(g, "add_15", 0), "conv_14_out_dq");
    assert_eq!(reads(g, "add_15", 1), "x");
    assert_close_to_fp32(&fp32, &m);

    let mut m = fp32.clone();
    let run = quantize_with(
        &mut m,
        Target::Onnxruntime,
        "float_depthwise: true",
        Some(amax.clone()),
    )
    .unwrap();
    assert_eq!(reads(&m.graph, "conv_4", 1), "dw.w");
    assert!(
        run.declined
            .iter()
            .any(|d| d.at.contains("conv_4") && d.reason.contains("float_depthwise"))
    );

    // TensorRT: only the layer inputs (SiLU and the SE stay float; TensorRT
    // fuses them into the convolutions).
    let mut m = fp32.clone();
    quantize_with(&mut m, Target::Tensorrt, "", Some(amax)).unwrap();
    assert_eq!(
        ops(&m, "QuantizeLinear"),
        6,
        "x, mul_3, pool, mul_10 (SE), mul_13, and the residual x (shared)"
    );
    assert_eq!(reads(&m.graph, "sigmoid_2", 0), "conv_1_out");
    assert_eq!(reads(&m.graph, "add_15", 1), "x_dq");
}

#[test]
fn onnxruntime_placement_with_float_elementwise_leaves_silu_and_squeeze_excite_float() {
    let fp32 = mbconv();
    let amax = minmax_ranges(&fp32, &[1, 2, 3]);
    let mut m = fp32.clone();
    quantize_with(
        &mut m,
        Target::Onnxruntime,
        "float_elementwise: true",
        Some(amax),
    )
    .unwrap();
    let g = &m.graph;
    // The convolution's output is still quantized (ONNX Runtime fuses a Conv
    // only with a Q on its output), but the Sigmoid and the Mul run in float:
    // their outputs get a pair only where a layer reads them.
    assert_eq!(reads(g, "sigmoid_2", 0), "conv_1_out_dq");
    assert_eq!(reads(g, "mul_3", 1), "sigmoid_2_out");
    assert_eq!(reads(g, "mul_13", 1), "sigmoid_12_out");
    // The layers still read quantized inputs (the depthwise one included).
    assert_eq!(reads(g, "conv_4", 0), "mul_3_out_dq");
    assert!(
        ops(&m, "QuantizeLinear") < 15,
        "{}",
        ops(&m, "QuantizeLinear")
    );
    assert_close_to_fp32(&fp32, &m);
}

/// [`mbconv`] with the depthwise convolution's activation an op ONNX
/// Runtime runs in float (its fused SiLU, QuickGelu, is one; Tanh stands
/// for it here), read by the squeeze-excite's pool and Mul only.
fn mbconv_float_activation() -> Model {
    mbconv_with(
        |b, x| b.op("Tanh", &[x], vec![]),
        |b, x| b.op("Relu", &[x], vec![]),
    )
}

/// `fp32` quantized for ONNX Runtime with the quantize step's `options`, on
/// min-max ranges of three inputs.
fn quantized_for_ort(fp32: &Model, options: &str) -> Model {
    let amax = minmax_ranges(fp32, &[1, 2, 3]);
    let mut m = fp32.clone();
    quantize_with(&mut m, Target::Onnxruntime, options, Some(amax)).unwrap();
    m
}

#[test]
fn onnxruntime_placement_quantizes_a_float_activation_that_only_integer_ops_read() {
    let fp32 = mbconv_float_activation();
    let m = quantized_for_ort(&fp32, "");
    let g = &m.graph;
    // The Tanh runs in float, but its output gets a pair: with it the pool
    // and the Mul read quantized inputs only and write tensors a layer
    // reads quantized, so ONNX Runtime runs them as
    // QLinearGlobalAveragePool and QLinearMul.
    assert_eq!(reads(g, "tanh_5", 0), "conv_4_out_dq");
    assert_eq!(reads(g, "globalaveragepool_6", 0), "tanh_5_out_dq");
    assert_eq!(reads(g, "mul_11", 0), "tanh_5_out_dq");
    assert_eq!(reads(g, "mul_11", 1), "sigmoid_10_out_dq");
    assert_eq!(reads(g, "conv_12", 0), "mul_11_out_dq");
    // x, expand, its Sigmoid and Mul, dw, the Tanh, the pool, se1 (after
    // its Relu), se2, its Sigmoid, the Mul, project: the residual Add
    // writes the graph output and stays float.
    assert_eq!(ops(&m, "QuantizeLinear"), 12);
    assert_close_to_fp32(&fp32, &m);

    // Where the Mul stays float (excluded), quantizing the Tanh's output
    // would turn only the pool integer: it stays float, and the pool and
    // the Mul read it as it is.
    let m = quantized_for_ort(&fp32, "exclude: [{name: mul_11}]");
    let g = &m.graph;
    assert_eq!(reads(g, "globalaveragepool_6", 0), "tanh_5_out");
    assert_eq!(reads(g, "mul_11", 0), "tanh_5_out");
    assert_close_to_fp32(&fp32, &m);
}

#[test]
fn onnxruntime_placement_never_quantizes_the_output_of_a_layer_kept_float() {
    // se2 kept float: its output feeds the squeeze-excite's Sigmoid, which
    // would run integer with a pair on it; but a float Conv between a DQ
    // and a Q is one ONNX Runtime quantizes itself, weights included.
    let fp32 = mbconv();
    let m = quantized_for_ort(&fp32, "exclude: [{name: conv_11}]");
    let g = &m.graph;
    assert_eq!(reads(g, "conv_11", 1), "se2.w");
    assert_eq!(reads(g, "sigmoid_12", 0), "conv_11_out");
    assert_close_to_fp32(&fp32, &m);
}

#[test]
fn exclusions_and_keep_first_last() {
    let fp32 = net(13);
    let amax = minmax_ranges(&fp32, &[1]);
    let mut m = fp32.clone();
    let run = quantize_with(
        &mut m,
        Target::Tensorrt,
        "exclude: [{name: conv_4}, {op: MatMul}]",
        Some(amax.clone()),
    )
    .unwrap();
    let g = &m.graph;
    assert_eq!(
        reads(g, "conv_4", 1),
        "w2",
        "excluded conv keeps its float weight"
    );
    assert_eq!(
        reads(g, "gemm_9", 0),
        "flatten_8_out_dq",
        "the Gemm still reads the shared input quantized"
    );
    assert_eq!(
        reads(g, "matmul_10", 0),
        "flatten_8_out",
        "the excluded MatMul reads it in float"
    );
    assert_eq!(reads(g, "matmul_10", 1), "wm");
    // Neither Add input comes from a quantized layer now: no residual Q/DQ.
    assert_eq!(reads(g, "add_5", 1), "maxpool_3_out");
    let reasons: Vec<String> = run
        .declined
        .iter()
        .map(|d| format!("{}: {}", d.at, d.reason))
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("conv_4") && r.contains("excluded by name 'conv_4'")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("matmul_10") && r.contains("excluded by op MatMul")),
        "{reasons:?}"
    );

    let mut m = fp32.clone();
    quantize_with(
        &mut m,
        Target::Tensorrt,
        "exclude: [{regex: '^(conv|gemm)_'}]",
        Some(amax.clone()),
    )
    .unwrap();
    assert_eq!(reads(&m.graph, "conv_1", 0), "x");
    assert_eq!(reads(&m.graph, "gemm_9", 1), "wg");
    assert_eq!(reads(&m.graph, "matmul_10", 1), "wm_dq");

    let mut m = fp32.clone();
    quantize_with(
        &mut m,
        Target::Tensorrt,
        "keep_first_last: true",
        Some(amax.clone()),
    )
    .unwrap();
    assert_eq!(reads(&m.graph, "conv_1", 0), "x", "first layer float");
    assert_eq!(reads(&m.graph, "matmul_10", 1), "wm", "last layer float");
    assert_eq!(reads(&m.graph, "conv_4", 1), "w2_dq");

    let mut m = fp32.clone();
    let e = quantize_with(
        &mut m,
        Target::Tensorrt,
        "exclude: [{name: a, op: Conv}]",
        Some(amax.clone()),
    )
    .unwrap_err();
    assert!(e.contains("exactly one of name, op, regex"), "{e}");
    let e = quantize_with(
        &mut m,
        Target::Tensorrt,
        "exclude: [{regex: '('}]",
        Some(amax),
    )
    .unwrap_err();
    assert!(e.contains("regex '('"), "{e}");
}

/// The pipeline's precision map keeps its float nodes out of INT8, matched
/// as convert-float16 matches them (the first override wins): their weights
/// stay float, an Add no quantized layer feeds gets no residual Q/DQ, the
/// report says the user kept them, and the model still agrees in tract.
#[test]
fn the_precision_map_keeps_its_float_nodes_out_of_int8() {
    quantize::register();
    let fp32 = net(13);
    let amax = minmax_ranges(&fp32, &[1]);
    for target in [Target::Tensorrt, Target::Onnxruntime] {
        let yaml = format!(
            "version: 1\ntarget: {target}\npasses: [quantize-int8]\nprecision:\n  overrides:\n    - {{ name: conv_1, to: int8 }}\n    - {{ op: Conv, to: fp32 }}\n    - {{ name: 'mat.*', to: fp16 }}\n"
        );
        let config = PipelineConfig::from_yaml(&yaml, "test").unwrap();
        let mut side = SideData::default();
        side.insert(amax.clone());
        let mut m = fp32.clone();
        let run = infopt_passes::run_pipeline_with(
            &mut m,
            &config,
            &DriverOptions {
                validate: true,
                ..Default::default()
            },
            side,
            &mut |_, _| Ok(Flow::Continue),
        )
        .unwrap();
        let g = &m.graph;
        // conv_1's own override (int8) comes first: it is quantized.
        assert_eq!(reads(g, "conv_1", 1), "w1_dq", "{target}");
        assert_eq!(
            reads(g, "conv_4", 1),
            "w2",
            "{target}: Conv=fp32 keeps conv_4"
        );
        assert_eq!(
            reads(g, "matmul_10", 1),
            "wm",
            "{target}: the regex keeps the MatMul"
        );
        assert_eq!(
            reads(g, "gemm_9", 1),
            "wg_dq",
            "{target}: nothing selects the Gemm"
        );
        let reasons: Vec<String> = run
            .declined
            .iter()
            .map(|d| format!("{}: {}", d.at, d.reason))
            .collect();
        assert!(
            reasons.iter().any(|r| r.contains("conv_4")
                && r.contains(
                    "kept float by the user's precision map: the override for op Conv says fp32"
                )),
            "{reasons:?}"
        );
        assert!(
            run.notes.iter().any(|n| n
                .contains("2 node(s) kept float by the user's precision map")
                && n.contains("conv_4 (fp32)")
                && n.contains("matmul_10 (fp16)")),
            "{:?}",
            run.notes
        );
        assert_close_to_fp32(&fp32, &m);
    }
    // TensorRT placement: with conv_4 float, the Add it feeds gets no
    // residual Q/DQ (no quantized layer feeds the Add).
    let yaml = "version: 1\ntarget: tensorrt\npasses: [quantize-int8]\nprecision: { overrides: [{ name: conv_4, to: fp32 }] }\n";
    let config = PipelineConfig::from_yaml(yaml, "test").unwrap();
    let mut side = SideData::default();
    side.insert(amax.clone());
    let mut m = fp32.clone();
    infopt_passes::run_pipeline_with(
        &mut m,
        &config,
        &DriverOptions::default(),
        side,
        &mut |_, _| Ok(Flow::Continue),
    )
    .unwrap();
    assert_eq!(reads(&m.graph, "conv_4", 0), "maxpool_3_out");
    assert_eq!(reads(&m.graph, "add_5", 1), "maxpool_3_out");
    let mut plain = fp32.clone();
    quantize_with(&mut plain, Target::Tensorrt, "", Some(amax)).unwrap();
    assert_eq!(
        reads(&plain.graph, "add_5", 1),
        "maxpool_3_out_dq",
        "the control"
    );
}

#[test]
fn missing_range_keeps_the_layer_float() {
    let fp32 = net(13);
    let mut amax = minmax_ranges(&fp32, &[1]);
    amax.0.remove("maxpool_3_out");
    let mut m = fp32.clone();
    let run = quantize_with(&mut m, Target::Tensorrt, "", Some(amax)).unwrap();
    assert_eq!(reads(&m.graph, "conv_4", 0), "maxpool_3_out");
    assert_eq!(reads(&m.graph, "conv_4", 1), "w2");
    assert!(run.declined.iter().any(
        |d| d.at.contains("conv_4") && d.reason.contains("no range for input 'maxpool_3_out'")
    ));
}

#[test]
fn ranges_from_a_file_and_errors() {
    let fp32 = net(13);
    let amax = minmax_ranges(&fp32, &[1]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ranges.json");
    let body: Vec<String> = amax
        .0
        .iter()
        .map(|(k, v)| format!("\"{k}\": {{\"amax\": {v}, \"min\": 0}}"))
        .collect();
    std::fs::write(&path, format!("{{\"tensors\": {{{}}}}}", body.join(", "))).unwrap();
    let mut from_file = fp32.clone();
    quantize_with(
        &mut from_file,
        Target::Tensorrt,
        &format!("ranges: '{}'", path.display()),
        None,
    )
    .unwrap();
    let mut from_side = fp32.clone();
    quantize_with(&mut from_side, Target::Tensorrt, "", Some(amax)).unwrap();
    assert_eq!(from_file.to_bytes().unwrap(), from_side.to_bytes().unwrap());

    let mut m = fp32.clone();
    let e = quantize_with(&mut m, Target::Tensorrt, "", None).unwrap_err();
    assert!(e.contains("needs ranges"), "{e}");
    std::fs::write(&path, "{\"tensors\": {\"x\": {\"min\": 1}}}").unwrap();
    let e = quantize_with(
        &mut m,
        Target::Tensorrt,
        &format!("ranges: '{}'", path.display()),
        None,
    )
    .unwrap_err();
    assert!(
        e.contains("ranges.json") && e.contains("'x' has no numeric \"amax\""),
        "{e}"
    );
    let e = quantize_with(
        &mut m,
        Target::Tensorrt,
        "activations: uint8",
        Some(Amax::default()),
    )
    .unwrap_err();
    assert!(e.contains("uint8 is for target onnxruntime"), "{e}");
}

#[test]
fn conv_followed_by_batchnorm_declines() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "2", "4", "4"]));
    let w = b.f32("w", &[2, 2, 1, 1], &[1.0, 0.5, -0.5, 1.0]);
    let c = b.op("Conv", &[x, w], vec![]);
    let s = b.f32("s", &[2], &[1.0, 1.0]);
    let z = b.f32("z", &[2], &[0.0, 0.0]);
    let v = b.f32("v", &[2], &[1.0, 1.0]);
    let y = b.op("BatchNormalization", &[c, s, z, z, v], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(13);
    let before = m.to_bytes().unwrap();
    let mut amax = Amax::default();
    amax.insert("x", 1.0);
    let run = quantize_with(&mut m, Target::Tensorrt, "", Some(amax)).unwrap();
    assert_eq!(m.to_bytes().unwrap(), before);
    assert!(run.declined.iter().any(|d| d.at.contains("conv_1")
        && d.reason.contains("BatchNormalization 'batchnormalization_2' reads its output: run fuse-conv-bn before quantize-int8")));
}

#[test]
fn second_run_declines_an_already_quantized_model() {
    let fp32 = net(13);
    let amax = minmax_ranges(&fp32, &[1]);
    let mut m = fp32.clone();
    quantize_with(&mut m, Target::Tensorrt, "", Some(amax.clone())).unwrap();
    let once = m.to_bytes().unwrap();
    let run = quantize_with(&mut m, Target::Tensorrt, "", Some(amax)).unwrap();
    assert_eq!(run.records[0].rewrites, 0);
    assert_eq!(m.to_bytes().unwrap(), once);
    assert!(
        run.declined
            .iter()
            .any(|d| d.reason.contains("already quantized"))
    );
}

#[test]
fn fold_constants_keeps_weight_qdq() {
    let fp32 = net(13);
    let amax = minmax_ranges(&fp32, &[1]);
    let mut m = fp32.clone();
    quantize_with(&mut m, Target::Tensorrt, "weights: qdq", Some(amax)).unwrap();
    let (q, dq) = (ops(&m, "QuantizeLinear"), ops(&m, "DequantizeLinear"));
    let config =
        PipelineConfig::from_pass_names(&["fold-constants".to_string()], Target::Tensorrt).unwrap();
    let run =
        infopt_passes::run_pipeline(&mut m, &config, &DriverOptions::default(), &mut |_, _| {
            Ok(Flow::Continue)
        })
        .unwrap();
    assert_eq!(
        (ops(&m, "QuantizeLinear"), ops(&m, "DequantizeLinear")),
        (q, dq)
    );
    assert_eq!(reads(&m.graph, "w1_QuantizeLinear", 0), "w1");
    assert!(
        run.declined
            .iter()
            .any(|d| d.reason.contains("weight 'w1' is kept"))
    );
}

/// An opset-11 model with attribute forms that moved to inputs at 13.
fn net_opset11(softmax_axis: i64) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "4", "4"]));
    let w = b.f32("w", &[2, 3, 1, 1], &values(6, 9, 0.5));
    let c = b.op("Conv", &[x, w], vec![]);
    let s = b.op("Squeeze", &[c], vec![Attribute::ints("axes", vec![0])]);
    let u = b.op("Unsqueeze", &[s], vec![Attribute::ints("axes", vec![0])]);
    let parts = b.op_n(
        "Split",
        &[u],
        vec![
            Attribute::int("axis", 1),
            Attribute::ints("split", vec![1, 1]),
        ],
        2,
    );
    let r = b.op(
        "ReduceSum",
        &[parts[0]],
        vec![
            Attribute::ints("axes", vec![2]),
            Attribute::int("keepdims", 0),
        ],
    );
    let sm = b.op("Softmax", &[r], vec![Attribute::int("axis", softmax_axis)]);
    b.output(sm, "y", DataType::Float, Some(dims(&["1", "1", "4"])));
    b.output(
        parts[1],
        "z",
        DataType::Float,
        Some(dims(&["1", "1", "4", "4"])),
    );
    let mut m = b.build(11);
    let config =
        PipelineConfig::from_pass_names(&["infer-shapes".to_string()], Target::Portable).unwrap();
    infopt_passes::run_pipeline(&mut m, &config, &DriverOptions::default(), &mut |_, _| {
        Ok(Flow::Continue)
    })
    .unwrap();
    m
}

#[test]
fn opset_11_is_raised_to_13_with_rewritten_nodes() {
    let fp32 = net_opset11(2);
    let amax = minmax_ranges(&fp32, &[1]);
    let mut m = fp32.clone();
    let run = quantize_with(&mut m, Target::Tensorrt, "", Some(amax)).unwrap();
    assert_eq!(m.opset(""), Some(13));
    assert!(
        run.notes.iter().any(|n| n.contains("opset raised to 13")),
        "{:?}",
        run.notes
    );
    let g = &m.graph;
    for (name, input) in [
        ("squeeze_2", "squeeze_2_axes"),
        ("unsqueeze_3", "unsqueeze_3_axes"),
        ("split_4", "split_4_split"),
        ("reducesum_5", "reducesum_5_axes"),
    ] {
        let n = node(g, name);
        assert!(
            n.attr("axes").is_none() && n.attr("split").is_none(),
            "{name}"
        );
        assert_eq!(reads(g, name, 1), input);
    }
    assert_eq!(init_i64(g, "split_4_split"), vec![1, 1]);
    assert_eq!(dq_axis(g, "w_DequantizeLinear"), Some(0));
    assert_close_to_fp32(&fp32, &m);
}

#[test]
fn opset_11_softmax_over_leading_axes_is_refused() {
    let fp32 = net_opset11(1);
    let amax = minmax_ranges(&fp32, &[1]);
    let mut m = fp32.clone();
    let e = quantize_with(&mut m, Target::Tensorrt, "", Some(amax)).unwrap_err();
    assert!(
        e.contains("Softmax 'softmax_6'") && e.contains("version_converter"),
        "{e}"
    );
    assert_eq!(m.opset(""), Some(11));
}

#[test]
fn registered_with_documentation_and_options() {
    quantize::register();
    let info = infopt_passes::registry::find("quantize-int8").expect("registered");
    assert!(
        info.missing_doc_sections().is_empty(),
        "{:?}",
        info.missing_doc_sections()
    );
    assert!(info.summary().starts_with("Quantizes a float model"));
    let yaml = "version: 1\npasses:\n  - quantize-int8: { ranges: r.json, weights: int8, exclude: [{name: conv1}, {op: Softmax}], keep_first_last: false }\n";
    PipelineConfig::from_yaml(yaml, "t").expect("the documented example parses");
    let e = PipelineConfig::from_yaml(
        "version: 1\npasses:\n  - quantize-int8: { weight: int8 }\n",
        "t",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("weight"), "{e}");
}

fn fixtures_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models/quantized")
}

/// Writes `model` to `name` under fixtures/models/quantized with
/// `INFOPT_BLESS=1`; otherwise asserts the committed file is byte-identical.
fn check_or_bless(name: &str, model: &mut Model) {
    let path = fixtures_dir().join(name);
    let bytes = model.to_bytes().unwrap();
    if std::env::var_os("INFOPT_BLESS").is_some() {
        std::fs::create_dir_all(fixtures_dir()).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        return;
    }
    let committed = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (regenerate with INFOPT_BLESS=1 cargo test -p infopt-calibration --test quantize)", path.display()));
    assert!(
        committed == bytes,
        "{name} differs from what quantize-int8 writes now (INFOPT_BLESS=1 to regenerate)"
    );
}

fn ranges_json(amax: &Amax) -> String {
    let body: Vec<String> = amax
        .0
        .iter()
        .map(|(k, v)| format!("    \"{k}\": {{ \"amax\": {v} }}"))
        .collect();
    format!("{{\n  \"tensors\": {{\n{}\n  }}\n}}\n", body.join(",\n"))
}

/// The ranges of a fixture, measured in tract and written with
/// `INFOPT_BLESS=1`, read from the committed `{name}.ranges.json` otherwise:
/// the fixture check is then exact arithmetic, independent of how this
/// machine's tract rounds.
fn committed_ranges(name: &str, model: &Model, seeds: &[u64]) -> (Amax, std::path::PathBuf) {
    let path = fixtures_dir().join(format!("{name}.ranges.json"));
    if std::env::var_os("INFOPT_BLESS").is_some() {
        std::fs::create_dir_all(fixtures_dir()).unwrap();
        std::fs::write(&path, ranges_json(&minmax_ranges(model, seeds))).unwrap();
    }
    let amax = quantize::read_ranges(&path).unwrap_or_else(|e| panic!("{e}"));
    (amax, path)
}

/// The quantized models tests/interop/test_quantize.py runs in ONNX Runtime:
/// cnn_bn_relu.onnx after fuse-conv-bn, for TensorRT and ONNX Runtime (ranges
/// measured once in tract and committed, so the check is exact arithmetic),
/// and an opset-12 model raised to 13.
#[test]
fn quantized_fixtures_are_current() {
    quantize::register();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/models/cnn_bn_relu.onnx");
    let fused = {
        let mut m = Model::load(&src).unwrap();
        let config =
            PipelineConfig::from_pass_names(&["fuse-conv-bn".to_string()], Target::Portable)
                .unwrap();
        infopt_passes::run_pipeline(&mut m, &config, &DriverOptions::default(), &mut |_, _| {
            Ok(Flow::Continue)
        })
        .unwrap();
        m
    };
    let ranges_path = committed_ranges("cnn_bn_relu", &fused, &[1, 2, 3, 4]).1;
    let yaml_ranges = format!("ranges: '{}'", ranges_path.display());
    for (target, name) in [
        (Target::Tensorrt, "cnn_int8_tensorrt.onnx"),
        (Target::Onnxruntime, "cnn_int8_onnxruntime.onnx"),
    ] {
        let mut m = fused.clone();
        let run = quantize_with(&mut m, target, &yaml_ranges, None).unwrap();
        assert!(run.records[0].rewrites > 0);
        // The Conv that feeds a BatchNormalization fuse-conv-bn could not fold stays float.
        assert!(
            run.declined
                .iter()
                .any(|d| d.reason.contains("run fuse-conv-bn")),
            "{:?}",
            run.declined
        );
        m.graph.meta.doc_string = Some(format!(
            "quantize-int8 (target {target}) of cnn_bn_relu.onnx after fuse-conv-bn; ranges cnn_bn_relu.ranges.json"
        ));
        check_or_bless(name, &mut m);
    }
    let mut fp32 = net_opset11(2);
    fp32.meta.opset_import[0].version = Some(12);
    let amax = committed_ranges("opset12", &fp32, &[1, 2]).0;
    let mut m = fp32.clone();
    quantize_with(&mut m, Target::Portable, "", Some(amax)).unwrap();
    assert_eq!(m.opset(""), Some(13));
    check_or_bless("opset12_fp32.onnx", &mut fp32);
    let mut mb = mbconv();
    let mut mb_int8 = mb.clone();
    quantize_with(
        &mut mb_int8,
        Target::Onnxruntime,
        "",
        Some(committed_ranges("mbconv", &mb, &[1, 2, 3]).0),
    )
    .unwrap();
    check_or_bless("mbconv_fp32.onnx", &mut mb);
    check_or_bless("mbconv_int8_onnxruntime.onnx", &mut mb_int8);
    check_or_bless("opset12_int8.onnx", &mut m);
}

/// ConvTranspose → {a, Relu(a)} → Concat → Conv → Reshape → MatMul of two
/// activations (r · rᵀ).
fn concat_net() -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "2", "4", "4"]));
    let wt = b.f32("wt", &[2, 3, 2, 2], &values(24, 31, 0.7));
    let a = b.op(
        "ConvTranspose",
        &[x, wt],
        vec![
            Attribute::ints("strides", vec![2, 2]),
            Attribute::ints("kernel_shape", vec![2, 2]),
        ],
    );
    let r = b.op("Relu", &[a], vec![]);
    let two = b.f32("two", &[], &[2.0]);
    let r = b.op("Mul", &[r, two], vec![]);
    let c = b.op("Concat", &[a, r], vec![Attribute::int("axis", 1)]);
    let w = b.f32("w", &[2, 6, 1, 1], &values(12, 32, 0.5));
    let d = b.op("Conv", &[c, w], vec![]);
    let shape = b.i64("shape", &[3], &[1, 2, 64]);
    let f = b.op("Reshape", &[d, shape], vec![]);
    let t = b.op(
        "Transpose",
        &[f],
        vec![Attribute::ints("perm", vec![0, 2, 1])],
    );
    let y = b.op("MatMul", &[f, t], vec![]);
    b.output(y, "y", DataType::Float, Some(dims(&["1", "2", "2"])));
    b.build(13)
}

#[test]
fn tensorrt_concat_conv_transpose_and_two_activation_matmul() {
    let fp32 = concat_net();
    let amax = minmax_ranges(&fp32, &[1, 2, 3]);
    let mut m = fp32.clone();
    let run = quantize_with(&mut m, Target::Tensorrt, "", Some(amax.clone())).unwrap();
    let g = &m.graph;
    // x, both Concat inputs, the Concat output (Conv input), both MatMul inputs.
    assert_eq!(ops(&m, "QuantizeLinear"), 6, "{:?}", run.notes);
    assert_eq!(ops(&m, "DequantizeLinear"), 6 + 2);
    assert_eq!(reads(g, "convtranspose_1", 1), "wt_dq");
    assert_eq!(dq_axis(g, "wt_DequantizeLinear"), Some(1));
    assert_eq!(
        init_f32(g, "wt_scale").len(),
        3,
        "ConvTranspose: one scale per output channel"
    );
    assert_eq!(reads(g, "concat_4", 0), "convtranspose_1_out_dq");
    assert_eq!(reads(g, "concat_4", 1), "mul_3_out_dq");
    // One scale for all Concat inputs: the larger range.
    let shared = amax
        .get("convtranspose_1_out")
        .unwrap()
        .max(amax.get("mul_3_out").unwrap())
        / 127.0;
    assert_eq!(
        init_f32(g, "convtranspose_1_out_scale")[0].to_bits(),
        shared.to_bits()
    );
    assert_eq!(
        init_f32(g, "mul_3_out_scale")[0].to_bits(),
        shared.to_bits()
    );
    assert_eq!(reads(g, "matmul_8", 0), "reshape_6_out_dq");
    assert_eq!(reads(g, "matmul_8", 1), "transpose_7_out_dq");
    assert_close_to_fp32(&fp32, &m);
}

#[test]
fn tensorrt_concat_of_far_apart_ranges_stays_float() {
    // A detector's boxes (hundreds) concatenated with its scores (0..1):
    // one shared scale would round every score to 0, so the Concat's inputs
    // get no Q/DQ and the step says why.
    let fp32 = concat_net();
    let mut amax = minmax_ranges(&fp32, &[1, 2, 3]);
    let big = amax.get("convtranspose_1_out").unwrap();
    amax.insert("mul_3_out", big / 100.0);
    let mut m = fp32.clone();
    let run = quantize_with(&mut m, Target::Tensorrt, "", Some(amax)).unwrap();
    let g = &m.graph;
    assert_eq!(reads(g, "concat_4", 0), "convtranspose_1_out");
    assert_eq!(reads(g, "concat_4", 1), "mul_3_out");
    let why: Vec<&str> = run.declined.iter().map(|d| d.reason.as_str()).collect();
    assert!(
        why.iter()
            .any(|r| r.starts_with("its inputs' ranges are 100x apart")),
        "{why:?}"
    );
    // The Concat's output still feeds the quantized Conv.
    assert_eq!(reads(g, "conv_5", 0), "concat_4_out_dq");
}

#[test]
fn integer_tensors_are_never_quantized_even_with_a_range() {
    let mut b = GraphBuilder::new();
    let a = b.input("a", DataType::Int32, dims(&["2", "2"]));
    let c = b.input("c", DataType::Int32, dims(&["2", "2"]));
    let y = b.op("MatMul", &[a, c], vec![]);
    b.output(y, "y", DataType::Int32, None);
    let mut m = b.build(13);
    let before = m.to_bytes().unwrap();
    let mut amax = Amax::default();
    amax.insert("a", 3.0);
    amax.insert("c", 3.0);
    for target in [Target::Tensorrt, Target::Onnxruntime] {
        let run = quantize_with(&mut m, target, "", Some(amax.clone())).unwrap();
        assert_eq!(m.to_bytes().unwrap(), before);
        assert!(
            run.declined
                .iter()
                .any(|d| d.reason.contains("no range for input 'a'"))
        );
    }
}

/// The passes a pipeline may run after quantize-int8 keep the Q/DQ pattern:
/// no fold of weight Q/DQ, no FusedConv around a quantized Conv (ORT would
/// no longer see `DQ → Conv → Q`), nothing removed.
#[test]
fn later_passes_keep_the_quantized_pattern() {
    let fp32 = net(13);
    let amax = minmax_ranges(&fp32, &[1]);
    for (target, weights) in [(Target::Onnxruntime, "int8"), (Target::Tensorrt, "qdq")] {
        let mut m = fp32.clone();
        quantize_with(
            &mut m,
            target,
            &format!("weights: {weights}"),
            Some(amax.clone()),
        )
        .unwrap();
        let before = ops_all(&m);
        let names: Vec<String> = [
            "fold-constants",
            "eliminate-identity",
            "eliminate-duplicates",
            "fuse-conv-bn",
            "fuse-matmul-add",
            "fuse-conv-activation",
            "eliminate-dead",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let config = PipelineConfig::from_pass_names(&names, target).unwrap();
        let options = DriverOptions {
            validate: true,
            ..Default::default()
        };
        infopt_passes::run_pipeline(&mut m, &config, &options, &mut |_, _| Ok(Flow::Continue))
            .unwrap();
        assert_eq!(ops_all(&m), before, "{target}");
    }
}

fn ops_all(m: &Model) -> BTreeMap<String, usize> {
    let mut h = BTreeMap::new();
    for (_, n) in m.graph.nodes() {
        *h.entry(n.op_type.clone()).or_insert(0) += 1;
    }
    h
}

#[test]
fn range_files_of_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    // A TensorRT cache: scale = amax / 127 as big-endian f32 hex (1.0 / 127 = 0x3c010204).
    let trt = file("cal.cache", "TRT-100300-EntropyCalibration2\nx: 3c010204\n");
    let a = quantize::read_ranges(&trt).unwrap();
    assert!((a.get("x").unwrap() - 1.0).abs() < 1e-6, "{a:?}");
    // ranges.json of a newer schema: refused with the version.
    let newer = file("new.json", "{\"schema_version\": 99, \"tensors\": {}}");
    let e = quantize::read_ranges(&newer).unwrap_err();
    assert!(e.contains("schema_version 99"), "{e}");
    // The minimal table.
    let minimal = file("min.json", "{\"tensors\": {\"x\": {\"amax\": 2.5}}}");
    assert_eq!(quantize::read_ranges(&minimal).unwrap().get("x"), Some(2.5));
    // A table written by the calibration side.
    let mut collector = infopt_calibration::RangeCollector::new();
    let t = HostTensor::from_vec(vec![4], vec![-1.0f32, 0.5, 2.0, -0.25]).unwrap();
    collector.observe("conv1_out", &t);
    let table = infopt_calibration::RangeTable::from_collector(
        &collector,
        infopt_calibration::Method::PERCENTILE,
        b"model",
    )
    .unwrap();
    let written = dir.path().join("ranges.json");
    table.write(&written).unwrap();
    assert_eq!(quantize::read_ranges(&written).unwrap(), table.to_amax());
    let e = quantize::read_ranges(&dir.path().join("missing.json")).unwrap_err();
    assert!(e.contains("missing.json"), "{e}");
}

/// A Concat of int64 shape values (`[batch, -1]` for a Reshape) is no
/// quantization candidate: it is not reported as a declined Concat.
#[test]
fn a_shape_concat_is_not_reported_as_declined() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "3", "4"]));
    let shape = b.op("Shape", &[x], vec![]);
    let minus_one = b.i64("minus_one", &[1], &[-1]);
    let new_shape = b.op(
        "Concat",
        &[shape, minus_one],
        vec![infopt_ir::Attribute::int("axis", 0)],
    );
    let y = b.op("Reshape", &[x, new_shape], vec![]);
    b.output(y, "y", DataType::Float, None);
    let fp32 = b.build(13);
    let mut amax = Amax::default();
    amax.insert("x", 3.0);
    for target in [Target::Tensorrt, Target::Onnxruntime] {
        let mut m = fp32.clone();
        let run = quantize_with(&mut m, target, "", Some(amax.clone())).unwrap();
        let concat = run
            .declined
            .iter()
            .find(|d| d.at.to_ascii_lowercase().contains("concat"));
        assert!(concat.is_none(), "{:?}", run.declined);
    }
}

/// x[1,3,8,8] → conv_1 → Clip(0, 6) → conv_3 (depthwise) → Clip(-1, 1) →
/// conv_5 → y: a ReLU6 as torch, Keras and TFLite export it (bounds as
/// inputs since opset 11), and a Clip that lets negative values through.
fn relu6_net() -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "8", "8"]));
    let a = conv(&mut b, x, "conv_a", [8, 3, 3, 1], 31);
    let zero = b.f32("zero", &[], &[0.0]);
    let six = b.f32("six", &[], &[6.0]);
    let r6 = b.op("Clip", &[a, zero, six], vec![]);
    let d = conv(&mut b, r6, "conv_b", [8, 8, 3, 8], 32);
    let lo = b.f32("lo", &[], &[-1.0]);
    let hi = b.f32("hi", &[], &[1.0]);
    let c = b.op("Clip", &[d, lo, hi], vec![]);
    let y = conv(&mut b, c, "conv_c", [4, 8, 1, 1], 33);
    b.output(y, "y", DataType::Float, Some(dims(&["1", "4", "8", "8"])));
    b.build(13)
}

#[test]
fn onnxruntime_placement_quantizes_a_relu6_output_not_the_conv_in_front_of_it() {
    let fp32 = relu6_net();
    let amax = minmax_ranges(&fp32, &[1, 2, 3]);
    let mut m = fp32.clone();
    let run = quantize_with(&mut m, Target::Onnxruntime, "", Some(amax.clone())).unwrap();
    let g = &m.graph;
    // The ReLU6 reads the Conv's float output and its own output is the
    // quantized one: UINT8, zero point 0, scale amax/255 (ORT then drops
    // the Clip in front of the Q and runs QLinearConv).
    assert_eq!(reads(g, "clip_2", 0), "conv_1_out", "{:?}", run.notes);
    assert_eq!(reads(g, "conv_3", 0), "clip_2_out_dq");
    let r = amax.get("clip_2_out").unwrap();
    assert!(r <= 6.0);
    assert_eq!(
        init_f32(g, "clip_2_out_scale")[0].to_bits(),
        (r / 255.0).to_bits()
    );
    assert_eq!(init_i64(g, "clip_2_out_zero_point"), vec![0]);
    // A Clip with a negative lower bound is no ReLU: the Conv's output is
    // quantized, signed (zero point 128), and the Clip reads its DQ.
    assert_eq!(reads(g, "clip_4", 0), "conv_3_out_dq");
    assert_eq!(init_i64(g, "conv_3_out_zero_point"), vec![128]);
    assert!(g.find_value("conv_1_out_scale").is_none());
    assert_close_to_fp32(&fp32, &m);
}

/// [`mbconv`] whose squeeze-excite pools with `ReduceMean` over `axes`
/// (timm's `x.mean((2, 3), keepdim=True)`), the axes an attribute below
/// opset 18 and a constant input from it.
fn mbconv_reduce_mean(axes: &[i64], opset: i64) -> Model {
    // A mean over the channels leaves one channel for se1 to read.
    let channels = if axes.contains(&1) { 1 } else { 16 };
    let axes = axes.to_vec();
    let pool = move |b: &mut GraphBuilder, d: ValueId| {
        let keep = Attribute::int("keepdims", 1);
        if opset >= 18 {
            let a = b.i64("se.axes", &[axes.len() as i64], &axes);
            b.op("ReduceMean", &[d, a], vec![keep])
        } else {
            let attrs = vec![Attribute::ints("axes", axes.clone()), keep];
            b.op("ReduceMean", &[d], attrs)
        }
    };
    let relu = |b: &mut GraphBuilder, x: ValueId| b.op("Relu", &[x], vec![]);
    mbconv_pooled(silu, relu, &pool, channels, opset)
}

/// The node that pools in [`mbconv_reduce_mean`] (it keeps its name).
const SE_POOL: &str = "reducemean_7";

#[test]
fn onnxruntime_placement_runs_a_spatial_reduce_mean_as_a_quantized_global_average_pool() {
    for (axes, opset) in [(vec![2, 3], 13), (vec![-1, -2], 13), (vec![2, 3], 18)] {
        let fp32 = mbconv_reduce_mean(&axes, opset);
        let amax = minmax_ranges(&fp32, &[1, 2, 3]);
        let mut m = fp32.clone();
        let run = quantize_with(&mut m, Target::Onnxruntime, "", Some(amax)).unwrap();
        let g = &m.graph;
        let pool = node(g, SE_POOL);
        assert_eq!(
            pool.op_type, "GlobalAveragePool",
            "axes {axes:?} opset {opset}"
        );
        assert!(pool.attributes.is_empty());
        assert_eq!(pool.inputs.len(), 1);
        // Between a DQ and a Q: ONNX Runtime's QLinearGlobalAveragePool.
        assert_eq!(reads(g, SE_POOL, 0), "mul_6_out_dq");
        assert_eq!(reads(g, "conv_8", 0), "reducemean_7_out_dq");
        assert_eq!(ops(&m, "ReduceMean"), 0);
        assert!(g.find_value("se.axes").is_none(), "the axes went with it");
        assert!(
            run.notes
                .iter()
                .any(|n| n
                    .contains("1 ReduceMean(s) over the spatial axes run as GlobalAveragePool")),
            "{:?}",
            run.notes
        );
        assert_close_to_fp32(&fp32, &m);
    }
}

#[test]
fn a_reduce_mean_that_is_no_global_pool_or_meets_tensorrt_stays() {
    // Over the channels: no GlobalAveragePool computes it.
    let fp32 = mbconv_reduce_mean(&[1], 13);
    let amax = minmax_ranges(&fp32, &[1, 2, 3]);
    let mut m = fp32.clone();
    quantize_with(&mut m, Target::Onnxruntime, "", Some(amax)).unwrap();
    assert_eq!(node(&m.graph, SE_POOL).op_type, "ReduceMean");
    assert_close_to_fp32(&fp32, &m);
    // TensorRT's placement quantizes layer inputs, and TensorRT reduces
    // in its own layer: the model keeps its ReduceMean.
    let fp32 = mbconv_reduce_mean(&[2, 3], 13);
    let amax = minmax_ranges(&fp32, &[1, 2, 3]);
    let mut m = fp32.clone();
    quantize_with(&mut m, Target::Tensorrt, "", Some(amax)).unwrap();
    assert_eq!(node(&m.graph, SE_POOL).op_type, "ReduceMean");
}

#[test]
fn a_layer_norm_mean_over_the_hidden_axis_stays_float() {
    // `[batch, sequence, hidden]`, the mean over the hidden axis (a
    // LayerNorm written out): a GlobalAveragePool would compute it too,
    // but it is no pool, and its output stays unquantized.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "4", "8"]));
    let w = b.f32("w", &[8, 8], &values(64, 5, 0.3));
    let h = b.op("MatMul", &[x, w], vec![]);
    let mean = b.op(
        "ReduceMean",
        &[h],
        vec![
            Attribute::ints("axes", vec![-1]),
            Attribute::int("keepdims", 1),
        ],
    );
    let centred = b.op("Sub", &[h, mean], vec![]);
    let w2 = b.f32("w2", &[8, 8], &values(64, 6, 0.3));
    let y = b.op("MatMul", &[centred, w2], vec![]);
    b.output(y, "y", DataType::Float, Some(dims(&["1", "4", "8"])));
    let fp32 = b.build(13);
    let amax = minmax_ranges(&fp32, &[1, 2, 3]);
    let mut m = fp32.clone();
    quantize_with(&mut m, Target::Onnxruntime, "", Some(amax)).unwrap();
    let g = &m.graph;
    assert_eq!(node(g, "reducemean_2").op_type, "ReduceMean");
    // Its output reaches the Sub as it is.
    assert_eq!(reads(g, "sub_3", 1), "reducemean_2_out");
}

#[test]
fn a_spatial_reduce_mean_whose_output_stays_float_stays_a_reduce_mean() {
    // The conv's output is quantized for the second conv; the ReduceMean
    // reads it through the same DQ but writes a graph output, which is not
    // quantized: a float pool, where ONNX Runtime's ReduceMean is faster.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "8", "6", "6"]));
    let a = conv(&mut b, x, "a", [8, 8, 3, 1], 31);
    let c = conv(&mut b, a, "c", [8, 8, 3, 1], 32);
    let mean = b.op(
        "ReduceMean",
        &[a],
        vec![
            Attribute::ints("axes", vec![2, 3]),
            Attribute::int("keepdims", 1),
        ],
    );
    b.output(c, "y", DataType::Float, Some(dims(&["1", "8", "6", "6"])));
    b.output(
        mean,
        "m",
        DataType::Float,
        Some(dims(&["1", "8", "1", "1"])),
    );
    let fp32 = b.build(13);
    let amax = minmax_ranges(&fp32, &[1, 2, 3]);
    let mut m = fp32.clone();
    quantize_with(&mut m, Target::Onnxruntime, "", Some(amax)).unwrap();
    let g = &m.graph;
    assert_eq!(reads(g, "conv_2", 0), "conv_1_out_dq");
    let mean = g.find_node("reducemean_3").unwrap();
    assert_eq!(g.node(mean).op_type, "ReduceMean");
    assert_close_to_fp32(&fp32, &m);
}
