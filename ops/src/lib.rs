//! infopt's commands as library functions: a command's options in, its
//! report value out. The `infopt` binary and the Python module are both thin
//! callers of this crate, so `infopt optimize` and `infopt.optimize(...)` run
//! the same code.

pub mod backend_args;
pub mod ci;
pub mod commands;
pub mod error;
pub mod gates;
pub mod guard;
pub mod half;
pub mod inputs_arg;
pub mod int8;
pub mod job;
pub mod job_file;
pub mod keywords;
pub mod models;
pub mod outcome;
pub mod progress;
pub mod quantized_input;
pub mod report;
pub mod save_args;
pub mod shape_args;
pub mod stages;
pub mod tract_eval;
