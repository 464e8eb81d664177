//! Quantization arithmetic and the Q/DQ nodes a plan turns into.
//!
//! Everything here follows the ONNX `QuantizeLinear` definition, so an INT8
//! initializer written by this module holds exactly what a runtime's
//! `QuantizeLinear` would compute from the float weight: `x / scale` in f32,
//! rounded half to even, plus the zero point, saturated.

use bytes::Bytes;
use infopt_ir::{
    Attribute, DataType, Dim, Graph, Node, Patch, PatchValue, Tensor, TensorType, Use, ValueId,
};

/// Integer type and affine parameters of one quantized activation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ActParams {
    pub dtype: DataType,
    pub scale: f32,
    pub zero_point: i32,
}

impl ActParams {
    /// Symmetric INT8: zero point 0, `scale = amax / 127`.
    pub fn symmetric(amax: f32) -> ActParams {
        ActParams {
            dtype: DataType::Int8,
            scale: amax / 127.0,
            zero_point: 0,
        }
    }

    /// A tensor known to be `>= 0` (a Relu output) on ONNX Runtime: the whole
    /// integer range covers `[0, amax]`, and the zero point is the type's
    /// lowest value, which lets ORT drop the Relu in front of the Q
    /// (quantizing already clamps at 0).
    pub fn non_negative(amax: f32, dtype: DataType) -> ActParams {
        ActParams {
            dtype,
            scale: amax / 255.0,
            zero_point: if dtype == DataType::Uint8 { 0 } else { -128 },
        }
    }

    /// Symmetric range in `dtype`: INT8 zero point 0, UINT8 zero point 128.
    pub fn symmetric_in(amax: f32, dtype: DataType) -> ActParams {
        ActParams {
            dtype,
            scale: amax / 127.0,
            zero_point: if dtype == DataType::Uint8 { 128 } else { 0 },
        }
    }
}

/// `QuantizeLinear` of one value: round half to even, add the zero point,
/// saturate to `[lo, hi]`.
pub fn quantize_value(x: f32, scale: f32, zero_point: i32, lo: i32, hi: i32) -> i32 {
    let q = (x / scale).round_ties_even() + zero_point as f32;
    if q.is_nan() {
        return zero_point.clamp(lo, hi);
    }
    q.clamp(lo as f32, hi as f32) as i32
}

/// Per-channel symmetric INT8 weight: `scale[c] = max|w[c]| / 127` and
/// values in `[-127, 127]` (never -128, so `-q` is representable and the
/// product of two such values cannot overflow an i16 pair sum in int kernels).
pub struct QuantizedWeight {
    pub scales: Vec<f32>,
    pub values: Vec<i8>,
}

/// Quantizes `w` (dims `dims`) per channel along `axis`.
///
/// Every candidate model of the INT8 search quantizes every weight again
/// (EfficientNet-B0: 5.3 M values, 37 builds a command): the values are
/// walked in runs of one channel rather than finding each one's channel by
/// a division.
pub fn quantize_weight(w: &[f32], dims: &[i64], axis: usize) -> QuantizedWeight {
    let channels = dims.get(axis).map_or(1, |&d| d.max(1) as usize);
    let inner: usize = dims
        .get(axis + 1..)
        .unwrap_or(&[])
        .iter()
        .map(|&d| d.max(0) as usize)
        .product::<usize>()
        .max(1);
    let mut amax = vec![0f32; channels];
    for (k, run) in w.chunks(inner).enumerate() {
        let c = k % channels;
        for &v in run {
            if v.is_finite() {
                amax[c] = amax[c].max(v.abs());
            }
        }
    }
    // An all-zero channel gets scale 1: every value quantizes to 0 either
    // way, and a zero scale would make QuantizeLinear divide by zero.
    let scales: Vec<f32> = amax
        .iter()
        .map(|&a| if a > 0.0 { a / 127.0 } else { 1.0 })
        .collect();
    let mut values = Vec::with_capacity(w.len());
    for (k, run) in w.chunks(inner).enumerate() {
        let scale = scales[k % channels];
        values.extend(
            run.iter()
                .map(|&v| quantize_value(v, scale, 0, -127, 127) as i8),
        );
    }
    QuantizedWeight { scales, values }
}

/// INT32 bias for ONNX Runtime's integer Conv/Gemm: `scale[c] = s_x * s_w[c]`.
pub fn quantize_bias(b: &[f32], act_scale: f32, weight_scales: &[f32]) -> (Vec<f32>, Vec<i32>) {
    let scales: Vec<f32> = weight_scales.iter().map(|&s| act_scale * s).collect();
    let values = b
        .iter()
        .zip(&scales)
        .map(|(&v, &s)| {
            let q = (v as f64 / s as f64).round_ties_even();
            q.clamp(i32::MIN as f64 + 1.0, i32::MAX as f64) as i32
        })
        .collect();
    (scales, values)
}

pub fn int_tensor(dtype: DataType, dims: Vec<i64>, values: &[i32]) -> Tensor {
    let bytes: Vec<u8> = match dtype {
        DataType::Int8 => values.iter().map(|&v| v as i8 as u8).collect(),
        DataType::Uint8 => values.iter().map(|&v| v as u8).collect(),
        _ => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    Tensor::from_raw(dtype, dims, Bytes::from(bytes))
}

fn node(op: &str, name: String, axis: Option<i64>) -> Node {
    let mut n = Node::new(op);
    n.name = Some(name);
    if let Some(a) = axis {
        n.set_attr(Attribute::int("axis", a));
    }
    n
}

fn shape_of(g: &Graph, v: ValueId) -> Option<Vec<Dim>> {
    g.value_type(v).and_then(|t| t.shape)
}

/// Adds `t → QuantizeLinear → DequantizeLinear` and makes `uses` read the
/// DQ output. Names: `{t}_scale`, `{t}_zero_point`, `{t}_q`, `{t}_dq`.
pub fn add_activation_qdq(p: &mut Patch, g: &Graph, t: ValueId, params: ActParams, uses: Vec<Use>) {
    let name = g.value(t).name.clone();
    let scale = p.add_initializer(
        &format!("{name}_scale"),
        Tensor::from_f32(vec![], &[params.scale]),
    );
    let zp = p.add_initializer(
        &format!("{name}_zero_point"),
        int_tensor(params.dtype, vec![], &[params.zero_point]),
    );
    let q = p.add_node(
        node("QuantizeLinear", format!("{name}_QuantizeLinear"), None),
        vec![Some(PatchValue::Existing(t)), Some(scale), Some(zp)],
        vec![format!("{name}_q")],
    );
    let q_out = PatchValue::NewNode { node: q, output: 0 };
    let dq = p.add_node(
        node("DequantizeLinear", format!("{name}_DequantizeLinear"), None),
        vec![Some(q_out), Some(scale), Some(zp)],
        vec![format!("{name}_dq")],
    );
    let dq_out = PatchValue::NewNode {
        node: dq,
        output: 0,
    };
    let shape = shape_of(g, t);
    p.set_type(
        q_out,
        TensorType {
            dtype: params.dtype,
            shape: shape.clone(),
        },
    );
    p.set_type(
        dq_out,
        TensorType {
            dtype: DataType::Float,
            shape,
        },
    );
    p.redirect_uses(t, uses, dq_out);
}

/// How a quantized weight is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightStorage {
    /// FP32 initializer → QuantizeLinear → DequantizeLinear.
    Qdq,
    /// INT8 initializer → DequantizeLinear (about 4× smaller).
    Int8,
}

/// Adds the per-channel Q/DQ (or INT8 + DQ) of weight `w` read by `uses`;
/// returns the weight scales (for an INT32 bias).
pub fn add_weight_qdq(
    p: &mut Patch,
    g: &Graph,
    w: ValueId,
    axis: usize,
    storage: WeightStorage,
    uses: Vec<Use>,
) -> Option<Vec<f32>> {
    let tensor = g.constant(w)?;
    let dims = tensor.dims().to_vec();
    let values = f32_values(tensor)?;
    let qw = quantize_weight(&values, &dims, axis);
    let name = g.value(w).name.clone();
    let channels = qw.scales.len() as i64;
    let scale = p.add_initializer(
        &format!("{name}_scale"),
        Tensor::from_f32(vec![channels], &qw.scales),
    );
    let zp = p.add_initializer(
        &format!("{name}_zero_point"),
        int_tensor(DataType::Int8, vec![channels], &vec![0; qw.scales.len()]),
    );
    let axis = Some(axis as i64);
    let int8 = match storage {
        WeightStorage::Int8 => {
            let bytes: Vec<u8> = qw.values.iter().map(|&v| v as u8).collect();
            p.add_initializer(
                &format!("{name}_quantized"),
                Tensor::from_raw(DataType::Int8, dims.clone(), Bytes::from(bytes)),
            )
        }
        WeightStorage::Qdq => {
            let q = p.add_node(
                node("QuantizeLinear", format!("{name}_QuantizeLinear"), axis),
                vec![Some(PatchValue::Existing(w)), Some(scale), Some(zp)],
                vec![format!("{name}_q")],
            );
            PatchValue::NewNode { node: q, output: 0 }
        }
    };
    let dq = p.add_node(
        node("DequantizeLinear", format!("{name}_DequantizeLinear"), axis),
        vec![Some(int8), Some(scale), Some(zp)],
        vec![format!("{name}_dq")],
    );
    let dq_out = PatchValue::NewNode {
        node: dq,
        output: 0,
    };
    let shape = Some(dims.iter().map(|&d| Dim::Known(d)).collect::<Vec<_>>());
    p.set_type(
        dq_out,
        TensorType {
            dtype: DataType::Float,
            shape,
        },
    );
    p.redirect_uses(w, uses, dq_out);
    Some(qw.scales)
}

/// A constant's values as f32: read straight from little-endian f32 bytes,
/// other types through f64.
fn f32_values(tensor: &Tensor) -> Option<Vec<f32>> {
    if tensor.dtype() == DataType::Float {
        let raw = tensor.raw_bytes().ok()?;
        return Some(
            raw.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        );
    }
    Some(
        tensor
            .to_f64_vec()
            .ok()?
            .iter()
            .map(|&v| v as f32)
            .collect(),
    )
}

/// INT32 bias + DequantizeLinear (axis 0) for ONNX Runtime's integer Conv /
/// Gemm, which fuse only when every input is a DQ.
pub fn add_bias_dq(
    p: &mut Patch,
    g: &Graph,
    b: ValueId,
    act_scale: f32,
    weight_scales: &[f32],
    user: Use,
) -> Option<()> {
    let tensor = g.constant(b)?;
    let values: Vec<f32> = tensor
        .to_f64_vec()
        .ok()?
        .iter()
        .map(|&v| v as f32)
        .collect();
    if values.len() != weight_scales.len() {
        return None;
    }
    let (scales, ints) = quantize_bias(&values, act_scale, weight_scales);
    let name = g.value(b).name.clone();
    let n = scales.len() as i64;
    // Distinct per consumer: the scale depends on the reader's input scale.
    let tag = g.node(user.node).name_or_op().to_string();
    let scale = p.add_initializer(
        &format!("{name}_{tag}_scale"),
        Tensor::from_f32(vec![n], &scales),
    );
    let zp = p.add_initializer(
        &format!("{name}_{tag}_zero_point"),
        int_tensor(DataType::Int32, vec![n], &vec![0; scales.len()]),
    );
    let q = p.add_initializer(
        &format!("{name}_{tag}_quantized"),
        int_tensor(DataType::Int32, vec![n], &ints),
    );
    let dq = p.add_node(
        node(
            "DequantizeLinear",
            format!("{name}_{tag}_DequantizeLinear"),
            Some(0),
        ),
        vec![Some(q), Some(scale), Some(zp)],
        vec![format!("{name}_{tag}_dq")],
    );
    p.redirect_uses(
        b,
        vec![user],
        PatchValue::NewNode {
            node: dq,
            output: 0,
        },
    );
    Some(())
}
