//! A command's options from keyword arguments (the Python API), without a
//! command line in between.
//!
//! The walk from a keyword to the option: the caller sends the keywords as
//! one JSON object → [`values::translate`] turns each Python form into the
//! option's own (`input_shapes={"x": [1, 3]}` → `["x:1x3"]`, `verify=False`
//! → `no_verify`) → [`nest`] puts it into the options struct, or into the
//! settings group (`backend`, `inputs`, `int8`, ...) that has a field of
//! that name (names read from serde, see `fields.rs`) → serde builds the
//! options, every field not given at its [`Default`], the same defaults the
//! command line's clap attributes read. An unknown keyword or a value of the
//! wrong kind is a one-line usage error that names it.
//!
//! What the command line's parser checks beyond types (two flags that
//! exclude each other, ranges) is checked in [`check`].

mod fields;
mod messages;
mod ordered;
pub mod values;

use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::backend_args::BackendSettings;
use crate::commands::bench::BenchOptions;
use crate::commands::build_engine::BuildEngineOptions;
use crate::commands::calibrate::CalibrateOptions;
use crate::commands::compare::CompareOptions;
use crate::commands::inspect::InspectOptions;
use crate::commands::optimize::OptimizeOptions;
use crate::error::{OpsError, OpsResult};
use crate::gates::GateSettings;
use crate::inputs_arg::InputSettings;
use crate::int8::Int8Settings;
use crate::save_args::SaveSettings;
use values::{Entry, Translated};

/// One command's options.
#[derive(Debug, Clone)]
pub enum Options {
    Optimize(Box<OptimizeOptions>),
    BuildEngine(Box<BuildEngineOptions>),
    Compare(Box<CompareOptions>),
    Bench(Box<BenchOptions>),
    Inspect(InspectOptions),
    Calibrate(Box<CalibrateOptions>),
}

/// A call: the command's options and the files its report goes to
/// (`report=`; the command line's `--report`).
#[derive(Debug, Clone)]
pub struct Call {
    pub options: Options,
    pub reports: Vec<PathBuf>,
}

/// Keywords the Python API names differently from the options' fields
/// (see `values::translate`), offered when a keyword is misspelt.
const ALIASES: &[&str] = &["pipeline", "verify", "report", "ep", "ep_option", "gates"];

/// Where keywords go: the options' own fields and their settings groups
/// (a group's fields are keywords of their own: `ort_dylib`, not `backend`).
struct Layout {
    command: &'static str,
    fields: &'static [&'static str],
    groups: Vec<(&'static str, &'static [&'static str])>,
}

impl Layout {
    fn of(command: &str) -> OpsResult<Layout> {
        use fields::of;
        let backend = ("backend", of::<BackendSettings>());
        let inputs = ("inputs", of::<InputSettings>());
        let gates = ("gates", of::<GateSettings>());
        let save = ("save", of::<SaveSettings>());
        let int8 = ("int8", of::<Int8Settings>());
        let (command, fields, groups) = match command {
            "optimize" => (
                "optimize",
                of::<OptimizeOptions>(),
                vec![gates, inputs, backend, save, int8],
            ),
            "build-engine" => (
                "build-engine",
                of::<BuildEngineOptions>(),
                vec![int8, inputs, backend, save],
            ),
            "compare" => (
                "compare",
                of::<CompareOptions>(),
                vec![backend, inputs, gates],
            ),
            "bench" => ("bench", of::<BenchOptions>(), vec![backend, inputs, gates]),
            "calibrate" => ("calibrate", of::<CalibrateOptions>(), vec![inputs, backend]),
            "inspect" => ("inspect", of::<InspectOptions>(), vec![]),
            other => return Err(OpsError::usage(format!("unknown command '{other}'"))),
        };
        Ok(Layout {
            command,
            fields,
            groups,
        })
    }

    fn is_group(&self, name: &str) -> bool {
        self.groups.iter().any(|(g, _)| *g == name)
    }

    /// Every keyword the command takes, for suggestions.
    fn known(&self) -> Vec<&'static str> {
        let own = self.fields.iter().filter(|f| !self.is_group(f));
        let grouped = self.groups.iter().flat_map(|(_, f)| f.iter());
        own.chain(grouped).chain(ALIASES).copied().collect()
    }

    /// The entries as the options' JSON: each in its group, or at the top.
    fn nest(&self, entries: &[Entry]) -> OpsResult<Map<String, Value>> {
        let mut top = Map::new();
        let mut grouped: Vec<(&str, Map<String, Value>)> = Vec::new();
        for e in entries {
            let group = self
                .groups
                .iter()
                .find(|(_, f)| f.contains(&e.field.as_str()));
            if let Some((name, _)) = group {
                match grouped.iter_mut().find(|(g, _)| g == name) {
                    Some((_, m)) => {
                        m.insert(e.field.clone(), e.value.clone());
                    }
                    None => {
                        grouped.push((name, Map::from_iter([(e.field.clone(), e.value.clone())])))
                    }
                }
            } else if self.fields.contains(&e.field.as_str()) && !self.is_group(&e.field) {
                top.insert(e.field.clone(), e.value.clone());
            } else {
                let known = self.known();
                return Err(OpsError::usage(messages::unknown(
                    self.command,
                    &e.keyword,
                    &known,
                )));
            }
        }
        for (name, m) in grouped {
            top.insert(name.to_string(), Value::Object(m));
        }
        Ok(top)
    }

    /// The options from the entries, each checked alone first so that a
    /// value serde refuses is named by its keyword.
    fn typed<T: DeserializeOwned>(&self, entries: &[Entry]) -> OpsResult<T> {
        let accepted = entries
            .iter()
            .map(|e| self.accepted::<T>(e))
            .collect::<OpsResult<Vec<_>>>()?;
        let all = self.nest(&accepted)?;
        serde_json::from_value::<T>(Value::Object(all))
            .map_err(|e| OpsError::usage(format!("invalid options for {}: {e}", self.command)))
    }

    /// The entry as `T` takes it. A number where `T` wants text
    /// (`workspace=1024`, `compute_capability=86`) is taken as its text, as
    /// the command line takes every value.
    fn accepted<T: DeserializeOwned>(&self, e: &Entry) -> OpsResult<Entry> {
        let alone = |value: &Value| -> OpsResult<Result<T, serde_json::Error>> {
            let one = Entry {
                value: value.clone(),
                ..e.clone()
            };
            let map = self.nest(std::slice::from_ref(&one))?;
            Ok(serde_json::from_value::<T>(Value::Object(map)))
        };
        let refused = match alone(&e.value)? {
            Ok(_) => return Ok(e.clone()),
            Err(refused) => refused,
        };
        if let Value::Number(n) = &e.value {
            let text = Value::String(n.to_string());
            if alone(&text)?.is_ok() {
                return Ok(Entry {
                    value: text,
                    ..e.clone()
                });
            }
        }
        let why = messages::reason(&refused.to_string());
        Err(OpsError::usage(messages::invalid(
            &e.keyword,
            &values::shown(&e.value),
            &why,
        )))
    }
}

/// The call `command` (`"optimize"`, `"build-engine"`, ...) makes with the
/// keywords of `keywords` (a JSON object; `null` values are not given).
pub fn parse(command: &str, keywords: &str) -> OpsResult<Call> {
    let layout = Layout::of(command)?;
    let not_an_object = |e: &dyn std::fmt::Display| {
        OpsError::usage(format!("the keywords are not a JSON object: {e}"))
    };
    let given = match serde_json::from_str::<ordered::Kw>(keywords) {
        Ok(ordered::Kw::Object(given)) => given,
        Ok(other) => return Err(not_an_object(&other.text())),
        Err(e) => return Err(not_an_object(&e)),
    };
    let mut entries = Vec::new();
    let mut reports = Vec::new();
    let mut pipeline_text = None;
    for (keyword, value) in given {
        match values::translate(command, &keyword, value) {
            Ok(Translated::Field(e)) => entries.push(e),
            Ok(Translated::PipelineText(t)) => pipeline_text = Some(t),
            Ok(Translated::Reports(r)) => reports.extend(r.into_iter().map(PathBuf::from)),
            Ok(Translated::Nothing) => {}
            Err((value, expected)) => {
                return Err(OpsError::usage(messages::invalid(
                    &keyword,
                    &value,
                    &format!("expected {expected}"),
                )));
            }
        }
    }
    let mut options = match layout.command {
        "optimize" => Options::Optimize(Box::new(layout.typed(&entries)?)),
        "build-engine" => Options::BuildEngine(Box::new(layout.typed(&entries)?)),
        "compare" => Options::Compare(Box::new(layout.typed(&entries)?)),
        "bench" => Options::Bench(Box::new(layout.typed(&entries)?)),
        "calibrate" => Options::Calibrate(Box::new(layout.typed(&entries)?)),
        _ => Options::Inspect(layout.typed(&entries)?),
    };
    if let Some(text) = pipeline_text {
        match &mut options {
            Options::Optimize(o) => o.config_text = Some(text),
            Options::BuildEngine(o) => o.config_text = Some(text),
            _ => {
                let known = layout.known();
                return Err(OpsError::usage(messages::unknown(
                    command, "pipeline", &known,
                )));
            }
        }
    }
    check(&options)?;
    Ok(Call { options, reports })
}

/// What the command line's parser refuses beyond a value's type: flags
/// that exclude each other, and ranges (clap's `conflicts_with`, `requires`
/// and `range` in src/commands).
fn check(options: &Options) -> OpsResult {
    let both = |a: &str, b: &str| -> OpsResult {
        Err(OpsError::usage(format!(
            "the argument '{a}' cannot be used with '{b}'"
        )))
    };
    let save = |s: &SaveSettings| -> OpsResult {
        if s.external_data.is_some() && s.inline {
            return both("external_data", "inline");
        }
        Ok(())
    };
    match options {
        Options::Optimize(o) => {
            if !o.passes.is_empty() && (o.config.is_some() || o.config_text.is_some()) {
                return both("passes", "pipeline");
            }
            if o.fp16 && o.bf16 {
                return both("fp16", "bf16");
            }
            save(&o.save)
        }
        Options::BuildEngine(o) => {
            if o.fp16 && o.bf16 {
                return both("fp16", "bf16");
            }
            if o.error_on_timing_cache_miss && o.timing_cache.is_none() {
                return Err(OpsError::usage(
                    "'error_on_timing_cache_miss' needs 'timing_cache'",
                ));
            }
            if let Some(n) = o.builder_opt_level.filter(|n| *n > 5) {
                let why = "expected 0 to 5";
                return Err(OpsError::usage(messages::invalid(
                    "builder_opt_level",
                    &n.to_string(),
                    why,
                )));
            }
            if let Some(n) = o.trt_major.filter(|n| !(10..=11).contains(n)) {
                let why = "expected 10 or 11";
                return Err(OpsError::usage(messages::invalid(
                    "trt_major",
                    &n.to_string(),
                    why,
                )));
            }
            save(&o.save)
        }
        _ => Ok(()),
    }
}

impl Options {
    /// The caller's samples as the calibration data (`calib_data=` /
    /// `data=` given an iterable).
    pub fn set_samples(&mut self, samples: infopt_calibration::run::Streamed) -> OpsResult {
        match self {
            Options::Optimize(o) => o.int8.calib_stream = Some(samples),
            Options::BuildEngine(o) => o.int8.calib_stream = Some(samples),
            Options::Calibrate(o) => o.data_stream = Some(samples),
            _ => return Err(OpsError::usage("this command takes no calibration data")),
        }
        Ok(())
    }

    /// The caller's arrays as the inputs (`inputs=` given a dict).
    pub fn set_inputs(
        &mut self,
        arrays: Vec<infopt_runtime::HostTensor>,
        origin: &str,
    ) -> OpsResult {
        let inputs = match self {
            Options::Optimize(o) => &mut o.inputs,
            Options::BuildEngine(o) => &mut o.inputs,
            Options::Compare(o) => &mut o.inputs,
            Options::Bench(o) => &mut o.inputs,
            Options::Calibrate(o) => &mut o.inputs,
            Options::Inspect(_) => return Err(OpsError::usage("inspect takes no inputs")),
        };
        inputs.arrays = Some((arrays, origin.to_string()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(command: &str, keywords: &str) -> String {
        match parse(command, keywords) {
            Err(e) => {
                assert_eq!(e.kind, crate::error::ErrorKind::Usage);
                e.message
            }
            Ok(c) => panic!("accepted: {c:?}"),
        }
    }

    fn optimize(keywords: &str) -> OptimizeOptions {
        match parse("optimize", keywords) {
            Ok(Call {
                options: Options::Optimize(o),
                ..
            }) => *o,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn keywords_reach_their_fields_and_the_rest_keeps_the_defaults() {
        let o = optimize(
            r#"{"model": "m.onnx", "fp16": true, "ort_dylib": "/x/libort.so", "calib_samples": 8,
                "gates": {"min_cosine": 0.999}, "input_shapes": {"x": [1, 3]},
                "precision": {"Softmax": "fp32", "Conv": "fp16"}, "verify": false, "target": "tensorrt"}"#,
        );
        assert!(o.fp16 && o.no_verify);
        assert_eq!(o.backend.ort_dylib, Some(PathBuf::from("/x/libort.so")));
        assert_eq!(o.int8.calib_samples, Some(8));
        assert_eq!(o.gates.gates, ["min_cosine=0.999"]);
        assert_eq!(o.inputs.input_shapes, ["x:1x3"]);
        // In the order written (a later entry may override an earlier one).
        assert_eq!(o.precision, ["Softmax=fp32", "Conv=fp16"]);
        assert_eq!(o.target, Some(infopt_passes::Target::Tensorrt));
        let d = OptimizeOptions::default();
        assert_eq!((o.runs, o.warmup), (d.runs, d.warmup));
        assert_eq!(o.backend.ort_opt_level, d.backend.ort_opt_level);
        assert_eq!(o.inputs.vocab, d.inputs.vocab);
    }

    #[test]
    fn an_unknown_keyword_is_named_with_the_nearest() {
        assert_eq!(
            usage("optimize", r#"{"fp61": true}"#),
            "unknown option 'fp61' for optimize; did you mean 'fp16'? (a similar argument exists: '--fp16')"
        );
        assert!(
            usage("bench", r#"{"calib_data": "d"}"#)
                .starts_with("unknown option 'calib_data' for bench")
        );
    }

    #[test]
    fn a_wrong_value_is_named_by_its_keyword() {
        assert_eq!(
            usage("optimize", r#"{"target": "gpu"}"#),
            "invalid value 'gpu' for '--target <TARGET>'; possible values: portable, onnxruntime, tensorrt"
        );
        assert_eq!(
            usage("bench", r#"{"runs": "many"}"#),
            "invalid value 'many' for '--runs <RUNS>'; expected a whole number (0 or more)"
        );
        assert_eq!(
            usage("optimize", r#"{"verify": "no"}"#),
            "invalid value 'no' for '--verify <VERIFY>'; expected True or False"
        );
        assert_eq!(
            usage("optimize", r#"{"fp16": true, "bf16": true}"#),
            "the argument 'fp16' cannot be used with 'bf16'"
        );
    }

    #[test]
    fn a_number_is_taken_as_text_where_text_is_wanted() {
        let Ok(Call {
            options: Options::BuildEngine(o),
            ..
        }) = parse("build-engine", r#"{"workspace": 1024, "runs": 3}"#)
        else {
            panic!("refused");
        };
        assert_eq!(o.workspace.as_deref(), Some("1024"));
        assert_eq!(o.runs, 3);
    }

    #[test]
    fn a_pipeline_dict_is_its_text() {
        let o = optimize(r#"{"pipeline": {"version": 1, "passes": ["fold-constants"]}}"#);
        assert_eq!(
            o.config_text.as_deref(),
            Some(r#"{"version":1,"passes":["fold-constants"]}"#)
        );
        assert!(usage("compare", r#"{"pipeline": {"passes": []}}"#).contains("'pipeline'"));
    }
}
