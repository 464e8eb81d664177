//! infopt-calibration: INT8 calibration. Observers collect activation
//! statistics while a model runs over calibration data, range methods turn
//! them into a clipping range (amax) per tensor, range tables and TensorRT
//! calibration caches store them, and the `quantize-int8` pass places
//! Q/DQ nodes from them.

pub mod amax;

pub use amax::Amax;
