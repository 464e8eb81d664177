//! infopt's graph IR: ONNX messages, the arena graph, lossless load/save with
//! external data, validation and patches.

pub mod atomic;
pub mod attr;
mod attr_bounds;
mod axis_bounds;
pub mod builder;
pub mod context;
pub mod dtype;
pub mod error;
pub mod external;
pub mod graph;
pub mod infer;
pub mod kernels;
pub mod load;
pub mod model;
mod operand_ranks;
mod operand_types;
pub mod patch;
pub mod proto;
mod reshape_volume;
pub mod save;
pub mod shape;
pub mod stats;
pub mod tensor;
pub mod union;
pub mod unknown_dims;
mod validate;
pub mod walk;
pub mod writeback;

pub use attr::Attribute;
pub use dtype::DataType;
pub use error::{IrError, Result};
pub use graph::{Graph, GraphIo, Node, NodeId, Slot, Use, Value, ValueId};
pub use model::{Model, SourceInfo};
pub use patch::{Patch, PatchValue, Redirect};
pub use save::{ExternalDataPolicy, SaveOptions, SaveSummary, check_output_folder};
pub use shape::{Dim, TensorType};
pub use tensor::Tensor;

/// IR version written into models infopt creates from scratch (ONNX 1.17+ readers).
pub const IR_VERSION_DEFAULT: i64 = 10;
