//! infopt: offline ONNX model optimizer.

mod backend_args;
mod commands;
mod exit;
mod gates;
mod inputs_arg;
mod int8;
mod report;
mod shape_args;
mod stages;
mod tract_eval;

use std::process::ExitCode;

use clap::Parser;

use crate::exit::Exit;

fn main() -> ExitCode {
    let cli = match commands::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Ok
            };
            let _ = e.print();
            return code.into();
        }
    };
    // Passes of other crates join the registry.
    infopt_calibration::quantize::register();
    // Constant folding may ask tract for ops the reference kernels lack.
    infopt_passes::fold_constants::register_fallback_evaluator(tract_eval::factory);
    match commands::run(cli) {
        Ok(()) => Exit::Ok.into(),
        Err(e) => {
            eprintln!("error: {}", e.message);
            e.exit.into()
        }
    }
}
