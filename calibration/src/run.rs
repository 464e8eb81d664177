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
use infopt_runtime::{InputShapes, IoSpec, Observe, Observing};
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
    /// Bytes of samples and outputs to keep for a judge of the same
    /// samples (see [`KeptRun`]); 0 keeps none. Batches of one only.
    pub keep_runs: usize,
    /// The tensors a Q/DQ may read (see [`crate::quantizable`]): the
    /// others are not binned and keep their full range. None: every
    /// tensor's range is the method's (`infopt calibrate`, a TensorRT
    /// cache).
    pub quantizable: Option<std::collections::BTreeSet<String>>,
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
    /// The runs kept (see [`CalibrateOptions::keep_runs`]), in data order.
    pub kept: Vec<KeptRun>,
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

mod kept;
mod side_by_side;
use kept::Keeper;
pub use kept::KeptRun;
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
    calibrate_with(target, chosen, shapes, source, options, progress, None)
}

/// Asked with the ranges of the first sample (the full range of each
/// tensor, whatever the method), before the rest run: whether to go on
/// (false: the calibration ends there, on one sample).
pub type AfterFirst<'a> = dyn FnMut(&RangeTable) -> Result<bool, VerifyError> + 'a;

/// [`calibrate`] that asks `after_first` with the first sample's ranges
/// whether to calibrate on the rest. The sessions and the data stay open
/// while it decides (INT8 times its placements there: a model's speed does
/// not depend on its ranges), so going on costs what one calibration
/// costs; its time is not counted in `seconds`.
pub fn calibrate_asking(
    target: &Target<'_>,
    chosen: &ChosenBackend,
    shapes: &InputShapes,
    source: &DataSource,
    options: &CalibrateOptions,
    progress: &mut ProgressFn<'_>,
    after_first: &mut AfterFirst<'_>,
) -> Result<Calibrated, VerifyError> {
    calibrate_with(
        target,
        chosen,
        shapes,
        source,
        options,
        progress,
        Some(after_first),
    )
}

/// [`calibrate`], asking `after_first` where there is one.
fn calibrate_with(
    target: &Target<'_>,
    chosen: &ChosenBackend,
    shapes: &InputShapes,
    source: &DataSource,
    options: &CalibrateOptions,
    progress: &mut ProgressFn<'_>,
    after_first: Option<&mut AfterFirst<'_>>,
) -> Result<Calibrated, VerifyError> {
    let started = Instant::now();
    let mut asking = 0.0f64;
    let c = match after_first {
        Some(after_first) => {
            let mut ask = |table: &RangeTable| -> Result<bool, VerifyError> {
                let t = Instant::now();
                let go_on = after_first(table);
                asking += t.elapsed().as_secs_f64();
                go_on
            };
            let ask: &mut AfterFirst<'_> = &mut ask;
            collect_asking(
                target,
                chosen,
                shapes,
                source,
                options,
                None,
                progress,
                Some(ask),
            )?
        }
        None => collect_asking(
            target, chosen, shapes, source, options, None, progress, None,
        )?,
    };
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
        seconds: (started.elapsed().as_secs_f64() - asking).max(0.0),
        dataset: c.dataset,
        meaningful: c.meaningful,
        backend: c.backend,
        kept: c.kept,
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
    /// The runs kept (see [`CalibrateOptions::keep_runs`]), in data order.
    pub kept: Vec<KeptRun>,
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
    collect_asking(
        target, chosen, shapes, source, options, slice, progress, None,
    )
}

/// Whether to go on after the first sample, asked with its statistics.
type GoOn<'a> = dyn FnMut(&RangeCollector) -> Result<bool, VerifyError> + 'a;

/// [`collect`] that asks `after_first` with the first sample's ranges
/// (built only for it: nobody asking, nothing is built).
#[allow(clippy::too_many_arguments)]
fn collect_asking(
    target: &Target<'_>,
    chosen: &ChosenBackend,
    shapes: &InputShapes,
    source: &DataSource,
    options: &CalibrateOptions,
    slice: Option<&dyn Fn(usize) -> std::ops::Range<usize>>,
    progress: &mut ProgressFn<'_>,
    after_first: Option<&mut AfterFirst<'_>>,
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
    let mut full_range: std::collections::BTreeMap<String, &'static str> =
        crate::full_range::full_range_tensors(model)
            .into_iter()
            .collect();
    if let Some(q) = &options.quantizable {
        let computed = infopt_verify::observe::computed_tensors(model)?;
        for (name, _, _) in computed {
            if !q.contains(&name) {
                full_range
                    .entry(name)
                    .or_insert(crate::quantizable::NOT_QUANTIZED);
            }
        }
    }
    let sha = crate::table::sha256_hex(model_bytes);
    match options.method {
        // Min-max reads the extremes only: no binning pass.
        Method::MinMax => collector = collector.without_histograms(),
        // Auto keeps these tensors' full range, whatever their histogram.
        Method::Auto => collector = collector.without_histograms_of(full_range.keys().cloned()),
        _ => {}
    }
    let keeper =
        (options.keep_runs > 0 && options.batch == 1).then(|| Keeper::new(options.keep_runs));
    let (sha_of, full_range_of) = (&sha, &full_range);
    let mut ask = after_first.map(|after_first| {
        move |collector: &RangeCollector| {
            // The full range of every tensor: what the hook needs (a
            // model's speed does not depend on its ranges), without the
            // method's choice per tensor, which on one sample means nothing
            // and costs as much as the final one (auto: 0.28 s on
            // EfficientNet-B0's 239 tensors).
            let table = table_of(collector, Method::MinMax, sha_of.clone(), full_range_of, 1)
                .map_err(VerifyError::usage)?;
            after_first(&table)
        }
    });
    let count = collect_sized(
        chosen,
        Sizing {
            model,
            model_bytes: model_bytes.len(),
            dir,
            shapes,
            declared: &declared,
            keeper: keeper.as_ref(),
        },
        data.as_mut(),
        options,
        limit,
        &mut collector,
        &mut |done| progress(done, total),
        ask.as_mut().map(|a| a as &mut GoOn<'_>),
    )?;
    Ok(Collected {
        collector,
        samples: count,
        total: whole.unwrap_or(count),
        model_sha256: sha,
        full_range,
        dataset: description,
        meaningful: data.meaningful(),
        backend: chosen.info.at_reference().describe(),
        kept: keeper.map(Keeper::into_runs).unwrap_or_default(),
    })
}

/// The samples of `data` run in one session of `backend` (`loaded`, where
/// it is loaded for the samples' shapes), one batch after another, into
/// `collector`; returns the number of samples run, and adds the bytes of
/// the tensors observed to `observed`. `start`: the position in the data
/// of the first sample run here.
#[allow(clippy::too_many_arguments)]
fn collect_one_session(
    backend: &dyn infopt_runtime::Backend,
    m: &Sizing<'_>,
    data: &mut dyn dataset::Dataset,
    options: &CalibrateOptions,
    limit: Option<usize>,
    collector: &mut RangeCollector,
    progress: &mut dyn FnMut(usize),
    observed: &mut usize,
    loaded: &mut Option<LoadedFor>,
    start: usize,
) -> Result<usize, VerifyError> {
    // One loaded model per batch shape (the last batch may be smaller),
    // given in and left to the caller.
    let mut failure: Option<VerifyError> = None;
    let mut done = 0usize;
    dataset::batches(
        data,
        &batch_specs(m.declared, options.batch),
        options.batch,
        limit,
        |tensors, samples| {
            let key: Vec<Vec<usize>> = tensors.iter().map(|t| t.shape().to_vec()).collect();
            if loaded.as_ref().is_none_or(|(k, _)| *k != key) {
                // The samples fix every input's shape; a symbol binding from
                // elsewhere (the verifier's batch of 2, say) would contradict
                // them.
                let mut at = m.shapes.clone();
                at.symbols.clear();
                for (t, spec) in tensors.iter().zip(m.declared) {
                    at.shapes.insert(spec.name.clone(), t.shape().to_vec());
                }
                // The reference backend (ONNX Runtime at `disable`) runs the
                // graph as written: the observed tensors are the model's own,
                // not those of ORT's layout rewrites, and the session holds
                // one copy of the weights instead of adding reordered ones.
                if !infopt_verify::evaluate::rebound(loaded, &key, &at) {
                    let loaded_now = infopt_verify::observe::load_observing(
                        backend,
                        m.model,
                        m.dir,
                        &at,
                        &Observe::All,
                    )
                    .map_err(|e| {
                        let m = e.message.clone();
                        failure = Some(e);
                        m
                    })?;
                    *loaded = Some((key, loaded_now));
                }
            }
            let Some((_, session)) = loaded.as_ref() else {
                return Err("no model loaded".into());
            };
            for t in &tensors {
                collector.observe_named(t);
            }
            // The intermediates are read where the backend put them, a run's
            // worth at a time, on every core (see `observe_views`).
            let outputs = session
                .run_observed_views(&tensors, &mut |views| {
                    *observed += views
                        .iter()
                        .map(|v| v.len() * v.dtype().size_of().max(1))
                        .sum::<usize>();
                    collector.observe_views(views);
                    Ok(())
                })
                .map_err(|e| format!("{}: {e}", samples[0].origin))?;
            if let Some(k) = m.keeper {
                k.keep(start + done, &samples[0].origin, &tensors, outputs);
            }
            done += samples.len();
            progress(done);
            Ok(())
        },
    )
    .map_err(|m| failure.take().unwrap_or_else(|| VerifyError::usage(m)))
}

/// The model a calibration runs, and what sizes its sessions.
struct Sizing<'a> {
    model: &'a Model,
    /// The model file's bytes (its weights, for most models).
    model_bytes: usize,
    dir: &'a Path,
    shapes: &'a InputShapes,
    declared: &'a [IoSpec],
    /// Where the runs are kept, if anywhere (batches of one).
    keeper: Option<&'a Keeper>,
}

/// Runs the samples of `data` into `collector`: the first one in one
/// session of the reference backend, whose observed tensors' bytes size the
/// rest, then the rest side by side where the CPU has threads for it and
/// the memory room (see `side_by_side.rs`); returns the samples run.
#[allow(clippy::too_many_arguments)]
fn collect_sized(
    chosen: &ChosenBackend,
    m: Sizing<'_>,
    data: &mut dyn dataset::Dataset,
    options: &CalibrateOptions,
    limit: Option<usize>,
    collector: &mut RangeCollector,
    progress: &mut dyn FnMut(usize),
    mut go_on: Option<&mut GoOn<'_>>,
) -> Result<usize, VerifyError> {
    let reference = chosen.reference_backend();
    let one = |backend: &dyn infopt_runtime::Backend,
               data: &mut dyn dataset::Dataset,
               limit: Option<usize>,
               collector: &mut RangeCollector,
               progress: &mut dyn FnMut(usize),
               observed: &mut usize,
               loaded: &mut Option<LoadedFor>,
               start: usize| {
        collect_one_session(
            backend, &m, data, options, limit, collector, progress, observed, loaded, start,
        )
    };
    let threads = chosen
        .info
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let cpu = chosen
        .info
        .execution_providers
        .iter()
        .all(|p| p == "CPUExecutionProvider");
    // Batches of several samples, weights mapped from a model larger than
    // memory, or a device: one session, as always.
    if options.batch != 1 || chosen.info.weights_mapped || !cpu {
        return one(
            reference, data, limit, collector, progress, &mut 0, &mut None, 0,
        );
    }
    // The first sample runs in a session as the rest will most likely run
    // (a thread each, one session per thread, the arena), kept for them: a
    // session of PP-Structure's SLANet takes 1.5 s to prepare.
    let available = infopt_verify::memory::available_bytes().unwrap_or(0);
    let likely = threads.clamp(1, side_by_side::MOST_SESSIONS);
    let likely_each = (threads / likely).max(1);
    // Sized as the likely sessions would be (a quarter of the memory
    // shared among them); the first run does not know what it observes.
    let first_observing = Observing {
        in_arena: available > 0,
        budget_bytes: Some(side_by_side::observe_budget(
            available / 4,
            likely,
            m.model_bytes,
            true,
        )),
    };
    let first_backend = reference.with_threads(likely_each, first_observing);
    let mut first_session: Option<LoadedFor> = None;
    let mut observed = 0usize;
    let first = one(
        first_backend.as_deref().unwrap_or(reference),
        data,
        Some(limit.map_or(1, |l| l.min(1))),
        collector,
        progress,
        &mut observed,
        &mut first_session,
        0,
    )?;
    let rest = limit.map(|l| l.saturating_sub(first));
    if first == 0 || rest == Some(0) {
        return Ok(first);
    }
    let (sessions, observing) =
        side_by_side::sessions_sized(threads, m.model_bytes, observed, available);
    // Side by side, the first session calibrates on while `go_on` decides
    // (see `side_by_side::Hold`); in one session nothing would run
    // meanwhile, and it decides first.
    let overlapped = go_on.is_some() && first_backend.is_some() && sessions >= 2;
    if !overlapped
        && let Some(go_on) = go_on.as_deref_mut()
        && !go_on(collector)?
    {
        return Ok(first);
    }
    let each = (threads / sessions).max(1);
    let mut after_first = |done: usize| progress(first + done);
    // tract has no thread setting (it runs on one): the rest in one session.
    let Some(first_backend) = first_backend else {
        return Ok(first
            + one(
                reference,
                data,
                rest,
                collector,
                &mut after_first,
                &mut 0,
                &mut first_session,
                first,
            )?);
    };
    // The first session serves the rest where it is as they need it.
    let (backend, preloaded) = if each == likely_each && observing == first_observing {
        (first_backend, first_session.take())
    } else {
        drop(first_session.take());
        match reference.with_threads(each, observing) {
            Some(b) => (b, None),
            None => (first_backend, None),
        }
    };
    if sessions < 2 {
        let mut loaded = preloaded;
        return Ok(first
            + one(
                backend.as_ref(),
                data,
                rest,
                collector,
                &mut after_first,
                &mut 0,
                &mut loaded,
                first,
            )?);
    }
    let sessions_of = side_by_side::Sessions {
        backend: backend.as_ref(),
        threads_each: each,
        model: m.model,
        dir: m.dir,
        shapes: m.shapes,
        declared: m.declared,
        empty: &collector.emptied(),
        keeper: m.keeper,
    };
    let hold = overlapped.then(side_by_side::Hold::default);
    let ahead = samples_ahead(m.shapes);
    let mut asking = Asking {
        go_on,
        hold: hold.as_ref(),
        verdict: None,
        queued: (0, 0),
        ahead,
    };
    let mut index = first;
    // Only a held calibration queues more than the sessions' usual two
    // batches each (`ahead` samples, after the question too).
    let queue = if hold.is_some() { ahead } else { 0 };
    let fed = sessions_of.run(sessions, preloaded, (hold.as_ref(), queue), |side| {
        let fed = dataset::batches(
            data,
            &batch_specs(m.declared, 1),
            1,
            rest,
            |tensors, samples| {
                let bytes = tensors
                    .iter()
                    .map(|t| t.len() * t.dtype().size_of().max(1))
                    .sum::<usize>();
                side.send(tensors, samples[0].origin.clone(), samples.len(), index)?;
                index += samples.len();
                after_first(side.done.load(std::sync::atomic::Ordering::Relaxed));
                if !asking.ahead(samples.len(), bytes, collector, side) {
                    return Err(STOPPED.into());
                }
                Ok(())
            },
        );
        // The data ended before the queue filled (a failure is said as it
        // is, without asking).
        if fed.is_ok() {
            asking.ask(collector, side);
        }
        fed
    });
    match asking.verdict {
        Some(Err(e)) => return Err(e),
        Some(Ok(false)) => return Ok(first),
        _ => {}
    }
    match fed {
        Ok((count, merged)) => {
            let count = count.map_err(VerifyError::usage)?;
            collector
                .merge(merged)
                .map_err(|e| VerifyError::new(infopt_verify::ErrorKind::Internal, e.to_string()))?;
            after_first(count);
            Ok(first + count)
        }
        Err((_, e)) => Err(e),
    }
}

/// Inputs queued for the first session while `go_on` decides, at most:
/// as many samples as fit in [`AHEAD_BYTES`], between [`LEAST_AHEAD`] and
/// [`MOST_AHEAD`] (see [`samples_ahead`]). Enough to keep it busy through
/// INT8's placement timing: YOLOv8n's timing (1.4 s) outlasted 16 of its
/// observed runs (70 ms each) and the other core idled for half a second.
const AHEAD_BYTES: usize = 64 << 20;
const LEAST_AHEAD: usize = 4;
const MOST_AHEAD: usize = 64;

/// Samples queued ahead for inputs of `shapes` (four bytes an element:
/// float inputs; a sample of unknown size counts as 1 MB).
fn samples_ahead(shapes: &infopt_runtime::InputShapes) -> usize {
    let bytes: usize = shapes
        .shapes
        .values()
        .map(|dims| dims.iter().product::<usize>().saturating_mul(4))
        .fold(0usize, usize::saturating_add);
    let bytes = if bytes == 0 { 1 << 20 } else { bytes };
    (AHEAD_BYTES / bytes).clamp(LEAST_AHEAD, MOST_AHEAD)
}

/// Why the feeding stopped when `go_on` said not to go on.
const STOPPED: &str = "the calibration stopped after its first sample";

/// `go_on`, asked once the queue holds its `ahead` samples (or the data
/// ended), with what it said.
struct Asking<'g, 'f, 'h> {
    go_on: Option<&'g mut GoOn<'f>>,
    /// The held sessions (see `side_by_side::Hold`); None: asked already.
    hold: Option<&'h side_by_side::Hold>,
    verdict: Option<Result<bool, VerifyError>>,
    /// Samples and input bytes queued before asking.
    queued: (usize, usize),
    /// Samples queued before asking, at most (see [`samples_ahead`]).
    ahead: usize,
}

impl Asking<'_, '_, '_> {
    /// Counts a batch queued; asks once the queue is full. Whether to go on.
    fn ahead(
        &mut self,
        samples: usize,
        bytes: usize,
        collector: &RangeCollector,
        side: &mut side_by_side::SideBySide,
    ) -> bool {
        if self.hold.is_none() {
            return true;
        }
        self.queued = (self.queued.0 + samples, self.queued.1 + bytes);
        if self.queued.0 < self.ahead && self.queued.1 < AHEAD_BYTES {
            return true;
        }
        self.ask(collector, side)
    }

    /// Asks `go_on`, if not yet, and opens the hold with its answer; a no
    /// (or an error) stops the sessions. Whether to go on.
    fn ask(&mut self, collector: &RangeCollector, side: &mut side_by_side::SideBySide) -> bool {
        let Some(hold) = self.hold.take() else {
            return !matches!(self.verdict, Some(Ok(false)) | Some(Err(_)));
        };
        let verdict = match self.go_on.as_deref_mut() {
            Some(go_on) => go_on(collector),
            None => Ok(true),
        };
        let go = matches!(verdict, Ok(true));
        hold.open(go);
        if !go {
            side.stop();
        }
        self.verdict = Some(verdict);
        go
    }
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

#[cfg(test)]
mod tests {
    use super::samples_ahead;
    use infopt_runtime::InputShapes;

    fn shapes(inputs: &[&[usize]]) -> InputShapes {
        let mut s = InputShapes::default();
        for (i, dims) in inputs.iter().enumerate() {
            s.shapes.insert(format!("in{i}"), dims.to_vec());
        }
        s
    }

    #[test]
    fn the_queue_ahead_holds_64_mb_of_inputs_within_its_bounds() {
        // YOLOv8n at 320x320: 1.2 MB a sample, 54 of them.
        assert_eq!(samples_ahead(&shapes(&[&[1, 3, 320, 320]])), 54);
        // Inputs of a few bytes (magika's 2048): as many as allowed.
        assert_eq!(samples_ahead(&shapes(&[&[1, 2048]])), 64);
        // Two inputs count together; 12 MB inputs: a few samples still.
        assert_eq!(samples_ahead(&shapes(&[&[1, 3, 1024, 1024]])), 5);
        assert_eq!(
            samples_ahead(&shapes(&[&[1, 3, 1024, 1024], &[1, 3, 1024, 1024]])),
            4
        );
        // Sizes unknown: a megabyte a sample.
        assert_eq!(samples_ahead(&InputShapes::default()), 64);
    }
}
