//! Fixes dynamic input dims to the values a deployment uses (staticization).
//!
//! ## What it does
//! Takes whole input shapes (`inputs: {input_ids: [1, 128]}`, or
//! `--input-shape input_ids:1x128`) and values of named symbols
//! (`symbols: {batch: 1}`, or `--input-shape input_ids:batch=1`), checks them
//! against the model, substitutes them in the graph inputs, in every
//! `value_info` and output declaration (derived dims such as `2*batch` are
//! evaluated), and re-runs shape inference. Dims the user did not fix stay
//! symbolic. The report lists every input and output dim that became static
//! and every one that stayed dynamic. Run `fold-constants` and
//! `eliminate-dead` afterwards (in a fixed point) to collapse the shape
//! scaffolding the fixed dims made constant. Run it once, before folding.
//!
//! On the `tensorrt` target, dims named `?` (Paddle's name for any dynamic
//! dim: PP-OCR's `x` of `[-1, 3, ?, ?]`) are left unnamed in the graph's
//! inputs and outputs: TensorRT takes equal dim names for one dimension and
//! refuses a 32x320 text line.
//!
//! ## When it declines
//! It does not decline: a shape that does not fit the model is an error, with
//! a one-line message naming the input: an unknown input name (the message
//! lists the inputs), a rank that differs from the model's, a dim that
//! contradicts a fixed dim of the model, a dim or symbol value that is not
//! positive, a symbol no input uses, and two values for one symbol.
//!
//! ## Numerics
//! None: the model computes the same thing for the fixed shapes.
//!
//! ## Example
//! `x: [batch, 4, 8, 8]` with `symbols: {batch: 1}` becomes `x: [1, 4, 8, 8]`;
//! `Shape(x) → Gather(0)` is then known to be `1` and folding replaces it.

crate::register_pass! {
    name: "fix-shapes",
    kind: Shape,
    file: "fix_shapes.rs",
    options: FixShapesOptions,
    build: |o: &FixShapesOptions| FixShapes { options: o.clone() },
    numerics: Exact,
}

use std::collections::{BTreeMap, BTreeSet};

use infopt_ir::infer::{infer_shapes, sym};
use infopt_ir::{Dim, Graph, Model, TensorType};

use crate::pass::{Pass, PassCx, PassError};

/// One `--input-shape` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeSpec {
    pub input: String,
    pub binding: ShapeBinding,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShapeBinding {
    /// `NAME:1x3x224x224`: the whole shape.
    Dims(Vec<i64>),
    /// `NAME:batch=1,seq=128`: values of symbols the input's dims use.
    Symbols(Vec<(String, i64)>),
}

/// Parses `NAME:1x3x224x224` or `NAME:batch=1[,seq=128]`. The name is
/// everything before the last `:` (TensorFlow-style names such as `input:0`
/// work). The error is `'ARG': what is wrong`; the caller puts the name of
/// its option in front.
pub fn parse_input_shape(arg: &str) -> Result<ShapeSpec, String> {
    let usage =
        "expected NAME:DIMS (e.g. input:1x3x224x224) or NAME:SYMBOL=VALUE (e.g. input_ids:batch=1)";
    let (name, spec) = arg
        .rsplit_once(':')
        .ok_or_else(|| format!("'{arg}': {usage}"))?;
    if name.is_empty() {
        return Err(format!(
            "'{arg}': the input name is empty; {usage}"
        ));
    }
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(format!(
            "'{arg}': no shape after the ':'; {usage}"
        ));
    }
    let positive = |text: &str, what: &str| -> Result<i64, String> {
        match text.trim().parse::<i64>() {
            Ok(v) if v > 0 => Ok(v),
            Ok(v) => Err(format!(
                "'{arg}': {what} is {v}; dims must be positive"
            )),
            Err(_) => Err(format!(
                "'{arg}': '{}' is not a number; {usage}",
                text.trim()
            )),
        }
    };
    let binding = if spec.contains('=') {
        let mut out = Vec::new();
        for part in spec.split(',') {
            let (s, v) = part
                .split_once('=')
                .ok_or_else(|| format!("'{arg}': '{part}' is not SYMBOL=VALUE"))?;
            let s = s.trim();
            if s.is_empty() {
                return Err(format!("'{arg}': a symbol name is empty"));
            }
            out.push((s.to_string(), positive(v, &format!("symbol '{s}'"))?));
        }
        ShapeBinding::Symbols(out)
    } else {
        let dims = spec
            .split(['x', 'X', ','])
            .enumerate()
            .map(|(i, d)| positive(d, &format!("dim {i}")))
            .collect::<Result<Vec<_>, _>>()?;
        ShapeBinding::Dims(dims)
    };
    Ok(ShapeSpec {
        input: name.to_string(),
        binding,
    })
}

/// Options of `fix-shapes`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixShapesOptions {
    /// Whole shapes by input name.
    #[serde(default)]
    pub inputs: BTreeMap<String, Vec<i64>>,
    /// Values of symbolic dims by symbol name.
    #[serde(default)]
    pub symbols: BTreeMap<String, i64>,
    /// For symbols given as `NAME:symbol=value`: the input they were given for
    /// (checked to use the symbol).
    #[serde(skip)]
    pub symbol_inputs: BTreeMap<String, String>,
}

impl FixShapesOptions {
    /// Options from `--input-shape` arguments.
    pub fn from_specs(specs: &[ShapeSpec]) -> Result<FixShapesOptions, String> {
        let mut o = FixShapesOptions::default();
        for s in specs {
            o.add(s.clone())?;
        }
        Ok(o)
    }

    pub fn add(&mut self, spec: ShapeSpec) -> Result<(), String> {
        match spec.binding {
            ShapeBinding::Dims(d) => {
                if let Some(prev) = self.inputs.get(&spec.input)
                    && *prev != d
                {
                    return Err(format!(
                        "input '{}' is given two shapes: {prev:?} and {d:?}",
                        spec.input
                    ));
                }
                self.inputs.insert(spec.input, d);
            }
            ShapeBinding::Symbols(list) => {
                for (s, v) in list {
                    self.bind(&s, v)?;
                    self.symbol_inputs.insert(s, spec.input.clone());
                }
            }
        }
        Ok(())
    }

    fn bind(&mut self, s: &str, v: i64) -> Result<(), String> {
        if let Some(&prev) = self.symbols.get(s)
            && prev != v
        {
            return Err(format!("symbol '{s}' is given two values: {prev} and {v}"));
        }
        self.symbols.insert(s.to_string(), v);
        Ok(())
    }

    /// Adds a pipeline's top-level `inputs:` and `symbols:`.
    pub fn merge(
        &mut self,
        inputs: &BTreeMap<String, Vec<i64>>,
        symbols: &BTreeMap<String, i64>,
    ) -> Result<(), String> {
        for (k, v) in inputs {
            self.add(ShapeSpec {
                input: k.clone(),
                binding: ShapeBinding::Dims(v.clone()),
            })?;
        }
        for (k, v) in symbols {
            self.bind(k, *v)?;
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty() && self.symbols.is_empty()
    }
}


/// What became of one dim that was not fixed before.
struct DimOutcome {
    text: String,
    /// The dim stays dynamic (rather than becoming a number).
    dynamic: bool,
    /// Its symbolic expression mentions a symbol the user bound.
    mentions_bound: bool,
}

/// Per dim that was not fixed before: whether it became static or stayed
/// dynamic.
fn dim_outcomes(
    out: &mut Vec<DimOutcome>,
    kind: &str,
    name: &str,
    old: Option<&[Dim]>,
    new: &[Dim],
    bindings: &BTreeMap<String, i64>,
) {
    for (i, d) in new.iter().enumerate() {
        let was = old.and_then(|o| o.get(i)).cloned().unwrap_or(Dim::Unknown);
        match (&was, d) {
            (Dim::Known(_), _) => {}
            (_, Dim::Known(v)) => out.push(DimOutcome {
                text: format!("fix-shapes: {kind} '{name}' dim {i}{} is now {v}", label(&was)),
                dynamic: false,
                mentions_bound: false,
            }),
            (_, d) => out.push(DimOutcome {
                text: format!("fix-shapes: {kind} '{name}' dim {i}{} stays dynamic", label(d)),
                dynamic: true,
                mentions_bound: match d {
                    Dim::Sym(e) => bindings.keys().any(|b| mentions_symbol(e, b)),
                    _ => false,
                },
            }),
        }
    }
}

/// Whether expression `expr` (`(seq+1)//2`) uses symbol `sym` as a whole name.
fn mentions_symbol(expr: &str, sym: &str) -> bool {
    let is_name = |c: char| c.is_alphanumeric() || c == '_' || c == '.';
    expr.match_indices(sym).any(|(at, _)| {
        let before = expr[..at].chars().next_back();
        let after = expr[at + sym.len()..].chars().next();
        !before.is_some_and(is_name) && !after.is_some_and(is_name)
    })
}

pub struct FixShapes {
    pub options: FixShapesOptions,
}

fn fmt_dims(d: &[Dim]) -> String {
    format!(
        "[{}]",
        d.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
}

fn err(msg: String) -> PassError {
    PassError::Config(format!("fix-shapes: {msg}"))
}

impl FixShapes {
    /// Checks the options against the model; returns the symbol bindings.
    fn bindings(&self, g: &Graph) -> Result<BTreeMap<String, i64>, PassError> {
        let o = &self.options;
        let names: Vec<String> = g
            .inputs
            .iter()
            .map(|io| g.value(io.value).name.clone())
            .collect();
        let declared = |name: &str| -> Option<Option<Vec<Dim>>> {
            let io = g.inputs.iter().find(|io| g.value(io.value).name == name)?;
            Some(g.value_type(io.value).and_then(|t| t.shape))
        };
        let unknown_input = |name: &str| {
            err(format!(
                "'{name}' is not an input of the model; its inputs are: {}",
                names.join(", ")
            ))
        };
        let mut bindings: BTreeMap<String, i64> = BTreeMap::new();
        let mut bound_by: BTreeMap<String, String> = BTreeMap::new();
        for (s, &v) in &o.symbols {
            if v <= 0 {
                return Err(err(format!("symbol '{s}' is {v}; dims must be positive")));
            }
            bindings.insert(s.clone(), v);
            bound_by.insert(s.clone(), "the symbol binding".into());
        }
        for (name, dims) in &o.inputs {
            let decl = declared(name).ok_or_else(|| unknown_input(name))?;
            if let Some((i, d)) = dims.iter().enumerate().find(|(_, d)| **d <= 0) {
                return Err(err(format!(
                    "input '{name}': dim {i} is {d}; dims must be positive"
                )));
            }
            let Some(decl) = decl else { continue };
            if decl.len() != dims.len() {
                return Err(err(format!(
                    "input '{name}' has rank {} {} in the model; the shape given, {dims:?}, has rank {}",
                    decl.len(),
                    fmt_dims(&decl),
                    dims.len()
                )));
            }
            for (i, (d, &v)) in decl.iter().zip(dims).enumerate() {
                match d {
                    Dim::Known(k) if *k != v => {
                        return Err(err(format!(
                            "input '{name}' dim {i} is fixed at {k} in the model {}; the shape given has {v}",
                            fmt_dims(&decl)
                        )));
                    }
                    // A plain symbol is bound by the dim; derived dims are checked below.
                    Dim::Sym(s) if is_plain_symbol(d) => {
                        if let Some(&prev) = bindings.get(s)
                            && prev != v
                        {
                            return Err(err(format!(
                                "input '{name}' dim {i} is symbol '{s}', given as {v}, but {} sets '{s}' = {prev}",
                                bound_by
                                    .get(s)
                                    .map(String::as_str)
                                    .unwrap_or("another binding")
                            )));
                        }
                        bindings.insert(s.clone(), v);
                        bound_by
                            .entry(s.clone())
                            .or_insert_with(|| format!("the shape of input '{name}'"));
                    }
                    _ => {}
                }
            }
        }
        // Derived dims of explicitly shaped inputs must agree with the bindings.
        for (name, dims) in &o.inputs {
            let Some(Some(decl)) = declared(name) else {
                continue;
            };
            for (i, (d, &v)) in decl.iter().zip(dims).enumerate() {
                if let Dim::Known(k) = sym::substitute(d, &bindings)
                    && k != v
                {
                    return Err(err(format!(
                        "input '{name}' dim {i} is '{d}' = {k} with the given symbols; the shape given has {v}"
                    )));
                }
            }
        }
        // Every symbol must be used by some input (a typo otherwise).
        let mut used: BTreeSet<String> = BTreeSet::new();
        for io in &g.inputs {
            if let Some(s) = g.value_type(io.value).and_then(|t| t.shape) {
                for d in &s {
                    used.extend(sym::symbols_of(d));
                }
            }
        }
        for s in o.symbols.keys() {
            if let Some(input) = o.symbol_inputs.get(s) {
                let decl = declared(input).ok_or_else(|| unknown_input(input))?;
                let uses = decl
                    .as_ref()
                    .is_some_and(|d| d.iter().any(|x| sym::symbols_of(x).contains(s)));
                if !uses {
                    let dims = decl
                        .as_deref()
                        .map(fmt_dims)
                        .unwrap_or_else(|| "unknown".into());
                    return Err(err(format!(
                        "input '{input}' has no dim named '{s}' (its dims: {dims})"
                    )));
                }
            } else if !used.contains(s) {
                let list = if used.is_empty() {
                    "none".to_string()
                } else {
                    used.iter().cloned().collect::<Vec<_>>().join(", ")
                };
                return Err(err(format!(
                    "symbol '{s}' is not used by any input; the inputs' symbols are: {list}"
                )));
            }
        }
        Ok(bindings)
    }
}

/// True for a dim that is one symbol (`batch`), not a derived dim (`2*batch`).
fn is_plain_symbol(d: &Dim) -> bool {
    match d {
        Dim::Sym(s) => sym::canonical(d) == *d && sym::symbols_of(d).into_iter().eq([s.clone()]),
        _ => false,
    }
}

/// Substitutes bound symbols in a dim; dims that mention none are left as they are.
fn subst(d: &Dim, b: &BTreeMap<String, i64>) -> Dim {
    if sym::symbols_of(d).iter().any(|s| b.contains_key(s)) {
        sym::substitute(d, b)
    } else {
        d.clone()
    }
}

fn subst_type(ty: &TensorType, b: &BTreeMap<String, i64>) -> Option<TensorType> {
    let shape = ty.shape.as_ref()?;
    let new: Vec<Dim> = shape.iter().map(|d| subst(d, b)).collect();
    (new != *shape).then_some(TensorType {
        dtype: ty.dtype,
        shape: Some(new),
    })
}

/// Substitutes in value_info, output (and subgraph input) declarations, recursively.
fn substitute_graph(g: &mut Graph, b: &BTreeMap<String, i64>, is_subgraph: bool) -> usize {
    let mut changed = 0;
    for v in g.value_info_ids().to_vec() {
        if let Some(new) = g.value(v).tensor_type().and_then(|t| subst_type(&t, b)) {
            g.set_value_type(v, &new);
            changed += 1;
        }
    }
    let n_in = if is_subgraph { g.inputs.len() } else { 0 };
    for io in g.outputs.iter_mut().chain(g.inputs.iter_mut().take(n_in)) {
        let ty = io.info.r#type.as_ref().and_then(TensorType::from_proto);
        if let Some(new) = ty.and_then(|t| subst_type(&t, b)) {
            io.info.r#type = Some(new.to_proto(io.info.r#type.as_ref()));
            changed += 1;
        }
    }
    for id in g.node_ids() {
        for sg in g.node_mut(id).subgraphs_mut() {
            changed += substitute_graph(sg, b, true);
        }
    }
    changed
}

fn label(d: &Dim) -> String {
    match d {
        Dim::Sym(s) => format!(" ({s})"),
        _ => String::new(),
    }
}

impl Pass for FixShapes {
    fn name(&self) -> &'static str {
        "fix-shapes"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        let g = &mut model.graph;
        let bindings = self.bindings(g)?;
        let before_outputs: Vec<(String, Option<Vec<Dim>>)> = g
            .outputs
            .iter()
            .map(|io| {
                (
                    g.value(io.value).name.clone(),
                    g.value_type(io.value).and_then(|t| t.shape),
                )
            })
            .collect();
        let mut changed = 0;
        let mut inputs_seen = Vec::new();
        let mut outputs_seen = Vec::new();
        for k in 0..g.inputs.len() {
            let v = g.inputs[k].value;
            let name = g.value(v).name.clone();
            let Some(ty) = g.value_type(v) else { continue };
            let old = ty.shape.clone();
            let new: Option<Vec<Dim>> = match (self.options.inputs.get(&name), &old) {
                (Some(dims), _) => Some(dims.iter().map(|&d| Dim::Known(d)).collect()),
                (None, Some(o)) => Some(o.iter().map(|d| subst(d, &bindings)).collect()),
                (None, None) => None,
            };
            let Some(new) = new else { continue };
            dim_outcomes(&mut inputs_seen, "input", &name, old.as_deref(), &new, &bindings);
            if old.as_ref() != Some(&new) {
                let new_ty = TensorType {
                    dtype: ty.dtype,
                    shape: Some(new),
                };
                let io = &mut g.inputs[k];
                io.info.r#type = Some(new_ty.to_proto(io.info.r#type.as_ref()));
                changed += 1;
            }
        }
        changed += substitute_graph(g, &bindings, false);
        // For TensorRT, Paddle's `?` dims (its name for any dynamic dim)
        // are left unnamed: TensorRT's parser would take them for one
        // dimension (see `infopt_ir::unknown_dims`).
        if cx.target == crate::pass::Target::Tensorrt {
            let unnamed = infopt_ir::unknown_dims::unname_unknown_dims(model);
            if unnamed > 0 {
                cx.note(format!(
                    "fix-shapes: {unnamed} input/output dim(s) named `?` (Paddle's name for any dynamic dim) left unnamed: TensorRT takes equal dim names for one dimension"
                ));
                changed += 1;
            }
        }
        let report = infer_shapes(model);
        for c in &report.conflicts {
            cx.note(format!("fix-shapes: {c}"));
        }
        let g = &model.graph;
        for (name, old) in before_outputs {
            let Some(io) = g.outputs.iter().find(|io| g.value(io.value).name == name) else {
                continue;
            };
            let Some(new) = g.value_type(io.value).and_then(|t| t.shape) else {
                outputs_seen.push(DimOutcome {
                    text: format!("fix-shapes: output '{name}' has an unknown shape"),
                    dynamic: true,
                    mentions_bound: false,
                });
                continue;
            };
            dim_outcomes(&mut outputs_seen, "output", &name, old.as_deref(), &new, &bindings);
        }
        // Printed: the input dims the user fixed, and output dims that stay
        // dynamic although what they depend on was fixed (a symbol the user
        // bound, or every input dim). The rest is for the JSON report.
        let asked = !self.options.inputs.is_empty() || !self.options.symbols.is_empty();
        let inputs_static = model.graph.inputs.iter().all(|io| {
            model
                .graph
                .value_type(io.value)
                .and_then(|t| t.shape)
                .is_some_and(|s| s.iter().all(|d| matches!(d, Dim::Known(_))))
        });
        for o in inputs_seen {
            if asked && !o.dynamic {
                cx.note(o.text);
            } else {
                cx.detail(o.text);
            }
        }
        for o in outputs_seen {
            if asked && o.dynamic && (o.mentions_bound || inputs_static) {
                cx.note(o.text);
            } else {
                cx.detail(o.text);
            }
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_shapes_and_symbols() {
        assert_eq!(
            parse_input_shape("input:1x3x224x224").unwrap(),
            ShapeSpec {
                input: "input".into(),
                binding: ShapeBinding::Dims(vec![1, 3, 224, 224])
            }
        );
        assert_eq!(parse_input_shape("input:0:1,8").unwrap().input, "input:0");
        assert_eq!(
            parse_input_shape("ids:batch=1, seq=128").unwrap().binding,
            ShapeBinding::Symbols(vec![("batch".into(), 1), ("seq".into(), 128)])
        );
        for bad in [
            "input",
            ":1x2",
            "x:",
            "x:1x0",
            "x:1xa",
            "x:batch=0",
            "x:=3",
            "x:b=-1",
        ] {
            let e = parse_input_shape(bad).unwrap_err();
            assert!(e.contains(bad), "{bad}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        assert!(parse_input_shape("x:1x0").unwrap_err().contains("positive"));
    }

    #[test]
    fn options_merge_and_conflicts() {
        let specs = vec![
            parse_input_shape("a:batch=1").unwrap(),
            parse_input_shape("b:2x3").unwrap(),
        ];
        let mut o = FixShapesOptions::from_specs(&specs).unwrap();
        assert_eq!(o.symbols.get("batch"), Some(&1));
        assert_eq!(o.symbol_inputs.get("batch").map(String::as_str), Some("a"));
        assert!(
            o.add(parse_input_shape("c:batch=2").unwrap())
                .unwrap_err()
                .contains("two values")
        );
        assert!(
            o.add(parse_input_shape("b:2x4").unwrap())
                .unwrap_err()
                .contains("two shapes")
        );
        assert!(
            o.merge(&BTreeMap::new(), &[("batch".to_string(), 1)].into())
                .is_ok()
        );
    }
}
