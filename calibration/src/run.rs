//! Calibration as a whole: the model runs over a dataset in a backend, every
//! intermediate float tensor streams into a [`RangeCollector`], and a range
//! method turns the statistics into a [`RangeTable`]. Memory is flat in the
//! number of samples: the samples are read one batch at a time, a run's
//! tensors are read where the backend put them (no host copy, see
//! `LoadedModel::run_observed_views`) and released before the next run, and
//! the collector keeps a fixed-size histogram per tensor.

use std::path::Path;
use std::time::Instant;

use infopt_ir::Model;
use infopt_runtime::{InputShapes, IoSpec, Observe};
use infopt_verify::dataset;
use infopt_verify::{ChosenBackend, ErrorKind, VerifyError};

// Where the samples come from is data_source.rs, below this file and
// data_shapes.rs; re-exported here, where callers have always found it.
pub use crate::data_source::{DataSource, OpenSamples, Streamed, open_dataset, open_files};
use crate::{Method, RangeCollector, RangeTable};

/// How to calibrate.
#[derive(Clone, Debug)]
pub struct CalibrateOptions {
    pub method: Method,
    /// Use at most this many samples.
    pub samples: Option<usize>,
    /// Samples joined per run (the models's batch dim must be free).
    pub batch: usize,
    /// Histogram bins (default 2048).
    pub bins: usize,
}

/// What a calibration produced.
pub struct Calibrated {
    pub table: RangeTable,
    pub samples: usize,
    pub seconds: f64,
    pub dataset: String,
    /// False for random data.
    pub meaningful: bool,
    pub backend: String,
}

/// Progress: samples done, samples expected (when known).
pub type ProgressFn<'a> = dyn FnMut(usize, Option<usize>) + 'a;

/// The model to calibrate.
pub struct Target<'a> {
    pub model: &'a Model,
    /// The model file's bytes, for the table's hash.
    pub file_bytes: &'a [u8],
    /// The folder its external data is resolved against.
    pub dir: &'a Path,
}

mod side_by_side;
use side_by_side::LoadedFor;

/// Calibrates the target on `source` in `chosen`'s backend.
pub fn calibrate(
    target: &Target<'_>,
    chosen: &ChosenBackend,
    shapes: &InputShapes,
    source: &DataSource,
    options: &CalibrateOptions,
    progress: &mut ProgressFn<'_>,
) -> Result<Calibrated, VerifyError> {
    let started = Instant::now();
    let c = collect(target, chosen, shapes, source, options, None, progress)?;
    if c.samples == 0 {
        return Err(VerifyError::usage("the calibration data has no samples"));
    }
    let table = table_of(
        &c.collector,
        options.method,
        c.model_sha256.clone(),
        &c.full_range,
        c.samples,
    )
    .map_err(VerifyError::usage)?;
    Ok(Calibrated {
        table,
        samples: c.samples,
        seconds: started.elapsed().as_secs_f64(),
        dataset: c.dataset,
        meaningful: c.meaningful,
        backend: c.backend,
    })
}

/// The range table of collected statistics: what [`calibrate`] writes, and what a merge
/// of shards writes (the same function of the same statistics, so the same bytes).
pub fn table_of(
    collector: &RangeCollector,
    method: Method,
    model_sha256: String,
    full_range: &std::collections::BTreeMap<String, &'static str>,
    samples: usize,
) -> Result<RangeTable, String> {
    let mut table = RangeTable::from_collector_bounded(collector, method, model_sha256, &|name| {
        full_range.get(name).copied()
    })
    .map_err(|e| e.to_string())?;
    // The collector counts observations (runs); a range table counts the
    // calibration samples behind each range, whatever the batch size.
    for r in table.tensors.values_mut() {
        r.samples = samples as u64;
    }
    Ok(table)
}

/// The statistics of a calibration, before a method turns them into ranges.
pub struct Collected {
    pub collector: RangeCollector,
    /// Samples observed.
    pub samples: usize,
    /// Samples in the whole dataset (after `--samples`), slices or not.
    pub total: usize,
    pub model_sha256: String,
    /// Tensors that keep their whole range under [`Method::Auto`], with the reason.
    pub full_range: std::collections::BTreeMap<String, &'static str>,
    pub dataset: String,
    pub meaningful: bool,
    pub backend: String,
}

/// Runs the target over `source` (only samples `slice` of it, when given: the
/// deterministic part of a sharded calibration) and keeps the statistics.
pub fn collect(
    target: &Target<'_>,
    chosen: &ChosenBackend,
    shapes: &InputShapes,
    source: &DataSource,
    options: &CalibrateOptions,
    slice: Option<&dyn Fn(usize) -> std::ops::Range<usize>>,
    progress: &mut ProgressFn<'_>,
) -> Result<Collected, VerifyError> {
    let (model, model_bytes, dir) = (target.model, target.file_bytes, target.dir);
    // Random data needs the model loaded to make inputs; files do not (a
    // serialization and a session of a large model saved).
    let mut data = match open_files(source).map_err(VerifyError::usage)? {
        Some(files) => files,
        None => {
            let serialized = model
                .to_bytes_referencing_sources()
                .map_err(|e| VerifyError::new(ErrorKind::Load, e))?;
            open_dataset(source, chosen, &serialized, dir, shapes)?
        }
    };
    let mut total = match (data.sample_count(), options.samples) {
        (Some(n), Some(l)) => Some(n.min(l)),
        (n, l) => n.or(l),
    };
    let whole = total;
    // The whole dataset's description, also for a slice of it.
    let description = data.describe();
    let mut limit = options.samples;
    if let Some(slice) = slice {
        let Some(n) = total else {
            return Err(VerifyError::usage(
                "this dataset does not say how many samples it has, so it cannot be split into shards; give --samples N",
            ));
        };
        let range = slice(n);
        total = Some(range.len());
        // The slice ends inside the first `n` samples: no further limit.
        limit = None;
        data = Box::new(dataset::Sliced::new(data, range));
    }
    // The inputs as declared (names, dtypes, fixed dims).
    let declared: Vec<IoSpec> = crate::data_shapes::declared_specs(model);
    let mut collector = RangeCollector::with_bins(options.bins).map_err(VerifyError::usage)?;
    if matches!(options.method, Method::MinMax) {
        // Min-max reads the extremes only: no binning pass.
        collector = collector.without_histograms();
    }
    let split = side_by_side_backend(chosen, model_bytes.len());
    let count = match split {
        Some((backend, sessions, threads_each)) => {
            let sessions_of = side_by_side::Sessions {
                backend: backend.as_ref(),
                threads_each,
                model,
                dir,
                shapes,
                declared: &declared,
                empty: &collector,
            };
            let fed = sessions_of.run(sessions, |side| {
                dataset::batches(
                    data.as_mut(),
                    &batch_specs(&declared, options.batch),
                    options.batch,
                    limit,
                    |tensors, samples| {
                        side.send(tensors, samples[0].origin.clone(), samples.len())?;
                        progress(side.done.load(std::sync::atomic::Ordering::Relaxed), total);
                        Ok(())
                    },
                )
            });
            match fed {
                Ok((count, merged)) => {
                    let count = count.map_err(VerifyError::usage)?;
                    collector = merged;
                    progress(count, total);
                    count
                }
                Err((_, e)) => return Err(e),
            }
        }
        None => collect_one_session(
            chosen,
            model,
            dir,
            shapes,
            &declared,
            data.as_mut(),
            options,
            limit,
            &mut collector,
            &mut |done| progress(done, total),
        )?,
    };
    Ok(Collected {
        collector,
        samples: count,
        total: whole.unwrap_or(count),
        model_sha256: crate::table::sha256_hex(model_bytes),
        full_range: crate::full_range::full_range_tensors(model)
            .into_iter()
            .collect(),
        dataset: description,
        meaningful: data.meaningful(),
        backend: chosen.info.at_reference().describe(),
    })
}

/// The samples of `data` run in one session of `chosen`'s reference
/// backend, one batch after another, into `collector`; returns the number
/// of samples run.
#[allow(clippy::too_many_arguments)]
fn collect_one_session(
    chosen: &ChosenBackend,
    model: &Model,
    dir: &Path,
    shapes: &InputShapes,
    declared: &[IoSpec],
    data: &mut dyn dataset::Dataset,
    options: &CalibrateOptions,
    limit: Option<usize>,
    collector: &mut RangeCollector,
    progress: &mut dyn FnMut(usize),
) -> Result<usize, VerifyError> {
    // One loaded model per batch shape (the last batch may be smaller).
    let mut loaded: Option<LoadedFor> = None;
    let mut failure: Option<VerifyError> = None;
    let mut done = 0usize;
    dataset::batches(
        data,
        &batch_specs(declared, options.batch),
        options.batch,
        limit,
        |tensors, samples| {
            let key: Vec<Vec<usize>> = tensors.iter().map(|t| t.shape().to_vec()).collect();
            if loaded.as_ref().is_none_or(|(k, _)| *k != key) {
                // The samples fix every input's shape; a symbol binding from
                // elsewhere (the verifier's batch of 2, say) would contradict
                // them.
                let mut at = shapes.clone();
                at.symbols.clear();
                for (t, spec) in tensors.iter().zip(declared) {
                    at.shapes.insert(spec.name.clone(), t.shape().to_vec());
                }
                // The reference backend (ONNX Runtime at `disable`) runs the
                // graph as written: the observed tensors are the model's own,
                // not those of ORT's layout rewrites, and the session holds
                // one copy of the weights instead of adding reordered ones.
                let m = infopt_verify::observe::load_observing(
                    chosen.reference_backend(),
                    model,
                    dir,
                    &at,
                    &Observe::All,
                )
                .map_err(|e| {
                    let m = e.message.clone();
                    failure = Some(e);
                    m
                })?;
                loaded = Some((key, m));
            }
            let Some((_, m)) = loaded.as_ref() else {
                return Err("no model loaded".into());
            };
            for t in &tensors {
                collector.observe_named(t);
            }
            // The intermediates are read where the backend put them, a run's
            // worth at a time, on every core (see `observe_views`).
            m.run_observed_views(&tensors, &mut |views| {
                collector.observe_views(views);
                Ok(())
            })
            .map_err(|e| format!("{}: {e}", samples[0].origin))?;
            done += samples.len();
            progress(done);
            Ok(())
        },
    )
    .map_err(|m| failure.take().unwrap_or_else(|| VerifyError::usage(m)))
}

/// Where calibration runs side by side (see `side_by_side.rs`): the
/// backend for each session (the reference backend with its share of the
/// threads), the number of sessions and each one's threads; None for one
/// session.
fn side_by_side_backend(
    chosen: &ChosenBackend,
    model_bytes: usize,
) -> Option<(Box<dyn infopt_runtime::Backend>, usize, usize)> {
    let threads = chosen
        .info
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if chosen.info.weights_mapped
        || !chosen
            .info
            .execution_providers
            .iter()
            .all(|p| p == "CPUExecutionProvider")
    {
        return None;
    }
    let available = infopt_verify::memory::available_bytes().unwrap_or(0);
    let sessions = side_by_side::sessions_for(threads, model_bytes, available);
    if sessions < 2 {
        return None;
    }
    // tract has no thread setting (it runs on one): one session.
    let each = (threads / sessions).max(1);
    chosen
        .reference_backend()
        .with_threads(each)
        .map(|b| (b, sessions, each))
}

/// Input specs for batches of `batch` samples: the leading dim is free.
fn batch_specs(declared: &[IoSpec], batch: usize) -> Vec<IoSpec> {
    if batch <= 1 {
        return declared.to_vec();
    }
    declared
        .iter()
        .map(|s| {
            let mut s = s.clone();
            if let Some(d) = s.dims.as_mut().and_then(|d| d.first_mut()) {
                *d = infopt_runtime::DimSpec::Unknown;
            }
            s
        })
        .collect()
}
