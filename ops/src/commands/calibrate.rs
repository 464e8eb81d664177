//! `infopt calibrate MODEL --data PATH -o ranges.json`: runs the model over
//! calibration data and writes the activation ranges (and optionally a
//! TensorRT calibration cache).
//!
//! Over many machines: `--shard K/N -o part-K.json` observes the K-th of N
//! fixed slices of the data and writes its statistics; `--merge part-*.json
//! -o ranges.json` merges them into the ranges one machine would have written
//! over all the data, byte for byte (see `infopt_calibration::shard`).

use std::path::PathBuf;

use infopt_calibration::cache::{
    CalibratorName, TrtCacheHeader, trt_version_code, write_trt_cache,
};
use infopt_calibration::run::{
    CalibrateOptions as RunOptions, DataSource, ProgressFn, Target, calibrate, collect, table_of,
};
use infopt_calibration::shard::{self, Part, PartData, PartSettings, Shard};
use infopt_calibration::table::sha256_hex;
use infopt_calibration::{DEFAULT_BINS, Method, RangeTable};
use infopt_runtime::InputShapes;
use infopt_verify::{BackendKind, ChosenBackend};

use crate::backend_args::BackendSettings;
use crate::error::{ErrorKind, OpsError, OpsResult};
use crate::inputs_arg::InputSettings;
use crate::stages;

/// `calibrate`'s options (see `OptimizeOptions` for how they are built).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CalibrateOptions {
    /// Model to calibrate (never modified). With --merge, optional: when given,
    /// the parts must come from it.
    pub model: Option<PathBuf>,
    /// Calibration data: a folder of .npz (or .npy) samples, one .npz with a
    /// leading sample axis, an image folder (with --preprocess), or random:N
    /// (smoke tests only: meaningless for accuracy).
    pub data: Option<String>,
    /// Samples held by the caller instead of `data` (the Python API's iterable).
    #[serde(skip)]
    pub data_stream: Option<infopt_calibration::run::Streamed>,
    /// Calibrate only shard K of N (contiguous slices of the data in dataset order,
    /// the same on every machine) and write its statistics to -o, for --merge.
    pub shard: Option<String>,
    /// Merge the parts of every shard (any order) into the ranges (and --trt-cache)
    /// one run over all the data writes, bit for bit. The method is the parts'.
    pub merge: Vec<PathBuf>,
    /// YAML preprocessing of an image folder (`images: {input, size, resize, ...}`).
    pub preprocess: Option<PathBuf>,
    /// Range method (auto: per tensor, the full range of bounded outputs,
    /// elsewhere the candidate with the least quantization error).
    pub method: String,
    /// Percentile of |x| for --method percentile.
    pub percentile: f64,
    /// Use at most this many samples.
    pub samples: Option<usize>,
    /// Samples per run (needs a free batch dim).
    pub batch: usize,
    /// Where to write the range table.
    pub output: PathBuf,
    /// Also write a TensorRT calibration cache.
    pub trt_cache: Option<PathBuf>,
    /// TensorRT version for the cache header (e.g. 10.3.0).
    pub trt_version: String,
    pub inputs: InputSettings,
    pub backend: BackendSettings,
}

/// Range method.
pub const DEFAULT_METHOD: &str = "entropy";
/// Percentile of |x| for `--method percentile`.
pub const DEFAULT_PERCENTILE: f64 = 99.99;
/// Samples per run.
pub const DEFAULT_BATCH: usize = 1;
/// TensorRT version of the cache header.
pub const DEFAULT_TRT_VERSION: &str = "10.3.0";

impl Default for CalibrateOptions {
    fn default() -> Self {
        CalibrateOptions {
            model: None,
            data: None,
            data_stream: None,
            shard: None,
            merge: Vec::new(),
            preprocess: None,
            method: DEFAULT_METHOD.into(),
            percentile: DEFAULT_PERCENTILE,
            samples: None,
            batch: DEFAULT_BATCH,
            output: PathBuf::new(),
            trt_cache: None,
            trt_version: DEFAULT_TRT_VERSION.into(),
            inputs: Default::default(),
            backend: Default::default(),
        }
    }
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
    /// `K/N` when one shard was calibrated (`output` is then its part).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// Parts merged, with --merge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parts: Option<usize>,
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
    if let Some(n) = r.parts {
        s.push_str(&format!(
            "merged {n} part{}: {} tensors on {} samples ({}, {}) in {:.3} s; wrote {}\n",
            if n == 1 { "" } else { "s" },
            r.tensors,
            r.samples,
            r.dataset,
            r.backend,
            r.seconds,
            r.output
        ));
        return s;
    }
    if let Some(k) = &r.shard {
        s.push_str(&format!("shard {k}: "));
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

/// The TensorRT cache header for `method`, when a cache is asked for.
fn cache_header(args: &CalibrateOptions, method: Method) -> OpsResult<Option<TrtCacheHeader>> {
    Ok(match &args.trt_cache {
        // TensorRT reads the scales whatever the header's calibrator name;
        // it names the algorithm that produced them.
        Some(_) => Some(TrtCacheHeader {
            version: trt_version_code(&args.trt_version).map_err(OpsError::usage)?,
            calibrator: match method {
                Method::MinMax => CalibratorName::MinMaxCalibration,
                _ => CalibratorName::EntropyCalibration2,
            },
        }),
        None => None,
    })
}

/// Writes the range table and, when asked, the TensorRT cache.
fn write_ranges(args: &CalibrateOptions, table: &RangeTable, method: Method) -> OpsResult {
    let header = cache_header(args, method)?;
    table
        .write(&args.output)
        .map_err(|e| OpsError::new(ErrorKind::Write, e))?;
    if let (Some(path), Some(header)) = (&args.trt_cache, header) {
        write_trt_cache(table, header, path).map_err(|e| OpsError::new(ErrorKind::Write, e))?;
    }
    Ok(())
}

/// `--merge`: the parts' statistics merged, and the ranges made from them.
fn merge(args: &CalibrateOptions) -> OpsResult<CalibrateReport> {
    let started = std::time::Instant::now();
    let model_sha256 = match &args.model {
        Some(p) => Some(sha256_hex(&std::fs::read(p).map_err(|e| {
            OpsError::new(ErrorKind::Load, format!("{}: {e}", p.display()))
        })?)),
        None => None,
    };
    let merged = shard::merge(&args.merge, model_sha256.as_deref()).map_err(OpsError::usage)?;
    if merged.samples == 0 {
        return Err(OpsError::usage(
            "the calibration data has no samples (every part is empty)",
        ));
    }
    let method = merged.settings.method;
    let table = table_of(
        &merged.collector,
        method,
        merged.model_sha256.clone(),
        &merged.full_range,
        merged.samples,
    )
    .map_err(OpsError::usage)?;
    write_ranges(args, &table, method)?;
    crate::progress::checkpoint()?;
    Ok(CalibrateReport {
        schema_version: CALIBRATE_SCHEMA_VERSION,
        model: args.model.as_ref().map_or_else(
            || format!("sha256:{}", merged.model_sha256),
            |p| p.display().to_string(),
        ),
        output: args.output.display().to_string(),
        trt_cache: args.trt_cache.as_ref().map(|p| p.display().to_string()),
        tensors: table.tensors.len(),
        samples: merged.samples,
        dataset: format!(
            "{} shard{} of {}",
            merged.shards,
            if merged.shards == 1 { "" } else { "s" },
            merged.description
        ),
        meaningful: merged.meaningful,
        method: method.name().to_string(),
        backend: merged.settings.backend.clone(),
        seconds: started.elapsed().as_secs_f64(),
        shard: None,
        parts: Some(args.merge.len()),
    })
}

/// `input=1x3x224x224, batch=1, other dims 1`: the shapes a part was run at.
fn shapes_setting(shapes: &infopt_runtime::InputShapes) -> String {
    let dims = |d: &[usize]| d.iter().map(usize::to_string).collect::<Vec<_>>().join("x");
    shapes
        .shapes
        .iter()
        .map(|(name, d)| format!("{name}={}", dims(d)))
        .chain(shapes.symbols.iter().map(|(s, v)| format!("{s}={v}")))
        .chain([format!("other dims {}", shapes.default_dim)])
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a part records about where the samples come from.
fn data_setting(source: &DataSource) -> OpsResult<String> {
    Ok(match source {
        DataSource::Arrays(_) => "arrays".into(),
        DataSource::Images { spec, .. } => {
            let text = std::fs::read(spec)
                .map_err(|e| OpsError::usage(format!("--preprocess {}: {e}", spec.display())))?;
            format!("images, preprocessing sha256 {}", sha256_hex(&text))
        }
        DataSource::Random { seed, count, .. } => format!("random:{count} (seed {seed})"),
        DataSource::Streamed(_) => "arrays (given in memory)".into(),
    })
}

/// Calibrates and writes the range table (and cache), without printing.
pub fn execute(args: &CalibrateOptions) -> OpsResult<CalibrateReport> {
    if !args.merge.is_empty() {
        return merge(args);
    }
    if args.batch == 0 {
        return Err(OpsError::usage("--batch must be at least 1"));
    }
    let missing = || {
        OpsError::usage(
            "give the model and its data (infopt calibrate MODEL --data PATH -o ranges.json), or parts to merge (--merge part-*.json -o ranges.json)",
        )
    };
    let model_path = args.model.as_ref().ok_or_else(missing)?;
    let shard = args
        .shard
        .as_deref()
        .map(Shard::parse)
        .transpose()
        .map_err(OpsError::usage)?;
    let method = crate::int8::method(&args.method, args.percentile)?;
    // The caller's samples (the Python API's iterable), else --data.
    let source = match (&args.data_stream, &args.data) {
        (Some(stream), _) => DataSource::Streamed(stream.clone()),
        (None, Some(data)) => DataSource::parse(data, args.preprocess.as_deref())
            .map_err(OpsError::usage)?
            .generated_with(args.inputs.seed.unwrap_or(0), args.inputs.vocab),
        (None, None) => return Err(missing()),
    };
    // Checked before the work: a bad --trt-version fails at once.
    cache_header(args, method)?;
    let model = crate::models::load_model(model_path)?;
    let bytes = std::fs::read(model_path)
        .map_err(|e| OpsError::new(ErrorKind::Load, format!("{}: {e}", model_path.display())))?;
    let inputs = args.inputs.resolve().map_err(OpsError::usage)?;
    let chosen = args.backend.build(BackendKind::Tract)?;
    let mut bar = SampleBar::default();
    let mut progress = |done: usize, total: Option<usize>| bar.update(done, total);
    let options = RunOptions {
        method,
        samples: args.samples,
        batch: args.batch,
        bins: DEFAULT_BINS,
        keep_runs: 0,
        quantizable: None,
    };
    let dir = stages::model_dir(model_path);
    let target = Target {
        model: &model,
        file_bytes: &bytes,
        dir: &dir,
    };
    if let Some(shard) = shard {
        let run = Run {
            target: &target,
            chosen: &chosen,
            shapes: &inputs.shapes,
            source: &source,
            options: &options,
        };
        let report = write_part(args, &run, shard, &mut progress);
        bar.finish();
        return report;
    }
    let result = calibrate(
        &target,
        &chosen,
        &inputs.shapes,
        &source,
        &options,
        &mut progress,
    )?;
    bar.finish();
    write_ranges(args, &result.table, method)?;
    crate::progress::checkpoint()?;
    Ok(CalibrateReport {
        schema_version: CALIBRATE_SCHEMA_VERSION,
        model: model_path.display().to_string(),
        output: args.output.display().to_string(),
        trt_cache: args.trt_cache.as_ref().map(|p| p.display().to_string()),
        tensors: result.table.tensors.len(),
        samples: result.samples,
        dataset: result.dataset.to_string(),
        meaningful: result.meaningful,
        method: args.method.clone(),
        backend: result.backend.to_string(),
        seconds: result.seconds,
        shard: None,
        parts: None,
    })
}

/// What one calibration run reads: the model, the backend, the shapes, the
/// data and the range options.
struct Run<'a> {
    target: &'a Target<'a>,
    chosen: &'a ChosenBackend,
    shapes: &'a InputShapes,
    source: &'a DataSource,
    options: &'a RunOptions,
}

impl Run<'_> {
    fn target_path(&self, args: &CalibrateOptions) -> String {
        args.model
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }
}

/// `--shard K/N`: observes the K-th slice of the data and writes its
/// statistics as a part to merge.
fn write_part(
    args: &CalibrateOptions,
    run: &Run<'_>,
    shard: Shard,
    progress: &mut ProgressFn<'_>,
) -> OpsResult<CalibrateReport> {
    let started = std::time::Instant::now();
    let c = collect(
        run.target,
        run.chosen,
        run.shapes,
        run.source,
        run.options,
        Some(&|n| shard.range(n)),
        progress,
    )?;
    let range = shard.range(c.total);
    let settings = PartSettings {
        method: run.options.method,
        histogram_bins: run.options.bins,
        histograms: c.collector.keeps_histograms(),
        input_shapes: shapes_setting(run.shapes),
        data: data_setting(run.source)?,
        backend: c.backend.clone(),
    };
    let part = Part::new(
        &c.collector,
        settings,
        c.model_sha256.clone(),
        shard,
        PartData {
            total_samples: c.total,
            first: range.start,
            end: range.end,
            description: c.dataset.clone(),
            meaningful: c.meaningful,
        },
        c.samples,
        &c.full_range,
    );
    part.write(&args.output)
        .map_err(|e| OpsError::new(ErrorKind::Write, e))?;
    crate::progress::checkpoint()?;
    Ok(CalibrateReport {
        schema_version: CALIBRATE_SCHEMA_VERSION,
        model: run.target_path(args),
        output: args.output.display().to_string(),
        trt_cache: None,
        tensors: c.collector.len(),
        samples: c.samples,
        dataset: format!("samples {}..{} of {}", range.start, range.end, c.dataset),
        meaningful: c.meaningful,
        method: args.method.clone(),
        backend: c.backend,
        seconds: started.elapsed().as_secs_f64(),
        shard: Some(shard.to_string()),
        parts: None,
    })
}

/// Progress over calibration samples: every count to a caller that shows
/// every step, a bar when the caller draws bars.
#[derive(Default)]
struct SampleBar(Option<Box<dyn crate::progress::Bar>>, bool);

impl SampleBar {
    fn update(&mut self, done: usize, total: Option<usize>) {
        crate::progress::event(
            "calibrate",
            match total {
                Some(t) => format!("{done}/{t} samples"),
                None => format!("{done} samples"),
            },
        );
        if !self.1 {
            // Asked once: the caller draws a bar or it does not.
            self.1 = true;
            self.0 = crate::progress::bar(
                "calibrate [{bar:30}] {pos}/{len} samples {per_sec} {elapsed_precise}",
                "calibrate",
                Some(total.unwrap_or(0)),
            );
        }
        if let Some(b) = &self.0 {
            b.set(done, "");
        }
    }

    fn finish(self) {
        if let Some(b) = self.0 {
            b.finish();
        }
    }
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
    fn summary(&self) -> crate::ci::CiSummary<'_> {
        crate::ci::CiSummary {
            title: "infopt calibrate".into(),
            subject: format!("`{}`", self.model),
            details: Some(self.markdown()),
            ..Default::default()
        }
    }
}
