//! `infopt calibrate`: arguments → options → `infopt_ops` → summary on stderr.

use std::path::PathBuf;

use infopt_ops::commands;

use crate::exit::OpsResult;
use crate::progress::Terminal;
use infopt_ops::outcome::CommandReport;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model to calibrate (never modified). With --merge, optional: when given,
    /// the parts must come from it.
    #[arg(required_unless_present = "merge")]
    pub model: Option<PathBuf>,
    /// Calibration data: a folder of .npz (or .npy) samples, one .npz with a
    /// leading sample axis, an image folder (with --preprocess), or random:N
    /// (smoke tests only: meaningless for accuracy).
    #[arg(
        long = "data",
        alias = "calib-data",
        value_name = "PATH|random:N",
        required_unless_present = "merge"
    )]
    pub data: Option<String>,
    /// Calibrate only shard K of N (contiguous slices of the data in dataset order,
    /// the same on every machine) and write its statistics to -o, for --merge.
    #[arg(long, value_name = "K/N", conflicts_with = "trt_cache")]
    pub shard: Option<String>,
    /// Merge the parts of every shard (any order) into the ranges (and --trt-cache)
    /// one run over all the data writes, bit for bit. The method is the parts'.
    #[arg(
        long,
        value_name = "PART.json",
        num_args = 1..,
        conflicts_with_all = ["data", "shard", "preprocess", "samples", "method", "percentile", "batch"]
    )]
    pub merge: Vec<PathBuf>,
    /// YAML preprocessing of an image folder (`images: {input, size, resize, ...}`).
    #[arg(long, value_name = "FILE.yaml")]
    pub preprocess: Option<PathBuf>,
    /// Range method (auto: per tensor, the full range of bounded outputs,
    /// elsewhere the candidate with the least quantization error).
    #[arg(
        long,
        default_value = infopt_ops::commands::calibrate::DEFAULT_METHOD,
        value_name = "auto|minmax|percentile|entropy|mse"
    )]
    pub method: String,
    /// Percentile of |x| for --method percentile.
    #[arg(long, default_value_t = infopt_ops::commands::calibrate::DEFAULT_PERCENTILE)]
    pub percentile: f64,
    /// Use at most this many samples.
    #[arg(long, value_name = "N")]
    pub samples: Option<usize>,
    /// Samples per run (needs a free batch dim).
    #[arg(long, default_value_t = infopt_ops::commands::calibrate::DEFAULT_BATCH, value_name = "B")]
    pub batch: usize,
    /// Where to write the range table.
    #[arg(short, long, value_name = "ranges.json")]
    pub output: PathBuf,
    /// Also write a TensorRT calibration cache.
    #[arg(long, value_name = "FILE")]
    pub trt_cache: Option<PathBuf>,
    /// TensorRT version for the cache header (e.g. 10.3.0).
    #[arg(long, default_value = infopt_ops::commands::calibrate::DEFAULT_TRT_VERSION, value_name = "X.Y.Z")]
    pub trt_version: String,
    #[command(flatten)]
    pub inputs: crate::args::InputArgs,
    #[command(flatten)]
    pub backend: crate::args::BackendArgs,
    /// Also write the report to FILE (repeatable): .json (JSON), .md (Markdown for a
    /// pull-request comment), .xml (JUnit XML).
    #[arg(long, value_name = "FILE")]
    pub report: Vec<PathBuf>,
}

impl From<Args> for infopt_ops::commands::calibrate::CalibrateOptions {
    fn from(a: Args) -> Self {
        infopt_ops::commands::calibrate::CalibrateOptions {
            model: a.model,
            data: a.data,
            data_stream: None,
            shard: a.shard,
            merge: a.merge,
            preprocess: a.preprocess,
            method: a.method,
            percentile: a.percentile,
            samples: a.samples,
            batch: a.batch,
            output: a.output,
            trt_cache: a.trt_cache,
            trt_version: a.trt_version,
            inputs: a.inputs.into(),
            backend: a.backend.into(),
        }
    }
}

/// The summary on stderr (stdout stays free: `-o -` is not a thing, but the
/// ranges file is the output) and the `--report` files.
pub fn run(args: Args) -> OpsResult {
    crate::report::kinds(&args.report)?;
    let reports = args.report.clone();
    let outcome = commands::calibrate(&args.into(), &Terminal)?;
    eprint!("{}", outcome.report.text());
    crate::report::write_files(&outcome.report, &reports, None)?;
    outcome.verdict()
}
