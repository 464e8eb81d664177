//! TensorRT optimization profiles from the command line and the model: `--shapes`
//! first, then `--input-shape` and the pipeline's `symbols:` for the dynamic inputs
//! `--shapes` leaves out. Static inputs need no profile. Errors are one line naming the
//! input and the flag that fixes it.

use std::collections::BTreeMap;

use infopt_ir::{Dim, Model};
use infopt_runtime::tensorrt::Profile;
use infopt_verify::ShapeArg;

/// An input of the graph TensorRT parses (initializers excluded), with its dims: a
/// `Dim::Sym` is a name TensorRT's parser takes for one dimension wherever it stands,
/// Paddle's `?` is none (infopt reads it as unknown, and the graph TensorRT parses
/// leaves it unnamed: see `unname_unknown_dims`).
struct GraphInput {
    name: String,
    dims: Option<Vec<Dim>>,
}

fn graph_inputs(model: &Model) -> Vec<GraphInput> {
    let g = &model.graph;
    g.inputs
        .iter()
        .filter(|io| g.value(io.value).initializer.is_none())
        .map(|io| GraphInput {
            name: g.value(io.value).name.clone(),
            dims: g.value_type(io.value).and_then(|t| t.shape),
        })
        .collect()
}

pub use infopt_ir::unknown_dims::unname_unknown_dims;

fn show(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// The profiles of a build: one per dynamic input.
pub fn profiles(
    model: &Model,
    shapes: &[Profile],
    input_shapes: &[ShapeArg],
    symbols: &BTreeMap<String, i64>,
) -> Result<Vec<Profile>, String> {
    profiles_with_notes(model, shapes, input_shapes, symbols).map(|(p, _)| p)
}

/// The ranges `--shapes` gives each symbolic dim name, from the inputs it
/// names (the first input to give a name decides; `check_shared_symbols`
/// refuses the others when they differ).
fn symbol_ranges(inputs: &[GraphInput], shapes: &[Profile]) -> BTreeMap<String, [i64; 3]> {
    let mut out = BTreeMap::new();
    for p in shapes {
        let Some(dims) = inputs
            .iter()
            .find(|i| i.name == p.input)
            .and_then(|i| i.dims.as_ref())
        else {
            continue;
        };
        for (axis, d) in dims.iter().enumerate() {
            if let (Dim::Sym(s), Some(min), Some(opt), Some(max)) =
                (d, p.min.get(axis), p.opt.get(axis), p.max.get(axis))
            {
                out.entry(s.clone()).or_insert([*min, *opt, *max]);
            }
        }
    }
    out
}

/// [`profiles`], with a note for each input whose profile came from the
/// symbols it shares with inputs `--shapes` named: BERT's `attention_mask`
/// and `token_type_ids` are `[batch, seq]` like its `input_ids`, and a
/// build that asked for three identical `--shapes` made the user repeat
/// what the model already says.
pub fn profiles_with_notes(
    model: &Model,
    shapes: &[Profile],
    input_shapes: &[ShapeArg],
    symbols: &BTreeMap<String, i64>,
) -> Result<(Vec<Profile>, Vec<String>), String> {
    let inputs = graph_inputs(model);
    let ranges = symbol_ranges(&inputs, shapes);
    let mut notes = Vec::new();
    let names: Vec<&str> = inputs.iter().map(|i| i.name.as_str()).collect();
    for p in shapes {
        if !names.contains(&p.input.as_str()) {
            return Err(format!(
                "--shapes names `{}`, which is not an input of the model (inputs: {})",
                p.input,
                names.join(", ")
            ));
        }
    }
    let mut bound: BTreeMap<String, i64> = symbols.clone();
    for a in input_shapes {
        if let ShapeArg::Symbols { symbols, .. } = a {
            for (s, v) in symbols {
                bound.insert(s.clone(), *v);
            }
        }
    }
    let mut out = Vec::new();
    for input in &inputs {
        let Some(dims) = &input.dims else {
            return Err(format!(
                "input `{}` has no known rank; give its shapes with --shapes {}:MIN/OPT/MAX",
                input.name, input.name
            ));
        };
        if let Some(p) = shapes.iter().find(|p| p.input == input.name) {
            check_against_model(p, dims)?;
            out.push(p.clone());
            continue;
        }
        if dims.iter().all(|d| matches!(d, Dim::Known(_))) {
            continue;
        }
        let given = input_shapes.iter().find_map(|a| match a {
            ShapeArg::Dims { input: i, dims } if *i == input.name => Some(dims),
            _ => None,
        });
        let resolved: Option<Vec<i64>> = match given {
            Some(d) => Some(d.clone()),
            None => dims
                .iter()
                .map(|d| match d {
                    Dim::Known(v) => Some(*v),
                    Dim::Sym(s) => bound.get(s).copied(),
                    Dim::Unknown => None,
                })
                .collect(),
        };
        if given.is_none()
            && resolved.is_none()
            && let Some(p) = shared_profile(&input.name, dims, &bound, &ranges)
        {
            notes.push(format!(
                "input `{}` takes the profile {}/{}/{} from the dim names it shares with --shapes ({})",
                input.name,
                join_dims(&p.min),
                join_dims(&p.opt),
                join_dims(&p.max),
                dims.iter()
                    .filter_map(|d| match d {
                        Dim::Sym(s) if ranges.contains_key(s) => Some(s.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            out.push(p);
            continue;
        }
        let Some(fixed) = resolved else {
            return Err(format!(
                "input `{}` has dynamic dims {} and no shapes for TensorRT: give --shapes {}:MIN/OPT/MAX (each like 1x3x224x224) or --input-shape {}:DIMS",
                input.name,
                show(dims),
                input.name,
                input.name
            ));
        };
        let p = Profile::fixed(input.name.clone(), fixed);
        check_against_model(&p, dims).map_err(|e| e.replace("--shapes", "--input-shape"))?;
        out.push(p);
    }
    check_shared_symbols(&inputs, &out)?;
    Ok((out, notes))
}

/// A profile for `dims` from fixed symbols and the ranges `--shapes` gave
/// the others; None when a dim has neither (or when no dim takes a range:
/// then the fixed symbols alone make the profile, as before).
fn shared_profile(
    name: &str,
    dims: &[Dim],
    bound: &BTreeMap<String, i64>,
    ranges: &BTreeMap<String, [i64; 3]>,
) -> Option<Profile> {
    let mut p = Profile::fixed(name, Vec::new());
    let mut ranged = false;
    for d in dims {
        let [min, opt, max] = match d {
            Dim::Known(v) => [*v; 3],
            Dim::Sym(s) => match (bound.get(s), ranges.get(s)) {
                (Some(v), _) => [*v; 3],
                (None, Some(r)) => {
                    ranged = true;
                    *r
                }
                (None, None) => return None,
            },
            Dim::Unknown => return None,
        };
        p.min.push(min);
        p.opt.push(opt);
        p.max.push(max);
    }
    ranged.then_some(p)
}

fn join_dims(d: &[i64]) -> String {
    d.iter().map(i64::to_string).collect::<Vec<_>>().join("x")
}

/// TensorRT's ONNX parser takes dims with the same symbolic name (`batch` on two inputs,
/// `S` on both H and W) to be one dimension, and rejects a profile that gives them
/// different sizes with a message naming neither. Say which input, axes and name.
fn check_shared_symbols(inputs: &[GraphInput], profiles: &[Profile]) -> Result<(), String> {
    let mut seen: BTreeMap<&str, (&str, usize, [i64; 3])> = BTreeMap::new();
    for p in profiles {
        let Some(input) = inputs.iter().find(|i| i.name == p.input) else {
            continue;
        };
        for (axis, dim) in input.dims.iter().flatten().enumerate() {
            let Dim::Sym(sym) = dim else { continue };
            if axis >= p.min.len() {
                continue;
            }
            let here = [p.min[axis], p.opt[axis], p.max[axis]];
            match seen.get(sym.as_str()) {
                Some((input, other_axis, there)) if *there != here => {
                    return Err(format!(
                        "--shapes: `{}` dim {axis} and `{input}` dim {other_axis} share the symbolic name `{sym}`, which TensorRT treats as one dimension, but the profile gives them {}/{}/{} and {}/{}/{}; give them the same sizes, or fix them with --input-shape",
                        p.input, here[0], here[1], here[2], there[0], there[1], there[2]
                    ));
                }
                Some(_) => {}
                None => {
                    seen.insert(sym.as_str(), (p.input.as_str(), axis, here));
                }
            }
        }
    }
    Ok(())
}

/// A profile fits the model: same rank, and the model's fixed dims in all of min/opt/max.
fn check_against_model(p: &Profile, dims: &[Dim]) -> Result<(), String> {
    if p.min.len() != dims.len() {
        return Err(format!(
            "--shapes {}: rank {} but the model's input has rank {} {}",
            p.input,
            p.min.len(),
            dims.len(),
            show(dims)
        ));
    }
    for (axis, d) in dims.iter().enumerate() {
        if let Dim::Known(v) = d
            && [p.min[axis], p.opt[axis], p.max[axis]]
                .iter()
                .any(|x| x != v)
        {
            return Err(format!(
                "--shapes {}: dim {axis} is fixed to {v} in the model {}, but the profile gives {}/{}/{}",
                p.input,
                show(dims),
                p.min[axis],
                p.opt[axis],
                p.max[axis]
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::DataType;
    use infopt_ir::builder::{GraphBuilder, dims};

    fn model() -> Model {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["batch", "3", "8"]));
        let m = b.input("m", DataType::Float, dims(&["1", "8"]));
        let y = b.op("Mul", &[x, m], vec![]);
        b.output(y, "y", DataType::Float, Some(dims(&["batch", "3", "8"])));
        b.build(17)
    }

    #[test]
    fn shapes_cover_dynamic_inputs_and_static_ones_need_none() {
        let p = infopt_runtime::tensorrt::args::parse_shape_spec("x:1x3x8/4x3x8/16x3x8").unwrap();
        let got = profiles(&model(), std::slice::from_ref(&p), &[], &BTreeMap::new()).unwrap();
        assert_eq!(got, vec![p]);
    }

    #[test]
    fn input_shape_and_symbols_give_fixed_profiles() {
        let dims = ShapeArg::Dims {
            input: "x".into(),
            dims: vec![2, 3, 8],
        };
        let got = profiles(&model(), &[], &[dims], &BTreeMap::new()).unwrap();
        assert_eq!(got, vec![Profile::fixed("x", vec![2, 3, 8])]);
        let symbols = BTreeMap::from([("batch".to_string(), 5)]);
        let got = profiles(&model(), &[], &[], &symbols).unwrap();
        assert_eq!(got, vec![Profile::fixed("x", vec![5, 3, 8])]);
    }

    #[test]
    fn an_input_sharing_the_dim_names_of_a_given_profile_takes_its_ranges() {
        let mut b = GraphBuilder::new();
        let ids = b.input("input_ids", DataType::Int64, dims(&["batch", "seq"]));
        let mask = b.input("attention_mask", DataType::Int64, dims(&["batch", "seq"]));
        let lens = b.input("lens", DataType::Int64, dims(&["batch"]));
        let other = b.input("other", DataType::Int64, dims(&["batch", "n"]));
        let y = b.op("Add", &[ids, mask], vec![]);
        let z = b.op("Add", &[lens, other], vec![]);
        b.output(y, "y", DataType::Int64, None);
        b.output(z, "z", DataType::Int64, None);
        let m = b.build(17);
        let parse = infopt_runtime::tensorrt::args::parse_shape_spec;
        let given = parse("input_ids:1x8/1x64/1x128").unwrap();
        // `other`'s `n` is nobody's: still the usual message, naming it.
        let e = profiles(&m, std::slice::from_ref(&given), &[], &BTreeMap::new()).unwrap_err();
        assert!(
            e.contains("input `other` has dynamic dims [batch, n]"),
            "{e}"
        );
        let n = BTreeMap::from([("n".to_string(), 4)]);
        let (got, notes) = profiles_with_notes(&m, std::slice::from_ref(&given), &[], &n).unwrap();
        assert_eq!(
            got,
            vec![
                given.clone(),
                Profile {
                    input: "attention_mask".into(),
                    ..given.clone()
                },
                Profile {
                    input: "lens".into(),
                    min: vec![1],
                    opt: vec![1],
                    max: vec![1],
                },
                Profile {
                    input: "other".into(),
                    min: vec![1, 4],
                    opt: vec![1, 4],
                    max: vec![1, 4],
                },
            ]
        );
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert_eq!(
            notes[0],
            "input `attention_mask` takes the profile 1x8/1x64/1x128 from the dim names it shares with --shapes (batch, seq)"
        );
    }

    #[test]
    fn question_mark_dims_are_no_names_and_are_left_unnamed() {
        use infopt_ir::proto::tensor_shape::DimValue;
        use infopt_ir::unknown_dims::{declared_dims, declared_dims_mut};
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["batch", "3", "8", "8"]));
        let y = b.op("Relu", &[x], vec![]);
        b.output(y, "y", DataType::Float, None);
        let mut m = b.build(17);
        // As Paddle declares it: `[batch, 3, ?, ?]`.
        for d in &mut declared_dims_mut(&mut m.graph.inputs[0].info).expect("a shape")[2..] {
            d.value = Some(DimValue::DimParam("?".into()));
        }
        let inputs = graph_inputs(&m);
        assert_eq!(
            inputs[0].dims,
            Some(vec![
                Dim::Sym("batch".into()),
                Dim::Known(3),
                Dim::Unknown,
                Dim::Unknown
            ])
        );
        assert_eq!(unname_unknown_dims(&mut m), 2);
        let values: Vec<_> = declared_dims(&m.graph.inputs[0].info)
            .expect("a shape")
            .iter()
            .map(|d| d.value.clone())
            .collect();
        assert_eq!(values[0], Some(DimValue::DimParam("batch".into())));
        assert_eq!(values[2], None);
        assert_eq!(values[3], None);
        assert_eq!(unname_unknown_dims(&mut m), 0);
    }

    #[test]
    fn errors_name_the_input_and_the_flag() {
        let e = profiles(&model(), &[], &[], &BTreeMap::new()).unwrap_err();
        assert!(
            e.contains("input `x` has dynamic dims [batch, 3, 8]"),
            "{e}"
        );
        assert!(e.contains("--shapes x:MIN/OPT/MAX"), "{e}");
        let parse = infopt_runtime::tensorrt::args::parse_shape_spec;
        for (spec, needle) in [
            (
                "y:1x3x8",
                "`y`, which is not an input of the model (inputs: x, m)",
            ),
            ("x:1x3/2x3/4x3", "rank 2 but the model's input has rank 3"),
            (
                "x:1x3x8/2x4x8/4x4x8",
                "dim 1 is fixed to 3 in the model [batch, 3, 8], but the profile gives 3/4/4",
            ),
        ] {
            let e = profiles(&model(), &[parse(spec).unwrap()], &[], &BTreeMap::new()).unwrap_err();
            assert!(e.contains(needle), "{spec}: {e}");
        }
    }
}
