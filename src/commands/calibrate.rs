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

/// What `infopt calibrate` did: the ranges it wrote and how they were made.
#[derive(serde::Serialize, Debug, Clone)]
pub struct CalibrateReport {
    pub schema_version: u32,
    pub model: String,
    /// The range table written (`-o`).
    pub output: String,
    pub trt_cache: Option<String>,
    pub tensors: usize,
    pub samples: usize,
    /// What the samples were ("12 .npz files in calib/", "random:8").
    pub dataset: String,
    /// Whether the data says something about real inputs (random data does not).
    pub meaningful: bool,
    pub method: String,
    pub backend: String,
    pub seconds: f64,
}

/// Bumped on incompatible changes to [`CalibrateReport`]'s JSON.
pub const CALIBRATE_SCHEMA_VERSION: u32 = 1;

/// The lines `infopt calibrate` prints.
pub fn render_text(r: &CalibrateReport) -> String {
    let mut s = String::new();
    if !r.meaningful {
        s.push_str(&format!(
            "warning: {} : these ranges say nothing about real inputs\n",
            r.dataset
        ));
    }
    s.push_str(&format!(
        "calibrated {} tensors on {} samples ({}) in {} in {:.2} s ({:.1} samples/s); wrote {}\n",
        r.tensors,
        r.samples,
        r.dataset,
        r.backend,
        r.seconds,
        r.samples as f64 / r.seconds.max(1e-9),
        r.output
    ));
    s
}

pub fn run(args: Args) -> CliResult {
    let report = execute(&args)?;
    eprint!("{}", render_text(&report));
    Ok(())
}

/// Calibrates and writes the range table (and cache), without printing.
pub fn execute(args: &Args) -> CliResult<CalibrateReport> {
    if args.batch == 0 {
        return Err(CliError::usage("--batch must be at least 1"));
    }
    let method = crate::int8::method(&args.method, args.percentile)?;
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
    let model = crate::models::load_model(&args.model)?;
    let bytes = std::fs::read(&args.model)
        .map_err(|e| CliError::new(Exit::Load, format!("{}: {e}", args.model.display())))?;
    let inputs = args.inputs.resolve().map_err(CliError::usage)?;
    let chosen = args.backend.build(BackendKind::Tract)?;
    let mut bar: Option<indicatif::ProgressBar> = None;
    let mut progress = |done: usize, total: Option<usize>| {
        crate::progress::event(
            "calibrate",
            match total {
                Some(t) => format!("{done}/{t} samples"),
                None => format!("{done} samples"),
            },
        );
        if crate::progress::has_sink() || !std::io::stderr().is_terminal() {
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
    crate::progress::checkpoint()?;
    Ok(CalibrateReport {
        schema_version: CALIBRATE_SCHEMA_VERSION,
        model: args.model.display().to_string(),
        output: args.output.display().to_string(),
        trt_cache: args.trt_cache.as_ref().map(|p| p.display().to_string()),
        tensors: result.table.tensors.len(),
        samples: result.samples,
        dataset: result.dataset.to_string(),
        meaningful: result.meaningful,
        method: args.method.clone(),
        backend: result.backend.to_string(),
        seconds: result.seconds,
    })
}

impl crate::outcome::CommandReport for CalibrateReport {
    fn command(&self) -> &'static str {
        "calibrate"
    }
    fn text(&self) -> String {
        render_text(self)
    }
    fn markdown(&self) -> String {
        crate::outcome::fenced(&format!("infopt calibrate: {}", self.model), &self.text())
    }
}
