//! tract as a fallback evaluator for constant folding: ops the reference
//! kernels do not implement (Erf, Tanh, Conv on constants, ...) are run as a
//! one-node model in tract. Registered by the CLI, so `passes/` does not depend
//! on a runtime.

use bytes::Bytes;
use infopt_ir::kernels::{Evaluator, KernelError};
use infopt_ir::{DataType, GraphIo, Model, Node, Tensor};
use infopt_runtime::{Backend, HostTensor, InputShapes, TensorData, TractBackend};

/// Inputs above this size are not handed to tract: folding is for small
/// constant subgraphs, and a large one is better left to the runtime.
const MAX_INPUT_BYTES: usize = 16 << 20;

pub struct TractEvaluator;

pub fn factory() -> Box<dyn Evaluator> {
    Box::new(TractEvaluator)
}

fn to_tensor(t: &HostTensor) -> Option<Tensor> {
    let dims: Vec<i64> = t.shape().iter().map(|&d| d as i64).collect();
    let (dtype, bytes): (DataType, Vec<u8>) = match t.data() {
        TensorData::F32(v) => (
            DataType::Float,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        TensorData::F64(v) => (
            DataType::Double,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        TensorData::F16(v) => (
            DataType::Float16,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        TensorData::BF16(v) => (
            DataType::Bfloat16,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        TensorData::I8(v) => (
            DataType::Int8,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        TensorData::I16(v) => (
            DataType::Int16,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        TensorData::I32(v) => (
            DataType::Int32,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        TensorData::I64(v) => (
            DataType::Int64,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        TensorData::U8(v) => (DataType::Uint8, v.clone()),
        TensorData::U16(v) => (
            DataType::Uint16,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        TensorData::U32(v) => (
            DataType::Uint32,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        TensorData::U64(v) => (
            DataType::Uint64,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        TensorData::Bool(v) => (DataType::Bool, v.iter().map(|&b| b as u8).collect()),
    };
    Some(Tensor::from_raw(dtype, dims, Bytes::from(bytes)))
}

impl Evaluator for TractEvaluator {
    fn eval(
        &self,
        node: &Node,
        inputs: &[Option<&Tensor>],
        opset: i64,
    ) -> Result<Option<Vec<Tensor>>, KernelError> {
        // Forms tract computes wrong are declined with the reason, never
        // folded.
        if let Some(why) = infopt_verify::tract_limits::wrong_in_tract(node) {
            return Err(KernelError::Unsupported(format!(
                "the fallback evaluator: {why}"
            )));
        }
        let Some(native) = run_in_tract(node, inputs, opset)? else {
            return Ok(None);
        };
        let Some((narrow, wide_type)) = widening(node, inputs) else {
            return Ok(Some(native));
        };
        // tract computes float16 in float16, step by step (a Conv's sums, a
        // Softmax's exponentials and sum each rounded to 11 bits), where the
        // op's definition rounds its result: the op runs in float32 and each
        // float16 output is rounded once. float32 likewise runs in float64
        // where tract can (a GRU's state near zero was off by 1e-6 in
        // float32, ten times ONNX's tolerance).
        let wide_inputs: Vec<Option<Tensor>> = inputs
            .iter()
            .map(|t| t.map(|t| cast(t, narrow, wide_type)).transpose())
            .collect::<Result<_, _>>()?;
        let refs: Vec<Option<&Tensor>> = wide_inputs.iter().map(|t| t.as_ref()).collect();
        let wide = match run_in_tract(node, &refs, opset)? {
            Some(w) if w.len() == native.len() => w,
            // float32 is what runtimes compute: tract's own result stands.
            _ if narrow == DataType::Float => return Ok(Some(native)),
            _ => {
                return Err(KernelError::Unsupported(format!(
                    "{} in float16: the fallback evaluator (tract) runs it only in float16, with float16 intermediate rounding",
                    node.op_type
                )));
            }
        };
        native
            .iter()
            .zip(wide)
            .map(|(n, w)| match (n.dtype(), w.dtype()) {
                (a, b) if a == narrow && b == wide_type => cast(&w, wide_type, narrow),
                (a, b) if a == b => Ok(w),
                (a, b) => Err(KernelError::Unsupported(format!(
                    "{} gives {a} in {narrow} but {b} in {wide_type}",
                    node.op_type
                ))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

/// The float type a node's inputs have and the wider one it runs in (see
/// `eval`): every float input has the same type, float16 or float32, and
/// nothing about the op depends on the input type beyond precision (no
/// Cast, no attribute naming a type).
fn widening(node: &Node, inputs: &[Option<&Tensor>]) -> Option<(DataType, DataType)> {
    let floats: Vec<DataType> = inputs
        .iter()
        .flatten()
        .map(|t| t.dtype())
        .filter(|d| d.is_float())
        .collect();
    let narrow = *floats.first()?;
    let wide = match narrow {
        DataType::Float16 => DataType::Float,
        DataType::Float => DataType::Double,
        _ => return None,
    };
    let plain = floats.iter().all(|&d| d == narrow)
        && !matches!(node.op_type.as_str(), "Cast" | "CastLike" | "BitCast")
        && !node.attributes.iter().any(|a| {
            matches!(
                a.name(),
                "to" | "dtype" | "output_dtype" | "stash_type" | "saturate"
            )
        });
    plain.then_some((narrow, wide))
}

/// A `from` tensor converted to `to` through the reference kernels (exact:
/// widening keeps every value, narrowing rounds once); others unchanged.
fn cast(t: &Tensor, from: DataType, to: DataType) -> Result<Tensor, KernelError> {
    if t.dtype() != from {
        return Ok(t.clone());
    }
    let node = Node {
        op_type: "Cast".into(),
        attributes: vec![infopt_ir::Attribute::int("to", to.code() as i64)],
        ..Default::default()
    };
    let out = infopt_ir::kernels::ReferenceKernels::new()
        .eval(&node, &[Some(t)], 21)?
        .and_then(|mut v| v.pop());
    out.ok_or_else(|| KernelError::invalid(format!("Cast from {from} to {to}")))
}

/// Runs `node` alone in tract on constant inputs; `None` when tract refuses
/// it (not implemented there).
fn run_in_tract(
    node: &Node,
    inputs: &[Option<&Tensor>],
    opset: i64,
) -> Result<Option<Vec<Tensor>>, KernelError> {
    // Standard ops only (tract matches ops by name and ignores the domain),
    // and no subgraphs.
    if !node.domain().is_empty() || node.has_subgraphs() {
        return Ok(None);
    }
    if inputs
        .iter()
        .flatten()
        .any(|t| t.payload_bytes() > MAX_INPUT_BYTES || t.dtype() == DataType::String)
    {
        return Ok(None);
    }
    let mut g = infopt_ir::Graph::new("fold");
    let mut one = Node {
        op_type: node.op_type.clone(),
        attributes: node.attributes.clone(),
        ..Default::default()
    };
    for (i, t) in inputs.iter().enumerate() {
        one.inputs
            .push(t.map(|t| g.add_initializer(&format!("in{i}"), t.clone())));
    }
    let names: Vec<String> = (0..node.outputs.len()).map(|i| format!("out{i}")).collect();
    let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    let id = g.add_node(one, &refs);
    for v in g.node(id).outputs.clone().into_iter().flatten() {
        let name = g.value(v).name.clone();
        g.outputs.push(GraphIo {
            value: v,
            info: infopt_ir::proto::ValueInfoProto {
                name: Some(name),
                ..Default::default()
            },
        });
    }
    let bytes = Model::new(g, opset)
        .to_bytes()
        .map_err(|e| KernelError::invalid(e.to_string()))?;
    // tract refusing the op (or the node) means "not implemented here".
    let Ok(loaded) = TractBackend.load(&bytes, None, &InputShapes::new()) else {
        return Ok(None);
    };
    let Ok(outputs) = loaded.run(&[]) else {
        return Ok(None);
    };
    let tensors: Option<Vec<Tensor>> = outputs.iter().map(to_tensor).collect();
    Ok(tensors)
}
