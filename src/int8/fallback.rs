//! The float fallback of an INT8 model that misses its target: every
//! quantized layer is first judged alone in INT8 (the others float) on a
//! few samples, which ranks the layers by the harm each does by itself;
//! then the fewest of the most harmful ones are kept in float: 1, 2, 4, ...
//! until the target is met, then a bisection between the last miss and the
//! first hit. A layer's own harm does not depend on which others are
//! quantized with it, so the ranking is fixed and keeping more of it in
//! float does not undo what fewer did (a ranking re-measured on the
//! quantized model each round did, on PP-OCRv4 rec).

use infopt_calibration::Amax;
use infopt_calibration::int8;
use infopt_calibration::quantize::Exclude;
use infopt_ir::Model;
use infopt_passes::{PipelineConfig, PipelineRun};
use infopt_verify::evaluate::HeldOut;

use super::costs::Costs;
use super::judge::Judge;
use super::{Context, Goal, KeptFloat, min_cosine, misses, quantize_rest, score};
use crate::exit::CliResult;

/// Samples each layer is judged on alone.
const PROBE_SAMPLES: usize = 8;

pub(super) struct Search<'a> {
    pub mid: &'a Model,
    /// The quantize step and the passes after it.
    pub from: &'a PipelineConfig,
    pub amax: &'a Amax,
    /// Other ranges, tried too where `amax` misses the target.
    pub other: Option<&'a Amax>,
    pub cx: &'a Context<'a>,
    pub goal: Goal,
    pub costs: &'a Costs,
}

/// What the search found.
pub(super) struct Found {
    pub kept: Vec<KeptFloat>,
    /// Why the target is still missed, naming the layers; None when met.
    pub failure: Option<String>,
    /// The model with those layers in float, the run of its passes and its
    /// judgement (None when no layer could be kept in float).
    pub model: Option<(Model, PipelineRun, HeldOut)>,
    /// That model has the other ranges.
    pub other_ranges: bool,
}

/// The quantized weighted layers of `quantized` (Conv, ConvTranspose, Gemm,
/// MatMul reading a DequantizeLinear): what keeping in float changes. An
/// op without weights kept in float still reads and feeds quantized tensors,
/// so its error barely changes.
pub(super) fn quantized_layers(quantized: &Model) -> Vec<String> {
    let g = &quantized.graph;
    g.nodes()
        .filter(|(_, n)| {
            matches!(
                n.op_type.as_str(),
                "Conv" | "ConvTranspose" | "Gemm" | "MatMul"
            ) && n.inputs.iter().flatten().any(|v| {
                g.producer(*v)
                    .is_some_and(|p| p.op_type == "DequantizeLinear")
            })
        })
        .map(|(_, n)| n.name_or_op().to_string())
        .collect()
}

/// A layer and what it did alone in INT8.
struct Harm {
    layer: String,
    /// The outputs' noise power relative to their signal, summed: errors of
    /// layers add up roughly in power, and unlike top-1 agreement on a few
    /// samples it does not come in steps.
    noise: f64,
    cosine: f64,
}

/// `Σ 10^(-SNR/10)` over the outputs and their parts judged on their own
/// (a detector's scores weigh as much as its boxes; infinite for a NaN).
fn relative_noise(h: &HeldOut) -> f64 {
    h.outputs
        .iter()
        .chain(h.parts.iter().map(|p| &p.agreement))
        .map(|o| {
            if o.snr_db.is_nan() {
                f64::INFINITY
            } else {
                10f64.powf(-o.snr_db / 10.0)
            }
        })
        .sum()
}

impl Search<'_> {
    /// The quantize step with `layers` kept in float too.
    fn with_float(&self, layers: &[String]) -> PipelineConfig {
        let mut config = self.from.clone();
        if let Some(o) = int8::options_mut(&mut config, 0) {
            o.exclude.extend(layers.iter().map(|l| Exclude {
                name: Some(l.clone()),
                op: None,
                regex: None,
            }));
        }
        config
    }

    fn quantize_with_float(&self, layers: &[String]) -> CliResult<(Model, PipelineRun)> {
        quantize_rest(
            self.mid,
            &self.with_float(layers),
            self.amax,
            self.cx,
            self.costs,
        )
    }

    /// The model with `layers` in float, judged: with `amax`, and where that
    /// misses the target with the other ranges too (the better one is
    /// returned, true when it is the other ranges').
    fn judge_with_float(
        &self,
        judge: &mut Judge<'_>,
        layers: &[String],
    ) -> CliResult<(Model, PipelineRun, HeldOut, bool)> {
        let (q, r) = self.quantize_with_float(layers)?;
        let h = judge.judge(&q)?;
        if let Some(other) = self.other.filter(|_| !misses(&h, self.goal).is_empty()) {
            let (q2, r2) = quantize_rest(
                self.mid,
                &self.with_float(layers),
                other,
                self.cx,
                self.costs,
            )?;
            let h2 = judge.judge(&q2)?;
            if score(&h2, self.goal) > score(&h, self.goal) {
                return Ok((q2, r2, h2, true));
            }
        }
        Ok((q, r, h, false))
    }

    /// Each of `layers` alone in INT8 on the first judged samples, most
    /// harmful first (ties: the order of the graph).
    fn rank(&self, judge: &mut Judge<'_>, layers: &[String]) -> CliResult<Vec<Harm>> {
        let mut out = Vec::with_capacity(layers.len());
        for layer in layers {
            let others: Vec<String> = layers.iter().filter(|l| *l != layer).cloned().collect();
            let (q, _) = self.quantize_with_float(&others)?;
            let h = judge.probe(&q, PROBE_SAMPLES)?;
            out.push(Harm {
                layer: layer.clone(),
                noise: relative_noise(&h),
                cosine: min_cosine(&h),
            });
        }
        out.sort_by(|a, b| b.noise.total_cmp(&a.noise));
        Ok(out)
    }

    /// Keeps the fewest of the most harmful layers of `quantized` (judged
    /// `first`, missing `missed`) in float that meet the target.
    pub fn run(
        &self,
        judge: &mut Judge<'_>,
        quantized: &Model,
        first: &HeldOut,
        missed: &[String],
    ) -> CliResult<Found> {
        // The user's overrides are fixed: a layer set to a float type (which
        // under the onnxruntime placement still reads a DQ input) or pinned
        // to int8 is never offered.
        let user = self.from.precision.as_ref();
        let layers: Vec<String> = quantized_layers(quantized)
            .into_iter()
            .filter(|l| !user.is_some_and(|m| m.fixes(&quantized.graph, l)))
            .collect();
        let before = min_cosine(first);
        if layers.is_empty() {
            return Ok(Found {
                kept: Vec::new(),
                failure: Some(failure_message(first, missed, &[], &[])),
                model: None,
                other_ranges: false,
            });
        }
        crate::progress::note(
            "int8",
            format!(
                "int8: {} below the target: judging each of {} layers alone in INT8 on {} sample(s)",
                missed.join(", "),
                layers.len(),
                PROBE_SAMPLES.min(first.samples)
            ),
        );
        let ranked = self.rank(judge, &layers)?;
        let n = ranked.len();
        let names: Vec<String> = ranked.iter().map(|h| h.layer.clone()).collect();
        // Keeps the `k` most harmful layers in float and judges the model.
        let mut attempt = |k: usize| -> CliResult<(Model, PipelineRun, HeldOut, bool, bool)> {
            let (q, r, h, other) = self.judge_with_float(judge, &names[..k])?;
            let met = misses(&h, self.goal).is_empty();
            crate::progress::note(
                "int8",
                format!(
                    "int8: {k} of {n} layer(s) in float: lowest cosine {:.5}, margin to the target {:.5}: {}",
                    min_cosine(&h),
                    score(&h, self.goal),
                    if met { "met" } else { "missed" }
                ),
            );
            Ok((q, r, h, met, other))
        };
        // Doubling until the target is met, then a bisection.
        let (mut lo, mut k) = (0usize, 1usize);
        let mut best = None;
        let mut last = None;
        loop {
            let k_now = k.min(n);
            let (q, r, h, met, other) = attempt(k_now)?;
            if met {
                best = Some((k_now, q, r, h, other));
                break;
            }
            lo = k_now;
            last = Some((q, r, h, other));
            if k_now == n {
                break;
            }
            k *= 2;
        }
        if let Some((mut hi, ..)) = best {
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                let (q, r, h, met, other) = attempt(mid)?;
                if met {
                    hi = mid;
                    best = Some((mid, q, r, h, other));
                } else {
                    lo = mid;
                }
            }
        }
        let kept_of = |k: usize, after: f64| -> Vec<KeptFloat> {
            ranked[..k]
                .iter()
                .map(|h| KeptFloat {
                    layer: h.layer.clone(),
                    cosine_before: before,
                    cosine_after: after,
                    cosine_alone: Some(h.cosine),
                })
                .collect()
        };
        Ok(match (best, last) {
            (Some((k, q, r, h, other)), _) => Found {
                kept: kept_of(k, min_cosine(&h)),
                failure: None,
                model: Some((q, r, h)),
                other_ranges: other,
            },
            (None, Some((q, r, h, other))) => {
                let still = misses(&h, self.goal);
                Found {
                    kept: kept_of(n, min_cosine(&h)),
                    failure: Some(failure_message(&h, &still, &names, &names[..5.min(n)])),
                    model: Some((q, r, h)),
                    other_ranges: other,
                }
            }
            (None, None) => Found {
                kept: Vec::new(),
                failure: Some(failure_message(first, missed, &[], &names)),
                model: None,
                other_ranges: false,
            },
        })
    }
}

/// The one-line verdict on a model that misses its target.
fn failure_message(h: &HeldOut, missed: &[String], kept: &[String], worst: &[String]) -> String {
    let list = |xs: &[String]| {
        if xs.is_empty() {
            "none".to_string()
        } else {
            xs.join(", ")
        }
    };
    let kept = if kept.is_empty() {
        "none".to_string()
    } else {
        format!(
            "{} (every quantized weighted layer: the error left is in the quantized activations between them)",
            kept.join(", ")
        )
    };
    format!(
        "the INT8 model misses its accuracy target on {} {} sample(s): {}; kept in float without reaching it: {kept}; the layers that harm most alone in INT8: {}",
        h.samples,
        if h.on_calibration_samples {
            "calibration"
        } else {
            "held-out"
        },
        missed.join(", "),
        list(worst)
    )
}
