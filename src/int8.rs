//! `optimize --int8` (and a `quantize-int8` step with `data:`): the passes
//! before the step run, the model is calibrated as it is there, the step and
//! the rest run with those ranges, and accuracy is measured against the
//! original on held-out samples. With `--int8-min-cosine`, the layers that
//! hurt most are kept in float, one at a time, until the outputs reach it.

use std::path::{Path, PathBuf};

use infopt_calibration::int8;
use infopt_calibration::quantize::Exclude;
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
    /// Range method (default entropy).
    #[arg(long, value_name = "minmax|percentile|entropy|mse")]
    pub calib_method: Option<String>,
    /// Calibration samples (default 256); the samples after them are held out.
    #[arg(long, value_name = "N")]
    pub calib_samples: Option<usize>,
    /// Held-out samples for the accuracy report (default 32).
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub held_out: usize,
    /// Keep the most harmful layers in float until every output's cosine
    /// similarity on held-out samples reaches this.
    #[arg(long, value_name = "COSINE")]
    pub int8_min_cosine: Option<f64>,
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

/// What `run` needs from the command.
pub struct Context<'a> {
    pub original: &'a Model,
    pub dir: &'a Path,
    pub shapes: &'a InputShapes,
    pub backend: &'a ChosenBackend,
    pub options: &'a DriverOptions,
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

/// Lowest cosine over the held-out outputs.
fn min_cosine(h: &HeldOut) -> f64 {
    h.outputs.iter().map(|o| o.cosine).fold(1.0, f64::min)
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
    let mid = model.clone();

    // Ranges: a file, or calibration of the model as it is here.
    let ranges = args.ranges.clone().or(step.ranges.clone());
    let data = args.calib_data.clone().or(step.data.clone());
    let method_name = args
        .calib_method
        .clone()
        .or(step.method.clone())
        .unwrap_or_else(|| "entropy".into());
    let percentile = step.percentile.unwrap_or(99.99);
    let samples = args.calib_samples.or(step.samples).unwrap_or(256);
    let preprocess = args.preprocess.clone().or(step.preprocess.clone());
    let mut side = SideData::default();
    let mut report = None;
    let mut source = None;
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
        let calibrated = calibrate(
            &target,
            cx.backend,
            cx.shapes,
            &src,
            &CalibrateOptions {
                method,
                samples: Some(samples),
                batch: 1,
                bins: DEFAULT_BINS,
            },
            &mut |_, _| {},
        )?;
        crate::progress::note(
            "calibrate",
            format!(
                "calibrated {} tensors on {} samples in {:.2} s ({})",
                calibrated.table.tensors.len(),
                calibrated.samples,
                calibrated.seconds,
                method.name()
            ),
        );
        let amax: Amax = calibrated.table.to_amax();
        side.insert(amax);
        report = Some(Int8Report {
            method: method.name().to_string(),
            calibration_samples: calibrated.samples,
            calibration_data: calibrated.dataset.clone(),
            meaningful: calibrated.meaningful,
            calibration_seconds: calibrated.seconds,
            tensors_calibrated: calibrated.table.tensors.len(),
            backend: calibrated.backend.clone(),
            held_out: None,
            worst_layers: Vec::new(),
            kept_float: Vec::new(),
            target_cosine: args.int8_min_cosine,
        });
        source = Some((src, calibrated.samples));
    }

    // The step and what follows it; again with more layers in float while
    // the held-out accuracy is below the target.
    let amax = side.get::<Amax>().cloned().unwrap_or_default();
    let mut from = from;
    let mut quantized;
    let mut held: Option<HeldOut> = None;
    let mut kept: Vec<KeptFloat> = Vec::new();
    loop {
        let mut side = SideData::default();
        side.insert(amax.clone());
        quantized = mid.clone();
        let suffix_run = stages::run_passes(
            &mut quantized,
            &from,
            cx.options,
            side,
            PassHooks::default(),
        )?;
        let Some((src, skip)) = &source else {
            append_run(&mut run, suffix_run);
            break;
        };
        let mut data = open_again(src, cx, &mid)?;
        let pair = evaluate::Pair {
            chosen: cx.backend,
            original: cx.original,
            candidate: &quantized,
            dir: cx.dir,
            shapes: cx.shapes,
        };
        let h = evaluate::held_out(&pair, data.as_mut(), *skip, args.held_out)?;
        let cos = min_cosine(&h);
        if let Some(last) = kept.last_mut() {
            last.cosine_after = cos;
        }
        let target = args.int8_min_cosine.unwrap_or(-1.0);
        if cos >= target || kept.len() >= 16 {
            append_run(&mut run, suffix_run);
            held = Some(h);
            break;
        }
        let worst = layer_snrs(cx, &mid, &quantized)?;
        let excluded: Vec<String> = int8::options(&from, 0)
            .map(|o| o.exclude.iter().filter_map(|e| e.name.clone()).collect())
            .unwrap_or_default();
        let Some(layer) = worst
            .iter()
            .find(|l| !excluded.contains(&l.layer))
            .map(|l| l.layer.clone())
        else {
            append_run(&mut run, suffix_run);
            held = Some(h);
            break;
        };
        crate::progress::note(
            "int8",
            format!("int8: cosine {cos:.5} below {target}: keeping layer '{layer}' in float"),
        );
        if let Some(o) = int8::options_mut(&mut from, 0) {
            o.exclude.push(Exclude {
                name: Some(layer.clone()),
                op: None,
                regex: None,
            });
        }
        kept.push(KeptFloat {
            layer,
            cosine_before: cos,
            cosine_after: cos,
        });
    }
    *model = quantized;
    if let Some(r) = report.as_mut() {
        r.held_out = held;
        r.kept_float = kept;
        r.worst_layers = layer_snrs(cx, &mid, model)?.into_iter().take(10).collect();
    }
    Ok((run, report))
}

fn open_again(
    src: &DataSource,
    cx: &Context<'_>,
    model: &Model,
) -> CliResult<Box<dyn infopt_verify::Dataset>> {
    Ok(infopt_calibration::run::open_dataset(
        src,
        cx.backend,
        &model.to_bytes().map_err(CliError::from_ir)?,
        cx.dir,
        cx.shapes,
    )?)
}

/// Quantized layers (Conv, Gemm, MatMul, ... with a DequantizeLinear input)
/// by how much error they add: their output's SNR against the float model
/// below the worst SNR of their inputs, largest first.
fn layer_snrs(cx: &Context<'_>, float: &Model, quantized: &Model) -> CliResult<Vec<LayerSnr>> {
    let inputs = {
        let bytes = float.to_bytes().map_err(CliError::from_ir)?;
        let loaded = cx
            .backend
            .backend
            .load(&bytes, Some(cx.dir), cx.shapes)
            .map_err(|e| CliError::new(crate::exit::Exit::CannotVerify, e))?;
        infopt_verify::inputs::generate(loaded.as_ref(), 1, 16)
            .map_err(|e| CliError::new(crate::exit::Exit::CannotVerify, e))?
    };
    let side = |m| Side {
        model: m,
        dir: cx.dir.to_path_buf(),
        inputs: &inputs,
    };
    let tol = infopt_runtime::compare::Tolerance {
        atol: 0.0,
        rtol: 0.0,
    };
    let report = intermediates::compare(
        cx.backend.backend.as_ref(),
        cx.shapes,
        side(float),
        side(quantized),
        tol,
    )?;
    let snr: std::collections::HashMap<&str, (f64, f64)> = report
        .tensors
        .iter()
        .map(|t| (t.name.as_str(), (t.agreement.snr_db, t.agreement.cosine)))
        .collect();
    let g = &quantized.graph;
    let mut out = Vec::new();
    for (_, node) in g.nodes() {
        let quantized_input = node.inputs.iter().flatten().any(|v| {
            g.producer(*v)
                .is_some_and(|p| p.op_type == "DequantizeLinear")
        });
        if !quantized_input
            || node.op_type == "QuantizeLinear"
            || node.op_type == "DequantizeLinear"
        {
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
            s,
        ));
    }
    out.sort_by(|a, b| a.1.total_cmp(&b.1));
    Ok(out.into_iter().map(|(l, _)| l).collect())
}
