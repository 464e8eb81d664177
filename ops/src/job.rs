//! One job, resolved once (DESIGN.md, "One job, resolved once"): the
//! precision and INT8 options are applied to the pipeline here, in one
//! order, and each is checked to take effect. `optimize` and `build-engine`
//! call [`Job::resolve`] before any model is loaded or run and
//! [`Job::check_model`] right after loading, before calibration or
//! verification; afterwards the precision part of the pipeline is only read.
//!
//! What is refused (exit 2, one line naming the option): a `--precision`
//! entry or `precision:` override that no pass of the pipeline realizes
//! (`X=fp16` without convert-float16, `X=int8` without quantize-int8), one
//! that selects nothing in the model (with "did you mean"), INT8 options
//! without a quantize-int8 step, `--no-auto-fp32` without a half pass.

use infopt_ir::Model;
use infopt_passes::precision::{self, ApplyError, Override, check};
use infopt_passes::{PipelineConfig, Precision};

use crate::error::{OpsError, OpsResult};
use crate::int8::Int8Settings;
use crate::job_file::JobFile;

/// The command-line options that change the precision of the model.
pub struct PrecisionFlags<'a> {
    /// `--fp16` / `--bf16`.
    pub half: Option<Precision>,
    /// `--precision NAME_OR_OP=P`, in the order given.
    pub overrides: &'a [String],
    /// `--int8` and its options.
    pub int8: &'a Int8Settings,
    /// `--no-auto-fp32`.
    pub no_auto_fp32: bool,
    /// `--disable NAME`: passes that will not run.
    pub disabled: &'a [String],
}

/// The resolved precision part of a job.
#[derive(Debug)]
pub struct Job {
    /// What resolution added to the pipeline, for the report.
    pub notes: Vec<String>,
    /// How many of the map's first overrides came from `--precision`.
    cli_overrides: usize,
}

/// The INT8 options given, by flag: each needs a quantize-int8 step.
fn int8_options_given(a: &Int8Settings) -> Vec<&'static str> {
    let given = [
        ("--calib-data", a.data_given()),
        ("--ranges", a.ranges.is_some()),
        ("--preprocess", a.preprocess.is_some()),
        ("--calib-method", a.calib_method.is_some()),
        ("--calib-samples", a.calib_samples.is_some()),
        ("--held-out", a.held_out.is_some()),
        ("--int8-min-cosine", a.int8_min_cosine.is_some()),
        ("--int8-min-top1", a.int8_min_top1.is_some()),
        ("--int8-timings", a.int8_timings.is_some()),
    ];
    given.iter().filter(|(_, g)| *g).map(|(f, _)| *f).collect()
}

impl Job {
    /// Applies `flags` to `config`: `--int8` (or a `precision:` default of
    /// int8) adds the quantize-int8 step, `--fp16`/`--bf16` the convert pass
    /// and the map's default, `--precision` the overrides (first in the map);
    /// then checks that a pass of the pipeline reads every one. A half
    /// conversion holds verification to the half model's accuracy target.
    pub fn resolve(config: &mut JobFile, flags: &PrecisionFlags<'_>) -> OpsResult<Job> {
        let default_int8 = config
            .precision
            .as_ref()
            .is_some_and(|m| m.default == Some(Precision::Int8));
        if flags.int8.int8 || default_int8 {
            infopt_calibration::int8::ensure_step(config).map_err(OpsError::usage)?;
        }
        let mut notes = precision::apply_to_pipeline(config, flags.overrides, flags.half)
            .map_err(|e| OpsError::usage(flag_wording(&e)))?;
        if precision::converts_to_half(config)
            && let Some(note) = config.verify.widen_for_half()
        {
            notes.push(note);
        }
        let runs: Vec<&str> = config
            .pass_names()
            .into_iter()
            .filter(|p| !flags.disabled.iter().any(|d| d == p))
            .collect();
        let quantizes = runs.contains(&infopt_calibration::int8::STEP);
        if !quantizes && let Some(first) = int8_options_given(flags.int8).first() {
            return Err(OpsError::usage(format!(
                "{first} is an INT8 option, but the pipeline has no quantize-int8 step; add --int8"
            )));
        }
        let converts = runs.iter().any(|p| {
            check::readers(Precision::Fp16).contains(p)
                || check::readers(Precision::Bf16).contains(p)
        });
        if flags.no_auto_fp32 && !converts {
            return Err(OpsError::usage(
                "--no-auto-fp32 applies to a conversion to float16 or bfloat16, which the pipeline does not run; add --fp16 or --bf16, or drop it",
            ));
        }
        if let Some(map) = &config.precision {
            check::check_readers(map, flags.overrides.len(), &runs, &Flags).map_err(|e| {
                // Adding the flag is not the fix when the pass is disabled.
                let skipped: Vec<&str> = flags
                    .disabled
                    .iter()
                    .map(String::as_str)
                    .filter(|d| check::readers(Precision::Fp32).contains(d))
                    .collect();
                if skipped.is_empty() {
                    OpsError::usage(e)
                } else {
                    OpsError::usage(format!("{e} (--disable {} skips it)", skipped.join(",")))
                }
            })?;
        }
        Ok(Job {
            notes,
            cli_overrides: flags.overrides.len(),
        })
    }

    /// Every override of the pipeline's precision map selects something in
    /// `model` (the model as loaded, subgraphs included).
    pub fn check_model(&self, config: &PipelineConfig, model: &Model) -> OpsResult {
        match &config.precision {
            Some(map) => {
                check::check_model(map, self.cli_overrides, model, &Flags).map_err(OpsError::usage)
            }
            None => Ok(()),
        }
    }
}

/// Precision checks in the command line's words.
struct Flags;

impl check::Wording for Flags {
    fn given(&self, o: &Override) -> String {
        format!("--precision {}={}", o.selector.source_text(), o.to)
    }
    fn adds_reader(&self, p: Precision) -> String {
        match p {
            Precision::Fp32 => "--fp16, --bf16 or --int8",
            Precision::Fp16 => "--fp16",
            Precision::Bf16 => "--bf16",
            Precision::Int8 => "--int8 with --calib-data or --ranges",
        }
        .into()
    }
}

/// An [`ApplyError`] in the command line's words.
fn flag_wording(e: &ApplyError) -> String {
    match e {
        ApplyError::ConflictingDefault { given, pipeline } => {
            format!(
                "--{given} conflicts with the pipeline's precision default {pipeline}; drop one of them"
            )
        }
        ApplyError::NoReader {
            readers,
            from_overrides,
        } => {
            let what = if *from_overrides {
                "--precision"
            } else {
                "the pipeline's `precision:` map"
            };
            format!(
                "{what} needs a pass that reads it ({}); add --fp16 or --bf16, or use a pipeline that runs one",
                readers.join(", ")
            )
        }
        ApplyError::BadOverride { text, problem } => format!("--precision '{text}': {problem}"),
        ApplyError::Pipeline(message) => message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_errors_are_worded_as_flags() {
        let conflict = ApplyError::ConflictingDefault {
            given: Precision::Bf16,
            pipeline: Precision::Fp16,
        };
        assert_eq!(
            flag_wording(&conflict),
            "--bf16 conflicts with the pipeline's precision default fp16; drop one of them"
        );
        let none = ApplyError::NoReader {
            readers: &precision::PRECISION_PASSES,
            from_overrides: true,
        };
        assert!(
            flag_wording(&none).starts_with("--precision needs a pass that reads it (convert-float16, convert-bfloat16, quantize-int8); add --fp16 or --bf16"),
            "{}",
            flag_wording(&none)
        );
        let bad = ApplyError::BadOverride {
            text: "Softmax".into(),
            problem: "expected NAME_OR_OP=PRECISION".into(),
        };
        assert!(
            flag_wording(&bad).starts_with("--precision 'Softmax': expected NAME_OR_OP=PRECISION")
        );
    }

    #[test]
    fn a_half_conversion_widens_default_verification() {
        let mut job =
            JobFile::from_yaml("version: 1\npasses: [fold-constants]\n", "p.yaml").unwrap();
        let int8 = Int8Settings::default();
        let flags = PrecisionFlags {
            half: Some(Precision::Fp16),
            overrides: &[],
            int8: &int8,
            no_auto_fp32: false,
            disabled: &[],
        };
        let resolved = Job::resolve(&mut job, &flags).unwrap();
        assert_eq!(job.verify.rtol, infopt_verify::config::HALF_RTOL);
        assert!(
            resolved.notes.iter().any(|n| n.contains("accuracy target")),
            "{:?}",
            resolved.notes
        );
    }
}
