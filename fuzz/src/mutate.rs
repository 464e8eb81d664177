//! Structure-aware mutations of ONNX messages: each one changes a model the
//! way a broken exporter or a hostile file would (dims, attribute values,
//! types, wiring, names, raw data, opsets, subgraphs), and leaves it a valid
//! protobuf message, so every case reaches the loader and the passes instead
//! of stopping at the decoder.

use bytes::Bytes;
use infopt_ir::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto, tensor_shape,
    type_proto,
};

use crate::rng::Rng;

/// Values that break arithmetic and allocation: signs, zero, one, powers of
/// two around 32 bits, 10^12, the extremes.
const NASTY: [i64; 19] = [
    i64::MIN,
    -1_000_000_000_000,
    -5,
    -2,
    -1,
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    255,
    65_536,
    (1 << 31) - 1,
    1 << 31,
    1 << 32,
    1_000_000_000_000,
    i64::MAX,
];

/// Mostly small values (what real attributes hold), sometimes nasty ones.
fn int(rng: &mut Rng) -> i64 {
    if rng.chance(1, 2) {
        rng.below(9) as i64 - 2
    } else {
        *rng.pick(&NASTY).unwrap_or(&0)
    }
}

fn ints(rng: &mut Rng) -> Vec<i64> {
    let n = rng.below(7);
    (0..n).map(|_| int(rng)).collect()
}

const FLOATS: [f32; 8] = [0.0, -1.0, 1e-30, 1e30, f32::NAN, f32::INFINITY, -0.0, 0.5];

/// Ops the inference rules, kernels and passes know (a node turned into one
/// of them meets the code that has the most arithmetic).
const OPS: [&str; 48] = [
    "Reshape",
    "Transpose",
    "Concat",
    "Split",
    "Slice",
    "Gather",
    "GatherElements",
    "Squeeze",
    "Unsqueeze",
    "Expand",
    "Tile",
    "ConstantOfShape",
    "Range",
    "Conv",
    "ConvTranspose",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "MatMul",
    "Gemm",
    "BatchNormalization",
    "LayerNormalization",
    "Add",
    "Mul",
    "Div",
    "Sub",
    "Pow",
    "Cast",
    "Pad",
    "Resize",
    "ReduceSum",
    "ReduceMean",
    "Shape",
    "Size",
    "Where",
    "Flatten",
    "Softmax",
    "Identity",
    "Dropout",
    "Constant",
    "Einsum",
    "TopK",
    "NonZero",
    "Clip",
    "Relu",
    "LSTM",
    "If",
    "Loop",
];

const ATTRS: [&str; 24] = [
    "axis",
    "axes",
    "perm",
    "num_outputs",
    "split",
    "pads",
    "strides",
    "dilations",
    "kernel_shape",
    "group",
    "keepdims",
    "to",
    "allowzero",
    "epsilon",
    "alpha",
    "transA",
    "transB",
    "output_padding",
    "output_shape",
    "hidden_size",
    "ceil_mode",
    "start",
    "end",
    "batch_dims",
];

/// The number of graphs in `g` (itself and every nested subgraph).
fn count_graphs(g: &GraphProto) -> usize {
    1 + g
        .node
        .iter()
        .flat_map(|n| &n.attribute)
        .flat_map(|a| a.g.iter().chain(&a.graphs))
        .map(count_graphs)
        .sum::<usize>()
}

/// Calls `f` on the `k`-th graph in pre-order; returns whether it was found.
fn with_graph(g: &mut GraphProto, k: &mut usize, f: &mut dyn FnMut(&mut GraphProto)) -> bool {
    if *k == 0 {
        f(g);
        return true;
    }
    *k -= 1;
    for n in &mut g.node {
        for a in &mut n.attribute {
            for sg in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                if with_graph(sg, k, f) {
                    return true;
                }
            }
        }
    }
    false
}

/// Applies 1 to 8 (mostly 1 to 3) random mutations to `model`; returns their names (for the
/// report of a failing case).
pub fn mutate(model: &mut ModelProto, rng: &mut Rng) -> Vec<&'static str> {
    let n = 1 + if rng.chance(1, 4) {
        rng.below(8)
    } else {
        rng.below(3)
    };
    (0..n).map(|_| mutate_once(model, rng)).collect()
}

fn mutate_once(model: &mut ModelProto, rng: &mut Rng) -> &'static str {
    // 0..20: what a broken exporter writes; 20..27: what sizes an allocation.
    let what = rng.below(27);
    if what == 0 {
        mutate_opset(model, rng);
        return "opset";
    }
    let Some(g) = model.graph.as_mut() else {
        return "none";
    };
    let mut k = rng.below(count_graphs(g));
    // Subgraphs are few; visit them often so If/Loop bodies get their share.
    if k == 0 && rng.chance(1, 3) {
        k = rng.below(count_graphs(g));
    }
    let mut name = "none";
    with_graph(g, &mut k, &mut |g| name = mutate_graph(g, rng, what));
    name
}

fn mutate_opset(model: &mut ModelProto, rng: &mut Rng) {
    if rng.chance(1, 4) {
        model.ir_version = Some(*rng.pick(&[0i64, 1, 3, 4, 7, 10, 14, 100, -1]).unwrap_or(&8));
        return;
    }
    let v = *rng
        .pick(&[
            1i64, 5, 6, 7, 9, 10, 11, 12, 13, 14, 17, 18, 19, 21, 23, 0, -1, 1000,
        ])
        .unwrap_or(&13);
    match model
        .opset_import
        .iter_mut()
        .find(|o| o.domain.as_deref().unwrap_or("").is_empty())
    {
        Some(o) => o.version = Some(v),
        None => model.opset_import.clear(),
    }
}

fn mutate_graph(g: &mut GraphProto, rng: &mut Rng, what: usize) -> &'static str {
    match what {
        1 | 2 => {
            mutate_value_info(g, rng);
            "dims"
        }
        3 => {
            mutate_elem_type(g, rng);
            "dtype"
        }
        4..=6 => {
            mutate_attribute(g, rng);
            "attribute"
        }
        7 => {
            add_attribute(g, rng);
            "add attribute"
        }
        8 | 9 => {
            mutate_inputs(g, rng);
            "node inputs"
        }
        10 => {
            mutate_outputs(g, rng);
            "node outputs"
        }
        11 => {
            if let Some(n) = rng.pick_mut(&mut g.node) {
                n.op_type = Some(rng.pick(&OPS).copied().unwrap_or("Relu").to_string());
            }
            "op type"
        }
        12 | 13 => {
            if let Some(t) = rng.pick_mut(&mut g.initializer) {
                mutate_tensor(t, rng);
            }
            "initializer"
        }
        14 => {
            initializer_to_input(g, rng);
            "initializer to input"
        }
        15 => {
            mutate_nodes(g, rng);
            "nodes"
        }
        16 => {
            mutate_graph_outputs(g, rng);
            "graph outputs"
        }
        17 => {
            mutate_subgraph_io(g, rng);
            "subgraph io"
        }
        20.. => crate::sizes::mutate(g, rng, what - 20),
        _ => {
            // Constant values and other attribute tensors.
            let tensors: usize = g
                .node
                .iter()
                .flat_map(|n| &n.attribute)
                .filter(|a| a.t.is_some())
                .count();
            if tensors > 0 {
                let mut k = rng.below(tensors);
                for a in g.node.iter_mut().flat_map(|n| n.attribute.iter_mut()) {
                    if let Some(t) = a.t.as_mut() {
                        if k == 0 {
                            mutate_tensor(t, rng);
                            break;
                        }
                        k -= 1;
                    }
                }
            }
            "constant value"
        }
    }
}

fn all_value_infos(g: &mut GraphProto) -> Vec<&mut ValueInfoProto> {
    g.input
        .iter_mut()
        .chain(g.output.iter_mut())
        .chain(g.value_info.iter_mut())
        .collect()
}

fn tensor_type(vi: &mut ValueInfoProto) -> Option<&mut type_proto::Tensor> {
    match vi.r#type.as_mut()?.value.as_mut()? {
        type_proto::Value::TensorType(t) => Some(t),
        _ => None,
    }
}

fn odd_dim(rng: &mut Rng) -> tensor_shape::Dimension {
    let value = match rng.below(6) {
        0 => None,
        1 => Some(tensor_shape::DimValue::DimParam(String::new())),
        2 => Some(tensor_shape::DimValue::DimParam(
            rng.pick(&["N", "batch", "seq", "?"])
                .unwrap_or(&"N")
                .to_string(),
        )),
        _ => Some(tensor_shape::DimValue::DimValue(int(rng))),
    };
    tensor_shape::Dimension {
        value,
        denotation: None,
    }
}

fn mutate_value_info(g: &mut GraphProto, rng: &mut Rng) {
    let mut infos = all_value_infos(g);
    let n = infos.len();
    if n == 0 {
        return;
    }
    let Some(t) = tensor_type(infos[rng.below(n)]) else {
        return;
    };
    let shape = t.shape.get_or_insert_with(Default::default);
    match rng.below(5) {
        0 => t.shape = None,
        1 => shape.dim.push(odd_dim(rng)),
        2 => {
            shape.dim.pop();
        }
        _ => {
            let d = odd_dim(rng);
            if let Some(slot) = rng.pick_mut(&mut shape.dim) {
                *slot = d;
            } else {
                shape.dim.push(d);
            }
        }
    }
}

fn odd_dtype(rng: &mut Rng) -> i32 {
    if rng.chance(1, 8) {
        *rng.pick(&[-1, 0, 1000, i32::MAX]).unwrap_or(&0)
    } else {
        rng.below(26) as i32
    }
}

fn mutate_elem_type(g: &mut GraphProto, rng: &mut Rng) {
    let mut infos = all_value_infos(g);
    let n = infos.len();
    if n == 0 {
        return;
    }
    let code = odd_dtype(rng);
    if let Some(t) = tensor_type(infos[rng.below(n)]) {
        t.elem_type = Some(code);
    }
}

fn random_attr_value(a: &mut AttributeProto, rng: &mut Rng) {
    match rng.below(5) {
        0 => a.i = Some(int(rng)),
        1 => a.ints = ints(rng),
        2 => a.f = Some(*rng.pick(&FLOATS).unwrap_or(&0.0)),
        3 => {
            a.floats = (0..rng.below(4))
                .map(|_| *rng.pick(&FLOATS).unwrap_or(&0.0))
                .collect()
        }
        _ => {
            a.s = Some(
                rng.pick(&["NOTSET", "SAME_UPPER", "VALID", "", "linear", "bogus"])
                    .unwrap_or(&"")
                    .as_bytes()
                    .to_vec(),
            )
        }
    }
}

fn mutate_attribute(g: &mut GraphProto, rng: &mut Rng) {
    let Some(n) = rng.pick_mut(&mut g.node) else {
        return;
    };
    let len = n.attribute.len();
    if len == 0 {
        return add_attr_to(n, rng);
    }
    let a = &mut n.attribute[rng.below(len)];
    match rng.below(6) {
        0 => {
            n.attribute.remove(rng.below(len));
        }
        1 if !a.ints.is_empty() => {
            let v = int(rng);
            if let Some(slot) = rng.pick_mut(&mut a.ints) {
                *slot = v;
            }
        }
        2 if !a.ints.is_empty() => {
            if rng.chance(1, 2) {
                a.ints.pop();
            } else {
                a.ints.push(int(rng));
            }
        }
        3 if a.i.is_some() => a.i = Some(int(rng)),
        4 => {
            // The type tag says one thing, the fields another.
            a.r#type = Some(rng.below(15) as i32);
        }
        _ => random_attr_value(a, rng),
    }
}

fn add_attr_to(n: &mut NodeProto, rng: &mut Rng) {
    let mut a = AttributeProto {
        name: Some(rng.pick(&ATTRS).copied().unwrap_or("axis").to_string()),
        ..Default::default()
    };
    random_attr_value(&mut a, rng);
    // An attribute of the same name twice is a case too.
    n.attribute.push(a);
}

fn add_attribute(g: &mut GraphProto, rng: &mut Rng) {
    if let Some(n) = rng.pick_mut(&mut g.node) {
        add_attr_to(n, rng);
    }
}

/// Names defined or used in `g`, for rewiring.
fn names(g: &GraphProto) -> Vec<String> {
    let mut v: Vec<String> = g
        .input
        .iter()
        .filter_map(|i| i.name.clone())
        .chain(g.initializer.iter().filter_map(|t| t.name.clone()))
        .chain(g.node.iter().flat_map(|n| n.output.iter().cloned()))
        .collect();
    v.push("ghost".into());
    v
}

fn mutate_inputs(g: &mut GraphProto, rng: &mut Rng) {
    let pool = names(g);
    let Some(n) = rng.pick_mut(&mut g.node) else {
        return;
    };
    let len = n.input.len();
    match rng.below(6) {
        0 => {
            n.input.pop();
        }
        1 if len > 0 => {
            let i = rng.below(len);
            let dup = n.input[i].clone();
            n.input.push(dup);
        }
        2 if len > 1 => {
            let (a, b) = (rng.below(len), rng.below(len));
            n.input.swap(a, b);
        }
        3 if len > 0 => {
            let i = rng.below(len);
            n.input[i] = String::new();
        }
        _ => {
            let name = rng.pick(&pool).cloned().unwrap_or_default();
            if len > 0 && rng.chance(2, 3) {
                let i = rng.below(len);
                n.input[i] = name;
            } else {
                n.input.push(name);
            }
        }
    }
}

fn mutate_outputs(g: &mut GraphProto, rng: &mut Rng) {
    let pool = names(g);
    let Some(n) = rng.pick_mut(&mut g.node) else {
        return;
    };
    match rng.below(4) {
        0 => {
            n.output.pop();
        }
        1 => n.output.push(format!("extra_{}", rng.below(4))),
        _ => {
            // Another value's name: a duplicate definition (or a cycle).
            let name = rng.pick(&pool).cloned().unwrap_or_default();
            if let Some(o) = rng.pick_mut(&mut n.output) {
                *o = name;
            }
        }
    }
}

fn mutate_tensor(t: &mut TensorProto, rng: &mut Rng) {
    match rng.below(6) {
        0 => {
            if let Some(raw) = &t.raw_data {
                let keep = rng.below(raw.len() + 1);
                t.raw_data = Some(raw.slice(..keep));
            } else {
                t.float_data.truncate(rng.below(t.float_data.len() + 1));
                t.int64_data.truncate(rng.below(t.int64_data.len() + 1));
            }
        }
        1 => {
            let v = int(rng);
            if let Some(d) = rng.pick_mut(&mut t.dims) {
                *d = v;
            } else {
                t.dims.push(v);
            }
        }
        2 => t.data_type = Some(odd_dtype(rng)),
        3 => {
            // Same bytes, another shape: a reshaped constant (valid or not).
            if rng.chance(1, 2) {
                t.dims.reverse();
            } else {
                t.dims.push(1);
            }
        }
        4 => {
            // Small integer content: shapes, axes, repeats, indices.
            let values = ints(rng);
            t.dims = if values.len() == 1 && rng.chance(1, 2) {
                Vec::new()
            } else {
                vec![values.len() as i64]
            };
            t.data_type = Some(7);
            t.raw_data = Some(Bytes::from(
                values
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect::<Vec<u8>>(),
            ));
            t.float_data.clear();
            t.int64_data.clear();
            t.int32_data.clear();
        }
        _ => t.dims.clear(),
    }
}

fn odd_input(name: String, rng: &mut Rng) -> ValueInfoProto {
    let rank = rng.below(5);
    ValueInfoProto {
        name: Some(name),
        r#type: Some(infopt_ir::proto::TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(if rng.chance(3, 4) { 7 } else { odd_dtype(rng) }),
                shape: Some(infopt_ir::proto::TensorShapeProto {
                    dim: (0..rank).map(|_| odd_dim(rng)).collect(),
                }),
            })),
            denotation: None,
        }),
        ..Default::default()
    }
}

fn initializer_to_input(g: &mut GraphProto, rng: &mut Rng) {
    if g.initializer.is_empty() {
        return;
    }
    let i = rng.below(g.initializer.len());
    let name = g.initializer[i].name.clone().unwrap_or_default();
    // Removed (a graph input now) or kept (an input with a default value).
    if rng.chance(1, 2) {
        g.initializer.remove(i);
    }
    let info = odd_input(name, rng);
    g.input.push(info);
}

fn mutate_nodes(g: &mut GraphProto, rng: &mut Rng) {
    let len = g.node.len();
    if len == 0 {
        return;
    }
    match rng.below(3) {
        0 => {
            g.node.remove(rng.below(len));
        }
        1 => {
            let copy = g.node[rng.below(len)].clone();
            g.node.push(copy);
        }
        _ => {
            let (a, b) = (rng.below(len), rng.below(len));
            g.node.swap(a, b);
        }
    }
}

fn mutate_graph_outputs(g: &mut GraphProto, rng: &mut Rng) {
    let len = g.output.len();
    match rng.below(4) {
        0 if len > 0 => {
            let copy = g.output[rng.below(len)].clone();
            g.output.push(copy);
        }
        1 if len > 0 => {
            g.output.remove(rng.below(len));
        }
        _ => {
            let pool = names(g);
            let name = rng.pick(&pool).cloned();
            if let Some(o) = rng.pick_mut(&mut g.output) {
                o.name = name;
            }
        }
    }
}

/// If/Loop bodies are matched to their node by position: drop, add or swap
/// their inputs and outputs; or swap an If's branches.
fn mutate_subgraph_io(g: &mut GraphProto, rng: &mut Rng) {
    let holders: Vec<usize> = (0..g.node.len())
        .filter(|&i| g.node[i].attribute.iter().any(|a| a.g.is_some()))
        .collect();
    let Some(&i) = rng.pick(&holders) else {
        return;
    };
    let n = &mut g.node[i];
    if rng.chance(1, 4) {
        let gs: Vec<Option<GraphProto>> = n.attribute.iter_mut().map(|a| a.g.take()).collect();
        let k = gs.len();
        for (i, sg) in gs.into_iter().enumerate() {
            n.attribute[(i + 1) % k].g = sg;
        }
        return;
    }
    let Some(sg) = n.attribute.iter_mut().filter_map(|a| a.g.as_mut()).next() else {
        return;
    };
    match rng.below(4) {
        0 => {
            sg.input.pop();
        }
        1 => {
            sg.output.pop();
        }
        2 => sg
            .input
            .push(odd_input(format!("extra_in_{}", rng.below(3)), rng)),
        _ => {
            if let Some(first) = sg.output.first().cloned() {
                sg.output.push(first);
            }
        }
    }
}
