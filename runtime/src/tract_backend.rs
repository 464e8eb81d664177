//! The tract adapter: the only module that touches tract's API.
//!
//! tract's internal crates are not a stable API, so everything tract-specific (protobuf
//! types, facts, plans, tensors) stays here, behind [`Backend`] / [`LoadedModel`].
//!
//! Loading: the bytes are decoded with tract's own ONNX protobuf schema, the input specs
//! are read from the graph, the caller's [`InputShapes`] are resolved into concrete dims
//! ([`resolve_input_shapes`]), and the graph is parsed with `Onnx::parse`, which takes the
//! model folder so that external-data initializers are read from it (tract confines their
//! locations to that folder, symlinks included). The inputs then get fully concrete facts,
//! and the model goes through `into_typed`, `into_optimized` and `into_runnable`.
//!
//! Symbolic dims in `value_info` and graph outputs are erased before parsing (known dims
//! and element types are kept): they would carry the model's symbols into tract's shape
//! inference, where they cannot unify with the concrete values chosen for the inputs.

use std::path::Path;

use tract_onnx::pb;
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::DimLike;

use crate::backend::{
    Backend, DimSpec, InputShapes, IoSpec, LoadedModel, Observe, ShapeResolution, TensorSink,
    ViewSink, check_run_inputs, resolve_input_shapes,
};
use crate::error::{Result, RuntimeError, one_line};
use crate::tensor::{DType, HostTensor, TensorData};
use crate::view::{DataView, TensorView};

const BACKEND: &str = "tract";
/// Pinned in Cargo.toml (`=0.23.9`); keep both in step.
const TRACT_VERSION: &str = "0.23.9";

/// The embedded tract backend. Single-threaded, CPU.
#[derive(Debug, Default, Clone, Copy)]
pub struct TractBackend;

impl TractBackend {
    pub fn new() -> TractBackend {
        TractBackend
    }
}

fn load_error(e: &TractError) -> RuntimeError {
    let mut message = one_line(e.chain());
    // tract's word for a cycle in the graph, easily read as the ONNX Loop operator.
    if message == "Loop detected" {
        message = "the graph has a cycle (tract: Loop detected)".into();
    }
    RuntimeError::Load {
        backend: BACKEND.into(),
        message,
    }
}

fn run_error(e: &TractError) -> RuntimeError {
    RuntimeError::Run {
        backend: BACKEND.into(),
        message: one_line(e.chain()),
    }
}

fn datum_type(dt: DType) -> Option<DatumType> {
    Some(match dt {
        DType::F32 => DatumType::F32,
        DType::F64 => DatumType::F64,
        DType::F16 => DatumType::F16,
        DType::I8 => DatumType::I8,
        DType::I16 => DatumType::I16,
        DType::I32 => DatumType::I32,
        DType::I64 => DatumType::I64,
        DType::U8 => DatumType::U8,
        DType::U16 => DatumType::U16,
        DType::U32 => DatumType::U32,
        DType::U64 => DatumType::U64,
        DType::Bool => DatumType::Bool,
        // tract has no bfloat16 tensors.
        DType::BF16 => return None,
    })
}

fn host_dtype(dt: DatumType) -> Option<DType> {
    Some(match dt {
        DatumType::F32 => DType::F32,
        DatumType::F64 => DType::F64,
        DatumType::F16 => DType::F16,
        DatumType::I8 => DType::I8,
        DatumType::I16 => DType::I16,
        DatumType::I32 => DType::I32,
        DatumType::I64 => DType::I64,
        DatumType::U8 => DType::U8,
        DatumType::U16 => DType::U16,
        DatumType::U32 => DType::U32,
        DatumType::U64 => DType::U64,
        DatumType::Bool => DType::Bool,
        _ => return None,
    })
}

/// Converts a host tensor into a tract tensor (one copy).
fn to_tract(t: &HostTensor) -> Result<Tensor> {
    let shape = t.shape();
    let r = match t.data() {
        TensorData::F32(v) => Tensor::from_shape(shape, v),
        TensorData::F64(v) => Tensor::from_shape(shape, v),
        TensorData::F16(v) => Tensor::from_shape(shape, v),
        TensorData::I8(v) => Tensor::from_shape(shape, v),
        TensorData::I16(v) => Tensor::from_shape(shape, v),
        TensorData::I32(v) => Tensor::from_shape(shape, v),
        TensorData::I64(v) => Tensor::from_shape(shape, v),
        TensorData::U8(v) => Tensor::from_shape(shape, v),
        TensorData::U16(v) => Tensor::from_shape(shape, v),
        TensorData::U32(v) => Tensor::from_shape(shape, v),
        TensorData::U64(v) => Tensor::from_shape(shape, v),
        TensorData::Bool(v) => Tensor::from_shape(shape, v),
        TensorData::BF16(_) => {
            return Err(RuntimeError::UnsupportedDType {
                backend: BACKEND.into(),
                kind: "input",
                name: t.name().unwrap_or_default().to_string(),
                dtype: "bf16".into(),
            });
        }
    };
    r.map_err(|e| run_error(&e))
}

/// Converts a tract tensor into a named host tensor (one copy).
fn from_tract(name: &str, t: &Tensor) -> Result<HostTensor> {
    view_of(name, t)?.to_host()
}

/// A borrowed view of a tract tensor (no copy).
fn view_of<'t>(name: &'t str, t: &'t Tensor) -> Result<TensorView<'t>> {
    fn typed<T: Datum + Copy>(t: &Tensor) -> TractResult<&[T]> {
        t.try_as_plain_ram()?.as_slice::<T>()
    }
    let unsupported = || RuntimeError::UnsupportedDType {
        backend: BACKEND.into(),
        kind: "output",
        name: name.to_string(),
        dtype: format!("{:?}", t.datum_type()),
    };
    let dt = host_dtype(t.datum_type()).ok_or_else(unsupported)?;
    let data = match dt {
        DType::F32 => typed::<f32>(t).map(DataView::F32),
        DType::F64 => typed::<f64>(t).map(DataView::F64),
        DType::F16 => typed::<f16>(t).map(DataView::F16),
        DType::I8 => typed::<i8>(t).map(DataView::I8),
        DType::I16 => typed::<i16>(t).map(DataView::I16),
        DType::I32 => typed::<i32>(t).map(DataView::I32),
        DType::I64 => typed::<i64>(t).map(DataView::I64),
        DType::U8 => typed::<u8>(t).map(DataView::U8),
        DType::U16 => typed::<u16>(t).map(DataView::U16),
        DType::U32 => typed::<u32>(t).map(DataView::U32),
        DType::U64 => typed::<u64>(t).map(DataView::U64),
        DType::Bool => typed::<bool>(t).map(DataView::Bool),
        DType::BF16 => return Err(unsupported()),
    }
    .map_err(|e| run_error(&e))?;
    TensorView::new(name, t.shape().to_vec(), data).ok_or_else(|| RuntimeError::Run {
        backend: BACKEND.into(),
        message: format!("output `{name}` does not fill its shape {:?}", t.shape()),
    })
}

/// Dims of an ONNX tensor type, `None` when the type has no shape.
fn dims_of(t: &pb::type_proto::Tensor) -> Option<Vec<DimSpec>> {
    use pb::tensor_shape_proto::dimension::Value;
    let shape = t.shape.as_ref()?;
    Some(
        shape
            .dim
            .iter()
            .map(|d| match &d.value {
                Some(Value::DimValue(v)) if *v >= 0 => DimSpec::Known(*v as usize),
                Some(Value::DimParam(s)) if !s.is_empty() && s != "?" => DimSpec::Symbol(s.clone()),
                _ => DimSpec::Unknown,
            })
            .collect(),
    )
}

fn tensor_type(vi: &pb::ValueInfoProto) -> Option<&pb::type_proto::Tensor> {
    match vi.r#type.as_ref()?.value.as_ref()? {
        pb::type_proto::Value::TensorType(t) => Some(t),
    }
}

/// Declared graph inputs (not initializers).
fn input_specs(graph: &pb::GraphProto) -> Result<Vec<IoSpec>> {
    let initializers: std::collections::HashSet<&str> =
        graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let mut specs = Vec::new();
    for vi in graph
        .input
        .iter()
        .filter(|vi| !initializers.contains(vi.name.as_str()))
    {
        let Some(t) = tensor_type(vi) else {
            return Err(RuntimeError::Load {
                backend: BACKEND.into(),
                message: format!("graph input `{}` has no tensor type", vi.name),
            });
        };
        let dtype =
            DType::from_onnx(t.elem_type).ok_or_else(|| RuntimeError::UnsupportedDType {
                backend: BACKEND.into(),
                kind: "input",
                name: vi.name.clone(),
                dtype: format!("ONNX type {}", t.elem_type),
            })?;
        specs.push(IoSpec {
            name: vi.name.clone(),
            dtype,
            dims: dims_of(t),
        });
    }
    Ok(specs)
}

/// Erases symbolic dims (keeping known dims and element types) from the `value_info` and
/// outputs of a graph and of every subgraph it holds.
fn erase_symbolic_dims(graph: &mut pb::GraphProto) {
    use pb::tensor_shape_proto::dimension::Value;
    for vi in graph.value_info.iter_mut().chain(graph.output.iter_mut()) {
        if let Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(t)),
            ..
        }) = vi.r#type.as_mut()
            && let Some(shape) = t.shape.as_mut()
        {
            for d in shape.dim.iter_mut() {
                if matches!(d.value, Some(Value::DimParam(_))) {
                    d.value = None;
                }
            }
        }
    }
    for node in graph.node.iter_mut() {
        for attr in node.attribute.iter_mut() {
            if let Some(g) = attr.g.as_mut() {
                erase_symbolic_dims(g);
            }
            for g in attr.graphs.iter_mut() {
                erase_symbolic_dims(g);
            }
        }
    }
}

/// Nodes (of the graph and its subgraphs) whose op tract does not implement, as
/// `` Op (node `name`) `` strings, in graph order, one per op type.
fn unsupported_ops(
    graph: &pb::GraphProto,
    onnx: &tract_onnx::Onnx,
    found: &mut Vec<(String, String)>,
) {
    for node in &graph.node {
        if !onnx.op_register.0.contains_key(&node.op_type)
            && !found.iter().any(|(op, _)| op == &node.op_type)
        {
            let name = if node.name.is_empty() {
                node.output.first().cloned().unwrap_or_default()
            } else {
                node.name.clone()
            };
            found.push((node.op_type.clone(), name));
        }
        for attr in &node.attribute {
            for g in attr.g.iter().chain(&attr.graphs) {
                unsupported_ops(g, onnx, found);
            }
        }
    }
}

/// tract without its graph optimizer: loads much faster, runs slower. For
/// one-shot runs such as verifying a rewrite on a large graph.
#[derive(Debug, Clone, Copy, Default)]
pub struct TractOneShot;

impl Backend for TractOneShot {
    fn name(&self) -> &str {
        BACKEND
    }

    fn version(&self) -> String {
        format!("tract-onnx {TRACT_VERSION} (unoptimized plan)")
    }

    fn load(
        &self,
        model_bytes: &[u8],
        model_dir: Option<&Path>,
        input_shapes: &InputShapes,
    ) -> Result<Box<dyn LoadedModel>> {
        guarded_load(model_bytes, model_dir, input_shapes, false, None)
    }

    fn load_observing(
        &self,
        model_bytes: &[u8],
        model_dir: Option<&Path>,
        input_shapes: &InputShapes,
        observe: &Observe,
    ) -> Result<Box<dyn LoadedModel>> {
        guarded_load(model_bytes, model_dir, input_shapes, false, Some(observe))
    }
}

impl Backend for TractBackend {
    fn name(&self) -> &str {
        BACKEND
    }

    fn version(&self) -> String {
        format!("tract-onnx {TRACT_VERSION}")
    }

    fn load(
        &self,
        model_bytes: &[u8],
        model_dir: Option<&Path>,
        input_shapes: &InputShapes,
    ) -> Result<Box<dyn LoadedModel>> {
        guarded_load(model_bytes, model_dir, input_shapes, true, None)
    }

    /// Observation runs the plain typed model: tract's optimizer fuses
    /// nodes, and the fused tensors would no longer exist to observe.
    fn load_observing(
        &self,
        model_bytes: &[u8],
        model_dir: Option<&Path>,
        input_shapes: &InputShapes,
        observe: &Observe,
    ) -> Result<Box<dyn LoadedModel>> {
        guarded_load(model_bytes, model_dir, input_shapes, false, Some(observe))
    }
}

/// Loads with tract's panics turned into load errors, and with a deadline.
///
/// tract's shape analysis can grow symbolic dim expressions without bound
/// on some graphs (a Mul rewired to broadcast a `[C]` constant along the
/// width of a PP-OCR classifier: fuzz seed 5151 case 918 grew for minutes
/// in `TDim::clone`, at any input size). tract has no way to stop it, so
/// the load runs on a thread of its own; past [`load_deadline`] the caller
/// gets a load error (verification then moves on to the next backend) and
/// the thread is left to finish or to end with the process.
fn guarded_load(
    model_bytes: &[u8],
    model_dir: Option<&Path>,
    input_shapes: &InputShapes,
    optimize: bool,
    observe: Option<&Observe>,
) -> Result<Box<dyn LoadedModel>> {
    let as_error = |panic| RuntimeError::Load {
        backend: BACKEND.into(),
        message: panic,
    };
    let bytes = model_bytes.to_vec();
    let dir = model_dir.map(Path::to_path_buf);
    let shapes = input_shapes.clone();
    let watched = observe.cloned();
    let (done, result) = std::sync::mpsc::channel();
    let deadline = load_deadline(model_bytes.len());
    let worker = std::thread::Builder::new()
        .name("infopt-tract-load".into())
        // tract's analysis recurses deeply; the main thread's 8 MiB, not a
        // spawned thread's 2 MiB (only the pages used are resident).
        .stack_size(64 << 20)
        .spawn(move || {
            quiet_panics_on_this_thread();
            let loaded = guard(|| {
                inject_panic(Stage::Load);
                load_model(&bytes, dir.as_deref(), &shapes, optimize, watched.as_ref())
            });
            let _ = done.send(loaded);
        });
    if worker.is_err() {
        // No thread to be had: load here, without the deadline.
        return guard(|| load_model(model_bytes, model_dir, input_shapes, optimize, observe))
            .map_err(as_error)?;
    }
    match result.recv_timeout(deadline) {
        Ok(loaded) => loaded.map_err(as_error)?,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(RuntimeError::LoadTimedOut {
            backend: "tract".into(),
            message: format!(
                "tract did not finish analysing the model in {} s (its symbolic shape analysis can grow without bound on some graphs); gave up on it",
                deadline.as_secs()
            ),
        }),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(as_error(
            "tract's load thread ended without a result".into(),
        )),
    }
}

/// Where a test may inject a fault into tract (see [`inject_panic`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Load,
    Run,
}

/// Debug builds only: `INFOPT_INJECT_PANIC=tract-load` panics on the load
/// thread, as tract does on some malformed models, `tract-load-stuck`
/// never returns, and `tract-run` panics in a run, for the tests that check
/// such a panic prints nothing and such a load is given up at the deadline
/// (the CLI tests' models that made tract panic are model errors by now).
#[cfg(debug_assertions)]
fn inject_panic(stage: Stage) {
    match (stage, std::env::var("INFOPT_INJECT_PANIC").as_deref()) {
        (Stage::Load, Ok("tract-load")) => panic!("injected panic\nsecond line"),
        // An analysis that does not end (within any test's patience); the
        // line lets a test count how many loads were started.
        (Stage::Load, Ok("tract-load-stuck")) => {
            eprintln!("injected: a tract load that does not end");
            std::thread::sleep(std::time::Duration::from_secs(600))
        }
        (Stage::Run, Ok("tract-run")) => panic!("injected panic in a run"),
        _ => {}
    }
}

#[cfg(not(debug_assertions))]
fn inject_panic(_: Stage) {}

thread_local! {
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// tract's panics on the load thread are caught and become the load error;
/// the process's panic hook (which prints to stderr) must not see them
/// first. The CLI silences its own thread the same way (`catch_quietly`);
/// this hook, installed once, passes every other thread's panics on.
fn quiet_panics_on_this_thread() {
    install_quiet_hook();
    QUIET.with(|q| q.set(true));
}

/// The panic hook that stays silent on a thread while [`QUIET`] is set
/// there, installed once.
fn install_quiet_hook() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
}

/// How long tract may take to parse and analyse a model of `bytes` bytes:
/// 30 s, plus 1 s for every 10 MB (the largest models here load in a few
/// seconds). `INFOPT_TRACT_LOAD_DEADLINE_S` overrides it.
fn load_deadline(bytes: usize) -> std::time::Duration {
    let from_env = std::env::var("INFOPT_TRACT_LOAD_DEADLINE_S")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    std::time::Duration::from_secs(from_env.unwrap_or(30 + bytes as u64 / 10_000_000))
}

/// Runs `f`, turning a panic inside tract into an error message. tract panics on some
/// malformed data (e.g. a Gather index past the end of its table) instead of returning
/// an error; a caller should get an error for that, not a crash. The process's panic
/// hook stays silent meanwhile: it printed the panic and its backtrace to stderr above
/// the one-line error (fuzz seed 3031: a GatherElements index out of bounds in a run
/// of the original that verification fell back to).
fn guard<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    install_quiet_hook();
    let was_quiet = QUIET.with(|q| q.replace(true));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was_quiet));
    outcome.map_err(|payload| {
        let text = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic payload".into());
        // An anyhow error unwrapped inside tract carries its backtrace in
        // the message when RUST_BACKTRACE is set: users get one line.
        let text = text.split("Stack backtrace:").next().unwrap_or_default();
        format!(
            "tract panicked: {}",
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        )
    })
}

fn load_model(
    model_bytes: &[u8],
    model_dir: Option<&Path>,
    input_shapes: &InputShapes,
    optimize: bool,
    observe: Option<&Observe>,
) -> Result<Box<dyn LoadedModel>> {
    let onnx = tract_onnx::onnx();
    let mut reader = model_bytes;
    let mut proto = onnx
        .proto_model_for_read(&mut reader)
        .map_err(|e| RuntimeError::Decode(one_line(e.chain())))?;
    let graph = proto
        .graph
        .as_mut()
        .ok_or_else(|| RuntimeError::Decode("the model has no graph".into()))?;
    let mut unsupported = Vec::new();
    unsupported_ops(graph, &onnx, &mut unsupported);
    if !unsupported.is_empty() {
        let list: Vec<String> = unsupported
            .iter()
            .map(|(op, node)| format!("{op} (node `{node}`)"))
            .collect();
        return Err(RuntimeError::Load {
            backend: BACKEND.into(),
            message: format!("unsupported operator(s): {}", list.join(", ")),
        });
    }
    let inputs = input_specs(graph)?;
    let resolution = resolve_input_shapes(&inputs, input_shapes)?;
    erase_symbolic_dims(graph);
    let output_names: Vec<String> = graph.output.iter().map(|o| o.name.clone()).collect();

    let dir = match model_dir {
        None => None,
        Some(d) => Some(d.to_str().ok_or_else(|| {
            RuntimeError::InvalidArgument(format!(
                "the model folder {} is not valid UTF-8, which tract requires",
                d.display()
            ))
        })?),
    };
    let parsed = onnx.parse(&proto, dir).map_err(|e| load_error(&e))?;
    if !parsed.unresolved_inputs.is_empty() {
        return Err(RuntimeError::Load {
            backend: BACKEND.into(),
            message: format!(
                "values used but never defined: {}",
                parsed.unresolved_inputs.join(", ")
            ),
        });
    }
    let mut model = parsed.model;

    // Give every input a fully concrete fact. tract's inputs are the graph inputs that
    // are not initializers, in graph order: the same list as `inputs`.
    let outlets = model.input_outlets().map_err(|e| load_error(&e))?.to_vec();
    if outlets.len() != inputs.len() {
        return Err(RuntimeError::Load {
            backend: BACKEND.into(),
            message: format!(
                "tract sees {} inputs, the graph declares {}",
                outlets.len(),
                inputs.len()
            ),
        });
    }
    for (ix, (spec, (_, dims))) in inputs.iter().zip(&resolution.input_shapes).enumerate() {
        let dt = datum_type(spec.dtype).ok_or_else(|| RuntimeError::UnsupportedDType {
            backend: BACKEND.into(),
            kind: "input",
            name: spec.name.clone(),
            dtype: spec.dtype.to_string(),
        })?;
        let fact = InferenceFact::dt_shape(dt, dims.iter().copied());
        model
            .set_input_fact(ix, fact)
            .map_err(|e| RuntimeError::InputShape {
                input: spec.name.clone(),
                message: one_line(e.chain()),
            })?;
    }

    let typed = model.into_typed().map_err(|e| load_error(&e))?;
    // tract's optimizer makes repeated runs fast but costs time superlinear in
    // the graph size (94 s for a 24k-node graph); a one-shot run (verifying a
    // rewrite) is faster on the plain typed model.
    let optimized = if optimize {
        typed.into_optimized().map_err(|e| load_error(&e))?
    } else {
        typed
    };

    // Output specs from the typed model: the element type tract computes and the
    // concrete dims it inferred.
    let out_outlets = optimized
        .output_outlets()
        .map_err(|e| load_error(&e))?
        .to_vec();
    if out_outlets.len() != output_names.len() {
        return Err(RuntimeError::Load {
            backend: BACKEND.into(),
            message: format!(
                "tract sees {} outputs, the graph declares {}",
                out_outlets.len(),
                output_names.len()
            ),
        });
    }
    let mut outputs = Vec::with_capacity(out_outlets.len());
    for (name, outlet) in output_names.iter().zip(&out_outlets) {
        let fact = optimized.outlet_fact(*outlet).map_err(|e| load_error(&e))?;
        let dtype = host_dtype(fact.datum_type).ok_or_else(|| RuntimeError::UnsupportedDType {
            backend: BACKEND.into(),
            kind: "output",
            name: name.clone(),
            dtype: format!("{:?}", fact.datum_type),
        })?;
        let dims = fact
            .shape
            .iter()
            .map(|d| match d.to_usize() {
                Ok(v) => DimSpec::Known(v),
                Err(_) => DimSpec::Symbol(d.to_string()),
            })
            .collect();
        outputs.push(IoSpec {
            name: name.clone(),
            dtype,
            dims: Some(dims),
        });
    }

    let plan = optimized.into_runnable().map_err(|e| load_error(&e))?;
    // Observed tensors in the order the plan computes them; graph outputs
    // are the run's result, not intermediates.
    let mut taps: Vec<Vec<(usize, String)>> = Vec::new();
    let mut observed = Vec::new();
    if let Some(observe) = observe {
        let model = plan.model();
        taps = vec![Vec::new(); model.nodes().len()];
        for &id in plan.order_without_consts() {
            let node = model.node(id);
            if node.inputs.is_empty() {
                continue;
            }
            for slot in 0..node.outputs.len() {
                let Some(label) = model.outlet_label(OutletId::new(id, slot)) else {
                    continue;
                };
                if observe.wants(label)
                    && !output_names.iter().any(|o| o == label)
                    && !observed.iter().any(|o: &String| o == label)
                {
                    taps[id].push((slot, label.to_string()));
                    observed.push(label.to_string());
                }
            }
        }
    }
    Ok(Box::new(TractModel {
        plan,
        inputs,
        outputs,
        resolution,
        taps,
        observed,
    }))
}

/// A model loaded into tract, optimized for the concrete input shapes of `resolution`.
struct TractModel {
    plan: Arc<TypedRunnableModel>,
    inputs: Vec<IoSpec>,
    outputs: Vec<IoSpec>,
    resolution: ShapeResolution,
    /// Per node id: the output slots to observe and their names (empty
    /// unless loaded for observation).
    taps: Vec<Vec<(usize, String)>>,
    observed: Vec<String>,
}

impl TractModel {
    fn values(&self, inputs: &[HostTensor]) -> Result<TVec<TValue>> {
        check_run_inputs(&self.inputs, &self.resolution, inputs)?;
        inputs
            .iter()
            .map(|t| to_tract(t).map(TValue::from))
            .collect()
    }

    fn collect_outputs(&self, results: TVec<TValue>) -> Result<Vec<HostTensor>> {
        if results.len() != self.outputs.len() {
            return Err(RuntimeError::Run {
                backend: BACKEND.into(),
                message: format!(
                    "tract returned {} outputs, the model declares {}",
                    results.len(),
                    self.outputs.len()
                ),
            });
        }
        results
            .iter()
            .zip(&self.outputs)
            .map(|(v, spec)| from_tract(&spec.name, v))
            .collect()
    }
}

impl LoadedModel for TractModel {
    fn inputs(&self) -> &[IoSpec] {
        &self.inputs
    }

    /// Outputs with the element types and concrete dims tract inferred for the chosen
    /// input shapes (a dim tract could only express symbolically stays a symbol).
    fn outputs(&self) -> &[IoSpec] {
        &self.outputs
    }

    fn resolution(&self) -> &ShapeResolution {
        &self.resolution
    }

    fn run(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>> {
        let values = self.values(inputs)?;
        let results = guard(|| {
            inject_panic(Stage::Run);
            self.plan.run(values)
        })
        .map_err(|panic| RuntimeError::Run {
            backend: BACKEND.into(),
            message: panic,
        })?
        .map_err(|e| run_error(&e))?;
        self.collect_outputs(results)
    }

    fn run_observed(
        &self,
        inputs: &[HostTensor],
        sink: &mut TensorSink<'_>,
    ) -> Result<Vec<HostTensor>> {
        self.run_observed_views(inputs, &mut |views| {
            for v in views {
                sink(&v.to_host()?)?;
            }
            Ok(())
        })
    }

    /// Evaluates node by node and lends each node's tapped outputs to the
    /// sink right after the node ran, in tract's own buffers; tract frees
    /// every value after its last reader, so only the tensors still needed
    /// downstream are held.
    fn run_observed_views(
        &self,
        inputs: &[HostTensor],
        sink: &mut ViewSink<'_>,
    ) -> Result<Vec<HostTensor>> {
        if self.taps.is_empty() {
            return LoadedModel::run_observed(&NotObserving, inputs, &mut |_| Ok(()));
        }
        let values = self.values(inputs)?;
        let mut sink_error: Option<RuntimeError> = None;
        let outcome = guard(|| -> TractResult<TVec<TValue>> {
            let mut state = tract_onnx::tract_core::plan::SimpleState::new(&self.plan)?;
            state.run_plan_with_eval(values, |ctx, op_state, node, node_inputs| {
                let out = tract_onnx::tract_core::plan::eval(ctx, op_state, node, node_inputs)?;
                let taps = &self.taps[node.id];
                if !taps.is_empty() {
                    let result = taps
                        .iter()
                        .map(|(slot, name)| view_of(name, &out[*slot]))
                        .collect::<Result<Vec<_>>>()
                        .and_then(|views| sink(&views));
                    if let Err(e) = result {
                        sink_error = Some(e);
                        return Err(TractError::msg("observation stopped"));
                    }
                }
                Ok::<_, TractError>(out)
            })
        })
        .map_err(|panic| RuntimeError::Run {
            backend: BACKEND.into(),
            message: panic,
        })?;
        if let Some(e) = sink_error {
            return Err(e);
        }
        self.collect_outputs(outcome.map_err(|e| run_error(&e))?)
    }

    fn observed(&self) -> &[String] {
        &self.observed
    }
}

/// Stands in for a model that was not loaded for observation, to reuse the
/// trait's error.
struct NotObserving;

impl LoadedModel for NotObserving {
    fn inputs(&self) -> &[IoSpec] {
        &[]
    }
    fn outputs(&self) -> &[IoSpec] {
        &[]
    }
    fn resolution(&self) -> &ShapeResolution {
        static EMPTY: std::sync::OnceLock<ShapeResolution> = std::sync::OnceLock::new();
        EMPTY.get_or_init(ShapeResolution::default)
    }
    fn run(&self, _: &[HostTensor]) -> Result<Vec<HostTensor>> {
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod guard_tests {
    use super::guard;

    #[test]
    fn a_panic_becomes_one_line_without_the_backtrace() {
        let e = guard(|| -> () {
            std::panic::panic_any(String::from(
                "called `Result::unwrap()` on an `Err` value: If branches differ\n\nStack backtrace:\n   0: msg\n   1: nboutputs",
            ))
        })
        .unwrap_err();
        assert_eq!(
            e,
            "tract panicked: called `Result::unwrap()` on an `Err` value: If branches differ"
        );
    }
}
