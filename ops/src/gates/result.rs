//! One gate's outcome: what every kind of gate (accuracy, latency, size,
//! structure) reports, shared by the gates' modules.

use serde::Serialize;

#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum GateKind {
    Accuracy,
    Latency,
    Size,
    Structure,
}

/// One gate's outcome.
#[derive(Serialize, Debug, Clone)]
pub struct GateResult {
    /// The gate as spelled on the command line: `min_cosine`, `max_abs@logits`.
    pub gate: String,
    pub kind: GateKind,
    /// The threshold as written.
    pub threshold: String,
    /// The measured value as shown.
    pub value: String,
    /// The measured value as a number, when it is one.
    pub measured: Option<f64>,
    pub passed: bool,
    /// Why it passed or failed, one line.
    pub message: String,
}
