//! The backend abstraction: a backend loads serialized ONNX bytes into a [`LoadedModel`]
//! with concrete input shapes, and a loaded model runs on [`HostTensor`]s.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Serialize;

use crate::error::{Result, RuntimeError};
use crate::tensor::{DType, HostTensor};
use crate::transfer::{DEVICE_RESIDENT_NEEDS_CUDA, RunEachTime, TimedRun, Transfer};
use crate::view::TensorView;

/// One dimension of a declared model input or output.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DimSpec {
    /// A fixed size (ONNX `dim_value`).
    Known(usize),
    /// A named symbolic size (ONNX `dim_param`), shared by every dim of the same name.
    Symbol(String),
    /// A dim with neither value nor name.
    Unknown,
}

impl fmt::Display for DimSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimSpec::Known(v) => write!(f, "{v}"),
            DimSpec::Symbol(s) => f.write_str(s),
            DimSpec::Unknown => f.write_str("?"),
        }
    }
}

/// A declared model input or output: name, element type and dims as the model states them.
/// `dims` is `None` when the model gives no shape at all (rank unknown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IoSpec {
    pub name: String,
    pub dtype: DType,
    pub dims: Option<Vec<DimSpec>>,
}

impl IoSpec {
    /// The dims rendered as `[N,3,224,224]`, or `[?]` when the rank is unknown.
    pub fn dims_string(&self) -> String {
        match &self.dims {
            None => "[?]".to_string(),
            Some(d) => {
                format!(
                    "[{}]",
                    d.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                )
            }
        }
    }
}

/// What the caller wants the input shapes to be. Loading makes every input concrete:
/// an input listed in `shapes` takes those dims; otherwise each symbolic dim takes the
/// value bound in `symbols`, and any symbol or unnamed dim left over takes `default_dim`
/// (reported back in [`ShapeResolution::defaulted`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputShapes {
    /// Concrete dims per input name.
    pub shapes: BTreeMap<String, Vec<usize>>,
    /// Values of symbolic dims, by symbol name.
    pub symbols: BTreeMap<String, usize>,
    /// Value given to a symbolic or unknown dim that nothing else binds.
    pub default_dim: usize,
}

impl Default for InputShapes {
    fn default() -> Self {
        InputShapes {
            shapes: BTreeMap::new(),
            symbols: BTreeMap::new(),
            default_dim: 1,
        }
    }
}

impl InputShapes {
    pub fn new() -> InputShapes {
        InputShapes::default()
    }

    /// Fixes the dims of one input, builder style.
    pub fn with_shape(mut self, input: impl Into<String>, dims: Vec<usize>) -> InputShapes {
        self.shapes.insert(input.into(), dims);
        self
    }

    /// Binds one symbol, builder style.
    pub fn with_symbol(mut self, symbol: impl Into<String>, value: usize) -> InputShapes {
        self.symbols.insert(symbol.into(), value);
        self
    }

    /// Sets the value of unbound dims, builder style.
    pub fn with_default_dim(mut self, value: usize) -> InputShapes {
        self.default_dim = value;
        self
    }
}

/// A dim that nothing bound and that therefore took [`InputShapes::default_dim`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DefaultedDim {
    pub input: String,
    pub axis: usize,
    /// The symbol name, or `None` for an unnamed dim.
    pub symbol: Option<String>,
    pub value: usize,
}

/// How loading made the inputs concrete.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ShapeResolution {
    /// The concrete dims of every input, in model input order.
    pub input_shapes: Vec<(String, Vec<usize>)>,
    /// The value of every symbol appearing in the inputs (bound, inferred from an explicit
    /// input shape, or defaulted).
    pub symbols: BTreeMap<String, usize>,
    /// Dims that took the default value: worth a warning in a report.
    pub defaulted: Vec<DefaultedDim>,
}

/// Resolves declared input specs against the caller's [`InputShapes`] into concrete dims.
/// Backend-neutral: adapters call it and then hand the result to their runtime.
pub fn resolve_input_shapes(inputs: &[IoSpec], wanted: &InputShapes) -> Result<ShapeResolution> {
    for name in wanted.shapes.keys() {
        if !inputs.iter().any(|i| &i.name == name) {
            let valid: Vec<&str> = inputs.iter().map(|i| i.name.as_str()).collect();
            return Err(RuntimeError::UnknownName(format!(
                "a shape was given for `{name}`, which is not a model input (inputs: {})",
                valid.join(", ")
            )));
        }
    }
    let mut symbols: BTreeMap<String, usize> = wanted.symbols.clone();
    // Symbols fixed by an explicit input shape; also checks explicit shapes against the
    // fixed dims of the declaration.
    let mut fixed_by: BTreeMap<String, String> = BTreeMap::new();
    for spec in inputs {
        let Some(dims) = wanted.shapes.get(&spec.name) else {
            continue;
        };
        let Some(declared) = &spec.dims else { continue };
        if declared.len() != dims.len() {
            return Err(RuntimeError::InputShape {
                input: spec.name.clone(),
                message: format!(
                    "the model declares rank {} ({}), the requested shape {dims:?} has rank {}",
                    declared.len(),
                    spec.dims_string(),
                    dims.len()
                ),
            });
        }
        for (axis, (d, &v)) in declared.iter().zip(dims).enumerate() {
            match d {
                DimSpec::Known(k) if *k != v => {
                    return Err(RuntimeError::InputShape {
                        input: spec.name.clone(),
                        message: format!(
                            "dim {axis} is fixed at {k} in the model ({}), the requested shape {dims:?} has {v}",
                            spec.dims_string()
                        ),
                    });
                }
                DimSpec::Symbol(s) => {
                    if let Some(&prev) = symbols.get(s)
                        && prev != v
                    {
                        let source = match fixed_by.get(s) {
                            Some(other) => format!("the shape requested for `{other}`"),
                            None => "the symbol binding".to_string(),
                        };
                        return Err(RuntimeError::InputShape {
                            input: spec.name.clone(),
                            message: format!(
                                "dim {axis} is symbol `{s}`, requested as {v}, but {source} sets `{s}` = {prev}"
                            ),
                        });
                    }
                    symbols.insert(s.clone(), v);
                    fixed_by
                        .entry(s.clone())
                        .or_insert_with(|| spec.name.clone());
                }
                _ => {}
            }
        }
    }

    let mut resolution = ShapeResolution::default();
    for spec in inputs {
        if let Some(dims) = wanted.shapes.get(&spec.name) {
            resolution
                .input_shapes
                .push((spec.name.clone(), dims.clone()));
            continue;
        }
        let Some(declared) = &spec.dims else {
            return Err(RuntimeError::InputShape {
                input: spec.name.clone(),
                message: "the model declares no shape for this input; give one explicitly".into(),
            });
        };
        let mut dims = Vec::with_capacity(declared.len());
        for (axis, d) in declared.iter().enumerate() {
            let v = match d {
                DimSpec::Known(k) => *k,
                DimSpec::Symbol(s) => match symbols.get(s) {
                    Some(&v) => v,
                    None => {
                        symbols.insert(s.clone(), wanted.default_dim);
                        resolution.defaulted.push(DefaultedDim {
                            input: spec.name.clone(),
                            axis,
                            symbol: Some(s.clone()),
                            value: wanted.default_dim,
                        });
                        wanted.default_dim
                    }
                },
                DimSpec::Unknown => {
                    resolution.defaulted.push(DefaultedDim {
                        input: spec.name.clone(),
                        axis,
                        symbol: None,
                        value: wanted.default_dim,
                    });
                    wanted.default_dim
                }
            };
            dims.push(v);
        }
        resolution.input_shapes.push((spec.name.clone(), dims));
    }
    // Report only the symbols the inputs use, plus explicit bindings (they may name
    // symbols that only appear inside the graph).
    resolution.symbols = symbols;
    Ok(resolution)
}

/// Which intermediate tensors a model loaded with [`Backend::load_observing`]
/// hands to the sink of [`LoadedModel::run_observed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observe {
    /// Every tensor a node computes (graph inputs and constants left out).
    All,
    /// These tensors, by name; names the model does not compute are ignored
    /// (see [`LoadedModel::observed`] for the ones it does).
    Names(Vec<String>),
}

impl Observe {
    pub fn wants(&self, name: &str) -> bool {
        match self {
            Observe::All => !name.is_empty(),
            Observe::Names(names) => names.iter().any(|n| n == name),
        }
    }
}

/// Receives each observed intermediate tensor as it is computed. The tensor
/// is only lent: whatever the sink keeps, it copies, so memory stays flat in
/// the number of tensors and of runs.
pub type TensorSink<'a> = dyn FnMut(&HostTensor) -> Result<()> + 'a;

/// Receives observed intermediate tensors as borrowed views of the
/// backend's own buffers, a group at a time (every tensor of one ONNX
/// Runtime run, or the outputs of one tract node). The views of one call are
/// all alive together, so the sink may read them in parallel; they are
/// released when it returns.
pub type ViewSink<'a> = dyn FnMut(&[TensorView<'_>]) -> Result<()> + 'a;

/// How a caller that sized its sessions to the memory lets their observing
/// runs use it (see `OrtOptions::observe_in_arena` and
/// `OrtOptions::observe_budget_bytes`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Observing {
    /// Observed outputs allocated from the CPU arena, reused run to run.
    pub in_arena: bool,
    /// Most bytes of observed tensors one run hands out (None: the
    /// backend's default).
    pub budget_bytes: Option<usize>,
}

/// An execution backend (tract, ONNX Runtime, TensorRT, ...).
pub trait Backend: Send + Sync {
    /// Short identifier, e.g. `"tract"`.
    fn name(&self) -> &str;

    /// Backend and version, e.g. `"tract-onnx 0.23.9"`.
    fn version(&self) -> String;

    /// Loads a serialized ONNX model. `model_dir` is the folder external-data locations are
    /// resolved against (no external data can be read without it). `input_shapes` makes the
    /// inputs concrete before the backend optimizes the model.
    fn load(
        &self,
        model_bytes: &[u8],
        model_dir: Option<&Path>,
        input_shapes: &InputShapes,
    ) -> Result<Box<dyn LoadedModel>>;

    /// The same backend with its runs on `threads` threads, for callers
    /// that run several sessions side by side (each with its share of the
    /// CPU), its observing sessions using memory as `observing` sizes it;
    /// None where the backend has no such setting (tract runs on one
    /// thread) or should not be split (a device's provider).
    fn with_threads(&self, threads: usize, observing: Observing) -> Option<Box<dyn Backend>> {
        let _ = (threads, observing);
        None
    }

    /// Loads a model whose intermediate tensors [`LoadedModel::run_observed`]
    /// hands out, as selected by `observe`. The model is prepared once; each
    /// run streams the tensors to a sink.
    fn load_observing(
        &self,
        model_bytes: &[u8],
        model_dir: Option<&Path>,
        input_shapes: &InputShapes,
        observe: &Observe,
    ) -> Result<Box<dyn LoadedModel>> {
        let _ = (model_bytes, model_dir, input_shapes, observe);
        Err(RuntimeError::InvalidArgument(format!(
            "{} cannot observe intermediate tensors",
            self.name()
        )))
    }
}

/// A model ready to run with the concrete input shapes chosen at load time.
pub trait LoadedModel: Send + Sync {
    /// Declared inputs (graph inputs that are not initializers), in model order.
    fn inputs(&self) -> &[IoSpec];

    /// Outputs, in model order. A backend that types the model for the chosen input shapes
    /// reports the element types and dims it resolved (tract does), otherwise the declared
    /// ones.
    fn outputs(&self) -> &[IoSpec];

    /// How the input shapes were made concrete (chosen dims, symbols, defaults).
    fn resolution(&self) -> &ShapeResolution;

    /// Makes the model run at the input shapes `at` without loading it
    /// again, where its session runs any shape the model declares (ONNX
    /// Runtime's does): samples of different lengths then share one session
    /// instead of one each (khmersm's segmenter, a sentence per sample: 146
    /// sessions, 2.1 s of a 3 s INT8 command). False where the backend typed
    /// the model for one set of shapes (tract): the caller loads it again.
    fn rebind_shapes(&mut self, at: &InputShapes) -> Result<bool> {
        let _ = at;
        Ok(false)
    }

    /// Runs the model. `inputs` are in [`LoadedModel::inputs`] order, with the dtypes and
    /// the concrete shapes of [`LoadedModel::resolution`]; a named tensor must carry the
    /// name of the input at its position. Outputs come back named, in model output order.
    fn run(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>>;

    /// Runs the model and hands every observed intermediate tensor (named) to
    /// `sink` as it is produced. Only models loaded with
    /// [`Backend::load_observing`] can.
    fn run_observed(
        &self,
        inputs: &[HostTensor],
        sink: &mut TensorSink<'_>,
    ) -> Result<Vec<HostTensor>> {
        let _ = (inputs, sink);
        Err(RuntimeError::InvalidArgument(
            "this model was not loaded for observation (use Backend::load_observing)".into(),
        ))
    }

    /// [`run_observed`](Self::run_observed) without a host copy of each
    /// intermediate: the sink reads the backend's buffers in place, in
    /// groups (see [`ViewSink`]). Backends that cannot lend their buffers
    /// copy, as `run_observed` does.
    fn run_observed_views(
        &self,
        inputs: &[HostTensor],
        sink: &mut ViewSink<'_>,
    ) -> Result<Vec<HostTensor>> {
        self.run_observed(inputs, &mut |t| sink(&[TensorView::of(t)]))
    }

    /// Names of the intermediate tensors `run_observed` hands out, in the
    /// order they are computed.
    fn observed(&self) -> &[String] {
        &[]
    }

    /// A runner for timed runs on `inputs`, moving data as `transfer` says
    /// (see [`Transfer`]). The default runs [`run`](Self::run) each time
    /// (host to host, fresh outputs); ONNX Runtime binds its inputs and
    /// outputs once instead. Backends without device memory refuse
    /// [`Transfer::DeviceResident`].
    fn timed_runner<'a>(
        &'a self,
        inputs: &'a [HostTensor],
        transfer: Transfer,
    ) -> Result<Box<dyn TimedRun + 'a>> {
        match transfer {
            Transfer::HostToHost => Ok(Box::new(RunEachTime(move || self.run(inputs).map(drop)))),
            Transfer::DeviceResident => Err(RuntimeError::InvalidArgument(
                DEVICE_RESIDENT_NEEDS_CUDA.into(),
            )),
        }
    }

    /// For backends that rebuild a loaded model of their own type.
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        Box::new(())
    }

    /// The concrete dims chosen for every input, in model input order.
    fn input_shapes(&self) -> Vec<Vec<usize>> {
        self.resolution()
            .input_shapes
            .iter()
            .map(|(_, d)| d.clone())
            .collect()
    }
}

/// Checks tensors handed to [`LoadedModel::run`] against the model's inputs: count, names,
/// dtypes and the concrete shapes chosen at load time.
pub fn check_run_inputs(
    specs: &[IoSpec],
    resolution: &ShapeResolution,
    inputs: &[HostTensor],
) -> Result<()> {
    if inputs.len() != specs.len() {
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        return Err(RuntimeError::InvalidArgument(format!(
            "the model takes {} input(s) ({}), {} were given",
            specs.len(),
            names.join(", "),
            inputs.len()
        )));
    }
    for (i, (spec, t)) in specs.iter().zip(inputs).enumerate() {
        if let Some(n) = t.name()
            && n != spec.name
        {
            return Err(RuntimeError::InputMismatch {
                input: spec.name.clone(),
                message: format!("the tensor at position {i} is named `{n}`"),
            });
        }
        if t.dtype() != spec.dtype {
            return Err(RuntimeError::InputMismatch {
                input: spec.name.clone(),
                message: format!("expected element type {}, got {}", spec.dtype, t.dtype()),
            });
        }
        if let Some((_, dims)) = resolution.input_shapes.get(i)
            && dims.as_slice() != t.shape()
        {
            return Err(RuntimeError::InputMismatch {
                input: spec.name.clone(),
                message: format!(
                    "the model was loaded for shape {dims:?}, got {:?} (reload with other input shapes)",
                    t.shape()
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, dims: Vec<DimSpec>) -> IoSpec {
        IoSpec {
            name: name.into(),
            dtype: DType::F32,
            dims: Some(dims),
        }
    }

    #[test]
    fn symbols_default_and_are_reported() {
        let inputs = vec![
            spec(
                "x",
                vec![
                    DimSpec::Symbol("N".into()),
                    DimSpec::Known(3),
                    DimSpec::Unknown,
                ],
            ),
            spec(
                "y",
                vec![DimSpec::Symbol("N".into()), DimSpec::Symbol("T".into())],
            ),
        ];
        let r = resolve_input_shapes(&inputs, &InputShapes::new().with_symbol("T", 7)).unwrap();
        assert_eq!(
            r.input_shapes,
            vec![("x".into(), vec![1, 3, 1]), ("y".into(), vec![1, 7])]
        );
        assert_eq!(r.symbols.get("N"), Some(&1));
        assert_eq!(r.symbols.get("T"), Some(&7));
        assert_eq!(r.defaulted.len(), 2);
        assert_eq!(r.defaulted[0].symbol.as_deref(), Some("N"));
        assert_eq!(r.defaulted[1].symbol, None);
        assert_eq!(r.defaulted[1].axis, 2);
    }

    #[test]
    fn explicit_shape_binds_symbols_for_other_inputs() {
        let inputs = vec![
            spec("x", vec![DimSpec::Symbol("N".into()), DimSpec::Known(3)]),
            spec("y", vec![DimSpec::Symbol("N".into())]),
        ];
        let r =
            resolve_input_shapes(&inputs, &InputShapes::new().with_shape("x", vec![4, 3])).unwrap();
        assert_eq!(r.input_shapes[1], ("y".into(), vec![4]));
        assert!(r.defaulted.is_empty());
    }

    #[test]
    fn conflicts_are_named() {
        let inputs = vec![spec(
            "x",
            vec![DimSpec::Symbol("N".into()), DimSpec::Known(3)],
        )];
        let e = resolve_input_shapes(&inputs, &InputShapes::new().with_shape("x", vec![2, 4]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("input `x`") && e.contains("fixed at 3"), "{e}");
        let e = resolve_input_shapes(
            &inputs,
            &InputShapes::new()
                .with_shape("x", vec![2, 3])
                .with_symbol("N", 5),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`N` = 5"), "{e}");
        let e = resolve_input_shapes(&inputs, &InputShapes::new().with_shape("z", vec![1]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`z`") && e.contains("inputs: x"), "{e}");
        let e = resolve_input_shapes(&inputs, &InputShapes::new().with_shape("x", vec![1]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("rank 2"), "{e}");
    }
}
