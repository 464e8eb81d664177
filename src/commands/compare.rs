//! `infopt compare A.onnx B.onnx`: run both models on the same inputs and compare their
//! outputs (A is the reference); with `--intermediate`, also every tensor both models
//! compute under the same name, naming the first (in A's topological order) that
//! diverges.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use infopt_ir::{Graph, GraphIo, Model};
use infopt_runtime::compare::{self, OutputAgreement, Tolerance};
use infopt_runtime::{Backend, DefaultedDim, HostTensor, LoadedModel, RuntimeError};
use serde::Serialize;

use super::bench::{BackendArgs, BackendInfo, runtime_error};
use crate::exit::{CliError, CliResult, Exit};
use crate::inputs_arg::{self, InputArgs, InputSource, Inputs};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The reference model.
    pub a: PathBuf,
    /// The model under test.
    pub b: PathBuf,
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Relative tolerance: an element agrees when |b - a| <= atol + rtol * |a|.
    #[arg(long, default_value_t = Tolerance::default().rtol)]
    pub rtol: f64,
    /// Absolute tolerance.
    #[arg(long, default_value_t = Tolerance::default().atol)]
    pub atol: f64,
    /// Also compare every tensor computed under the same name in both models, and name
    /// the first that diverges (runs in ort unless --backend says otherwise).
    #[arg(long)]
    pub intermediate: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Version of the JSON layout below; bumped on incompatible changes.
pub const COMPARE_SCHEMA_VERSION: u32 = 1;

#[derive(Serialize, Debug)]
pub struct IntermediateAgreement {
    /// The tensor's name in both models.
    pub name: String,
    /// The node of A that produces it.
    pub op_type: String,
    pub node: String,
    pub agreement: OutputAgreement,
}

#[derive(Serialize, Debug)]
pub struct IntermediateReport {
    /// Tensors computed under the same name in both models (graph outputs excluded).
    pub compared: usize,
    pub diverging: usize,
    /// Names left out, with the reason (e.g. a non-tensor type).
    pub skipped: Vec<String>,
    /// The first diverging tensor in A's topological order.
    pub first_divergence: Option<IntermediateAgreement>,
    /// Every compared tensor, in A's topological order.
    pub tensors: Vec<IntermediateAgreement>,
}

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
                .and_then(|x| inputs_arg::convert(x, t.dtype()).ok())
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
            "note        input `{}` dim {} ({}) unbound, took {}; set it with --input-shape",
            d.input,
            d.axis,
            d.symbol.as_deref().unwrap_or("unnamed"),
            d.value
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

/// Main-graph tensors produced by a node, in topological order, with the producing
/// node's op type and name; graph outputs left out.
fn produced_in_order(g: &Graph) -> CliResult<Vec<(String, String, String)>> {
    let order = g
        .topological_order()
        .map_err(|e| CliError::new(Exit::Load, e))?;
    let mut out = Vec::new();
    for id in order {
        let node = g.node(id);
        for v in node.outputs.iter().flatten() {
            let name = &g.value(*v).name;
            if name.is_empty() || g.is_graph_output(*v) {
                continue;
            }
            out.push((
                name.clone(),
                node.op_type.clone(),
                node.name_or_op().to_string(),
            ));
        }
    }
    Ok(out)
}

/// A copy of the model with `names` appended to the graph outputs (types left for the
/// backend to infer), serialized with every tensor inline.
fn with_outputs(model: &Model, names: &[String]) -> CliResult<Vec<u8>> {
    let mut m = model.clone();
    for name in names {
        let Some(v) = m.graph.find_value(name) else {
            continue;
        };
        m.graph.outputs.push(GraphIo {
            value: v,
            info: infopt_ir::proto::ValueInfoProto {
                name: Some(name.clone()),
                ..Default::default()
            },
        });
    }
    m.to_bytes().map_err(CliError::from_ir)
}

/// Whether the IR knows the tensor's element type is one no backend here holds.
fn unsupported_type(g: &Graph, name: &str) -> Option<String> {
    let v = g.find_value(name)?;
    let ty = g.value_type(v)?;
    let code = ty.dtype.code();
    if code == 0 || infopt_runtime::DType::from_onnx(code).is_some() {
        return None;
    }
    Some(ty.dtype.name())
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
) -> CliResult<IntermediateReport> {
    let a = super::load_model(a_path)?;
    let b = super::load_model(b_path)?;
    let in_b: HashSet<String> = produced_in_order(&b.graph)?
        .into_iter()
        .map(|(n, _, _)| n)
        .collect();
    let mut skipped = Vec::new();
    let mut common: Vec<(String, String, String)> = Vec::new();
    for (name, op, node) in produced_in_order(&a.graph)? {
        if !in_b.contains(&name) {
            continue;
        }
        if let Some(t) =
            unsupported_type(&a.graph, &name).or_else(|| unsupported_type(&b.graph, &name))
        {
            skipped.push(format!("{name} ({t})"));
            continue;
        }
        common.push((name, op, node));
    }
    let dir_of = |p: &Path| match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // A tensor a backend cannot hand back (a sequence, a string, ...) is dropped from
    // both models and the load retried.
    let (ya, yb) = loop {
        let names: Vec<String> = common.iter().map(|(n, _, _)| n.clone()).collect();
        let run = |model: &Model,
                   path: &Path,
                   tensors: &[HostTensor]|
         -> CliResult<Result<Vec<HostTensor>, RuntimeError>> {
            let bytes = with_outputs(model, &names)?;
            Ok(pair
                .backend
                .load(&bytes, Some(&dir_of(path)), &pair.inputs.shapes)
                .and_then(|m| m.run(tensors)))
        };
        let ra = run(&a, a_path, pair.a_inputs)?;
        let rb = run(&b, b_path, pair.b_inputs)?;
        match (ra, rb) {
            (Ok(ya), Ok(yb)) => break (ya, yb),
            (Err(e), _) | (_, Err(e)) => {
                if let RuntimeError::UnsupportedDType {
                    kind: "output",
                    name,
                    dtype,
                    ..
                } = &e
                    && let Some(pos) = common.iter().position(|(n, _, _)| n == name)
                {
                    skipped.push(format!("{name} ({dtype})"));
                    common.remove(pos);
                    continue;
                }
                return Err(CliError::new(
                    Exit::Load,
                    format!(
                        "cannot run the models with their intermediate tensors as outputs in {}: {e}{}",
                        pair.backend.name(),
                        if pair.backend.name() == "tract" {
                            " (try --backend ort)"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        }
    };
    let mut tensors = Vec::with_capacity(common.len());
    for (name, op_type, node) in common {
        let find = |ys: &[HostTensor]| ys.iter().find(|t| t.name() == Some(name.as_str())).cloned();
        let (Some(ta), Some(tb)) = (find(&ya), find(&yb)) else {
            skipped.push(format!("{name} (not returned)"));
            continue;
        };
        let agreement = compare::compare_tensors(&name, &tb, &ta, tol);
        tensors.push(IntermediateAgreement {
            name,
            op_type,
            node,
            agreement,
        });
    }
    let diverging = tensors
        .iter()
        .filter(|t| !t.agreement.within_tolerance)
        .count();
    let first_divergence = tensors
        .iter()
        .find(|t| !t.agreement.within_tolerance)
        .map(|t| IntermediateAgreement {
            name: t.name.clone(),
            op_type: t.op_type.clone(),
            node: t.node.clone(),
            agreement: t.agreement.clone(),
        });
    Ok(IntermediateReport {
        compared: tensors.len(),
        diverging,
        skipped,
        first_divergence,
        tensors,
    })
}

pub fn run(args: Args) -> CliResult {
    if !(args.rtol >= 0.0 && args.atol >= 0.0) {
        return Err(CliError::usage("--rtol and --atol must be non-negative"));
    }
    let tol = Tolerance {
        atol: args.atol,
        rtol: args.rtol,
    };
    let inputs = args.inputs.resolve().map_err(CliError::usage)?;
    let default_backend = if args.intermediate { "ort" } else { "tract" };
    let (backend, info) = args.backend.build(default_backend)?;
    let a = super::bench::load(backend.as_ref(), &args.a, &inputs)?;
    let b = super::bench::load(backend.as_ref(), &args.b, &inputs)?;
    let b_inputs = inputs_for_b(&a.inputs, b.model.as_ref(), &inputs)
        .map_err(|m| CliError::usage(format!("{}: {m}", args.b.display())))?;
    let run = |m: &dyn LoadedModel, x: &[HostTensor], p: &Path| {
        m.run(x)
            .map_err(|e| runtime_error(e, Exit::Load))
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
    let resolution = a.model.resolution();
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
    };
    if args.json {
        let text =
            serde_json::to_string_pretty(&report).map_err(|e| CliError::new(Exit::Internal, e))?;
        println!("{text}");
    } else {
        print!("{}", render_text(&report));
    }
    if !report.passed {
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
        return Err(CliError::new(Exit::Verify, message));
    }
    Ok(())
}
