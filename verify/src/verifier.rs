//! The oracle: the original model runs once on seeded (or given) inputs, and
//! every candidate runs on the same inputs in the same backend and is judged
//! by a [`Criterion`].
//!
//! The policy a user can trust without thinking about backends: the
//! reference is not the optimizer's own arithmetic, so ONNX Runtime first
//! (the original at graph optimizations off, the candidate as the user runs
//! it) and tract only when ONNX Runtime is absent or cannot run the original
//! (or for bfloat16 pipelines, which ONNX Runtime's CPU provider cannot run);
//! the other runtime when the first cannot run the original; sizes tried in
//! turn when the user fixed none (see [`crate::shapes`]); ONNX Runtime when
//! tract cannot load the candidate (a contrib op), and as a second opinion
//! when only tract sees a difference. An explicit `--backend` turns all
//! fallbacks off.

use std::path::PathBuf;

use infopt_ir::Model;
use infopt_runtime::compare::{self, Tolerance};
use infopt_runtime::{
    DefaultedDim, HostTensor, InputShapes, Latency, LoadedModel, OutputAgreement,
};
use serde::Serialize;

use crate::backend::{BackendInfo, BackendKind, BackendOptions, ChosenBackend};
use crate::criterion::Criterion;
use crate::error::{ErrorKind, Result, VerifyError};
use crate::half_io::HalfIo;
use crate::inputs::Inputs;
use crate::shapes;
use crate::timing::{Timed, time_interleaved};

/// The verdict on one candidate, as reports show it.
#[derive(Serialize, Debug, Clone)]
pub struct Verification {
    pub backend: BackendInfo,
    pub inputs: String,
    /// The criterion that decided `passed`.
    pub criterion: Criterion,
    /// The element-wise tolerance, reported next to it (`mismatches`).
    pub rtol: f64,
    pub atol: f64,
    /// Concrete input shapes both models ran with.
    pub input_shapes: Vec<(String, Vec<usize>)>,
    /// Symbolic dims nobody fixed, which took a chosen value.
    pub defaulted_dims: Vec<DefaultedDim>,
    pub outputs: Vec<OutputAgreement>,
    pub passed: bool,
}

impl Verification {
    /// The outputs outside their tolerance, each as an error message reads
    /// it ([`Criterion::failure_summary`]), joined by commas.
    pub fn failing_outputs(&self) -> String {
        self.outputs
            .iter()
            .filter(|o| !o.within_tolerance)
            .map(Criterion::failure_summary)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[derive(Serialize, Debug, Clone)]
pub struct LatencyComparison {
    pub backend: BackendInfo,
    pub before: Latency,
    pub after: Latency,
    /// before.median / after.median.
    pub speedup: f64,
}

/// How to build the verifier.
#[derive(Clone, Debug)]
pub struct VerifyPolicy {
    /// Backends in order of preference; with `explicit`, only that one.
    pub prefer: Vec<BackendKind>,
    /// `--backend`: no fallback at all.
    pub explicit: Option<BackendKind>,
    pub options: BackendOptions,
    pub criterion: Criterion,
    /// Element-wise tolerance computed alongside (and used by `Elementwise`).
    pub tolerance: Tolerance,
    /// Keep the original loaded, for timing.
    pub keep_original: bool,
    /// The pipeline writes half-precision graph inputs and outputs
    /// (`--fp16-io`): candidates are fed and read through [`HalfIo`].
    pub half_io: bool,
}

/// The original model loaded in a backend, with its inputs and reference
/// outputs, and what it takes to check candidates against it.
pub struct Verifier {
    pub chosen: ChosenBackend,
    pub shapes: InputShapes,
    pub dir: PathBuf,
    original: Option<Box<dyn LoadedModel>>,
    original_bytes: Vec<u8>,
    /// Outputs whose values lie in a fixed range (see [`range_scales`]).
    range_scales: Vec<(String, f64)>,
    /// Class maps, judged by how many labels differ (see
    /// [`Criterion::judge_labels`]).
    label_outputs: Vec<String>,
    pub resolution: infopt_runtime::ShapeResolution,
    pub inputs: Vec<HostTensor>,
    pub expected: Vec<HostTensor>,
    pub inputs_description: String,
    policy: VerifyPolicy,
    /// Notes for the report: fallbacks taken, sizes chosen.
    pub notes: Vec<String>,
    /// Warnings for the report (a difference only tract saw).
    pub warnings: Vec<String>,
    /// Tensors compared beside the outputs: what a data-dependent selection
    /// reads (see [`crate::selection`]), exposed as outputs of every model
    /// run here.
    watched: Vec<String>,
}

impl Verifier {
    /// Loads and runs the original under `policy`.
    pub fn new(
        original: &Model,
        dir: PathBuf,
        inputs: &Inputs,
        policy: VerifyPolicy,
    ) -> Result<Verifier> {
        // Refuse before loading what cannot fit, rather than be killed; a
        // model whose weights are external but too big for the heap runs in
        // ONNX Runtime with them memory-mapped.
        let mut policy = policy;
        let stats = infopt_ir::stats::GraphStats::of_model(original);
        let inline = original
            .source
            .as_ref()
            .is_none_or(|s| s.external_files.is_empty());
        let weights = crate::memory::WeightBytes {
            total: stats.parameter_bytes,
            external: stats.external_parameter_bytes,
            copies: 1 + u64::from(policy.keep_original) + u64::from(inline),
        };
        let mapping_allowed = policy.explicit.is_none_or(|k| k == BackendKind::Ort);
        let mapped_note = match crate::memory::plan(weights, mapping_allowed) {
            Err(why) => return Err(VerifyError::new(ErrorKind::CannotVerify, why)),
            Ok(crate::memory::WeightPlan::Heap) => None,
            Ok(crate::memory::WeightPlan::Mapped { note }) => {
                policy.prefer = vec![BackendKind::Ort];
                policy.options.map_weights = true;
                Some(note)
            }
        };
        let bytes = original
            .to_bytes_referencing_sources()
            .map_err(|e| VerifyError::new(ErrorKind::Load, e))?;
        let watched = crate::selection::selection_inputs(original);
        let exposed = match watched.is_empty() {
            true => None,
            false => Some(
                crate::selection::exposing(original, &watched)
                    .to_bytes_referencing_sources()
                    .map_err(|e| VerifyError::new(ErrorKind::Load, e))?,
            ),
        };
        let run_bytes = exposed.as_deref().unwrap_or(&bytes);
        // Mode-switch inputs (a sample rate compared with 16000) get the
        // value the graph compares them with, not a random one.
        let mut value_notes = Vec::new();
        let string_choices = crate::string_inputs::string_choices(original);
        let string_inputs: Vec<String> = string_choices.iter().map(|c| c.input.clone()).collect();
        let mut with_values;
        let inputs = if inputs.file.is_none() {
            with_values = inputs.clone();
            for h in crate::value_hints::chosen_values(original) {
                with_values.values.insert(h.input, h.value);
                value_notes.push(h.why);
            }
            for c in string_choices {
                value_notes.push(format!(
                    "input `{}` holds strings: generated from {} string(s) {}",
                    c.input,
                    c.strings.len(),
                    match c.listed {
                        true => "that the ops reading it list",
                        false => "of infopt's own (no op reading it lists any)",
                    }
                ));
                with_values.strings.insert(c.input, c.strings);
            }
            &with_values
        } else {
            inputs
        };
        let kinds: Vec<BackendKind> = match policy.explicit {
            Some(k) => vec![k],
            None => policy.prefer.clone(),
        };
        // Sizes: the caller's, or (with unbound dims and generated inputs)
        // the candidates of `shapes`.
        let tries = if inputs.file.is_some() {
            vec![shapes::Candidate {
                label: "from the input arrays".into(),
                shapes: inputs.shapes.clone(),
            }]
        } else {
            shapes::candidates(original, &inputs.shapes)
        };
        if let Some(why) = crate::loop_work::refusal(original) {
            return Err(VerifyError::new(
                ErrorKind::CannotVerify,
                format!("cannot verify: {why}"),
            ));
        }
        // Sizes at which an activation cannot fit are not tried: a runtime
        // would grow until the kernel killed it; nor sizes at which the
        // arithmetic would take minutes. When all are such, that is why
        // verification cannot run.
        let available = crate::memory::available_bytes();
        // One candidate: no dim was left to choose (see shapes::candidates).
        let fixed = tries.len() == 1;
        let mut too_big = None;
        let tries: Vec<shapes::Candidate> = tries
            .into_iter()
            .filter(
                |t| match refusal_at(original, &t.shapes, available, fixed) {
                    Some(why) => {
                        too_big.get_or_insert(why);
                        false
                    }
                    None => true,
                },
            )
            .collect();
        if let (true, Some(why)) = (tries.is_empty(), too_big) {
            return Err(VerifyError::new(
                ErrorKind::CannotVerify,
                format!("cannot verify: {why}"),
            ));
        }
        let mut errors: Vec<String> = Vec::new();
        let mut any_backend = false;
        // Whether ONNX Runtime ran the original (or failed to): the only
        // runtime here fed strings.
        let mut ort_ran = false;
        // A runtime refusing the original as invalid: the error when no
        // other backend runs it either.
        let mut invalid: Option<VerifyError> = None;
        // tract cannot be the reference of a model it computes wrong.
        let wrong_in_tract = crate::tract_limits::model_wrong_in_tract(original);
        for (ki, &kind) in kinds.iter().enumerate() {
            if let (true, Some(why)) = (kind.is_tract(), &wrong_in_tract) {
                errors.push(format!("tract cannot be the reference: {why}"));
                any_backend = true;
                continue;
            }
            let chosen = match ChosenBackend::build(kind, &policy.options) {
                Ok(c) => c,
                Err(e) if mapped_note.is_some() => {
                    return Err(VerifyError::new(
                        ErrorKind::CannotVerify,
                        format!(
                            "cannot verify: the model's weights do not fit in memory, and ONNX Runtime, which runs them memory-mapped, is not available ({}); install it (pip install onnxruntime) or run with --no-verify",
                            e.message
                        ),
                    ));
                }
                Err(e) if policy.explicit.is_some() => return Err(e),
                Err(e) => {
                    errors.push(e.message);
                    continue;
                }
            };
            any_backend = true;
            ort_ran |= kind == BackendKind::Ort;
            let mut last = String::new();
            for (ti, t) in tries.iter().enumerate() {
                let mut fallback_note = None;
                let mut timed_out = false;
                match Self::run_original(
                    &chosen,
                    run_bytes,
                    &dir,
                    inputs,
                    &t.shapes,
                    &mut fallback_note,
                    &mut timed_out,
                ) {
                    Ok((loaded, tensors, expected)) => {
                        let mut notes = value_notes.clone();
                        notes.extend(mapped_note.iter().cloned());
                        notes.extend(fallback_note);
                        if ki > 0 && mapped_note.is_none() {
                            notes.push(format!(
                                "verified in {}: {}",
                                chosen.backend.name(),
                                errors.join("; ")
                            ));
                        }
                        if ti > 0 {
                            notes.push(format!(
                                "verification sizes: {} (the first choice failed: {last})",
                                t.label
                            ));
                        }
                        if !watched.is_empty() {
                            notes.push(format!(
                                "verification also compares what the model's data-dependent selections (NonMaxSuppression, TopK, NonZero, Compress) read: {}; the outputs hold only what they keep, which on generated inputs may be nothing",
                                watched.join(", ")
                            ));
                        }
                        return Ok(Verifier {
                            inputs_description: crate::inputs::describe_with_strings(
                                &tensors,
                                &string_inputs,
                            ),
                            shapes: t.shapes.clone(),
                            dir,
                            resolution: loaded.resolution().clone(),
                            // Timing runs the original as the user will: the
                            // reference, loaded without graph optimization,
                            // is not that model.
                            // The model run here has the watched tensors
                            // as outputs too: timing loads the original.
                            original: (policy.keep_original
                                && chosen.reference.is_none()
                                && watched.is_empty())
                            .then_some(loaded),
                            original_bytes: bytes,
                            range_scales: range_scales(original),
                            label_outputs: crate::evaluate::label_outputs(original),
                            inputs: tensors,
                            expected,
                            chosen,
                            policy,
                            notes,
                            warnings: Vec::new(),
                            watched,
                        });
                    }
                    Err(e) if e.kind == ErrorKind::Usage => return Err(e),
                    Err(e) if e.kind == ErrorKind::Load => {
                        // Other sizes load the same model: no use trying them.
                        last = e.message.clone();
                        invalid.get_or_insert(e);
                        break;
                    }
                    Err(e) => {
                        last = e.message;
                        // A load given up at its deadline leaves its thread
                        // working (a core, and memory that grew to 6 GB on a
                        // fuzzed PP-OCR cls): with another backend to hand,
                        // go to it rather than start the same analysis at
                        // other sizes.
                        if timed_out
                            && kinds[ki + 1..]
                                .iter()
                                .any(|&k| ChosenBackend::build(k, &policy.options).is_ok())
                        {
                            break;
                        }
                    }
                }
            }
            errors.push(format!(
                "cannot run the original model in {}: {last}",
                chosen.backend.name()
            ));
        }
        if let Some(e) = invalid {
            return Err(e);
        }
        let kind = if any_backend {
            ErrorKind::CannotVerify
        } else {
            ErrorKind::Unavailable
        };
        // A string input is no matter of sizes: only ONNX Runtime is fed one.
        let strings: Vec<String> = string_inputs.iter().map(|n| format!("`{n}`")).collect();
        if !strings.is_empty() && !ort_ran {
            return Err(VerifyError::new(
                kind,
                format!(
                    "cannot verify: the model's input{} {} {} strings, which only ONNX Runtime is fed here and it is not available: install it (pip install onnxruntime), or pass --no-verify to write the model unverified",
                    if strings.len() > 1 { "s" } else { "" },
                    strings.join(", "),
                    if strings.len() > 1 { "hold" } else { "holds" },
                ),
            ));
        }
        let mut hint = match shapes::suggestion(original, &inputs.shapes) {
            Some(s) => format!("; fix the input sizes the model expects with {s}"),
            None => String::new(),
        };
        // An input that picks a branch may have picked one that cannot run
        // at these sizes: name it, and the way to give its value.
        let deciders = crate::value_hints::branch_inputs(original);
        if inputs.file.is_none() && !deciders.is_empty() {
            let names: Vec<String> = deciders
                .iter()
                .map(|(i, at)| {
                    let v = inputs
                        .values
                        .get(i)
                        .map_or("a random value".to_string(), |v| v.to_string());
                    format!("`{i}` (decides If `{at}`; it was {v})")
                })
                .collect();
            hint.push_str(&format!(
                "; the input{} {} choose{} what the model computes: give real values with --inputs FILE.npz (one array per input)",
                if names.len() > 1 { "s" } else { "" },
                names.join(", "),
                if names.len() > 1 { "" } else { "s" },
            ));
        }
        Err(VerifyError::new(
            kind,
            format!(
                "cannot verify: {}{hint} (or install onnxruntime, pass --backend, or --no-verify)",
                errors.join("; and ")
            ),
        ))
    }

    #[allow(clippy::type_complexity)]
    fn run_original(
        chosen: &ChosenBackend,
        bytes: &[u8],
        dir: &std::path::Path,
        inputs: &Inputs,
        shapes: &InputShapes,
        notes: &mut Option<String>,
        timed_out: &mut bool,
    ) -> Result<(Box<dyn LoadedModel>, Vec<HostTensor>, Vec<HostTensor>)> {
        let loaded = chosen
            .reference_backend()
            .load(bytes, Some(dir), shapes)
            .map_err(|e| match e {
                e @ infopt_runtime::RuntimeError::LoadTimedOut { .. } => {
                    *timed_out = true;
                    VerifyError::runtime(e, ErrorKind::CannotVerify)
                }
                // The original itself, refused by the runtime's own check
                // (sizes play no part at load): the user's model is wrong.
                infopt_runtime::RuntimeError::InvalidModel { backend, message } => {
                    VerifyError::new(
                        ErrorKind::Load,
                        format!("the model is invalid: {message} ({backend}'s check of the model)"),
                    )
                }
                e => VerifyError::runtime(e, ErrorKind::CannotVerify),
            })?;
        if inputs.file.is_none() {
            crate::inputs::check_generated_size(loaded.as_ref())
                .map_err(|m| VerifyError::new(ErrorKind::CannotVerify, m))?;
        }
        let mut with_shapes = inputs.clone();
        with_shapes.shapes = shapes.clone();
        let tensors = with_shapes
            .for_model(loaded.as_ref())
            .map_err(VerifyError::usage)?;
        let first = match loaded.run(&tensors) {
            Ok(expected) => return Ok((loaded, tensors, expected)),
            Err(e) => VerifyError::runtime(e, ErrorKind::CannotVerify),
        };
        // Seeded values the model cannot take (an index or axis out of
        // range, a zero divisor, a negative scale): plainer ones, when the
        // inputs are ours to choose.
        if inputs.file.is_none()
            && let Some((fb, plain, expected)) =
                crate::inputs::Fallback::first_that_runs(loaded.as_ref(), &tensors)
        {
            *notes = Some(format!(
                "verification inputs: {} (the seeded ones made the original fail: {})",
                fb.describe(),
                first.message
            ));
            return Ok((loaded, plain, expected));
        }
        Err(first)
    }

    pub fn backend_name(&self) -> &str {
        self.chosen.backend.name()
    }

    pub fn info(&self) -> &BackendInfo {
        &self.chosen.info
    }

    /// `loaded` (a candidate loaded by [`Verifier::load`]) as timing should
    /// run it: loaded again without the watched tensors as outputs when
    /// there are any, so that it is timed as the original is.
    pub fn for_timing(
        &self,
        loaded: Box<dyn LoadedModel>,
        model: &Model,
    ) -> Result<Box<dyn LoadedModel>> {
        if self.watched.is_empty() {
            return Ok(loaded);
        }
        drop(loaded);
        self.load_exposing(model, &[])
    }

    /// Loads a candidate model in the verifier's backend (with the watched
    /// tensors as outputs too).
    pub fn load(&self, model: &Model) -> Result<Box<dyn LoadedModel>> {
        self.load_exposing(model, &self.watched)
    }

    /// [`Verifier::load`] with the tensors `watched` as outputs too.
    fn load_exposing(&self, model: &Model, watched: &[String]) -> Result<Box<dyn LoadedModel>> {
        if self.policy.options.map_weights {
            // Tensors the passes rewrote are no longer in the source files:
            // they travel inline, on the heap.
            let stats = infopt_ir::stats::GraphStats::of_model(model);
            let rewritten = stats
                .parameter_bytes
                .saturating_sub(stats.external_parameter_bytes);
            if let Some(why) = crate::memory::candidate_refusal(rewritten, stats.parameter_bytes) {
                return Err(VerifyError::new(ErrorKind::CannotVerify, why));
            }
        }
        let exposed;
        let model = match watched.is_empty() {
            true => model,
            false => {
                exposed = crate::selection::exposing(model, watched);
                &exposed
            }
        };
        let bytes = model
            .to_bytes_referencing_sources()
            .map_err(|e| VerifyError::new(ErrorKind::Load, e))?;
        let loaded = self
            .chosen
            .backend
            .load(&bytes, Some(&self.dir), &self.shapes)
            .map_err(|e| {
                VerifyError::new(
                    ErrorKind::Mismatch,
                    format!(
                        "the optimized model cannot be loaded in {}: {e}",
                        self.backend_name()
                    ),
                )
            })?;
        Ok(if self.policy.half_io {
            Box::new(HalfIo::new(loaded))
        } else {
            loaded
        })
    }

    /// Runs a loaded candidate and judges its outputs.
    pub fn check(&self, candidate: &dyn LoadedModel) -> Result<(Vec<OutputAgreement>, bool)> {
        let actual = candidate.run(&self.inputs).map_err(|e| {
            VerifyError::new(
                ErrorKind::Mismatch,
                format!("the optimized model fails to run: {e}"),
            )
        })?;
        let tol = self.policy.criterion.elementwise(self.policy.tolerance);
        // A watched tensor the candidate no longer holds by that name (a
        // rewrite replaced it) is not compared; the outputs always are.
        let held = |t: &HostTensor| {
            let name = t.name().unwrap_or("");
            !self.watched.iter().any(|w| w == name) || actual.iter().any(|a| a.name() == Some(name))
        };
        let kept: Vec<HostTensor>;
        let expected = match self.expected.iter().all(held) {
            true => &self.expected,
            false => {
                kept = self.expected.iter().filter(|t| held(t)).cloned().collect();
                &kept
            }
        };
        let actual = self.watched_as_expected(actual, expected);
        let mut outputs = compare::compare_outputs(&actual, expected, tol);
        for o in &mut outputs {
            if self.label_outputs.contains(&o.name) {
                self.policy.criterion.judge_labels(o);
                continue;
            }
            let range = self
                .range_scales
                .iter()
                .find(|(n, _)| *n == o.name)
                .map(|(_, r)| *r)
                .or_else(|| self.watched_range(&o.name, expected));
            match range.as_ref() {
                Some(r) => {
                    let reference_max = o.scale;
                    o.scale = o.scale.max(*r);
                    self.policy.criterion.judge_bounded(o, reference_max, *r);
                }
                None => self.policy.criterion.judge(o),
            }
        }
        let passed = compare::all_within_tolerance(&outputs);
        Ok((outputs, passed))
    }

    /// A note naming the watched tensors a candidate no longer computes by
    /// name (a rewrite replaced them, or folded them to a constant): they
    /// were not compared.
    fn say_unwatched(&mut self, compared: &[OutputAgreement]) {
        let missing: Vec<&str> = self
            .watched
            .iter()
            .filter(|w| !compared.iter().any(|o| &o.name == *w))
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            return;
        }
        let note = format!(
            "verification did not compare {}: read by a data-dependent selection in the original, but the optimized model computes no tensor of that name (a rewrite replaced it, or folded it to a constant); the outputs were compared",
            missing.join(", ")
        );
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    /// The candidate's outputs with each watched tensor in the reference's
    /// float type: a precision pass leaves a tensor before a selection in
    /// float16 (the Cast back to float32 is the selection's), and its values
    /// are what is compared, not its type. The model's outputs keep theirs.
    fn watched_as_expected(
        &self,
        actual: Vec<HostTensor>,
        expected: &[HostTensor],
    ) -> Vec<HostTensor> {
        if self.watched.is_empty() {
            return actual;
        }
        actual
            .into_iter()
            .map(|a| {
                let name = a.name().unwrap_or("").to_string();
                let reference = expected.iter().find(|e| e.name() == Some(name.as_str()));
                match reference {
                    Some(e)
                        if self.watched.contains(&name)
                            && e.dtype() == infopt_runtime::DType::F32
                            && a.dtype().is_float()
                            && a.dtype() != e.dtype() =>
                    {
                        let values: Vec<f32> = a.to_f64_vec().iter().map(|&x| x as f32).collect();
                        HostTensor::from_vec(a.shape().to_vec(), values)
                            .map(|t| t.named(name))
                            .unwrap_or(a)
                    }
                    _ => a,
                }
            })
            .collect()
    }

    /// The range a watched tensor is judged against, as a bounded output's
    /// (see [`Criterion::judge_bounded`]): 1 when the reference's values all
    /// lie in [0, 1] (the scores a NonMaxSuppression thresholds, about 1e-3
    /// on generated inputs, whose float rounding is then 1e-4 of their own
    /// largest value); None otherwise and for the model's outputs.
    fn watched_range(&self, name: &str, expected: &[HostTensor]) -> Option<f64> {
        if !self.watched.iter().any(|w| w == name) {
            return None;
        }
        let e = expected.iter().find(|e| e.name() == Some(name))?;
        let values = e.to_f64_vec();
        (e.dtype().is_float() && values.iter().all(|v| (0.0..=1.0).contains(v))).then_some(1.0)
    }

    /// A candidate that disagrees with the reference when ONNX Runtime runs
    /// it at the user's level may be judging ORT's optimizer, not ours. The
    /// original at that level is run against the reference (itself at
    /// `disable`); when it disagrees too:
    /// - if the candidate at `disable` agrees with the reference, the
    ///   rewrite is exact and ORT's optimizer changes this model's results
    ///   (before and after): the outputs at `disable` are what is judged;
    /// - else if every output of the candidate is within
    ///   [`RUNTIME_NOISE_FACTOR`] times the original's own distance, both
    ///   rounding-sized (at most [`RUNTIME_NOISE_MAX_SCALED`] of the
    ///   output's scale, the cosine criterion kept, no shape or NaN issue), the rewrite moves the outputs no more than ORT's
    ///   optimizer moves the original's (float rounding both: Mask R-CNN's
    ///   masks move by 6.6e-4 under ORT's level-all fusions, by 5.7e-4 under
    ///   Conv+BatchNorm folding): accepted, and said.
    ///
    /// Returns the outputs judged and the warning; `None` otherwise.
    fn ort_optimizer_excuse(
        &self,
        candidate: &Model,
        judged: &[OutputAgreement],
    ) -> Option<(Vec<OutputAgreement>, String)> {
        let reference = self.chosen.reference.as_ref()?;
        let level = self.chosen.info.opt_level.clone()?;
        let original = self
            .chosen
            .backend
            .load(&self.original_bytes, Some(&self.dir), &self.shapes)
            .ok()?;
        let (original_outputs, original_agrees) = self.check(original.as_ref()).ok()?;
        if original_agrees {
            return None;
        }
        let bytes = candidate.to_bytes_referencing_sources().ok()?;
        let at_disable = reference.load(&bytes, Some(&self.dir), &self.shapes).ok()?;
        let (outputs, agrees) = self.check(at_disable.as_ref()).ok()?;
        if agrees {
            return Some((
                outputs,
                format!(
                    "ONNX Runtime's graph optimizations (opt {level}) change this model's results: the original at opt {level} differs from itself at opt disable by max abs {:.3e}, and so does the optimized model; the optimized model agrees with the original at opt disable, which is what was judged",
                    worst_abs(&original_outputs)
                ),
            ));
        }
        // Only rounding-sized distances excuse anything: the original's own
        // must be small against its scale and keep the direction (a fusion
        // that changes what the original computes, such as ORT's LayerNorm
        // fusion of a swapped Pow, would otherwise cover a wrong rewrite).
        let rounding = |a: &OutputAgreement| {
            a.issue.is_none()
                && a.nan_mismatches == 0
                && a.cosine >= crate::criterion::DEFAULT_MIN_COSINE
                && a.max_abs <= RUNTIME_NOISE_MAX_SCALED * a.scale.max(f64::MIN_POSITIVE)
        };
        let within_noise = judged.len() == original_outputs.len()
            && judged.iter().zip(&original_outputs).all(|(c, o)| {
                c.within_tolerance
                    || (rounding(o) && rounding(c) && c.max_abs <= RUNTIME_NOISE_FACTOR * o.max_abs)
            });
        within_noise.then(|| {
            let mut accepted = judged.to_vec();
            for o in &mut accepted {
                o.within_tolerance = true;
            }
            (
                accepted,
                format!(
                    "ONNX Runtime's own graph optimizations (opt {level}) move this model's outputs by up to max abs {:.3e} (the original at opt {level} against itself at opt disable); the optimized model is within {RUNTIME_NOISE_FACTOR} times that on every output (max abs {:.3e}), float rounding of the same order, and was accepted",
                    worst_abs(&original_outputs),
                    worst_abs(judged)
                ),
            )
        })
    }

    pub fn verification(&self, outputs: Vec<OutputAgreement>, passed: bool) -> Verification {
        let tol = self.policy.criterion.elementwise(self.policy.tolerance);
        Verification {
            backend: self.chosen.info.clone(),
            inputs: self.inputs_description.clone(),
            criterion: self.policy.criterion,
            rtol: tol.rtol,
            atol: tol.atol,
            input_shapes: self.resolution.input_shapes.clone(),
            defaulted_dims: self.resolution.defaulted.clone(),
            outputs,
            passed,
        }
    }

    /// The same verifier in ONNX Runtime (same sizes, inputs regenerated
    /// from the same seed or read from the same arrays).
    fn in_ort(&self, inputs: &Inputs, original: &Model) -> Result<Verifier> {
        let mut policy = self.policy.clone();
        policy.explicit = Some(BackendKind::Ort);
        let mut fixed = inputs.clone();
        fixed.shapes = self.shapes.clone();
        Verifier::new(original, self.dir.clone(), &fixed, policy)
    }

    /// Checks a candidate with the whole policy: the candidate is loaded in
    /// this backend, or in ONNX Runtime when tract cannot load it; a
    /// difference only tract sees is put to ONNX Runtime, which decides.
    /// Returns the verdict and the candidate loaded where it was judged;
    /// the verifier may have moved to ONNX Runtime.
    pub fn verify_candidate(
        &mut self,
        candidate: &Model,
        original: &Model,
        inputs: &Inputs,
    ) -> Result<(Verification, Box<dyn LoadedModel>)> {
        let fallback = self.policy.explicit.is_none() && self.chosen.kind.is_tract();
        let loaded = match self.load(candidate) {
            Ok(l) => l,
            Err(e) if fallback => {
                // ONNX Runtime missing: the candidate (contrib ops, the
                // opset-23 Attention) needs it; that is a missing runtime
                // (exit 8), not a mismatch.
                if let Err(o) = ChosenBackend::build(BackendKind::Ort, &self.policy.options) {
                    return Err(VerifyError::new(
                        ErrorKind::Unavailable,
                        needs_ort_message(candidate, &e, &o),
                    ));
                }
                // ONNX Runtime cannot run the original either: nothing was
                // compared, so this is "cannot verify" (exit 7), not a
                // mismatch (found by the command-line fuzz with contrib ops).
                let ort = self.in_ort(inputs, original).map_err(|o| {
                    let kind = match o.kind {
                        ErrorKind::Usage | ErrorKind::Unavailable | ErrorKind::Internal => o.kind,
                        _ => ErrorKind::CannotVerify,
                    };
                    VerifyError::new(kind, format!("{}; and {}", e.message, o))
                })?;
                let notes = std::mem::take(&mut self.notes);
                *self = ort;
                self.notes = notes;
                self.notes
                    .push(format!("verified in ONNX Runtime: {}", e.message));
                self.load(candidate)?
            }
            Err(e) => return Err(e),
        };
        let (outputs, passed) = self.check(loaded.as_ref())?;
        // Only for a candidate that fails: the excuse runs the original again.
        let excuse = (!passed)
            .then(|| self.ort_optimizer_excuse(candidate, &outputs))
            .flatten();
        let (outputs, passed) = match excuse {
            Some((outputs, warning)) => {
                self.warnings.push(warning);
                (outputs, true)
            }
            None => (outputs, passed),
        };
        let verification = self.verification(outputs, passed);
        self.say_unwatched(&verification.outputs);
        if passed || !fallback {
            return Ok((verification, loaded));
        }
        // A disagreement seen only by tract may be tract's own error on one
        // of the two graphs: ONNX Runtime, where available, decides.
        if let Ok(ort) = self.in_ort(inputs, original)
            && let Ok(second) = ort.load(candidate)
            && let Ok((ort_outputs, true)) = ort.check(second.as_ref())
        {
            let worst = worst_abs(&verification.outputs);
            let mut warnings = std::mem::take(&mut self.warnings);
            warnings.push(format!(
                "tract found a difference (max abs {worst:.3e}) that ONNX Runtime does not: the output agrees in ONNX Runtime, which is trusted here"
            ));
            let notes = std::mem::take(&mut self.notes);
            *self = ort;
            self.warnings = warnings;
            self.notes = notes;
            let v = self.verification(ort_outputs, true);
            return Ok((v, second));
        }
        Ok((verification, loaded))
    }

    /// The original loaded in this backend, for timing: the one kept since
    /// [`Verifier::new`] (`keep_original`), else loaded again.
    pub fn take_original(&mut self) -> Result<Box<dyn LoadedModel>> {
        match self.original.take() {
            Some(o) => Ok(o),
            None => self
                .chosen
                .backend
                .load(&self.original_bytes, Some(&self.dir), &self.shapes)
                .map_err(|e| VerifyError::runtime(e, ErrorKind::Load)),
        }
    }

    /// Times the original against `candidate`, interleaved.
    pub fn bench(
        &mut self,
        candidate: Box<dyn LoadedModel>,
        warmup: usize,
        runs: usize,
    ) -> Result<LatencyComparison> {
        let original = self.take_original()?;
        let models = [
            Timed {
                label: "original".into(),
                model: original,
                inputs: self.inputs.clone(),
            },
            Timed {
                label: "optimized".into(),
                model: candidate,
                inputs: self.inputs.clone(),
            },
        ];
        let lat = time_interleaved(
            &models,
            warmup,
            runs,
            self.chosen.info.transfer,
            &mut |_| {},
        )?;
        let (before, after) = (lat[0].clone(), lat[1].clone());
        let speedup = if after.median_ms > 0.0 {
            before.median_ms / after.median_ms
        } else {
            0.0
        };
        Ok(LatencyComparison {
            backend: self.chosen.info.clone(),
            before,
            after,
            speedup,
        })
    }
}

/// Why verification cannot run `model` at `shapes`: an activation past
/// half of `available` bytes, or more arithmetic than the work budget for
/// sizes it chose or for sizes fixed (`fixed`: by the model's declarations,
/// the caller's `--input-shape`, or the input arrays).
fn refusal_at(
    model: &Model,
    shapes: &InputShapes,
    available: Option<u64>,
    fixed: bool,
) -> Option<String> {
    let inferred = crate::activations::infer_at(model, shapes)?;
    let budget = crate::work::Budget::for_sizes(fixed);
    available
        .and_then(|bytes| crate::activations::refusal_in(&inferred, bytes))
        .or_else(|| crate::work::refusal_in(&inferred, budget))
}

/// Graph outputs whose values lie in a range fixed by the op that makes them
/// (Sigmoid, HardSigmoid, Softmax: [0, 1]; Tanh, Softsign: [-1, 1]), seen
/// through ops that only move values, with that range's magnitude. Such an
/// output is judged against at least that scale: a text detector fed noise
/// outputs probabilities of about 1e-6, where float rounding of its logits
/// is 5% of the largest value but 1e-7 of the range the output lives in.
pub fn range_scales(model: &Model) -> Vec<(String, f64)> {
    let g = &model.graph;
    let mut out = Vec::new();
    for io in &g.outputs {
        let mut v = io.value;
        for _ in 0..8 {
            let Some(p) = g.producer(v) else { break };
            if !p.domain().is_empty() {
                break;
            }
            match p.op_type.as_str() {
                "Sigmoid" | "HardSigmoid" | "Softmax" | "Tanh" | "Softsign" => {
                    out.push((g.value(io.value).name.clone(), 1.0));
                    break;
                }
                "Identity" | "Reshape" | "Transpose" | "Squeeze" | "Unsqueeze" | "Flatten" => {
                    match p.inputs.first().copied().flatten() {
                        Some(i) => v = i,
                        None => break,
                    }
                }
                _ => break,
            }
        }
    }
    out
}

/// Largest absolute difference over outputs (infinite when an output is missing or misshaped).
/// How far past the original's own distance under ONNX Runtime's
/// optimizations a candidate may be and still be float rounding (see
/// `Verifier::ort_optimizer_excuse`).
pub const RUNTIME_NOISE_FACTOR: f64 = 2.0;

/// The largest distance, relative to an output's scale, that counts as
/// float rounding for that excuse (Mask R-CNN's masks: 4.9e-4).
pub const RUNTIME_NOISE_MAX_SCALED: f64 = 1e-2;

pub fn worst_abs(outputs: &[OutputAgreement]) -> f64 {
    outputs
        .iter()
        .map(|o| {
            if o.issue.is_some() {
                f64::INFINITY
            } else {
                o.max_abs
            }
        })
        .fold(0.0, f64::max)
}

/// Why a candidate tract cannot load needs ONNX Runtime, naming its
/// `com.microsoft` ops when it has some.
fn needs_ort_message(candidate: &Model, tract: &VerifyError, ort: &VerifyError) -> String {
    let mut contrib: Vec<String> = candidate
        .graph
        .nodes()
        .filter(|(_, n)| n.domain() == "com.microsoft")
        .map(|(_, n)| n.op_type.clone())
        .collect();
    contrib.sort();
    contrib.dedup();
    let what = if contrib.is_empty() {
        format!(
            "the optimized model does not run in tract ({})",
            tract.message
        )
    } else {
        format!(
            "the optimized model has ONNX Runtime contrib ops (com.microsoft {}) that only ONNX Runtime runs",
            contrib.join(", ")
        )
    };
    // The install line names the pip extra: a wheel install (`pip install infopt
    // tensorrt-rtx-cu13-libs`) has no ONNX Runtime, and tract cannot load every graph
    // infopt writes (a float16 Gemm, say).
    let why = ort.message.split("; ").next().unwrap_or(&ort.message);
    format!(
        "cannot verify: {what}, and ONNX Runtime is not available ({why}); {ORT_INSTALL}, or pass --no-verify"
    )
}

/// How to get ONNX Runtime for verification, in messages.
pub const ORT_INSTALL: &str = "install it with `pip install 'infopt[ort]'` (for engines: `pip install 'infopt[ort]' tensorrt-rtx-cu13-libs`), `pip install onnxruntime` in infopt's environment, or set ORT_DYLIB_PATH to libonnxruntime.so";
