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
use infopt_calibration::run::{CalibrateOptions, DataSource, Target, calibrate};
use infopt_calibration::{Amax, DEFAULT_BINS, Method};
use infopt_ir::Model;
use infopt_passes::{DriverOptions, PipelineConfig, PipelineRun, SideData};
use infopt_runtime::InputShapes;
use infopt_verify::ChosenBackend;
use infopt_verify::evaluate::{self, HeldOut};
use infopt_verify::intermediates::{self, Side};

use crate::exit::{CliError, CliResult};
use crate::stages::{self, PassHooks};

mod costs;
mod fallback;
mod judge;
pub mod metric;
pub mod search;
mod speed;

use costs::Costs;
use judge::Judge;

/// INT8 options of `optimize` (and `build-engine`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Int8Args {
    /// Quantize to INT8: adds a quantize-int8 step after the pipeline's
    /// passes (unless it has one) and calibrates on --calib-data.
    #[arg(long)]
    pub int8: bool,
    /// Calibration data: a folder of .npz/.npy samples, a stacked .npz, an
    /// image folder (with --preprocess), or random:N (smoke tests only).
    #[arg(long, value_name = "PATH|random:N")]
    pub calib_data: Option<String>,
    /// Image preprocessing YAML for an image folder.
    #[arg(long, value_name = "FILE.yaml")]
    pub preprocess: Option<PathBuf>,
    /// Range method (default auto: per tensor, the full range of bounded
    /// outputs, elsewhere the candidate with the least quantization error).
    #[arg(long, value_name = "auto|minmax|percentile|entropy|mse")]
    pub calib_method: Option<String>,
    /// Calibration samples (default 256); the samples after them are held out.
    #[arg(long, value_name = "N")]
    pub calib_samples: Option<usize>,
    /// Held-out samples the INT8 model is judged on (default 256).
    #[arg(long, value_name = "N")]
    pub held_out: Option<usize>,
    /// Accuracy target: every output's cosine similarity with the float
    /// model on the held-out samples (default 0.99). Below it, the most
    /// harmful layers are kept in float until it is met.
    #[arg(long, value_name = "COSINE")]
    pub int8_min_cosine: Option<f64>,
    /// Accuracy target of classifier outputs (Softmax or a dense head):
    /// the fraction of rows whose top class is the float model's (default 0.99).
    #[arg(long, value_name = "FRACTION")]
    pub int8_min_top1: Option<f64>,
    /// With a metric given through the Python API (`infopt.optimize(...,
    /// metric=f)`): the most the INT8 model's score may fall below the
    /// float model's on the held-out samples (default 0.01); the metric is
    /// then the whole accuracy target.
    #[arg(long, value_name = "DROP")]
    pub int8_max_drop: Option<f64>,
    /// Ranges from an earlier `infopt calibrate` (or a TensorRT/ORT cache)
    /// instead of calibrating.
    #[arg(long, value_name = "ranges.json")]
    pub ranges: Option<PathBuf>,
}

/// A range method by name; `percentile` for `percentile` (shared by
/// `calibrate --method` and `optimize --calib-method`).
pub fn method(name: &str, percentile: f64) -> CliResult<Method> {
    let m = Method::from_name(name).map_err(CliError::usage)?;
    Ok(match m {
        Method::Percentile { .. } => Method::Percentile { percentile },
        other => other,
    })
}

pub use crate::report::int8::{Int8Report, KeptFloat, LayerSnr};

/// Default accuracy targets.
pub const DEFAULT_MIN_COSINE: f64 = 0.99;
pub const DEFAULT_MIN_TOP1: f64 = 0.99;
/// Default number of held-out samples judged.
pub const DEFAULT_HELD_OUT: usize = 256;

/// What `run` needs from the command.
pub struct Context<'a> {
    pub original: &'a Model,
    pub dir: &'a Path,
    pub shapes: &'a InputShapes,
    pub backend: &'a ChosenBackend,
    pub options: &'a DriverOptions,
    /// The command's backend options (to build ONNX Runtime when the model
    /// at the quantize step needs it).
    pub backend_args: &'a crate::backend_args::BackendArgs,
    /// Judge the result on the data (false with --no-verify).
    pub judge: bool,
}

fn append_run(into: &mut PipelineRun, more: PipelineRun) {
    into.records.extend(more.records);
    into.declined.extend(more.declined);
    into.notes.extend(more.notes);
    into.budget_exhausted.extend(more.budget_exhausted);
    if more.stopped_after.is_some() {
        into.stopped_after = more.stopped_after;
    }
}

/// What is held to the cosine target: every output, and every part of an
/// output judged on its own (a detector's scores beside its boxes).
fn judged(h: &HeldOut) -> impl Iterator<Item = &infopt_runtime::OutputAgreement> {
    h.outputs.iter().chain(h.parts.iter().map(|p| &p.agreement))
}

/// Lowest cosine over the held-out outputs and their parts.
fn min_cosine(h: &HeldOut) -> f64 {
    judged(h).map(|o| o.cosine).fold(1.0, f64::min)
}

/// The accuracy target.
#[derive(Clone, Copy, Debug)]
struct Goal {
    cosine: f64,
    top1: f64,
    /// With a caller's metric (see `metric.rs`): the most its score may
    /// fall below the float model's; that is then the whole target.
    max_drop: f64,
}

/// `t >= min`, false for NaN.
fn top1_meets(t: f64, min: f64) -> bool {
    t >= min
}

/// The top-1 agreement of classifier output `name` judged against the
/// target: the one measured, or on the calibration samples (which the
/// ranges fit and whose classes are clear) the lower of it and the one
/// expected on unseen rows (see `evaluate::expected_agreement`).
fn top1_judged(h: &HeldOut, name: &str) -> Option<f64> {
    let measured = *h.top1_agreement.get(name)?;
    if !h.on_calibration_samples {
        return Some(measured);
    }
    Some(match h.top1_expected.get(name) {
        Some(&e) if e < measured => e,
        _ => measured,
    })
}

/// The score agreement of a part of scores judged against the target
/// (see `evaluate::PartAgreement::score_agreement`): the one measured, or
/// on the calibration samples the lower of it and the one expected with
/// the error doubled.
fn scores_judged(h: &HeldOut, p: &evaluate::PartAgreement) -> Option<f64> {
    let measured = p.score_agreement?;
    if !h.on_calibration_samples {
        return Some(measured);
    }
    Some(match p.score_agreement_expected {
        Some(e) if e < measured => e,
        _ => measured,
    })
}

/// What misses the goal: `output (cosine 0.95 < 0.99)`, ...; empty when met.
fn misses(h: &HeldOut, goal: Goal) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(m) = h.metric {
        if !metric::meets(m.candidate, m.original, goal.max_drop) {
            out.push(format!(
                "the metric ({:.5} < float's {:.5} less {})",
                m.candidate, m.original, goal.max_drop
            ));
        }
        return out;
    }
    for p in &h.parts {
        if let Some(t) = scores_judged(h, p)
            && !top1_meets(t, goal.top1)
        {
            out.push(format!(
                "{} (score agreement {:.4} < {})",
                p.agreement.name, t, goal.top1
            ));
        }
    }
    for o in judged(h) {
        let cosine_ok = o.cosine >= goal.cosine; // false for NaN
        if !cosine_ok {
            out.push(format!(
                "{} (cosine {:.5} < {})",
                o.name, o.cosine, goal.cosine
            ));
        }
        if let Some(t) = top1_judged(h, &o.name)
            && !top1_meets(t, goal.top1)
        {
            out.push(format!(
                "{} (top-1 agreement {:.4} < {})",
                o.name, t, goal.top1
            ));
        }
    }
    out
}

/// The smallest margin to the target over the outputs (cosine and top-1):
/// positive when the target is met.
fn score(h: &HeldOut, goal: Goal) -> f64 {
    // `f64::min` skips NaN: a NaN margin is the worst, not ignored.
    let worst = |m: f64, x: f64| {
        if x.is_nan() {
            f64::NEG_INFINITY
        } else {
            m.min(x)
        }
    };
    if let Some(s) = h.metric {
        return metric::margin(s.candidate, s.original, goal.max_drop);
    }
    let mut m = f64::INFINITY;
    for o in judged(h) {
        m = worst(m, o.cosine - goal.cosine);
        if let Some(t) = top1_judged(h, &o.name) {
            m = worst(m, t - goal.top1);
        }
    }
    for p in &h.parts {
        if let Some(t) = scores_judged(h, p) {
            m = worst(m, t - goal.top1);
        }
    }
    m
}

/// Tensors `auto` leaves float: those whose largest values decide a
/// softmax or a max (see `infopt_calibration::full_range`). Their readers
/// compute in float anyway, so a Q/DQ there buys no integer kernel, and
/// its 255 levels over the whole range move every class score by up to
/// half a step: on magika the logits' step was 0.18, which turned the class
/// of files whose top two scores were closer than that (5 of 300 with only
/// the last layer in INT8). The layer before them still runs in INT8 with
/// a float output. Marked in `table`; returns the names.
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

/// The quantize step and the passes after it on a copy of `mid`, with `amax`.
fn quantize_rest(
    mid: &Model,
    from: &PipelineConfig,
    amax: &Amax,
    cx: &Context<'_>,
    costs: &Costs,
) -> CliResult<(Model, PipelineRun)> {
    costs.time(
        "candidate: built (the quantize step and the passes after it)",
        || {
            let mut side = SideData::default();
            side.insert(amax.clone());
            let mut quantized = mid.clone();
            let run =
                stages::run_passes(&mut quantized, from, cx.options, side, PassHooks::default())?;
            Ok((quantized, run))
        },
    )
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
/// explicit --backend.
fn calibration_backend<'a>(
    cx: &Context<'a>,
    mid: &Model,
    target: infopt_passes::Target,
    notes: &mut Vec<String>,
) -> CliResult<Chosen<'a>> {
    use infopt_verify::BackendKind;
    if cx.backend.kind == BackendKind::Ort || cx.backend_args.explicit()?.is_some() {
        return Ok(Chosen::Given(cx.backend));
    }
    let build_ort = || {
        let options = cx.backend_args.options()?;
        Ok::<_, CliError>(infopt_verify::ChosenBackend::build(
            BackendKind::Ort,
            &options,
        ))
    };
    if target == infopt_passes::Target::Onnxruntime
        && let Ok(ort) = build_ort()?
    {
        return Ok(Chosen::Own(Box::new(ort)));
    }
    // tract, if it can run the graph.
    let bytes = mid
        .to_bytes_referencing_sources()
        .map_err(CliError::from_ir)?;
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
        Err(e) => Err(CliError::new(
            crate::exit::Exit::CannotVerify,
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

/// Binds the model's input sizes to those of the calibration data (see
/// `infopt_calibration::data_shapes`), before anything runs the model, so
/// calibration and verification run at the sizes of the data. Returns a
/// note for the report.
pub fn bind_data_shapes(
    config: &PipelineConfig,
    args: &Int8Args,
    model: &Model,
    shapes: &mut InputShapes,
) -> CliResult<Option<String>> {
    let Some(index) = int8::find_step(config) else {
        return Ok(None);
    };
    let step = int8::options(config, index).cloned().unwrap_or_default();
    if args.ranges.is_some() || step.ranges.is_some() {
        return Ok(None);
    }
    let Some(data) = args.calib_data.clone().or(step.data.clone()) else {
        return Ok(None);
    };
    let preprocess = args.preprocess.clone().or(step.preprocess.clone());
    let src = DataSource::parse(&data, preprocess.as_deref()).map_err(CliError::usage)?;
    infopt_calibration::data_shapes::bind_from_data(model, &src, shapes).map_err(CliError::usage)
}

/// Runs `config` (which has a quantize-int8 step at `index`) on `model`.
pub fn run(
    model: &mut Model,
    config: &PipelineConfig,
    index: usize,
    args: &Int8Args,
    cx: &Context<'_>,
) -> CliResult<(PipelineRun, Option<Int8Report>)> {
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

    // Ranges: a file, or calibration of the model as it is here.
    let ranges = args.ranges.clone().or(step.ranges.clone());
    let data = args.calib_data.clone().or(step.data.clone());
    let method_name = args
        .calib_method
        .clone()
        .or(step.method.clone())
        .unwrap_or_else(|| "auto".into());
    let percentile = step.percentile.unwrap_or(99.99);
    let samples = args.calib_samples.or(step.samples).unwrap_or(256);
    let preprocess = args.preprocess.clone().or(step.preprocess.clone());
    if args.int8_max_drop.is_some() && !metric::installed() {
        return Err(CliError::usage(
            "--int8-max-drop needs a metric, which the command line cannot name: call infopt.optimize(..., int8=True, metric=f, int8_max_drop=D) from Python (or use --int8-min-cosine / --int8-min-top1)",
        ));
    }
    let goal = Goal {
        cosine: args.int8_min_cosine.unwrap_or(DEFAULT_MIN_COSINE),
        top1: args.int8_min_top1.unwrap_or(DEFAULT_MIN_TOP1),
        max_drop: args.int8_max_drop.unwrap_or(metric::DEFAULT_MAX_DROP),
    };
    let mut side = SideData::default();
    let mut report = None;
    let mut source = None;
    let mut notes = Vec::new();
    let mut full_range: Option<Amax> = None;
    let costs = Costs::default();
    let chosen = if ranges.is_some() && !cx.judge {
        Chosen::Given(cx.backend)
    } else {
        calibration_backend(cx, &mid, config.target, &mut notes)?
    };
    let backend = chosen.get();
    if let Some(path) = &ranges {
        let amax = infopt_calibration::quantize::read_ranges(path).map_err(CliError::usage)?;
        side.insert(amax);
    } else {
        let data = data.ok_or_else(|| {
            CliError::usage(
                "quantize-int8 needs ranges: give --calib-data PATH (or random:N for a smoke test), --ranges FILE, or `data:`/`ranges:` in the step",
            )
        })?;
        let src = DataSource::parse(&data, preprocess.as_deref()).map_err(CliError::usage)?;
        let method = method(&method_name, percentile)?;
        let bytes = mid.to_bytes().map_err(CliError::from_ir)?;
        let target = Target {
            model: &mid,
            file_bytes: &bytes,
            dir: cx.dir,
        };
        let mut steps: Option<crate::progress::Steps> = None;
        let calibrated = calibrate(
            &target,
            backend,
            cx.shapes,
            &src,
            &CalibrateOptions {
                method,
                samples: Some(samples),
                batch: 1,
                bins: DEFAULT_BINS,
            },
            &mut |done, total| {
                let s = steps.get_or_insert_with(|| {
                    crate::progress::Steps::new("calibrate", "calibration", total, 1.0)
                });
                s.set(done, "samples");
            },
        )?;
        if let Some(s) = steps.as_mut() {
            s.finish();
        }
        costs.add("calibration", 1, calibrated.seconds);
        crate::progress::note(
            "calibrate",
            format!(
                "calibrated {} tensors on {} samples in {:.2} s ({}, {})",
                calibrated.table.tensors.len(),
                calibrated.samples,
                calibrated.seconds,
                method.name(),
                backend.backend.name()
            ),
        );
        let mut calibrated = calibrated;
        let mut amax: Amax = calibrated.table.to_amax();
        if method == infopt_calibration::Method::Auto {
            // The full range of every tensor, to weigh against the
            // per-tensor choice on the data (outliers that matter).
            let mut full = Amax(
                calibrated
                    .table
                    .tensors
                    .iter()
                    .map(|(n, r)| (n.clone(), r.min.abs().max(r.max.abs())))
                    .filter(|(_, a)| *a > 0.0)
                    .collect(),
            );
            let float = not_quantized(&mid, &mut calibrated.table);
            for t in &float {
                amax.0.remove(t);
                full.0.remove(t);
            }
            full_range = Some(full);
        }
        side.insert(amax);
        let mut methods_chosen: BTreeMap<String, usize> = BTreeMap::new();
        for r in calibrated.table.tensors.values() {
            *methods_chosen.entry(r.method.clone()).or_default() += 1;
        }
        report = Some(Int8Report {
            method: method.name().to_string(),
            calibration_samples: calibrated.samples,
            calibration_data: calibrated.dataset.clone(),
            meaningful: calibrated.meaningful,
            calibration_seconds: calibrated.seconds,
            tensors_calibrated: calibrated.table.tensors.len(),
            backend: format!("{} {}", backend.backend.name(), calibrated.backend),
            held_out: None,
            worst_layers: Vec::new(),
            kept_float: Vec::new(),
            candidates: Vec::new(),
            target_cosine: Some(goal.cosine),
            target_top1: Some(goal.top1),
            max_drop: metric::installed().then_some(goal.max_drop),
            classifier_outputs: Vec::new(),
            target_met: true,
            failure: None,
            methods_chosen,
            tensor_methods: calibrated
                .table
                .tensors
                .iter()
                .map(|(n, r)| (n.clone(), r.method.clone()))
                .collect(),
            costs: BTreeMap::new(),
            kept_by_user: Vec::new(),
            speed: None,
        });
        source = Some((src, calibrated.samples));
    }

    // The step and what follows it, judged on the data; below the target,
    // the layers that do most harm on their own are kept in float.
    let mut amax = side.get::<Amax>().cloned().unwrap_or_default();
    let classifiers = evaluate::classifier_outputs(cx.original);
    let mut held: Option<HeldOut> = None;
    let mut kept: Vec<KeptFloat> = Vec::new();
    let mut measured = Vec::new();
    let mut failure = None;
    let mut speed_check = None;
    let limit = args.held_out.unwrap_or(DEFAULT_HELD_OUT).max(1);
    // The placement that runs fastest where the model will run (see
    // `speed.rs`), before the search decides what to keep float in it.
    let mut from = from;
    let (quantized, suffix_run) = match source.as_ref().filter(|_| cx.judge) {
        None => quantize_rest(&mid, &from, &amax, cx, &costs)?,
        Some((src, calibrated)) => {
            let mut judge = Judge::new(
                src,
                backend,
                cx,
                &mid,
                &classifiers,
                *calibrated,
                limit,
                &costs,
            );
            let sample = first_sample(src, backend, cx, &mid, 0)?;
            let shapes = shapes_of_sample(&mid, cx.shapes, &sample);
            let picked = costs.time("placement timing (one thread)", || {
                speed::pick_placement(cx, &from, &mid, &amax, &sample, &shapes, &costs, &mut judge)
            })?;
            let timed_faster = picked.int8_was_faster();
            if let Some((config, note)) = picked.switch {
                from = config;
                notes.push(note);
            }
            let (mut quantized, mut suffix_run) = quantize_rest(&mid, &from, &amax, cx, &costs)?;
            // The full ranges may do better on this data (outliers that
            // carry meaning): the one with the larger margin to the target
            // on the probe samples is kept, met or not, so that ranges that
            // fit the samples judged only just do not win over ones with
            // room to spare; only it is judged on every sample (judging both
            // there cost a full judgement per command). The ranges not
            // taken, for the fallback to try again with layers in float
            // (what clips harmlessly with some layers in float may not with
            // all of them, and the other way round).
            let mut other: Option<(Amax, &'static str)> = None;
            if let Some(alt) = full_range.take() {
                let (q2, run2) = quantize_rest(&mid, &from, &alt, cx, &costs)?;
                let p1 = judge.probe(&quantized, fallback::PROBE_SAMPLES)?;
                let p2 = judge.probe(&q2, fallback::PROBE_SAMPLES)?;
                let (a, b) = (score(&p1, goal), score(&p2, goal));
                crate::progress::note(
                    "int8",
                    format!(
                        "int8: per-tensor ranges score {a:.5}, full ranges {b:.5} (lowest margin to the target on {} probe sample(s))",
                        p1.samples
                    ),
                );
                if b > a {
                    notes.push(format!(
                        "range method: the full range (minmax) of every tensor, which did better on the data than the per-tensor choice (lowest margin to the target {b:.5} against {a:.5} on {} probe sample(s))",
                        p1.samples
                    ));
                    if let Some(r) = report.as_mut() {
                        full_ranges_chosen(r);
                    }
                    other = Some((std::mem::replace(&mut amax, alt), PER_TENSOR));
                    quantized = q2;
                    suffix_run = run2;
                } else {
                    other = Some((alt, FULL_RANGES));
                }
            }
            let mut h = judge.judge(&quantized)?;
            if h.on_calibration_samples {
                notes.push(format!(
                    "no held-out samples: all {} samples of the data were used for calibration, so the INT8 model was judged on those same samples (give more data than --calib-samples, {calibrated} here, to judge it on samples calibration did not see); the top-1 agreement judged is the lower of the one measured and the one expected on unseen rows (every row's margin against every row's error, doubled)",
                    h.samples
                ));
            }
            let missed = misses(&h, goal);
            let mut keep_set = Vec::new();
            let mut ranges_used = amax.clone();
            if !missed.is_empty() {
                let search = fallback::Search {
                    mid: &mid,
                    from: &from,
                    amax: &amax,
                    other: other.as_ref().map(|(a, _)| a),
                    cx,
                    goal,
                    costs: &costs,
                };
                let found = search.run(&mut judge, &quantized, &h, &missed)?;
                if found.other_ranges
                    && let Some((a, _)) = other.as_ref()
                {
                    ranges_used = a.clone();
                }
                keep_set = found.keep;
                kept = found.kept;
                measured = found.candidates;
                failure = found.failure;
                if let Some((q, r, h2)) = found.model {
                    quantized = q;
                    suffix_run = r;
                    h = h2;
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
            // Not slower than float where it runs (see `speed.rs`).
            let timed_already = timed_faster && keep_set.is_empty();
            if failure.is_none()
                && config.target != infopt_passes::Target::Tensorrt
                && !timed_already
            {
                let search = fallback::Search {
                    mid: &mid,
                    from: &from,
                    amax: &ranges_used,
                    other: None,
                    cx,
                    goal,
                    costs: &costs,
                };
                let sample = first_sample(src, backend, cx, &mid, h.skipped)?;
                let shapes = shapes_of_sample(&mid, cx.shapes, &sample);
                let checked = costs.time("speed check (one thread)", || {
                    speed::check(
                        cx,
                        &search,
                        &keep_set,
                        &ranges_used,
                        &mut judge,
                        &quantized,
                        &mid,
                        &sample,
                        &shapes,
                    )
                })?;
                if let Some(c) = checked {
                    if let Some((q, r, h2)) = c.replace {
                        quantized = q;
                        suffix_run = r;
                        h = h2;
                    }
                    notes.extend(c.note);
                    speed_check = Some(c.report);
                }
            }
            held = Some(h);
            (quantized, suffix_run)
        }
    };
    append_run(&mut run, suffix_run);
    *model = quantized;
    run.notes.extend(notes);
    if let Some(r) = report.as_mut() {
        r.classifier_outputs = classifiers;
        r.target_met = failure.is_none();
        r.failure = failure;
        r.kept_by_user = config
            .precision
            .as_ref()
            .map(|m| m.kept_float_nodes(&model.graph))
            .unwrap_or_default();
        if let (Some(h), Some((src, _))) = (&held, &source) {
            let sample = first_sample(src, backend, cx, &mid, h.skipped)?;
            let shapes = shapes_of_sample(&mid, cx.shapes, &sample);
            r.worst_layers = costs
                .time("per-layer comparison on one sample", || {
                    layer_snrs(cx, backend, &shapes, &sample, &mid, model)
                })?
                .into_iter()
                .take(10)
                .collect();
        }
        r.held_out = held;
        r.kept_float = kept;
        r.candidates = measured;
        r.costs = costs.steps();
        r.speed = speed_check;
        crate::progress::note(
            "int8",
            format!("int8: where the time went: {}", costs.line()),
        );
    }
    Ok((run, report))
}

fn open_again(
    src: &DataSource,
    backend: &ChosenBackend,
    cx: &Context<'_>,
    model: &Model,
) -> CliResult<Box<dyn infopt_verify::Dataset>> {
    // Files need no model; only random data is generated from it.
    if let Some(files) = infopt_calibration::run::open_files(src).map_err(CliError::usage)? {
        return Ok(files);
    }
    Ok(infopt_calibration::run::open_dataset(
        src,
        backend,
        &model.to_bytes().map_err(CliError::from_ir)?,
        cx.dir,
        cx.shapes,
    )?)
}

/// Sample `skip` of the data (the first judged one), as the model's inputs:
/// the per-layer comparison runs on real data, not on random inputs.
fn first_sample(
    src: &DataSource,
    backend: &ChosenBackend,
    cx: &Context<'_>,
    model: &Model,
    skip: usize,
) -> CliResult<Vec<infopt_runtime::HostTensor>> {
    let specs = infopt_calibration::data_shapes::declared_specs(model);
    let mut data = open_again(src, backend, cx, model)?;
    let mut last = None;
    for _ in 0..=skip {
        match data.next_sample(&specs).map_err(CliError::usage)? {
            Some(s) => last = Some(s),
            None => break,
        }
    }
    last.map(|s| s.tensors)
        .ok_or_else(|| CliError::usage("the calibration data has no samples"))
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
) -> CliResult<Vec<LayerSnr>> {
    let side = |m| Side {
        model: m,
        dir: cx.dir.to_path_buf(),
        inputs,
    };
    let tol = infopt_runtime::compare::Tolerance {
        atol: 0.0,
        rtol: 0.0,
    };
    let report = intermediates::compare(
        backend.backend.as_ref(),
        shapes,
        side(float),
        side(quantized),
        tol,
    )?;
    let snr: std::collections::HashMap<&str, (f64, f64)> = report
        .tensors
        .iter()
        .map(|t| (t.name.as_str(), (t.agreement.snr_db, t.agreement.cosine)))
        .collect();
    let noise = |snr_db: f64| 10f64.powf(-snr_db / 10.0);
    let g = &quantized.graph;
    let mut out = Vec::new();
    for (_, node) in g.nodes() {
        // Only weighted layers: keeping one in float drops its weight and
        // output quantization. An integer op (Add, GlobalAveragePool, ...)
        // kept in float still reads and feeds quantized tensors, so its
        // error barely changes (seen on PP-OCRv4 det: three rounds wasted).
        if !matches!(
            node.op_type.as_str(),
            "Conv" | "ConvTranspose" | "Gemm" | "MatMul"
        ) {
            continue;
        }
        // The float activations behind the DequantizeLinear inputs.
        let mut quantized_input = false;
        let mut noise_in = 0f64;
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
            if let Some(x) = source
                && let Some(&(s, _)) = snr.get(g.value(x).name.as_str())
            {
                noise_in = noise_in.max(noise(s));
            }
        }
        if !quantized_input {
            continue;
        }
        let Some(out_v) = node.outputs.first().copied().flatten() else {
            continue;
        };
        let tensor = g.value(out_v).name.clone();
        let Some(&(s, cos)) = snr.get(tensor.as_str()) else {
            continue;
        };
        out.push((
            LayerSnr {
                layer: node.name_or_op().to_string(),
                op: node.op_type.clone(),
                tensor,
                snr_db: s,
                cosine: cos,
            },
            noise(s) - noise_in,
        ));
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(out.into_iter().map(|(l, _)| l).collect())
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
