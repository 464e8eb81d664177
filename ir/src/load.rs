//! ONNX protobuf → IR.

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;
use prost::Message;

use crate::attr::Attribute;
use crate::error::{IrError, Result};
use crate::external::{ExternalResolver, map_file};
use crate::graph::{Graph, GraphIo, Node, NodeId, Slot, Use, Value, ValueId};
use crate::model::{Model, SourceInfo};
use crate::proto::{AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto};
use crate::tensor::Tensor;

// `Model::load` lives here, beside what it calls, so that model.rs (the type)
// needs nothing of loading.
impl Model {
    pub fn load(path: &Path) -> Result<Model> {
        load_model(path)
    }
}

/// Loads a model file. The file is memory-mapped and never written; tensor data
/// (including external data) stays in the maps instead of being copied.
pub fn load_model(path: &Path) -> Result<Model> {
    let bytes = map_file(path).map_err(|source| IrError::Read {
        path: path.into(),
        source,
    })?;
    if bytes.is_empty() {
        return Err(IrError::EmptyFile { path: path.into() });
    }
    let file_size = bytes.len() as u64;
    let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
    let mut model = model_from_bytes(bytes, &dir, path)?;
    if let Some(src) = &mut model.source {
        src.path = Some(path.to_path_buf());
        src.file_size = file_size;
    }
    // Decoding faults in the pages around every field it reads (most of a
    // model of small weights); none of them is needed until a pass reads it.
    crate::external::release_mapped_pages();
    Ok(model)
}

/// Decodes a model from bytes; external data is resolved relative to `dir`.
/// `label` names the model in error messages.
pub fn model_from_bytes(bytes: Bytes, dir: &Path, label: &Path) -> Result<Model> {
    let mut proto = ModelProto::decode(bytes.clone()).map_err(|e| IrError::Decode {
        path: label.into(),
        detail: e.to_string().replace('\n', " "),
    })?;
    let graph_proto = match proto.graph.take() {
        Some(g) => g,
        None => {
            return Err(IrError::NotOnnx {
                path: label.into(),
                detail: "no graph".into(),
            });
        }
    };
    if proto.ir_version.is_none() && proto.opset_import.is_empty() {
        return Err(IrError::NotOnnx {
            path: label.into(),
            detail: "neither an IR version nor opset imports".into(),
        });
    }
    let mut resolver = ExternalResolver::new(dir);
    let graph = build_graph(graph_proto, false, &mut resolver)?;
    Ok(Model {
        meta: proto,
        graph,
        source: Some(SourceInfo {
            path: None,
            file_size: bytes.len() as u64,
            external_files: resolver.files(),
        }),
    })
}

/// What defined a name, for duplicate-definition messages.
fn describe_definer(graph: &Graph, v: ValueId) -> String {
    let value = graph.value(v);
    if let Some((n, _)) = value.producer {
        let node = graph.node(n);
        format!("node '{}' ({})", node.name_or_op(), node.op_type)
    } else if value.initializer.is_some() {
        "an initializer".into()
    } else if value.sparse.is_some() {
        "a sparse initializer".into()
    } else {
        "a graph input".into()
    }
}

fn resolve_tensor(
    name: &str,
    proto: &mut TensorProto,
    resolver: &mut ExternalResolver,
) -> Result<Option<crate::tensor::ExternalOrigin>> {
    let origin = if Tensor::proto_is_external(proto) {
        Some(resolver.resolve(name, proto)?)
    } else {
        None
    };
    check_tensor(name, proto)?;
    Ok(origin)
}

/// Refuses a tensor whose dims cannot describe its data: a negative dim, an
/// element count that overflows, or raw bytes of another size than the dims
/// and type need. Kernels and passes size buffers by the dims, so a file must
/// not be able to claim more than it holds.
fn check_tensor(name: &str, proto: &TensorProto) -> Result<()> {
    let bad = |problem: String| IrError::BadTensor {
        tensor: name.to_string(),
        problem,
    };
    if let Some((i, d)) = proto.dims.iter().enumerate().find(|(_, d)| **d < 0) {
        return Err(bad(format!(
            "dim {i} is {d}; tensor dims must be non-negative"
        )));
    }
    let numel = proto
        .dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))
        .ok_or_else(|| bad(format!("dims {:?} overflow the element count", proto.dims)))?;
    // A segment holds part of a tensor; its raw data is not the whole shape.
    if proto.segment.is_some() {
        return Ok(());
    }
    let dtype = crate::dtype::DataType::from_code(proto.data_type.unwrap_or(0));
    if let Some(raw) = &proto.raw_data {
        if let Some(need) = dtype.storage_bytes(numel)
            && raw.len() != need
        {
            return Err(bad(format!(
                "raw data holds {} bytes, but {dtype} dims {:?} need {need}",
                raw.len(),
                proto.dims
            )));
        }
        return Ok(());
    }
    // Typed fields: one entry per element (two for complex numbers), for the
    // types whose storage is unambiguous.
    use crate::dtype::DataType as D;
    let (held, per) = match dtype {
        D::Float => (proto.float_data.len(), 1),
        D::Complex64 => (proto.float_data.len(), 2),
        D::Double => (proto.double_data.len(), 1),
        D::Complex128 => (proto.double_data.len(), 2),
        D::Int64 => (proto.int64_data.len(), 1),
        D::Uint32 | D::Uint64 => (proto.uint64_data.len(), 1),
        D::Int32
        | D::Int16
        | D::Int8
        | D::Uint16
        | D::Uint8
        | D::Bool
        | D::Float16
        | D::Bfloat16 => (proto.int32_data.len(), 1),
        D::String => (proto.string_data.len(), 1),
        _ => return Ok(()),
    };
    if held != numel.saturating_mul(per) {
        return Err(bad(format!(
            "holds {held} values, but {dtype} dims {:?} need {}",
            proto.dims,
            numel.saturating_mul(per)
        )));
    }
    Ok(())
}

/// Builds the IR of one graph. In a subgraph, names not defined locally become
/// `outer` values, resolved against the enclosing graph by the caller.
pub(crate) fn build_graph(
    mut proto: GraphProto,
    is_subgraph: bool,
    resolver: &mut ExternalResolver,
) -> Result<Graph> {
    let mut g = Graph::default();
    let mut names: HashMap<String, ValueId> = HashMap::new();

    let nodes = std::mem::take(&mut proto.node);
    let inputs = std::mem::take(&mut proto.input);
    let outputs = std::mem::take(&mut proto.output);
    let initializers = std::mem::take(&mut proto.initializer);
    let sparse = std::mem::take(&mut proto.sparse_initializer);
    let value_info = std::mem::take(&mut proto.value_info);
    g.meta = proto;

    let duplicate =
        |g: &Graph, name: &str, first: ValueId, second: String| IrError::DuplicateDefinition {
            name: name.to_string(),
            first: describe_definer(g, first),
            second,
        };

    for mut info in inputs {
        let name = info.name.take().unwrap_or_default();
        if let Some(&v) = names.get(&name) {
            return Err(duplicate(&g, &name, v, "another graph input".into()));
        }
        let v = g.add_value(Value::named(&name));
        names.insert(name, v);
        g.inputs.push(GraphIo { value: v, info });
    }
    for mut t in initializers {
        let name = t.name.clone().unwrap_or_default();
        let origin = resolve_tensor(&name, &mut t, resolver)?;
        let mut tensor = Tensor::from_proto(t);
        tensor.external = origin;
        let v = match names.get(&name) {
            // An initializer that is also a graph input (IR < 4 style): the
            // input's default value.
            Some(&v) if g.is_graph_input(v) && g.value(v).initializer.is_none() => v,
            Some(&v) => return Err(duplicate(&g, &name, v, "an initializer".into())),
            None => {
                let v = g.add_value(Value::named(&name));
                names.insert(name, v);
                v
            }
        };
        g.value_mut(v).initializer = Some(tensor);
        g.initializer_order.push(v);
    }
    for s in sparse {
        let name = s
            .values
            .as_ref()
            .and_then(|t| t.name.clone())
            .unwrap_or_default();
        let v = match names.get(&name) {
            Some(&v) if g.is_graph_input(v) && g.value(v).sparse.is_none() => v,
            Some(&v) => return Err(duplicate(&g, &name, v, "a sparse initializer".into())),
            None => {
                let v = g.add_value(Value::named(&name));
                names.insert(name, v);
                v
            }
        };
        g.value_mut(v).sparse = Some(Box::new(s));
        g.sparse_order.push(v);
    }

    // Create every node and its outputs first, so inputs can refer to values
    // produced later in the file (an unsorted graph is sorted at save; a cycle
    // is reported by validation).
    let mut pending_inputs: Vec<(NodeId, Vec<String>)> = Vec::with_capacity(nodes.len());
    for np in nodes {
        let (node, input_names, output_names) = build_node(np, resolver)?;
        let id = g.add_node(node, &[]);
        for (slot, name) in output_names.iter().enumerate() {
            if name.is_empty() {
                g.node_mut(id).outputs.push(None);
                continue;
            }
            if let Some(&v) = names.get(name) {
                let n = g.node(id);
                let second = format!("node '{}' ({})", n.name_or_op(), n.op_type);
                return Err(duplicate(&g, name, v, second));
            }
            let v = g.add_value(Value {
                producer: Some((id, slot as u32)),
                ..Value::named(name)
            });
            names.insert(name.clone(), v);
            g.node_mut(id).outputs.push(Some(v));
        }
        pending_inputs.push((id, input_names));
    }

    let mut resolve_name = |g: &mut Graph, name: &str, node: Option<NodeId>| -> Result<ValueId> {
        if let Some(&v) = names.get(name) {
            return Ok(v);
        }
        if is_subgraph {
            let v = g.add_value(Value {
                outer: true,
                ..Value::named(name)
            });
            names.insert(name.to_string(), v);
            return Ok(v);
        }
        match node {
            Some(n) => {
                let node = g.node(n);
                Err(IrError::UndefinedInput {
                    node: node.name_or_op().to_string(),
                    op: node.op_type.clone(),
                    input: name.to_string(),
                })
            }
            None => Err(IrError::UndefinedOutput {
                name: name.to_string(),
            }),
        }
    };

    for (id, input_names) in pending_inputs {
        for (slot, name) in input_names.iter().enumerate() {
            let v = if name.is_empty() {
                None
            } else {
                Some(resolve_name(&mut g, name, Some(id))?)
            };
            g.node_mut(id).inputs.push(v);
            if let Some(v) = v {
                g.value_mut(v).uses.push(Use {
                    node: id,
                    slot: Slot::Input(slot as u32),
                });
            }
        }
        // Values read by the node's subgraphs from this scope.
        let mut free = Vec::new();
        for sg in g.node(id).subgraphs() {
            sg.collect_free_names(&mut free);
        }
        free.sort();
        free.dedup();
        for name in free {
            let v = resolve_name(&mut g, &name, Some(id))?;
            g.value_mut(v).uses.push(Use {
                node: id,
                slot: Slot::Capture,
            });
        }
    }

    for mut info in outputs {
        let name = info.name.take().unwrap_or_default();
        let v = resolve_name(&mut g, &name, None)?;
        if g.outputs.iter().any(|o| o.value == v) {
            return Err(IrError::DuplicateOutput { name });
        }
        g.outputs.push(GraphIo { value: v, info });
    }

    for mut info in value_info {
        let name = info.name.take().unwrap_or_default();
        let v = match names.get(&name) {
            Some(&v) if g.value(v).info.is_none() => v,
            // A second entry for the same name, or one for a value that does not
            // exist: keep it as a detached label so it round-trips.
            _ => g.add_value(Value::named(&name)),
        };
        g.value_mut(v).info = Some(Box::new(info));
        g.value_info_order.push(v);
    }
    Ok(g)
}

/// Builds a node (without linking its values) and returns its input and output names.
fn build_node(
    mut np: NodeProto,
    resolver: &mut ExternalResolver,
) -> Result<(Node, Vec<String>, Vec<String>)> {
    let inputs = std::mem::take(&mut np.input);
    let outputs = std::mem::take(&mut np.output);
    let attrs = std::mem::take(&mut np.attribute);
    let name = np.name.take();
    let op_type = np.op_type.take().unwrap_or_default();
    let domain = np.domain.take();
    let mut attributes = Vec::with_capacity(attrs.len());
    for a in attrs {
        attributes.push(build_attribute(
            a,
            name.as_deref().unwrap_or(&op_type),
            resolver,
        )?);
    }
    let node = Node {
        name,
        op_type,
        domain,
        inputs: Vec::new(),
        outputs: Vec::new(),
        attributes,
        extra: np,
    };
    Ok((node, inputs, outputs))
}

fn build_attribute(
    mut a: AttributeProto,
    node: &str,
    resolver: &mut ExternalResolver,
) -> Result<Attribute> {
    let mut subgraphs = Vec::new();
    let single_graph = a.g.is_some();
    if let Some(g) = a.g.take() {
        subgraphs.push(build_graph(g, true, resolver)?);
    }
    for g in std::mem::take(&mut a.graphs) {
        subgraphs.push(build_graph(g, true, resolver)?);
    }
    // Tensors in attributes (Constant values) may also use external data; they
    // are brought inline.
    let label = format!("{node}.{}", a.name.as_deref().unwrap_or(""));
    if let Some(t) = a.t.as_mut() {
        resolve_tensor(&label, t, resolver)?;
    }
    for t in a.tensors.iter_mut() {
        resolve_tensor(&label, t, resolver)?;
    }
    Ok(Attribute {
        proto: a,
        subgraphs,
        single_graph,
    })
}
