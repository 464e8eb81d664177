//! The INT8 part of the optimize and build-engine reports: calibration,
//! held-out accuracy, the worst layers and those kept in float (computed by
//! [`crate::int8`]).

use std::collections::BTreeMap;

use infopt_verify::evaluate::HeldOut;
use serde::Serialize;

/// One layer's agreement with the float model.
#[derive(Serialize, Debug, Clone)]
pub struct LayerSnr {
    pub layer: String,
    pub op: String,
    pub tensor: String,
    pub snr_db: f64,
    pub cosine: f64,
}

/// A layer or activation the accuracy target kept in float, and what that bought.
#[derive(Serialize, Debug, Clone)]
pub struct KeptFloat {
    /// The layer's node name, or the activation tensor's name.
    pub layer: String,
    /// `layer` (a weighted layer) or `activation` (a Q/DQ pair on a tensor).
    pub kind: String,
    /// The layer's op, or the ops reading the activation.
    pub op: String,
    /// Lowest output cosine before and after the search's keep-set.
    pub cosine_before: f64,
    pub cosine_after: f64,
    /// Lowest output cosine, and the outputs' relative noise power, of the
    /// model with only this one in INT8 (every other candidate in float, on
    /// the few samples candidates are ranked on): the harm it does alone.
    pub cosine_alone: Option<f64>,
    pub loss_alone: Option<f64>,
}

/// One candidate of the search and what it did alone in INT8 (every other
/// candidate in float) on the probe samples.
#[derive(Serialize, Debug, Clone)]
pub struct CandidateLoss {
    pub candidate: String,
    /// `layer` or `activation`.
    pub kind: String,
    pub op: String,
    /// The outputs' relative noise power (`Σ 10^(-SNR/10)`) with only it
    /// quantized.
    pub loss: f64,
    /// `loss` less the noise with every candidate in float: its harm alone.
    pub harm: f64,
    /// The lowest output cosine with only it quantized.
    pub cosine: f64,
}

/// One step of the INT8 search (see `crate::int8::costs`): how many times
/// it ran and the seconds it took together (0 where it is only counted).
#[derive(Serialize, Debug, Clone, Default)]
pub struct StepCost {
    pub count: usize,
    pub seconds: f64,
}

/// One model timed by the INT8 speed check.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct SpeedTimed {
    pub label: String,
    /// Median milliseconds at one thread.
    pub ms: f64,
    /// It meets the accuracy target.
    pub met: bool,
}

/// The speed check of the INT8 answer (see `crate::int8::speed`): the INT8
/// model, the other placements tried and the float model, timed interleaved
/// in ONNX Runtime CPU at one thread, and the one written.
#[derive(Serialize, Debug, Clone)]
pub struct SpeedCheck {
    pub float_ms: f64,
    pub timed: Vec<SpeedTimed>,
    /// The label of the model written (`float` for the float model).
    pub chosen: String,
}

/// [`Int8Report::method`] when a range table stood in for calibrating
/// (`--ranges` with `--calib-data`: the data is judged on, not calibrated
/// on).
pub const GIVEN_RANGES: &str = "given";

#[derive(Serialize, Debug, Clone)]
pub struct Int8Report {
    pub method: String,
    pub calibration_samples: usize,
    pub calibration_data: String,
    /// False for random data: the ranges say nothing of real inputs.
    pub meaningful: bool,
    pub calibration_seconds: f64,
    pub tensors_calibrated: usize,
    pub backend: String,
    /// Accuracy against the float model on samples calibration did not see.
    pub held_out: Option<HeldOut>,
    /// The 10 quantized layers with the lowest SNR.
    pub worst_layers: Vec<LayerSnr>,
    pub kept_float: Vec<KeptFloat>,
    /// Every candidate the search measured, most useful first (empty when
    /// the target was met without a search, or the search stopped at its
    /// bound).
    pub candidates: Vec<CandidateLoss>,
    pub target_cosine: Option<f64>,
    /// Top-1 agreement asked of classifier outputs.
    pub target_top1: Option<f64>,
    /// With the caller's metric: the most its score may fall below the
    /// float model's (the target then); the scores are in
    /// `held_out.metric` (`original`: FP32's, `candidate`: INT8's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_drop: Option<f64>,
    /// Outputs judged by top-1 agreement too.
    pub classifier_outputs: Vec<String>,
    /// Outputs holding regressed values (boxes, landmarks): judged by the
    /// correlation of each value across samples too, never by top-1 or
    /// nearest neighbours.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub regression_outputs: Vec<String>,
    /// Outputs whose classes lie along another axis than the last (a
    /// per-pixel softmax over channels), with that axis: judged by top-1
    /// agreement along it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub class_axis_outputs: Vec<(String, usize)>,
    /// Class maps (an ArgMax's output): judged by the fraction of elements
    /// equal to the float model's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub label_outputs: Vec<String>,
    /// Whether the held-out accuracy meets the target (true when not judged).
    pub target_met: bool,
    /// What misses the target, one line, when it is missed.
    pub failure: Option<String>,
    /// How many tensors each range method chose (auto picks per tensor).
    pub methods_chosen: BTreeMap<String, usize>,
    /// Per calibrated tensor, the method that chose its range.
    pub tensor_methods: BTreeMap<String, String>,
    /// What the calibration and accuracy search did, by step: candidates
    /// built, judged on every sample and probed on a few, sessions and
    /// runs of each model, with their seconds.
    pub costs: BTreeMap<String, StepCost>,
    /// Nodes the user's precision map (`--precision`, `precision:`) keeps out
    /// of INT8, as `name (fp32)`; the search never quantizes or offers them
    /// (its own are `kept_float`).
    pub kept_by_user: Vec<String>,
    /// The one-thread speed check; None when it was not made (TensorRT
    /// target, no ONNX Runtime, not judged, target missed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speed: Option<SpeedCheck>,
    /// Why the float model was written instead of INT8: only float keeps
    /// the accuracy target, or INT8 with every layer quantized was no
    /// faster than float at one thread (a layer pinned to INT8 prevents
    /// both).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub float_written: Option<String>,
    /// Every measurement of time that decided something, in the order
    /// the run asked for them (`--int8-timings` answers a later run from
    /// them: see `int8/timings.rs`).
    pub timings: Vec<RecordedTiming>,
}

/// One measurement of time an INT8 run decided by, in the order it asked.
#[derive(serde::Deserialize, Serialize, Debug, Clone, PartialEq)]
pub struct RecordedTiming {
    /// What was measured: each model's label and the start of its
    /// SHA-256 (`"float 3f2a..."`), or what the answer is for.
    pub what: Vec<String>,
    /// The answer: milliseconds per model (seconds for a run of the
    /// original), in `what`'s order (null: not measured).
    pub ms: Vec<Option<f64>>,
}
