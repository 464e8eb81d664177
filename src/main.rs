<<<<<<< HEAD
//! infopt: offline ONNX model optimizer. The command line lives in the
//! library ([`infopt::cli`]) so the Python wheel's `infopt` script runs the
//! same entry point.
=======
//! infopt: offline ONNX model optimizer.

mod backend_args;
mod commands;
mod exit;
mod gates;
mod half;
mod inputs_arg;
mod int8;
mod report;
mod shape_args;
mod stages;
mod tract_eval;
>>>>>>> fp16

use std::process::ExitCode;

fn main() -> ExitCode {
    infopt::cli::main(std::env::args_os()).into()
}
