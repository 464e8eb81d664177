//! One module per subcommand; each has an `Args` struct and a `run` function.

pub mod bench;
pub mod build_engine;
pub mod calibrate;
pub mod compare;
pub mod convert;
pub mod doctor;
pub mod inspect;
pub mod optimize;
pub mod passes;

use clap::{Parser, Subcommand};

use crate::exit::OpsResult;

#[derive(Parser, Debug)]
#[command(name = "infopt", version, about = "Offline ONNX model optimizer", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show what a model contains: IO, opsets, op histogram, parameters, external data.
    Inspect(inspect::Args),
    /// Load a model and save it again (lossless), optionally moving weights to external data.
    Convert(convert::Args),
    /// Run a pass pipeline, verify the result against the original, write it and report what changed.
    Optimize(Box<optimize::Args>),
    /// List the passes or print one pass's documentation.
    Passes(passes::Args),
    /// Time a model in a backend (median, p90, p99, min, throughput); --compare times a second one interleaved.
    Bench(bench::Args),
    /// Run two models on the same inputs and compare their outputs (exit 4 on mismatch).
    Compare(compare::Args),
    /// Check what this machine can run: tract, ONNX Runtime, TensorRT, GPU, CPU features (and how to fix what is missing).
    Doctor(doctor::Args),
    /// Build a TensorRT engine: tensorrt pipeline, precision as graph passes, verification, engine (or --emit-onnx and the trtexec commands).
    BuildEngine(Box<build_engine::Args>),
    /// Run a model over calibration data and write activation ranges (and a TensorRT cache).
    Calibrate(Box<calibrate::Args>),
}

pub fn run(cli: Cli) -> OpsResult {
    match cli.command {
        Command::Inspect(a) => inspect::run(a),
        Command::Convert(a) => convert::run(a),
        Command::Optimize(a) => optimize::run(*a),
        Command::Passes(a) => passes::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Doctor(a) => doctor::run(a),
        Command::BuildEngine(a) => build_engine::run(*a),
        Command::Calibrate(a) => calibrate::run(*a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_data_without_a_threshold_is_ops_default() {
        let cli = Cli::try_parse_from(["infopt", "optimize", "m.onnx", "--external-data"]);
        let Ok(Cli {
            command: Command::Optimize(a),
        }) = cli
        else {
            panic!("{cli:?}");
        };
        assert_eq!(
            a.save.external_data,
            Some(infopt_ops::save_args::DEFAULT_EXTERNAL_THRESHOLD)
        );
    }
}
