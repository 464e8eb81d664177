//! Choosing input sizes a model accepts when the user fixed none.
//!
//! Unbound dims first take distinct values (2, 3, 4, ... per symbol), so a
//! rewrite that confuses batch and sequence does not pass unnoticed; a model
//! that cannot run like that (a detector whose H and W must be multiples of
//! 32, whose feature maps are concatenated) gets sizes that such models
//! accept: spatial (or sequence) dims of 64, then 32, 128 and 512, batch 1;
//! a signal's samples (the last axis of a rank-3 input) at 16000 and 4096,
//! every other dim 1; and last every unbound dim at 2, then 4 and 8 (a batch
//! a Reshape splits into fixed groups). Every size the graph says something
//! about ([`crate::size_hints`]: stride chains, Resize scales, kernels, a
//! fixed partner) is moved to the nearest size it admits, in the distinct
//! choice too (distinct admissible sizes, H != W). Symbols the graph
//! relates ([`crate::relations`]: a KV cache's `total = past + seq`) take
//! the value the relation gives them in every choice.

use std::collections::{BTreeMap, BTreeSet};

use infopt_ir::{Dim, Model};
use infopt_runtime::InputShapes;

use crate::relations::{self, Relations};
use crate::size_hints::{self, SizeHint, key_of};

// `UnboundDim` is defined in size_hints.rs, which keys its hints by it;
// this file reads the hints.
pub use crate::size_hints::UnboundDim;

/// Declared dims of the model's graph inputs (initializers left out), with
/// `None` for an input without a shape.
pub fn declared_inputs(model: &Model) -> Vec<(String, Option<Vec<Dim>>)> {
    let g = &model.graph;
    g.inputs
        .iter()
        .filter(|io| g.value(io.value).initializer.is_none())
        .map(|io| {
            let name = g.value(io.value).name.clone();
            (name, g.value_type(io.value).and_then(|t| t.shape))
        })
        .collect()
}

/// Dims that neither the model nor `base` fixes.
pub fn unbound_dims(model: &Model, base: &InputShapes) -> Vec<UnboundDim> {
    let mut out = Vec::new();
    for (input, dims) in declared_inputs(model) {
        if base.shapes.contains_key(&input) {
            continue;
        }
        let Some(dims) = dims else { continue };
        let rank = dims.len();
        for (axis, d) in dims.iter().enumerate() {
            let symbol = match d {
                Dim::Known(v) if *v > 0 => continue,
                Dim::Sym(s) if base.symbols.contains_key(s) => continue,
                Dim::Sym(s) => Some(s.clone()),
                _ => None,
            };
            out.push(UnboundDim {
                input: input.clone(),
                axis,
                rank,
                symbol,
            });
        }
    }
    out
}

/// A set of sizes to try, with a label for notes.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub label: String,
    pub shapes: InputShapes,
}

/// Whether a dim looks like a size rather than a batch: one of the last two
/// axes of an image-like input (H and W of NCHW), any axis but the first of
/// a rank-4 one (H and W of NHWC too: tf2onnx's fingerprint U-Net, LEADER,
/// takes `[N, H, W, 1]` all unbound, and ran at none of the sizes tried
/// while H stayed 1; a channel dim is rarely left unbound), or any axis
/// but the first of a rank-1/2 input (the samples of an audio frame, the
/// tokens of a sequence).
fn spatial(d: &UnboundDim) -> bool {
    d.axis > 0 && (d.rank < 3 || d.rank == 4 || d.axis >= d.rank - 2)
}

/// Whether a dim is the samples of a signal: the last axis of a rank-3
/// input (audio as [batch, channels, time]).
fn signal(d: &UnboundDim) -> bool {
    d.rank == 3 && d.axis == 2
}

/// The sizes to try, in order (see the module doc). With nothing unbound,
/// just `base`. Sizes respect what the graph says ([`size_hints`]): a
/// multiple of its stride chain, at least its kernels, or the one size a
/// fixed partner admits.
pub fn candidates(model: &Model, base: &InputShapes) -> Vec<Candidate> {
    let base = &with_implied_symbols(model, base);
    let unbound = unbound_dims(model, base);
    if unbound.is_empty() {
        return vec![Candidate {
            label: "as given".into(),
            shapes: base.clone(),
        }];
    }
    let hints = size_hints::hints(model, &unbound);
    let hint = |d: &UnboundDim| hints.get(&key_of(d)).filter(|h| h.is_informative());
    let rels = relations::relations(model, &symbols_of(&unbound));
    let mut out: Vec<Candidate> = Vec::new();
    // Unrelated versions of the choices, tried after all related ones: a
    // relation read from a broadcast may be wrong where a dim is 1.
    let mut unrelated: Vec<Candidate> = Vec::new();
    let mut push = |label: String, shapes: InputShapes| {
        let with = related(&rels, shapes.clone());
        if with != shapes {
            unrelated.push(Candidate {
                label: format!("{label}, the graph's relations left out"),
                shapes,
            });
        }
        if !out.iter().any(|c| c.shapes == with) {
            out.push(Candidate {
                label,
                shapes: with,
            });
        }
    };
    // Distinct values per key: 2, 3, 4, ... for keys the graph says nothing
    // about (unnamed ones stay at 2, as a batch shared by several inputs
    // must), distinct admissible sizes for the others.
    let mut values: BTreeMap<String, usize> = BTreeMap::new();
    let mut next = 2;
    for d in &unbound {
        let key = key_of(d);
        if values.contains_key(&key) {
            continue;
        }
        let v = match hint(d) {
            _ if d.symbol.as_ref().is_some_and(|s| rels.is_dependent(s)) => 1,
            Some(h) => {
                let mut v = h.fit(64);
                while h.exact.is_none() && values.values().any(|&u| u as u64 == v) {
                    v = h.fit(v + 1);
                }
                v as usize
            }
            None if d.symbol.is_some() => {
                next += 1;
                next - 1
            }
            None => 2,
        };
        values.insert(key, v);
    }
    let mut label = "distinct values for unbound dims".to_string();
    let described = [describe_hints(&hints), rels.describe()]
        .into_iter()
        .filter(|d| !d.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    if !described.is_empty() {
        label = format!("{label} ({described})");
    }
    push(
        label,
        with_sizes(model, base, &unbound, |d| values[&key_of(d)]),
    );
    let fitted = |d: &UnboundDim, size: usize, other: usize| match hint(d) {
        Some(h) if spatial(d) => h.fit(size as u64) as usize,
        Some(h) => h.exact.as_ref().map_or(other, |(n, _)| *n as usize),
        None if spatial(d) => size,
        None => other,
    };
    let has_spatial = unbound.iter().any(spatial);
    if has_spatial {
        // 512: audio frames (an STFT's reflect padding needs more than its
        // window), long enough sequences.
        for size in [64usize, 32, 128, 512] {
            push(
                format!("spatial dims {size}, other unbound dims 1"),
                with_sizes(model, base, &unbound, |d| fitted(d, size, 1)),
            );
        }
    }
    // Sequence-like inputs only (rank 1 or 2), every other unbound dim 1:
    // an audio model whose state input [2, batch, 128] must keep batch 1.
    if unbound.iter().any(|d| d.rank < 3 && d.axis > 0) {
        for size in [64usize, 512] {
            push(
                format!("sequence dims {size}, other unbound dims 1"),
                with_sizes(model, base, &unbound, |d| {
                    if d.rank < 3 && d.axis > 0 {
                        fitted(d, size, 1)
                    } else {
                        fitted(d, 1, 1)
                    }
                }),
            );
        }
    }
    // A signal: the last axis of a rank-3 input long, every other unbound
    // dim 1. pyannote's segmentation takes audio as [B, C, T], all unbound:
    // its InstanceNorm has one channel (C must be 1, which the spatial
    // choices above make 64 too) and SincNet's strides need T past 1000.
    // A second of 16 kHz audio first, then a quarter.
    if unbound.iter().any(signal) {
        for size in [16000usize, 4096] {
            push(
                format!("signal dims {size}, other unbound dims 1"),
                with_sizes(model, base, &unbound, |d| {
                    fitted(d, if signal(d) { size } else { 1 }, 1)
                }),
            );
        }
    }
    // Last, every unbound dim at a multiple of 4, then of 8: a graph that
    // splits its batch into fixed groups runs at none of the sizes above.
    // ICLabel (mne-icalabel) feeds each component four times, flipped and
    // negated, and averages them with a Reshape to [4, -1]: its batch must
    // be a multiple of 4, and its plain `optimize` exited 7 at batch 2.
    for dim in [2usize, 4, 8] {
        let mut every = base.clone();
        every.default_dim = dim;
        push(format!("every unbound dim {dim}"), every);
    }
    for c in unrelated {
        if !out.iter().any(|o| o.shapes == c.shapes) {
            out.push(c);
        }
    }
    out
}

/// `base` with the symbols its whole input shapes fix: `--input-shape
/// waveforms:1x16000` on `[batch_size, N]` makes `batch_size` 1 for
/// `waveforms_lens` (`[batch_size]`) too. The first sizes tried gave it a
/// distinct 2, which the symbol binding then refused against the user's 1,
/// and verification said it had fallen back to "every unbound dim 2" while
/// running at the user's sizes.
fn with_implied_symbols(model: &Model, base: &InputShapes) -> InputShapes {
    let mut out = base.clone();
    for (input, declared) in declared_inputs(model) {
        let (Some(declared), Some(given)) = (declared, base.shapes.get(&input)) else {
            continue;
        };
        if declared.len() != given.len() {
            continue;
        }
        for (d, &v) in declared.iter().zip(given) {
            if let Dim::Sym(s) = d {
                out.symbols.entry(s.clone()).or_insert(v);
            }
        }
    }
    out
}

/// The named unbound symbols.
fn symbols_of(unbound: &[UnboundDim]) -> BTreeSet<String> {
    unbound.iter().filter_map(|d| d.symbol.clone()).collect()
}

/// `shapes` with every dependent symbol set from the free ones (a free
/// symbol the candidate leaves to the default takes the default); unchanged
/// when a dependent would not be a size.
fn related(rels: &Relations, mut shapes: InputShapes) -> InputShapes {
    if rels.is_empty() {
        return shapes;
    }
    let default = shapes.default_dim as i64;
    let value = |s: &str| Some(shapes.symbols.get(s).map_or(default, |&v| v as i64));
    let Some(dependents) = rels.dependents(&value) else {
        return shapes;
    };
    for (s, v) in dependents {
        shapes.symbols.insert(s, v as usize);
    }
    shapes
}

/// `H: multiple of 32, at least 224; W: 512 (Concat `c`)` for the keys with hints.
pub fn describe_hints(hints: &BTreeMap<String, SizeHint>) -> String {
    hints
        .iter()
        .filter(|(_, h)| h.is_informative())
        .map(|(k, h)| {
            if let Some((n, why)) = &h.exact {
                return format!("{k} = {n} ({why})");
            }
            let mut parts = Vec::new();
            if h.divisor > 1 {
                parts.push(format!("a multiple of {}", h.divisor));
            }
            if h.min > 1 {
                parts.push(format!("at least {}", h.min));
            }
            format!("{k} {}", parts.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `base` with every unbound dim set by `size`. Named symbols get one value
/// (the first dim that uses them decides); unnamed dims fix their input's
/// whole shape.
fn with_sizes(
    model: &Model,
    base: &InputShapes,
    unbound: &[UnboundDim],
    size: impl Fn(&UnboundDim) -> usize,
) -> InputShapes {
    let mut shapes = base.clone();
    let mut per_input: BTreeMap<&str, Vec<&UnboundDim>> = BTreeMap::new();
    for d in unbound {
        match &d.symbol {
            Some(s) => {
                shapes.symbols.entry(s.clone()).or_insert_with(|| size(d));
            }
            None => per_input.entry(d.input.as_str()).or_default().push(d),
        }
    }
    for (input, dims) in declared_inputs(model) {
        let Some(unnamed) = per_input.get(input.as_str()) else {
            continue;
        };
        let Some(dims) = dims else { continue };
        let concrete: Vec<usize> = dims
            .iter()
            .enumerate()
            .map(|(axis, d)| match d {
                Dim::Known(v) if *v > 0 => *v as usize,
                Dim::Sym(s) => shapes.symbols.get(s).copied().unwrap_or(1),
                _ => unnamed
                    .iter()
                    .find(|u| u.axis == axis)
                    .map(|u| size(u))
                    .unwrap_or(1),
            })
            .collect();
        shapes.shapes.insert(input, concrete);
    }
    shapes
}

/// `--input-shape` arguments a user could pass, with symbols in capitals
/// and `D0`, `D1`, ... (numbered across inputs, so that two unnamed dims
/// never look alike) standing for the sizes to choose, followed by what the
/// graph says about them and the same arguments with numbers in (batch 1,
/// 256 moved to what the graph asks for elsewhere: a form to start from;
/// for the error when nothing runs).
pub fn suggestion(model: &Model, base: &InputShapes) -> Option<String> {
    let unbound = unbound_dims(model, base);
    if unbound.is_empty() {
        return None;
    }
    let hints = size_hints::hints(model, &unbound);
    let mut args = Vec::new();
    let mut examples = Vec::new();
    let mut named: BTreeMap<String, SizeHint> = BTreeMap::new();
    let mut unnamed = 0;
    for (input, dims) in declared_inputs(model) {
        if !unbound.iter().any(|u| u.input == input) {
            continue;
        }
        let Some(dims) = dims else { continue };
        let mut example = Vec::new();
        let text: Vec<String> = dims
            .iter()
            .enumerate()
            .map(|(axis, d)| {
                let shown = match d {
                    Dim::Known(v) if *v > 0 => {
                        example.push(v.to_string());
                        return v.to_string();
                    }
                    Dim::Sym(s) => s.to_uppercase(),
                    _ => {
                        unnamed += 1;
                        format!("D{}", unnamed - 1)
                    }
                };
                let key = unbound
                    .iter()
                    .find(|u| u.input == input && u.axis == axis)
                    .map(key_of);
                let hint = key.and_then(|k| hints.get(&k));
                if let Some(h) = hint {
                    named.insert(shown.clone(), h.clone());
                }
                // A batch of 1; a size of 256 (moved to what the graph
                // asks for) elsewhere.
                example.push(match (axis, hint) {
                    (0, _) => "1".to_string(),
                    (_, Some(h)) => h.fit(256).to_string(),
                    (_, None) => "256".to_string(),
                });
                shown
            })
            .collect();
        args.push(format!("--input-shape {input}:{}", text.join("x")));
        examples.push(format!("--input-shape {input}:{}", example.join("x")));
    }
    let mut described = describe_hints(&named);
    let rels = relations::relations(model, &symbols_of(&unbound)).describe();
    if !rels.is_empty() {
        described = if described.is_empty() {
            rels
        } else {
            format!("{described}; {rels}")
        };
    }
    // The capitals are placeholders: a user typed one as it stood.
    let example = format!(
        ", a number for each capitalized name (e.g. {})",
        examples.join(" ")
    );
    Some(if described.is_empty() {
        format!("{}{example}", args.join(" "))
    } else {
        format!("{} (the graph wants {described}){example}", args.join(" "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::builder::{GraphBuilder, dims};
    use infopt_ir::{Attribute, DataType};

    #[test]
    fn audio_of_unbound_batch_channels_and_time_is_tried_as_one_long_channel() {
        let mut b = GraphBuilder::new();
        let x = b.input("input", DataType::Float, dims(&["B", "C", "T"]));
        let y = b.op("Relu", &[x], vec![]);
        b.output(y, "y", DataType::Float, None);
        let model = b.build(17);
        let tries = candidates(&model, &InputShapes::new());
        let signal: Vec<&Candidate> = tries
            .iter()
            .filter(|c| c.label.starts_with("signal dims"))
            .collect();
        assert_eq!(signal.len(), 2, "{tries:?}");
        let at = |c: &Candidate, s: &str| c.shapes.symbols.get(s).copied();
        assert_eq!(
            (at(signal[0], "B"), at(signal[0], "C"), at(signal[0], "T")),
            (Some(1), Some(1), Some(16000))
        );
        assert_eq!(at(signal[1], "T"), Some(4096));
        // After the spatial choices, before every dim at 2.
        let pos = |l: &str| tries.iter().position(|c| c.label.starts_with(l)).unwrap();
        assert!(pos("spatial dims 512") < pos("signal dims 16000"));
        assert!(pos("signal dims 4096") < pos("every unbound dim 2"));
        // Multiples of 4 and 8 last (a batch split into fixed groups).
        assert!(pos("every unbound dim 2") < pos("every unbound dim 4"));
        assert!(pos("every unbound dim 4") < pos("every unbound dim 8"));
        let every4 = &tries[pos("every unbound dim 4")];
        assert_eq!(every4.shapes.default_dim, 4);
    }

    #[test]
    fn a_symbol_an_input_shape_fixes_is_kept_for_the_inputs_sharing_it() {
        // --input-shape waveforms:1x16000 on [batch_size, N]: the lengths
        // input [batch_size] takes batch_size 1 in every choice.
        let mut b = GraphBuilder::new();
        let w = b.input("waveforms", DataType::Float, dims(&["batch_size", "N"]));
        let l = b.input("lens", DataType::Float, dims(&["batch_size"]));
        let s = b.op("ReduceSum", &[w], vec![Attribute::ints("axes", vec![1])]);
        let y = b.op("Add", &[s, l], vec![]);
        b.output(y, "y", DataType::Float, None);
        let model = b.build(13);
        let mut base = InputShapes::new();
        base.shapes.insert("waveforms".into(), vec![1, 16000]);
        let tries = candidates(&model, &base);
        assert_eq!(tries.len(), 1, "{tries:?}");
        assert_eq!(tries[0].shapes.symbols.get("batch_size"), Some(&1));
        assert_eq!(tries[0].label, "as given");
    }

    #[test]
    fn related_sizes_come_first_and_unrelated_ones_stay_as_fallbacks() {
        let mut b = GraphBuilder::new();
        let k = b.input("cache", DataType::Float, dims(&["past"]));
        let n = b.input("new", DataType::Float, dims(&["seq"]));
        let m = b.input("mask", DataType::Float, dims(&["total"]));
        let c = b.op("Concat", &[k, n], vec![Attribute::int("axis", 0)]);
        let a = b.op("Add", &[c, m], vec![]);
        b.output(a, "y", DataType::Float, None);
        let model = b.build(13);
        let tries = candidates(&model, &InputShapes::new());
        let sym = |c: &Candidate, s: &str| {
            c.shapes
                .symbols
                .get(s)
                .copied()
                .unwrap_or(c.shapes.default_dim)
        };
        let first = &tries[0];
        assert_eq!(sym(first, "total"), sym(first, "past") + sym(first, "seq"));
        assert!(
            first.label.contains("total = past + seq (Add"),
            "{}",
            first.label
        );
        let last = tries.last().unwrap();
        assert!(
            last.label.ends_with("the graph's relations left out"),
            "{}",
            last.label
        );
        assert_ne!(sym(last, "total"), sym(last, "past") + sym(last, "seq"));
    }
}
