//! infopt-runtime: execution backends for infopt.
//!
//! Backends load serialized ONNX bytes (this crate does not depend on the IR), make the
//! inputs concrete, and run on [`HostTensor`]s. Around them: seeded input generation
//! ([`inputs`]), output agreement ([`compare`]) and latency ([`timing`]).
//!
//! ```no_run
//! use infopt_runtime::{Backend, InputShapes, TractBackend, compare, inputs, timing};
//! # fn main() -> Result<(), infopt_runtime::RuntimeError> {
//! let bytes = std::fs::read("model.onnx").map_err(|e| infopt_runtime::RuntimeError::InvalidArgument(e.to_string()))?;
//! let model = TractBackend.load(&bytes, Some(std::path::Path::new(".")), &InputShapes::new().with_symbol("N", 4))?;
//! let x = inputs::generate_for_model(model.as_ref(), &inputs::InputGen::with_seed(7))?;
//! let y = model.run(&x)?;
//! let agreement = compare::compare_outputs(&y, &y, compare::Tolerance::default());
//! let latency = timing::time_model(model.as_ref(), &x, 3, 20)?;
//! # let _ = (agreement, latency); Ok(()) }
//! ```

pub mod backend;
pub mod compare;
pub mod error;
pub mod inputs;
pub mod native_stage;
pub mod ort_backend;
mod python;
pub mod string_ids;
pub mod tensor;
pub mod tensorrt;
pub mod timing;
pub mod tract_backend;
pub mod transfer;
pub mod view;

pub use backend::{
    Backend, DefaultedDim, DimSpec, InputShapes, IoSpec, LoadedModel, Observe, Observing,
    ShapeResolution, TensorSink, ViewSink,
};
pub use compare::{OutputAgreement, Tolerance};
pub use error::{Result, RuntimeError};
pub use ort_backend::{OptLevel, OrtBackend, OrtOptions, backend_by_name};
pub use tensor::{DType, HostTensor, TensorData};
pub use timing::Latency;
pub use tract_backend::{TractBackend, TractOneShot};
pub use transfer::{TimedRun, Transfer};
pub use view::{DataView, TensorView};
