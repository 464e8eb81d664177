//! The float16/bfloat16 part of the optimize report: the automatic float32
//! islands (computed by [`crate::half`]).

use infopt_verify::sensitivity::NodeError;
use serde::Serialize;

/// Why a node was kept.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum KeptFor {
    /// Its float32 output comes near the half type's largest value.
    Range,
    /// It added the most error, and keeping it raised the output cosine.
    Error,
    /// The inputs were generated: it computes an exponential, a power or a
    /// logarithm's argument, or its output left float16's range with the
    /// inputs scaled up, and real data may take it there.
    Unseen,
}

/// A node the search kept in float32, and why.
#[derive(Serialize, Debug, Clone)]
pub struct KeptLayer {
    pub node: String,
    pub op: String,
    pub kept_for: KeptFor,
    /// Its first output.
    pub tensor: String,
    /// Largest magnitude of its outputs in float32 on the verification inputs.
    pub float32_max: f64,
    /// SNR of that output in the half model against float32, dB (null when
    /// it overflowed to infinity or NaN, or for `range`).
    pub output_snr_db: Option<f64>,
    /// The SNR it lost against its cleanest input, dB (null: all of it, or for `range`).
    pub added_db: Option<f64>,
    /// Lowest output cosine before and after keeping it (null for `range`:
    /// those are kept before the first judgement).
    pub cosine_before: Option<f64>,
    pub cosine_after: Option<f64>,
    /// The same in words (also the reason the pass reports).
    pub reason: String,
}

/// What the automatic islands did (`half_precision` in the JSON report).
#[derive(Serialize, Debug, Clone)]
pub struct HalfReport {
    /// `fp16` or `bf16`.
    pub precision: String,
    /// The lowest cosine every output must reach (null: the criterion is not a cosine).
    pub target_cosine: Option<f64>,
    /// What the model was judged on.
    pub inputs: String,
    /// Those inputs were generated (seeded), not given with `--inputs`.
    pub generated_inputs: bool,
    /// Said loudly when the inputs were generated: what the search could
    /// not see and what it kept for it.
    pub warning: Option<String>,
    /// Lowest output cosine of the plain conversion, and of the result.
    pub cosine_converted: f64,
    pub cosine_final: f64,
    pub reached: bool,
    /// `false` with `--no-auto-fp32`: converted and judged once.
    pub searched: bool,
    pub kept_fp32: Vec<KeptLayer>,
    /// Nodes kept on trial and put back: keeping them did not help.
    pub without_effect: Vec<String>,
    /// The nodes adding the most error in the result (at most 5), when the
    /// target was not reached.
    pub worst_remaining: Vec<NodeError>,
    pub trials: usize,
    pub seconds: f64,
}

impl HalfReport {
    /// The report's lines for a terminal or Markdown.
    pub fn render(&self) -> String {
        let h = self;
        use std::fmt::Write;
        let mut s = String::new();
        let target = h
            .target_cosine
            .map_or("the tolerance".to_string(), |c| format!("cosine >= {c}"));
        let _ = writeln!(
            s,
            "{}: target {target} on {}: {} (lowest output cosine {:.6}; {:.6} before keeping layers for their error; {} trial{}, {:.2} s)",
            h.precision,
            h.inputs,
            if h.reached { "reached" } else { "MISSED" },
            h.cosine_final,
            h.cosine_converted,
            h.trials,
            if h.trials == 1 { "" } else { "s" },
            h.seconds
        );
        if let Some(w) = &h.warning {
            let _ = writeln!(s, "  warning: {w}");
        }
        for k in &h.kept_fp32 {
            let _ = writeln!(s, "  kept in float32: {} ({}): {}", k.node, k.op, k.reason);
        }
        for w in &h.without_effect {
            let _ = writeln!(s, "  tried without effect: {w}");
        }
        s
    }
}
