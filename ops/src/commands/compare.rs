//! `infopt compare A.onnx B.onnx`: run both models on the same inputs and compare their
//! outputs (A is the reference); with `--intermediate`, also every tensor both models
//! compute under the same name, naming the first (in A's topological order) that
//! diverges.

use std::path::{Path, PathBuf};

use infopt_runtime::compare::{self, OutputAgreement, Tolerance};
use infopt_runtime::{Backend, DefaultedDim, HostTensor, LoadedModel};
use serde::Serialize;

use infopt_verify::intermediates::{self, IntermediateReport};
use infopt_verify::{BackendInfo, BackendKind};

use crate::backend_args::BackendSettings;
use crate::ci::{self, Check, CiSummary};
use crate::error::{ErrorKind, OpsError, OpsResult};
use crate::inputs_arg::{self, InputSettings, InputSource, Inputs};
use crate::models::{self, runtime_error};
use crate::outcome::{CommandReport, Outcome};
use crate::report::summaries;

/// `compare`'s options (see `OptimizeOptions` for how they are built).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompareOptions {
    /// The reference model.
    pub a: PathBuf,
    /// The model under test.
    pub b: PathBuf,
    pub backend: BackendSettings,
    pub inputs: InputSettings,
    /// Relative tolerance: an element agrees when |b - a| <= atol + rtol * |a|
    /// (same default as `optimize`; widened to one ulp for float16/bfloat16 outputs).
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
    /// Also compare every tensor computed under the same name in both models, and name
    /// the first that diverges (runs in ort unless --backend says otherwise).
    pub intermediate: bool,
    pub gates: crate::gates::GateSettings,
    /// Untimed runs per model before a latency gate's timed runs.
    pub warmup: usize,
    /// Timed runs per model for a latency gate (at least 30).
    pub runs: usize,
}

/// Relative tolerance (the same as `optimize`'s pipeline default).
pub const DEFAULT_RTOL: f64 = 1e-4;
/// Absolute tolerance.
pub const DEFAULT_ATOL: f64 = 1e-5;
/// Untimed runs per model before a latency gate's timed runs.
pub const DEFAULT_WARMUP: usize = 5;
/// Timed runs per model for a latency gate.
pub const DEFAULT_RUNS: usize = 30;

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            a: PathBuf::new(),
            b: PathBuf::new(),
            backend: Default::default(),
            inputs: Default::default(),
            rtol: DEFAULT_RTOL,
            atol: DEFAULT_ATOL,
            intermediate: false,
            gates: Default::default(),
            warmup: DEFAULT_WARMUP,
            runs: DEFAULT_RUNS,
        }
    }
}

/// Version of the JSON layout below; bumped on incompatible changes.
pub const COMPARE_SCHEMA_VERSION: u32 = 1;

#[derive(Serialize, Debug)]
pub struct CompareReport {
    pub schema_version: u32,
    pub a: String,
    pub b: String,
    pub backend: BackendInfo,
    pub input_source: InputSource,
    pub inputs: String,
    pub input_shapes: Vec<(String, Vec<usize>)>,
    pub defaulted_dims: Vec<DefaultedDim>,
    pub tolerance: Tolerance,
    /// Per output of A (then outputs only B has), B against A.
    pub outputs: Vec<OutputAgreement>,
    /// Every output agrees within tolerance.
    pub passed: bool,
    pub intermediate: Option<IntermediateReport>,
    /// Release gates, when any were set; then they (not the tolerance) decide the exit code
    /// of accuracy.
    pub gates: Option<crate::gates::GateReport>,
}

/// Inputs for B: A's tensor of the same name where B's input has the same shape
/// (converted to B's dtype, e.g. f32 → f16), else generated or read for B.
fn inputs_for_b(
    a_inputs: &[HostTensor],
    b: &dyn LoadedModel,
    inputs: &Inputs,
) -> Result<Vec<HostTensor>, String> {
    let own = inputs.for_model(b)?;
    Ok(own
        .into_iter()
        .map(|t| {
            a_inputs
                .iter()
                .find(|x| x.name() == t.name() && x.shape() == t.shape())
                .and_then(|x| infopt_verify::inputs::convert(x, t.dtype()).ok())
                .unwrap_or(t)
        })
        .collect())
}

fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.is_finite() {
        format!("{v:.3e}")
    } else {
        v.to_string()
    }
}

fn issue_text(a: &OutputAgreement) -> String {
    use infopt_runtime::compare::AgreementIssue as I;
    match &a.issue {
        None => String::new(),
        Some(I::MissingActual) => " (missing from B)".into(),
        Some(I::MissingExpected) => " (only in B)".into(),
        Some(I::ShapeMismatch { actual, expected }) => {
            format!(" (shape {actual:?} in B, {expected:?} in A)")
        }
        Some(I::DTypeMismatch { actual, expected }) => {
            format!(" (dtype {actual} in B, {expected} in A)")
        }
    }
}

fn agreement_row(a: &OutputAgreement) -> String {
    format!(
        "  {:<28} {:>10} {:>10} {:>9.6} {:>12}  {}{}",
        a.name,
        fmt_num(a.max_abs),
        fmt_num(a.max_rel),
        a.cosine,
        format!("{}/{}", a.mismatches, a.elements),
        if a.within_tolerance { "ok" } else { "MISMATCH" },
        issue_text(a)
    )
}

pub fn render_text(r: &CompareReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "A (ref)     {}", r.a);
    let _ = writeln!(s, "B           {}", r.b);
    let _ = writeln!(s, "backend     {}", r.backend.describe());
    let _ = writeln!(
        s,
        "inputs      {} ({})",
        r.inputs,
        r.input_source.describe()
    );
    for d in &r.defaulted_dims {
        let _ = writeln!(
            s,
            "note        {}",
            crate::backend_args::defaulted_dim_note(d)
        );
    }
    let _ = writeln!(
        s,
        "tolerance   |b - a| <= {} + {} * |a|",
        r.tolerance.atol, r.tolerance.rtol
    );
    let _ = writeln!(
        s,
        "  {:<28} {:>10} {:>10} {:>9} {:>12}",
        "output", "max abs", "max rel", "cosine", "mismatches"
    );
    for a in &r.outputs {
        let _ = writeln!(s, "{}", agreement_row(a));
    }
    if let Some(i) = &r.intermediate {
        let _ = writeln!(
            s,
            "intermediate {} tensors in both models, {} diverge",
            i.compared, i.diverging
        );
        if !i.skipped.is_empty() {
            let _ = writeln!(s, "  skipped: {}", i.skipped.join(", "));
        }
        match &i.first_divergence {
            Some(f) => {
                let _ = writeln!(
                    s,
                    "first divergence: `{}` (output of {} node `{}`)",
                    f.name, f.op_type, f.node
                );
                let _ = writeln!(s, "{}", agreement_row(&f.agreement));
            }
            None => {
                let _ = writeln!(s, "no intermediate tensor diverges");
            }
        }
    }
    let failed = r.outputs.iter().filter(|a| !a.within_tolerance).count();
    if r.passed {
        let _ = writeln!(s, "result      B matches A ({} outputs)", r.outputs.len());
    } else {
        let _ = writeln!(
            s,
            "result      B differs from A: {failed} of {} outputs outside tolerance",
            r.outputs.len()
        );
    }
    s
}

struct Pair<'a> {
    backend: &'a dyn Backend,
    inputs: &'a Inputs,
    a_inputs: &'a [HostTensor],
    b_inputs: &'a [HostTensor],
}

/// Runs both models with the shared intermediates as extra outputs and compares them.
fn compare_intermediates(
    pair: &Pair<'_>,
    a_path: &Path,
    b_path: &Path,
    tol: Tolerance,
) -> OpsResult<IntermediateReport> {
    let a = crate::models::load_model(a_path)?;
    let b = crate::models::load_model(b_path)?;
    Ok(intermediates::compare(
        pair.backend,
        &pair.inputs.shapes,
        intermediates::Side {
            model: &a,
            dir: dir_of(a_path),
            inputs: pair.a_inputs,
        },
        intermediates::Side {
            model: &b,
            dir: dir_of(b_path),
            inputs: pair.b_inputs,
        },
        tol,
    )?)
}

fn dir_of(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `infopt compare`: the report (table or JSON) and `--report` files, then
/// The CI summary of a comparison (`--report FILE.md`, `.xml`).
pub fn ci_summary(r: &CompareReport) -> CiSummary<'_> {
    let checks = if r.gates.as_ref().is_some_and(|g| {
        g.results
            .iter()
            .any(|x| x.kind == crate::gates::GateKind::Accuracy)
    }) {
        Vec::new()
    } else {
        vec![Check {
            name: "agreement".into(),
            passed: r.passed,
            message: format!(
                "{} outputs of B against A (rtol {:e}, atol {:e}){}",
                r.outputs.len(),
                r.tolerance.rtol,
                r.tolerance.atol,
                if r.passed { "" } else { ": outside tolerance" }
            ),
        }]
    };
    CiSummary {
        title: "infopt compare".into(),
        subject: format!("`{}` (A) vs `{}` (B)", r.a, r.b),
        facts: Vec::new(),
        checks,
        gates: r.gates.as_ref(),
        ops: Vec::new(),
        agreement: &r.outputs,
        latency: summaries::latency_line(r.gates.as_ref(), None),
        details: None,
    }
}

impl CommandReport for CompareReport {
    fn command(&self) -> &'static str {
        "compare"
    }
    fn text(&self) -> String {
        let mut s = render_text(self);
        if let Some(g) = &self.gates {
            s.push_str(&ci::render_gates_text(g));
        }
        s
    }
    fn markdown(&self) -> String {
        ci::render_markdown(&ci_summary(self))
    }
    fn summary(&self) -> CiSummary<'_> {
        ci_summary(self)
    }
}

/// Runs both models and compares them, without printing: the report, with
/// a mismatch or a failed gate beside it.
pub fn execute(args: &CompareOptions) -> OpsResult<Outcome<CompareReport>> {
    if !(args.rtol >= 0.0 && args.atol >= 0.0) {
        return Err(OpsError::usage("--rtol and --atol must be non-negative"));
    }
    let tol = Tolerance {
        atol: args.atol,
        rtol: args.rtol,
    };
    let inputs = args.inputs.resolve().map_err(OpsError::usage)?;
    let gates = crate::gates::Gates::resolve(None, &args.gates)?;
    args.backend.check_io_binding(
        gates.latency_threshold().is_some(),
        "compare times only for a max_latency_ratio gate (--gate max_latency_ratio=1.05)",
    )?;
    let default_backend = if args.intermediate {
        BackendKind::Ort
    } else {
        BackendKind::Tract
    };
    let chosen = args.backend.build(default_backend)?;
    let (backend, info) = (chosen.backend, chosen.info);
    let a = models::load(backend.as_ref(), &args.a, &inputs)?;
    let b = models::load(backend.as_ref(), &args.b, &inputs)?;
    let b_inputs = inputs_for_b(&a.inputs, b.model.as_ref(), &inputs)
        .map_err(|m| OpsError::usage(format!("{}: {m}", args.b.display())))?;
    let run = |m: &dyn LoadedModel, x: &[HostTensor], p: &Path| {
        m.run(x)
            .map_err(|e| runtime_error(e, ErrorKind::Load))
            .map_err(|mut e| {
                e.message = format!("{}: {}", p.display(), e.message);
                e
            })
    };
    let ya = run(a.model.as_ref(), &a.inputs, &args.a)?;
    let yb = run(b.model.as_ref(), &b_inputs, &args.b)?;
    let outputs = compare::compare_outputs(&yb, &ya, tol);
    let passed = compare::all_within_tolerance(&outputs);
    let intermediate = if args.intermediate {
        let pair = Pair {
            backend: backend.as_ref(),
            inputs: &inputs,
            a_inputs: &a.inputs,
            b_inputs: &b_inputs,
        };
        Some(compare_intermediates(&pair, &args.a, &args.b, tol)?)
    } else {
        None
    };
    let resolution = a.model.resolution().clone();
    let gate_report = if gates.is_empty() {
        None
    } else {
        Some(crate::gates::compare_gates(
            &gates,
            &outputs,
            &ya,
            &yb,
            (a.model.as_ref(), &a.inputs),
            (b.model.as_ref(), &b_inputs),
            &args.b,
            &info,
            (args.warmup, args.runs),
        )?)
    };
    let report = CompareReport {
        schema_version: COMPARE_SCHEMA_VERSION,
        a: args.a.display().to_string(),
        b: args.b.display().to_string(),
        backend: info,
        input_source: inputs.source.clone(),
        inputs: inputs_arg::describe(&a.inputs),
        input_shapes: resolution.input_shapes.clone(),
        defaulted_dims: resolution.defaulted.clone(),
        tolerance: tol,
        outputs,
        passed,
        intermediate,
        gates: gate_report,
    };
    if let Some(e) = report.gates.as_ref().and_then(|g| g.error()) {
        return Ok(Outcome {
            report,
            failure: Some(e),
        });
    }
    // Accuracy gates replace the tolerance as the verdict on the outputs.
    let accuracy_gated = gates.config.has_accuracy();
    if !report.passed && !accuracy_gated {
        let bad: Vec<&str> = report
            .outputs
            .iter()
            .filter(|o| !o.within_tolerance)
            .map(|o| o.name.as_str())
            .collect();
        let mut message = format!(
            "{} does not match {} within tolerance (atol {}, rtol {}): output(s) {}",
            args.b.display(),
            args.a.display(),
            tol.atol,
            tol.rtol,
            bad.join(", ")
        );
        if let Some(f) = report
            .intermediate
            .as_ref()
            .and_then(|i| i.first_divergence.as_ref())
        {
            message.push_str(&format!("; first diverging tensor: `{}`", f.name));
        }
        return Ok(Outcome {
            report,
            failure: Some(OpsError::new(ErrorKind::Verify, message)),
        });
    }
    Ok(Outcome::passed(report))
}
