//! Mutations of what sizes a buffer or a loop: the shape, repeats, pads,
//! scales, limits and steps operators read from constants; the sizing
//! attributes (`perm`, `output_shape`, `split`, `k`); the bytes behind an
//! initializer (its element type, its length, a file outside the model's
//! folder); and what an If or Loop body returns. `mutate.rs` changes a model
//! the way a broken exporter would; these aim at the arithmetic that turns a
//! number in the file into an allocation, which real models seldom exercise
//! because their own size operators are few (a PP-OCR recognizer has no
//! Expand, no Range and no Tile), so a sized operator is also *inserted* on
//! one of the model's own activations.

use bytes::Bytes;
use infopt_ir::proto::{
    AttributeProto, GraphProto, NodeProto, StringStringEntryProto, TensorProto, ValueInfoProto,
    tensor_shape, type_proto,
};

use crate::rng::Rng;

/// Sizes that overflow, underflow or exhaust memory, beside the ordinary
/// ones a real shape holds (so one bad entry often hides among good ones).
const SIZES: [i64; 20] = [
    -7,
    -2,
    -1,
    0,
    1,
    2,
    3,
    64,
    100_000,
    1 << 20,
    (1 << 31) - 1,
    1 << 31,
    1 << 32,
    1 << 40,
    1_000_000_000_000,
    i64::MAX,
    i64::MAX - 1,
    i64::MIN,
    i64::MIN + 1,
    -1_000_000_000_000,
];

/// Scales (Resize, Upsample) and Range bounds: huge, tiny, negative, not a number.
const SCALES: [f32; 12] = [
    1.0,
    2.0,
    0.5,
    0.0,
    -1.0,
    1e6,
    1e12,
    3.4e38,
    1e-30,
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
];

fn size(rng: &mut Rng) -> i64 {
    *rng.pick(&SIZES).unwrap_or(&0)
}

fn scale(rng: &mut Rng) -> f32 {
    *rng.pick(&SCALES).unwrap_or(&1.0)
}

/// `n` entries, mostly small (1 to 4) with one or more sizes from [`SIZES`].
fn sizes(rng: &mut Rng, n: usize) -> Vec<i64> {
    let mut v: Vec<i64> = (0..n).map(|_| 1 + rng.below(4) as i64).collect();
    for _ in 0..1 + rng.below(2) {
        let s = size(rng);
        if let Some(slot) = rng.pick_mut(&mut v) {
            *slot = s;
        }
    }
    v
}

/// The input slots that size an operator's output: (op, slot, element
/// type of that input: 7 int64, 1 float).
const SIZED_INPUTS: [(&str, usize, i32); 21] = [
    ("Reshape", 1, 7),
    ("Expand", 1, 7),
    ("Tile", 1, 7),
    ("ConstantOfShape", 0, 7),
    ("Resize", 2, 1),
    ("Resize", 3, 7),
    ("Upsample", 1, 1),
    ("Pad", 1, 7),
    ("Range", 0, 1),
    ("Range", 1, 1),
    ("Range", 2, 1),
    ("Slice", 1, 7),
    ("Slice", 2, 7),
    ("Slice", 4, 7),
    ("TopK", 1, 7),
    ("OneHot", 1, 7),
    ("Unsqueeze", 1, 7),
    ("Squeeze", 1, 7),
    // Indices a kernel reads memory at.
    ("Gather", 1, 7),
    ("GatherElements", 1, 7),
    ("ScatterND", 1, 7),
];

/// Applies one size mutation of kind `kind` (0..7) to `g`; returns its name.
pub fn mutate(g: &mut GraphProto, rng: &mut Rng, kind: usize) -> &'static str {
    match kind {
        0 => {
            if rewrite_sized_input(g, rng) {
                "size input"
            } else {
                insert_sized_op(g, rng);
                "inserted sized op"
            }
        }
        1 | 2 => {
            insert_sized_op(g, rng);
            "inserted sized op"
        }
        3 => {
            sizing_attribute(g, rng);
            "sizing attribute"
        }
        4 => {
            if let Some(t) = rng.pick_mut(&mut g.initializer) {
                wrong_bytes(t, rng);
            }
            "initializer bytes"
        }
        5 => {
            if let Some(t) = rng.pick_mut(&mut g.initializer) {
                external_outside(t, rng);
            }
            "external data"
        }
        _ => {
            body_outputs(g, rng);
            "body outputs"
        }
    }
}

fn tensor_i64(name: &str, values: &[i64], scalar: bool) -> TensorProto {
    let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    raw_tensor(name, 7, values.len(), bytes, scalar)
}

fn tensor_f32(name: &str, values: &[f32], scalar: bool) -> TensorProto {
    let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    raw_tensor(name, 1, values.len(), bytes, scalar)
}

/// A tensor of `len` elements of ONNX type `data_type` in `raw_data`
/// (a scalar when `scalar`, else one dimension).
fn raw_tensor(name: &str, data_type: i32, len: usize, bytes: Vec<u8>, scalar: bool) -> TensorProto {
    TensorProto {
        name: Some(name.to_string()),
        data_type: Some(data_type),
        dims: if scalar { Vec::new() } else { vec![len as i64] },
        raw_data: Some(Bytes::from(bytes)),
        ..Default::default()
    }
}

/// A constant of `elem` type (7 int64, else float) for a sizing input:
/// Range bounds and TopK's k are scalars, the rest vectors of 1 to 8.
fn sizing_constant(name: &str, op: &str, elem: i32, rng: &mut Rng) -> TensorProto {
    let scalar = matches!(op, "Range") || (op == "TopK" && rng.chance(1, 2));
    let n = if scalar { 1 } else { 1 + rng.below(8) };
    if elem == 7 {
        tensor_i64(name, &sizes(rng, n), scalar)
    } else {
        let v: Vec<f32> = (0..n)
            .map(|_| if rng.chance(1, 2) { 1.0 } else { scale(rng) })
            .collect();
        tensor_f32(name, &v, scalar)
    }
}

/// Replaces the constant behind a sizing input of an existing node (an
/// initializer or a `Constant` node's value). False when the graph has none.
fn rewrite_sized_input(g: &mut GraphProto, rng: &mut Rng) -> bool {
    let mut candidates: Vec<(usize, usize, &'static str, i32)> = Vec::new();
    for (i, n) in g.node.iter().enumerate() {
        let op = n.op_type.as_deref().unwrap_or("");
        for &(sized, slot, elem) in &SIZED_INPUTS {
            if sized == op && n.input.get(slot).is_some_and(|s| !s.is_empty()) {
                candidates.push((i, slot, sized, elem));
            }
        }
    }
    let Some(&(i, slot, op, elem)) = rng.pick(&candidates) else {
        return false;
    };
    let name = g.node[i].input[slot].clone();
    let fresh = sizing_constant(&name, op, elem, rng);
    if let Some(t) = g
        .initializer
        .iter_mut()
        .find(|t| t.name.as_deref() == Some(&name))
    {
        *t = fresh;
        return true;
    }
    for n in &mut g.node {
        if n.op_type.as_deref() == Some("Constant") && n.output.first() == Some(&name) {
            n.attribute = vec![AttributeProto {
                name: Some("value".into()),
                r#type: Some(4),
                t: Some(TensorProto {
                    name: None,
                    ..fresh
                }),
                ..Default::default()
            }];
            return true;
        }
    }
    // Computed at run time (a Shape chain): a constant takes its place.
    g.node[i].input[slot] = format!("{name}_fuzz_size");
    g.initializer
        .push(sizing_constant(&format!("{name}_fuzz_size"), op, elem, rng));
    true
}

/// The operators inserted on an activation, each reading constants that size it.
const INSERTED: [&str; 15] = [
    "Expand",
    "Tile",
    "Reshape",
    "Resize",
    "Pad",
    "Slice",
    "TopK",
    "ConstantOfShape",
    "Range",
    "Transpose",
    "ConvTranspose",
    "Upsample",
    "Einsum",
    "Gather",
    "Conv",
];

/// Einsum equations: ordinary ones, and ones no runtime should accept
/// (repeated output letters, two ellipses, a letter for an axis the input
/// lacks, letters past ASCII, a product over many letters).
const EQUATIONS: [&str; 12] = [
    "ij->ji",
    "...->...",
    "ii->i",
    "ij,ij->",
    "ij,jk->ik",
    "abcdefghijklmnop->p",
    "i->ii",
    "a...b...->ab",
    "\u{e9}->\u{e9}",
    "->",
    "bhij,bhjk->bhik",
    "ab,cd,ef->abcdef",
];

/// Inserts `y = Op(x, constants...)` after an activation `x` of the graph
/// and makes one reader of `x` (or the graph output) read `y`.
fn insert_sized_op(g: &mut GraphProto, rng: &mut Rng) {
    // Activations: node outputs and graph inputs, with the index of the
    // node to insert before (after the producer).
    let mut values: Vec<(String, usize)> = g
        .input
        .iter()
        .filter_map(|i| i.name.clone())
        .filter(|n| !g.initializer.iter().any(|t| t.name.as_ref() == Some(n)))
        .map(|n| (n, 0))
        .collect();
    for (i, n) in g.node.iter().enumerate() {
        if n.op_type.as_deref() == Some("Constant") {
            continue;
        }
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            values.push((o.clone(), i + 1));
        }
    }
    let Some((x, at)) = rng.pick(&values).cloned() else {
        return;
    };
    let op = *rng.pick(&INSERTED).unwrap_or(&"Expand");
    let k = g.node.len();
    let y = format!("fuzz_sized_{k}");
    let c = |slot: usize| format!("fuzz_sized_{k}_c{slot}");
    let mut node = NodeProto {
        op_type: Some(op.to_string()),
        name: Some(format!("fuzz_sized_{k}_{op}")),
        output: vec![y.clone()],
        ..Default::default()
    };
    let mut constants: Vec<TensorProto> = Vec::new();
    match op {
        "Expand" | "Tile" | "Reshape" | "Pad" | "TopK" => {
            node.input = vec![x.clone(), c(1)];
            constants.push(sizing_constant(&c(1), op, 7, rng));
            if op == "TopK" {
                node.output.push(format!("{y}_indices"));
            }
        }
        "Resize" | "Upsample" => {
            if op == "Upsample" || rng.chance(1, 2) {
                // Scales (opset 11+: roi, scales; Upsample: scales).
                let scales = sizing_constant(&c(2), op, 1, rng);
                node.input = if op == "Upsample" {
                    vec![x.clone(), c(2)]
                } else {
                    vec![x.clone(), String::new(), c(2)]
                };
                constants.push(scales);
            } else {
                node.input = vec![x.clone(), String::new(), String::new(), c(3)];
                constants.push(sizing_constant(&c(3), op, 7, rng));
            }
        }
        "Slice" => {
            let n = 1 + rng.below(4);
            node.input = vec![x.clone(), c(1), c(2), c(3), c(4)];
            constants.push(tensor_i64(&c(1), &sizes(rng, n), false));
            constants.push(tensor_i64(&c(2), &sizes(rng, n), false));
            constants.push(tensor_i64(&c(3), &(0..n as i64).collect::<Vec<_>>(), false));
            // Steps of 0 are the case runtimes loop on.
            let steps: Vec<i64> = (0..n)
                .map(|_| if rng.chance(1, 2) { 0 } else { size(rng) })
                .collect();
            constants.push(tensor_i64(&c(4), &steps, false));
        }
        "ConstantOfShape" => {
            // Reads only its shape; the activation feeds nothing here.
            node.input = vec![c(0)];
            constants.push(sizing_constant(&c(0), op, 7, rng));
        }
        "Range" => {
            node.input = vec![c(0), c(1), c(2)];
            let start = if rng.chance(1, 2) { 0.0 } else { scale(rng) };
            let delta = *rng
                .pick(&[1.0f32, 0.0, -1.0, 1e-30, f32::NAN])
                .unwrap_or(&1.0);
            constants.push(tensor_f32(&c(0), &[start], true));
            constants.push(tensor_f32(&c(1), &[scale(rng)], true));
            constants.push(tensor_f32(&c(2), &[delta], true));
        }
        "Transpose" => {
            node.input = vec![x.clone()];
            let n = 1 + rng.below(5);
            // Duplicates, out of range, negative.
            let perm: Vec<i64> = (0..n)
                .map(|_| {
                    *rng.pick(&[0i64, 0, 1, 1, 2, 3, -1, 7, i64::MAX])
                        .unwrap_or(&0)
                })
                .collect();
            node.attribute.push(ints_attr("perm", perm));
        }
        "Einsum" => {
            let equation = *rng.pick(&EQUATIONS).unwrap_or(&"ij->ji");
            let terms = equation
                .split("->")
                .next()
                .map_or(1, |l| l.split(',').count());
            node.input = vec![x.clone(); terms];
            node.attribute.push(AttributeProto {
                name: Some("equation".into()),
                r#type: Some(3),
                s: Some(equation.as_bytes().to_vec()),
                ..Default::default()
            });
        }
        "Gather" => {
            // Indices a constant can put out of range, on any axis.
            node.input = vec![x.clone(), c(1)];
            let n = 1 + rng.below(3);
            constants.push(tensor_i64(&c(1), &sizes(rng, n), rng.chance(1, 3)));
            let axis = if rng.chance(1, 2) {
                rng.below(4) as i64 - 1
            } else {
                size(rng)
            };
            node.attribute.push(int_attr("axis", axis));
        }
        "Conv" => {
            // A weight of its own whose dims disagree with `kernel_shape`,
            // `group` or the activation's channels, and sizing attributes.
            node.input = vec![x.clone(), c(1)];
            let (out, per_group, k) = (
                1 + rng.below(4) as i64,
                1 + rng.below(3) as i64,
                1 + rng.below(3) as i64,
            );
            constants.push(TensorProto {
                name: Some(c(1)),
                data_type: Some(1),
                dims: vec![out, per_group, k, k],
                float_data: vec![0.5; (out * per_group * k * k) as usize],
                ..Default::default()
            });
            let group = *rng
                .pick(&[1, 2, 3, 0, -1, 1 << 20, (1 << 31) - 1, i64::MAX])
                .unwrap_or(&1);
            node.attribute.push(int_attr("group", group));
            for which in ["kernel_shape", "strides", "pads", "dilations"] {
                if rng.chance(1, 3) {
                    let n = if which == "pads" { 4 } else { 2 };
                    node.attribute.push(ints_attr(which, sizes(rng, n)));
                }
            }
        }
        _ => {
            // ConvTranspose with a weight of its own and a huge output_shape.
            node.input = vec![x.clone(), c(1)];
            let channels = 1 + rng.below(4) as i64;
            let weight = TensorProto {
                name: Some(c(1)),
                data_type: Some(1),
                dims: vec![channels, 1, 1, 1],
                float_data: vec![1.0; channels as usize],
                ..Default::default()
            };
            constants.push(weight);
            let out = vec![size(rng), size(rng)];
            node.attribute.push(ints_attr("output_shape", out));
            if rng.chance(1, 2) {
                node.attribute.push(ints_attr("strides", sizes(rng, 2)));
            }
        }
    }
    g.initializer.extend(constants);
    // One reader of x now reads y; when nothing reads x, y is an output.
    let reader = g
        .node
        .iter()
        .enumerate()
        .skip(at)
        .find(|(_, n)| n.input.contains(&x))
        .map(|(i, _)| i);
    match reader {
        Some(r) if rng.chance(3, 4) => {
            for input in g.node[r].input.iter_mut().filter(|i| **i == x) {
                *input = y.clone();
            }
        }
        _ => g.output.push(ValueInfoProto {
            name: Some(y),
            ..Default::default()
        }),
    }
    g.node.insert(at.min(g.node.len()), node);
}

fn ints_attr(name: &str, ints: Vec<i64>) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(7),
        ints,
        ..Default::default()
    }
}

fn int_attr(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(2),
        i: Some(i),
        ..Default::default()
    }
}

/// Attributes that size an output, per op: set on the nodes that have them
/// (or can have them) to sizes, duplicates or out-of-range entries.
fn sizing_attribute(g: &mut GraphProto, rng: &mut Rng) {
    const SIZED: [&str; 12] = [
        "Transpose",
        "ConvTranspose",
        "Split",
        "TopK",
        "Concat",
        "Gather",
        "Flatten",
        "Pad",
        "Upsample",
        "Conv",
        "MaxPool",
        "Softmax",
    ];
    let holders: Vec<usize> = (0..g.node.len())
        .filter(|&i| SIZED.contains(&g.node[i].op_type.as_deref().unwrap_or("")))
        .collect();
    let i = match rng.pick(&holders) {
        Some(&i) => i,
        None if !g.node.is_empty() => rng.below(g.node.len()),
        None => return,
    };
    let n = &mut g.node[i];
    let (name, value) = match n.op_type.as_deref().unwrap_or("") {
        "Transpose" => {
            let rank = n
                .attribute
                .iter()
                .find(|a| a.name.as_deref() == Some("perm"))
                .map_or(4, |a| a.ints.len().max(1));
            let mut perm: Vec<i64> = (0..rank as i64).collect();
            // A duplicate, or one entry out of range.
            let j = rng.below(rank);
            perm[j] = if rng.chance(1, 2) {
                perm[(j + 1) % rank]
            } else {
                size(rng)
            };
            ("perm", ints_attr("perm", perm))
        }
        "ConvTranspose" => {
            let which = *rng
                .pick(&["output_shape", "output_padding", "pads", "dilations"])
                .unwrap_or(&"output_shape");
            (which, ints_attr(which, sizes(rng, 2)))
        }
        "Split" => {
            let n = 1 + rng.below(4);
            ("split", ints_attr("split", sizes(rng, n)))
        }
        "TopK" => ("k", int_attr("k", size(rng))),
        "Pad" => {
            let n = 2 * (1 + rng.below(4));
            ("pads", ints_attr("pads", sizes(rng, n)))
        }
        "Upsample" => (
            "scales",
            AttributeProto {
                name: Some("scales".into()),
                r#type: Some(6),
                floats: (0..4).map(|_| scale(rng)).collect(),
                ..Default::default()
            },
        ),
        "Conv" if rng.chance(1, 4) => ("group", int_attr("group", size(rng))),
        "Conv" | "MaxPool" => {
            let which = *rng
                .pick(&["kernel_shape", "pads", "dilations", "strides"])
                .unwrap_or(&"pads");
            let n = 2 + 2 * rng.below(2);
            (which, ints_attr(which, sizes(rng, n)))
        }
        _ => ("axis", int_attr("axis", size(rng))),
    };
    n.attribute.retain(|a| a.name.as_deref() != Some(name));
    n.attribute.push(value);
}

/// Element types whose bytes are not the tensor's: the same bytes read as
/// another type (twice as many elements, or half), one byte short, or no
/// bytes at all for a non-empty shape.
fn wrong_bytes(t: &mut TensorProto, rng: &mut Rng) {
    match rng.below(4) {
        0 => t.data_type = Some(*rng.pick(&[1, 2, 3, 5, 6, 7, 9, 10, 11, 16]).unwrap_or(&7)),
        1 => {
            if let Some(raw) = &t.raw_data
                && !raw.is_empty()
            {
                t.raw_data = Some(raw.slice(..raw.len() - 1));
            }
        }
        2 => {
            t.raw_data = Some(Bytes::new());
            t.float_data.clear();
            t.int64_data.clear();
            t.int32_data.clear();
        }
        _ => {
            // Typed fields and raw bytes both present, disagreeing.
            t.float_data = vec![1.0; 1 + rng.below(3)];
        }
    }
}

/// Points an initializer at external data outside the model's folder, in
/// a device file, or past its file's end.
fn external_outside(t: &mut TensorProto, rng: &mut Rng) {
    let location = *rng
        .pick(&[
            "../outside.bin",
            "../../../../etc/passwd",
            "/etc/passwd",
            "/dev/zero",
            "/proc/self/mem",
            "sub/../../x.bin",
            "",
            "missing.bin",
            ".",
        ])
        .unwrap_or(&"../outside.bin");
    let mut entries = vec![StringStringEntryProto {
        key: Some("location".into()),
        value: Some(location.into()),
    }];
    for key in ["offset", "length"] {
        if rng.chance(1, 2) {
            let v = size(rng);
            entries.push(StringStringEntryProto {
                key: Some(key.into()),
                value: Some(if rng.chance(1, 8) {
                    "twelve".into()
                } else {
                    v.to_string()
                }),
            });
        }
    }
    t.external_data = entries;
    t.data_location = Some(1);
    t.raw_data = None;
    t.float_data.clear();
    t.int64_data.clear();
    t.int32_data.clear();
}

/// An If branch or Loop body that returns the wrong thing: an output named
/// after an outer value or nothing, of another type or rank, or (Loop) its
/// condition dropped.
fn body_outputs(g: &mut GraphProto, rng: &mut Rng) {
    let outer: Vec<String> = g.node.iter().flat_map(|n| n.output.clone()).collect();
    let mut bodies: Vec<&mut GraphProto> = g
        .node
        .iter_mut()
        .flat_map(|n| n.attribute.iter_mut())
        .filter_map(|a| a.g.as_mut())
        .collect();
    let len = bodies.len();
    if len == 0 {
        return;
    }
    let body = &mut bodies[rng.below(len)];
    let inner: Vec<String> = body.node.iter().flat_map(|n| n.output.clone()).collect();
    if body.output.is_empty() {
        return;
    }
    let at = rng.below(body.output.len());
    let how = rng.below(4);
    if how == 3 {
        body.output.remove(at);
        return;
    }
    let out = &mut body.output[at];
    match how {
        0 => {
            let name = rng
                .pick(&outer)
                .or_else(|| rng.pick(&inner))
                .cloned()
                .unwrap_or_else(|| "ghost".into());
            out.name = Some(name);
        }
        1 => out.name = Some(String::new()),
        _ => {
            if let Some(type_proto::Value::TensorType(t)) =
                out.r#type.as_mut().and_then(|t| t.value.as_mut())
            {
                t.elem_type = Some(*rng.pick(&[1, 6, 7, 9, 10, 8]).unwrap_or(&7));
                let rank = rng.below(5);
                t.shape = Some(infopt_ir::proto::TensorShapeProto {
                    dim: (0..rank)
                        .map(|_| tensor_shape::Dimension {
                            value: Some(tensor_shape::DimValue::DimValue(size(rng))),
                            denotation: None,
                        })
                        .collect(),
                });
            }
        }
    }
}
