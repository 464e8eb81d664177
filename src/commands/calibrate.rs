//! `infopt calibrate MODEL --data PATH -o ranges.json`: runs the model over
//! calibration data and writes the activation ranges (and optionally a
//! TensorRT calibration cache).

use std::io::IsTerminal;
use std::path::PathBuf;

use infopt_calibration::cache::{
    CalibratorName, TrtCacheHeader, trt_version_code, write_trt_cache,
};
use infopt_calibration::run::{CalibrateOptions, DataSource, Target, calibrate};
use infopt_calibration::{DEFAULT_BINS, Method};
use infopt_verify::BackendKind;

use crate::backend_args::BackendArgs;
use crate::exit::{CliError, CliResult, Exit};
use crate::inputs_arg::InputArgs;
use crate::stages;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model to calibrate (never modified).
    pub model: PathBuf,
    /// Calibration data: a folder of .npz (or .npy) samples, one .npz with a
    /// leading sample axis, an image folder (with --preprocess), or random:N
    /// (smoke tests only: meaningless for accuracy).
    #[arg(long = "data", alias = "calib-data", value_name = "PATH|random:N")]
    pub data: String,
    /// YAML preprocessing of an image folder (`images: {input, size, resize, ...}`).
    #[arg(long, value_name = "FILE.yaml")]
    pub preprocess: Option<PathBuf>,
    /// Range method (auto: per tensor, the full range of bounded outputs,
    /// elsewhere the candidate with the least quantization error).
    #[arg(
        long,
        default_value = "entropy",
        value_name = "auto|minmax|percentile|entropy|mse"
    )]
    pub method: String,
    /// Percentile of |x| for --method percentile.
    #[arg(long, default_value_t = 99.99)]
    pub percentile: f64,
    /// Use at most this many samples.
    #[arg(long, value_name = "N")]
    pub samples: Option<usize>,
    /// Samples per run (needs a free batch dim).
    #[arg(long, default_value_t = 1, value_name = "B")]
    pub batch: usize,
    /// Where to write the range table.
    #[arg(short, long, value_name = "ranges.json")]
    pub output: PathBuf,
    /// Also write a TensorRT calibration cache.
    #[arg(long, value_name = "FILE")]
    pub trt_cache: Option<PathBuf>,
    /// TensorRT version for the cache header (e.g. 10.3.0).
    #[arg(long, default_value = "10.3.0", value_name = "X.Y.Z")]
    pub trt_version: String,
    #[command(flatten)]
    pub inputs: InputArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
}

pub fn method(name: &str, percentile: f64) -> CliResult<Method> {
    let m = Method::from_name(name).map_err(CliError::usage)?;
    Ok(match m {
        Method::Percentile { .. } => Method::Percentile { percentile },
        other => other,
    })
}

pub fn run(args: Args) -> CliResult {
    if args.batch == 0 {
        return Err(CliError::usage("--batch must be at least 1"));
    }
    let method = method(&args.method, args.percentile)?;
    let source =
        DataSource::parse(&args.data, args.preprocess.as_deref()).map_err(CliError::usage)?;
    let header = match &args.trt_cache {
        // TensorRT reads the scales whatever the header's calibrator name;
        // it names the algorithm that produced them.
        Some(_) => Some(TrtCacheHeader {
            version: trt_version_code(&args.trt_version).map_err(CliError::usage)?,
            calibrator: match method {
                Method::MinMax => CalibratorName::MinMaxCalibration,
                _ => CalibratorName::EntropyCalibration2,
            },
        }),
        None => None,
    };
    let model = super::load_model(&args.model)?;
    let bytes = std::fs::read(&args.model)
        .map_err(|e| CliError::new(Exit::Load, format!("{}: {e}", args.model.display())))?;
    let inputs = args.inputs.resolve().map_err(CliError::usage)?;
    let chosen = args.backend.build(BackendKind::Tract)?;
    let mut bar: Option<indicatif::ProgressBar> = None;
    let mut progress = |done: usize, total: Option<usize>| {
        if !std::io::stderr().is_terminal() {
            return;
        }
        let b = bar.get_or_insert_with(|| {
            let b = indicatif::ProgressBar::new(total.unwrap_or(0) as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "calibrate [{bar:30}] {pos}/{len} samples {per_sec} {elapsed_precise}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b
        });
        b.set_position(done as u64);
    };
    let options = CalibrateOptions {
        method,
        samples: args.samples,
        batch: args.batch,
        bins: DEFAULT_BINS,
    };
    let dir = stages::model_dir(&args.model);
    let target = Target {
        model: &model,
        file_bytes: &bytes,
        dir: &dir,
    };
    let result = calibrate(
        &target,
        &chosen,
        &inputs.shapes,
        &source,
        &options,
        &mut progress,
    )?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    result
        .table
        .write(&args.output)
        .map_err(|e| CliError::new(Exit::Write, e))?;
    if let (Some(path), Some(header)) = (&args.trt_cache, header) {
        write_trt_cache(&result.table, header, path).map_err(|e| CliError::new(Exit::Write, e))?;
    }
    if !result.meaningful {
        eprintln!(
            "warning: {} : these ranges say nothing about real inputs",
            result.dataset
        );
    }
    eprintln!(
        "calibrated {} tensors on {} samples ({}) in {} in {:.2} s ({:.1} samples/s); wrote {}",
        result.table.tensors.len(),
        result.samples,
        result.dataset,
        result.backend,
        result.seconds,
        result.samples as f64 / result.seconds.max(1e-9),
        args.output.display()
    );
    Ok(())
}
