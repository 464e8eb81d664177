//! Precision options applied to a pipeline: a half default adds its convert
//! pass, overrides go first in the map. Errors are values: the caller words
//! them after how the options were given (flags, keyword arguments), which
//! the passes do not know.

use super::{PRECISION_PASSES, Precision, PrecisionMap};
use crate::config::{PassConfig, PipelineConfig, Step};

/// Why precision options do not apply to a pipeline.
#[derive(Clone, Debug, PartialEq)]
pub enum ApplyError {
    /// The half type asked for contradicts the pipeline's own default.
    ConflictingDefault {
        given: Precision,
        pipeline: Precision,
    },
    /// No pass of the pipeline reads the precision map; `readers` would.
    /// `from_overrides`: overrides were given (else it is the pipeline's
    /// own `precision:` map).
    NoReader {
        readers: &'static [&'static str],
        from_overrides: bool,
    },
    /// Override `text` does not parse: `problem` says why.
    BadOverride { text: String, problem: String },
    /// The convert pass could not be added to the pipeline.
    Pipeline(String),
}

/// Applies precision options to a pipeline: `half` sets the map's default,
/// `overrides` (`NAME_OR_OP=P`, in the order given) go first in the map; a
/// float16/bfloat16 default appends the convert pass when the pipeline has
/// none (after its fusions). Returns notes for the report.
pub fn apply_to_pipeline(
    config: &mut PipelineConfig,
    overrides: &[String],
    half: Option<Precision>,
) -> Result<Vec<String>, ApplyError> {
    let mut notes = Vec::new();
    if overrides.is_empty() && half.is_none() && config.precision.is_none() {
        return Ok(notes);
    }
    let map = config.precision.get_or_insert_with(PrecisionMap::default);
    if let Some(p) = half {
        match map.default {
            Some(d) if d != p && d != Precision::Fp32 => {
                return Err(ApplyError::ConflictingDefault {
                    given: p,
                    pipeline: d,
                });
            }
            _ => map.default = Some(p),
        }
    }
    for o in overrides.iter().rev() {
        let parsed = super::parse_override(o).map_err(|problem| ApplyError::BadOverride {
            text: o.clone(),
            problem,
        })?;
        map.overrides.insert(0, parsed);
    }
    let default = map.default;
    let pass = match default {
        Some(Precision::Fp16) => Some("convert-float16"),
        Some(Precision::Bf16) => Some("convert-bfloat16"),
        _ => None,
    };
    if let Some(pass) = pass
        && !config.pass_names().contains(&pass)
    {
        let step = PassConfig::from_name(pass).map_err(ApplyError::Pipeline)?;
        config.passes.push(Step::Pass(step));
        notes.push(format!(
            "precision default {}: appended {pass} to the pipeline",
            default.map(|d| d.as_str()).unwrap_or("")
        ));
    }
    if !config
        .pass_names()
        .iter()
        .any(|n| PRECISION_PASSES.contains(n))
    {
        return Err(ApplyError::NoReader {
            readers: &PRECISION_PASSES,
            from_overrides: !overrides.is_empty(),
        });
    }
    Ok(notes)
}

/// True when the pipeline converts float32 to a half type (its result is
/// then held to a half model's accuracy target).
pub fn converts_to_half(config: &PipelineConfig) -> bool {
    config
        .pass_names()
        .iter()
        .any(|n| *n == "convert-float16" || *n == "convert-bfloat16")
}
