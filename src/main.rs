//! infopt: offline ONNX model optimizer. The command line lives in the
//! library ([`infopt::cli`]) so the Python wheel's `infopt` script runs the
//! same entry point.

use std::process::ExitCode;

fn main() -> ExitCode {
    infopt::cli::main(std::env::args_os()).into()
}
