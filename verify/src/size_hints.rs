//! What a model's graph says about the sizes its unbound input dims accept.
//!
//! One forward walk over the main graph follows each unbound dim of a graph
//! input (a *key*: its symbol, or `input#axis` for an unnamed dim) through the
//! ops that keep an axis's identity, as a rational multiple of the key's size:
//! a stride-2 Conv halves it, a Resize with scale 2 doubles it, a Transpose
//! moves it. From that come three hints:
//!
//! - **divisor**: every multiple must be a whole number, or a floor somewhere
//!   makes two branches disagree (YOLO's upsampled map concatenated with a
//!   finer one; a Resize by 0.25). The divisor is the least common multiple
//!   of the denominators: the product of the strides of the longest strided
//!   Conv/Pool chain, divided by what Resizes multiply back.
//! - **minimum**: a Conv or Pool needs at least its (dilated) kernel minus
//!   its padding on each spatial axis; through the chain's factor that is a
//!   minimum size of the input.
//! - **exact**: where a followed dim meets a fixed one — an element-wise op
//!   or a Concat whose other operand has that axis fixed at `n > 1` (another
//!   input declared `[1,1,512,512]`, a positional table) — the input's size
//!   is `n` divided by the factor.
//!
//! Rules never guess beyond these ops: an op without a rule stops the walk
//! for its outputs, so a hint can be missing but is not made up. Offsets
//! (a valid Conv's `k - 1`, Pad) are not tracked: a Pad or Slice stops it.

use std::collections::{BTreeMap, HashMap};

use infopt_ir::{Dim, Graph, Model, Node, Tensor, ValueId};

/// One unbound dim of a graph input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnboundDim {
    pub input: String,
    pub axis: usize,
    pub rank: usize,
    /// The symbol, if the dim has one.
    pub symbol: Option<String>,
}

/// Largest divisor believed: beyond it the walk has met something it does
/// not understand rather than a real stride chain.
const MAX_DIVISOR: u64 = 1024;
/// Largest minimum or exact size believed.
const MAX_SIZE: u64 = 16384;

/// The hints for one key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SizeHint {
    /// Sizes must be multiples of this (1 when nothing divides).
    pub divisor: u64,
    /// Sizes must be at least this (1 when nothing bounds them).
    pub min: u64,
    /// The one size the graph admits, and the node that says so.
    pub exact: Option<(u64, String)>,
}

impl SizeHint {
    fn new() -> SizeHint {
        SizeHint {
            divisor: 1,
            min: 1,
            exact: None,
        }
    }

    /// `want` moved to the nearest size the hint admits: the exact size, or
    /// the smallest multiple of the divisor at least `max(want, min)`.
    pub fn fit(&self, want: u64) -> u64 {
        if let Some((n, _)) = &self.exact {
            return *n;
        }
        let at_least = want.max(self.min).max(1);
        at_least.div_ceil(self.divisor) * self.divisor
    }

    /// Whether the hint says anything.
    pub fn is_informative(&self) -> bool {
        self.divisor > 1 || self.min > 1 || self.exact.is_some()
    }
}

/// The key of an unbound dim: dims that share a symbol share a size.
pub fn key_of(d: &UnboundDim) -> String {
    match &d.symbol {
        Some(s) => s.clone(),
        None => format!("{}#{}", d.input, d.axis),
    }
}

/// A dim as a multiple of one key's size: `size(key) * num / den`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Lin {
    key: usize,
    num: u64,
    den: u64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl Lin {
    /// `self * num / den`, reduced; `None` when it leaves the believable range.
    fn scaled(self, num: u64, den: u64) -> Option<Lin> {
        let n = self.num.checked_mul(num)?;
        let d = self.den.checked_mul(den)?;
        let g = gcd(n, d).max(1);
        let (n, d) = (n / g, d / g);
        (n > 0 && n <= MAX_SIZE && d <= MAX_DIVISOR).then_some(Lin {
            key: self.key,
            num: n,
            den: d,
        })
    }
}

/// Per axis of a value: the multiple it follows, or `Fixed(n)` for a known
/// size, or nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ax {
    Follows(Lin),
    Fixed(u64),
    Other,
}

struct Walk<'a> {
    g: &'a Graph,
    /// Axis facts of the values reached so far.
    axes: HashMap<ValueId, Vec<Ax>>,
    /// Integer values that hold sizes (see [`Walk::size_values`]): per
    /// element, what it follows.
    sizes: HashMap<ValueId, Vec<Ax>>,
    hints: Vec<SizeHint>,
}

/// Hints for every key of `unbound`, by key.
pub fn hints(model: &Model, unbound: &[UnboundDim]) -> BTreeMap<String, SizeHint> {
    let mut keys: Vec<String> = Vec::new();
    for d in unbound {
        let k = key_of(d);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let g = &model.graph;
    let mut walk = Walk {
        g,
        axes: HashMap::new(),
        sizes: HashMap::new(),
        hints: vec![SizeHint::new(); keys.len()],
    };
    for io in &g.inputs {
        let v = io.value;
        if g.value(v).initializer.is_some() {
            continue;
        }
        let name = &g.value(v).name;
        let Some(shape) = g.value_type(v).and_then(|t| t.shape) else {
            continue;
        };
        let ax = shape
            .iter()
            .enumerate()
            .map(|(axis, dim)| {
                match unbound
                    .iter()
                    .find(|u| &u.input == name && u.axis == axis)
                    .and_then(|u| keys.iter().position(|k| *k == key_of(u)))
                {
                    Some(key) => Ax::Follows(Lin {
                        key,
                        num: 1,
                        den: 1,
                    }),
                    None => match dim {
                        Dim::Known(n) if *n > 0 => Ax::Fixed(*n as u64),
                        _ => Ax::Other,
                    },
                }
            })
            .collect();
        walk.axes.insert(v, ax);
    }
    if let Ok(order) = g.topological_order() {
        for id in order {
            walk.node(g.node(id));
        }
    }
    keys.into_iter().zip(walk.hints).collect()
}

impl Walk<'_> {
    /// Axis facts of `v`: tracked ones, else what its declared type fixes.
    fn facts(&self, v: ValueId) -> Option<Vec<Ax>> {
        if let Some(a) = self.axes.get(&v) {
            return Some(a.clone());
        }
        // A Constant node's output often has no declared type (Paddle's
        // exports: hundreds of scalar Constants multiplied into the maps).
        let shape = match self.g.value_type(v).and_then(|t| t.shape) {
            Some(s) => s,
            None => {
                let p = self.g.producer(v).filter(|p| p.is("Constant"))?;
                let t = infopt_ir::infer::constant_value(p)?;
                t.dims().iter().map(|&d| Dim::Known(d)).collect()
            }
        };
        Some(
            shape
                .iter()
                .map(|d| match d {
                    Dim::Known(n) if *n > 0 => Ax::Fixed(*n as u64),
                    _ => Ax::Other,
                })
                .collect(),
        )
    }

    /// Whether any input of the node follows a key (else there is nothing to do).
    fn reached(&self, node: &Node) -> bool {
        node.inputs.iter().flatten().any(|v| {
            self.axes
                .get(v)
                .is_some_and(|a| a.iter().any(|x| matches!(x, Ax::Follows(_))))
        })
    }

    fn constant(&self, v: Option<&Option<ValueId>>) -> Option<Tensor> {
        let v = (*v?)?;
        if let Some(t) = self.g.constant(v) {
            return Some(t.clone());
        }
        let p = self.g.producer(v)?;
        p.is("Constant")
            .then(|| infopt_ir::infer::constant_value(p))
            .flatten()
    }

    fn set(&mut self, node: &Node, slot: usize, ax: Vec<Ax>) {
        if let Some(Some(v)) = node.outputs.get(slot) {
            self.axes.insert(*v, ax);
        }
    }

    fn node(&mut self, node: &Node) {
        if !node.domain().is_empty() {
            return;
        }
        self.size_values(node);
        if !self.reached(node) {
            return;
        }
        let op = node.op_type.as_str();
        match op {
            "Conv" | "ConvInteger" | "MaxPool" | "AveragePool" | "LpPool" => self.window(node),
            "ConvTranspose" => self.transposed(node),
            "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" => {
                if let Some(mut a) = self.input_axes(node, 0) {
                    for x in a.iter_mut().skip(2) {
                        *x = Ax::Fixed(1);
                    }
                    if let Some(c) = a.get_mut(1) {
                        *c = Ax::Other;
                    }
                    self.set(node, 0, a);
                }
            }
            "Resize" | "Upsample" => self.resize(node),
            "Concat" => self.concat(node),
            "Transpose" => {
                if let Some(a) = self.input_axes(node, 0) {
                    let perm: Vec<i64> = match node.attr_ints("perm") {
                        Ok(Some(p)) => p.to_vec(),
                        _ => (0..a.len() as i64).rev().collect(),
                    };
                    let out: Option<Vec<Ax>> = perm
                        .iter()
                        .map(|&p| a.get(usize::try_from(p).ok()?).copied())
                        .collect();
                    if let Some(out) = out {
                        self.set(node, 0, out);
                    }
                }
            }
            // One output of the first input's shape.
            "Relu"
            | "LeakyRelu"
            | "Sigmoid"
            | "Tanh"
            | "HardSigmoid"
            | "HardSwish"
            | "Elu"
            | "Selu"
            | "Celu"
            | "Gelu"
            | "Softplus"
            | "Softsign"
            | "Mish"
            | "Clip"
            | "Exp"
            | "Log"
            | "Neg"
            | "Abs"
            | "Sqrt"
            | "Reciprocal"
            | "Erf"
            | "Floor"
            | "Ceil"
            | "Round"
            | "Sign"
            | "Cast"
            | "CastLike"
            | "Identity"
            | "Dropout"
            | "BatchNormalization"
            | "InstanceNormalization"
            | "LRN"
            | "Softmax"
            | "LogSoftmax"
            | "Hardmax"
            | "QuantizeLinear"
            | "DequantizeLinear"
            | "Not"
            | "IsNaN"
            | "LayerNormalization"
            | "GroupNormalization"
            | "Shrink"
            | "ThresholdedRelu" => {
                if let Some(a) = self.input_axes(node, 0) {
                    self.set(node, 0, a);
                }
            }
            "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Max" | "Min" | "Sum" | "Mean" | "PRelu"
            | "Where" | "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "And"
            | "Or" | "Xor" | "Mod" => self.broadcast(node),
            _ => {}
        }
    }

    /// Sizes read as values: `Shape(x)` holds `x`'s axes; a Gather or
    /// Slice of constant positions picks some of them, and Squeeze,
    /// Unsqueeze, Cast, Reshape and Identity keep one. A size less a
    /// constant (`Sub(samples, 400)`: an audio front end's frames from its
    /// samples less its window) says the size is at least that constant:
    /// below it the count is negative, and ONNX Runtime met onnx-asr's
    /// wespeaker front end at 3 samples with a floating-point exception
    /// that ended the process.
    fn size_values(&mut self, node: &Node) {
        let input = |slot: usize| node.inputs.get(slot).copied().flatten();
        let held = |v: Option<ValueId>| v.and_then(|v| self.sizes.get(&v)).cloned();
        let picked: Option<Vec<Ax>> = match node.op_type.as_str() {
            "Shape" => input(0).and_then(|x| self.facts(x)).map(|axes| {
                let rank = axes.len() as i64;
                let at = |i: i64| (if i < 0 { i + rank } else { i }).clamp(0, rank) as usize;
                let start = at(node.attr_int_or("start", 0).unwrap_or(0));
                let end = at(node.attr_int("end").ok().flatten().unwrap_or(rank));
                axes.get(start..end.max(start))
                    .map(<[Ax]>::to_vec)
                    .unwrap_or_default()
            }),
            "Gather" if node.attr_int_or("axis", 0).unwrap_or(0) == 0 => {
                let all = held(input(0));
                let at = self
                    .constant(node.inputs.get(1))
                    .and_then(|t| t.to_i64_vec().ok());
                match (all, at) {
                    (Some(all), Some(at)) => at
                        .iter()
                        .map(|&i| {
                            let i = if i < 0 { i + all.len() as i64 } else { i };
                            usize::try_from(i).ok().and_then(|i| all.get(i).copied())
                        })
                        .collect(),
                    _ => None,
                }
            }
            "Slice" => {
                let all = held(input(0));
                let bound = |slot: usize| {
                    self.constant(node.inputs.get(slot))
                        .and_then(|t| t.to_i64_vec().ok())
                        .and_then(|v| (v.len() == 1).then(|| v[0]))
                };
                let axis_zero = match self.constant(node.inputs.get(3)) {
                    Some(t) => t.to_i64_vec().is_ok_and(|a| a == [0]),
                    None => input(3).is_none(),
                };
                let plain_step = input(4).is_none();
                match (all, bound(1), bound(2)) {
                    (Some(all), Some(a), Some(b)) if axis_zero && plain_step => {
                        let n = all.len() as i64;
                        let at = |i: i64| (if i < 0 { i + n } else { i }).clamp(0, n) as usize;
                        all.get(at(a)..at(b).max(at(a))).map(<[Ax]>::to_vec)
                    }
                    _ => None,
                }
            }
            "Squeeze" | "Unsqueeze" | "Cast" | "Reshape" | "Identity" => {
                held(input(0)).filter(|v| v.len() == 1)
            }
            "Sub" => {
                if let (Some([Ax::Follows(l)]), Some(c)) = (
                    held(input(0)).as_deref(),
                    self.constant(node.inputs.get(1))
                        .and_then(|t| t.to_i64_vec().ok())
                        .filter(|v| v.len() == 1)
                        .map(|v| v[0]),
                ) && c > 1
                {
                    let min = (c as u64).checked_mul(l.den).map(|n| n.div_ceil(l.num));
                    let h = &mut self.hints[l.key];
                    if let Some(min) = min.filter(|&m| m <= MAX_SIZE) {
                        h.min = h.min.max(min);
                    }
                }
                None
            }
            _ => None,
        };
        if let (Some(v), Some(Some(out))) = (picked, node.outputs.first()) {
            self.sizes.insert(*out, v);
        }
    }

    fn input_axes(&self, node: &Node, slot: usize) -> Option<Vec<Ax>> {
        let v = (*node.inputs.get(slot)?)?;
        self.facts(v)
    }

    /// Records that key size `lin` must equal `n` (the node says so).
    fn exact(&mut self, lin: Lin, n: u64, node: &Node) {
        let scaled = n * lin.den;
        if n <= 1 || !scaled.is_multiple_of(lin.num) {
            return;
        }
        let size = scaled / lin.num;
        let h = &mut self.hints[lin.key];
        if size <= MAX_SIZE && h.exact.is_none() {
            h.exact = Some((size, format!("{} `{}`", node.op_type, node.name_or_op())));
        }
    }

    fn note_divisor(&mut self, lin: Lin) {
        let h = &mut self.hints[lin.key];
        let l = h.divisor / gcd(h.divisor, lin.den) * lin.den;
        if l <= MAX_DIVISOR {
            h.divisor = l;
        }
    }

    /// Numpy broadcasting of every input; a followed axis meeting a fixed
    /// size above 1 gives an exact hint.
    fn broadcast(&mut self, node: &Node) {
        let ins: Vec<Vec<Ax>> = node
            .inputs
            .iter()
            .map(|v| v.and_then(|v| self.facts(v)))
            .collect::<Option<_>>()
            .unwrap_or_default();
        if ins.is_empty() {
            return;
        }
        let rank = ins.iter().map(|a| a.len()).max().unwrap_or(0);
        let mut out = vec![Ax::Other; rank];
        for (i, slot) in out.iter_mut().enumerate() {
            let at = |a: &Vec<Ax>| (i + a.len()).checked_sub(rank).map(|j| a[j]);
            let here: Vec<Ax> = ins.iter().filter_map(at).collect();
            let follows = here.iter().find_map(|x| match x {
                Ax::Follows(l) => Some(*l),
                _ => None,
            });
            let fixed = here.iter().find_map(|x| match x {
                Ax::Fixed(n) if *n > 1 => Some(*n),
                _ => None,
            });
            *slot = match (follows, fixed) {
                (Some(l), Some(n)) => {
                    self.exact(l, n, node);
                    Ax::Fixed(n)
                }
                (Some(l), None) => Ax::Follows(l),
                (None, Some(n)) => Ax::Fixed(n),
                (None, None) if here.iter().all(|x| *x == Ax::Fixed(1)) => Ax::Fixed(1),
                _ => Ax::Other,
            };
        }
        self.set(node, 0, out);
    }

    fn concat(&mut self, node: &Node) {
        let ins: Option<Vec<Vec<Ax>>> = node
            .inputs
            .iter()
            .map(|v| v.and_then(|v| self.facts(v)))
            .collect();
        let Some(ins) = ins.filter(|i| !i.is_empty()) else {
            return;
        };
        let rank = ins[0].len();
        if ins.iter().any(|a| a.len() != rank) {
            return;
        }
        let axis = node.attr_int_or("axis", 0).unwrap_or(0);
        let axis = if axis < 0 { axis + rank as i64 } else { axis };
        let mut out = vec![Ax::Other; rank];
        for (i, slot) in out.iter_mut().enumerate() {
            if i as i64 == axis {
                continue;
            }
            let follows = ins.iter().find_map(|a| match a[i] {
                Ax::Follows(l) => Some(l),
                _ => None,
            });
            let fixed = ins.iter().find_map(|a| match a[i] {
                Ax::Fixed(n) => Some(n),
                _ => None,
            });
            *slot = match (follows, fixed) {
                // Concat does not broadcast: a fixed partner fixes the size, 1 included.
                (Some(l), Some(n)) => {
                    self.exact(l, n, node);
                    Ax::Fixed(n)
                }
                (Some(l), None) => Ax::Follows(l),
                (None, Some(n)) => Ax::Fixed(n),
                _ => Ax::Other,
            };
        }
        self.set(node, 0, out);
    }

    /// Conv and pools: spatial axes divided by the stride, with a minimum
    /// from the kernel.
    fn window(&mut self, node: &Node) {
        let Some(x) = self.input_axes(node, 0) else {
            return;
        };
        if x.len() < 3 {
            return;
        }
        let spatial = x.len() - 2;
        // Conv's kernel may be left to the weight's dims [M, C/group, k...].
        let kernel: Vec<i64> = match node.attr_ints("kernel_shape") {
            Ok(Some(k)) => k.to_vec(),
            _ => node
                .inputs
                .get(1)
                .copied()
                .flatten()
                .and_then(|w| self.g.value_type(w)?.known_dims())
                .filter(|d| d.len() == x.len())
                .map(|d| d[2..].to_vec())
                .unwrap_or_else(|| vec![1; spatial]),
        };
        let ints = |name: &str, default: i64, n: usize| -> Vec<i64> {
            match node.attr_ints(name) {
                Ok(Some(v)) if v.len() == n => v.to_vec(),
                _ => vec![default; n],
            }
        };
        let strides = ints("strides", 1, spatial);
        let dilations = ints("dilations", 1, spatial);
        let pads = ints("pads", 0, 2 * spatial);
        let auto_pad = node
            .attr_string("auto_pad")
            .ok()
            .flatten()
            .unwrap_or_default();
        let same = auto_pad.starts_with("SAME");
        let mut out = vec![Ax::Other; x.len()];
        out[0] = x[0];
        for i in 0..spatial {
            let ax = x[2 + i];
            let k = kernel.get(i).copied().unwrap_or(1).max(1);
            let s = strides[i].max(1) as u64;
            let eff = dilations[i].max(1) * (k - 1) + 1;
            let padded = if same {
                eff - 1
            } else {
                pads[i] + pads[i + spatial]
            };
            out[2 + i] = match ax {
                Ax::Follows(l) => {
                    // The input must cover the kernel: size * factor >= eff - pads.
                    let need = (eff - padded).max(1) as u64;
                    let min = (need * l.den).div_ceil(l.num);
                    let h = &mut self.hints[l.key];
                    if min <= MAX_SIZE {
                        h.min = h.min.max(min);
                    }
                    match l.scaled(1, s) {
                        Some(n) => {
                            self.note_divisor(n);
                            Ax::Follows(n)
                        }
                        None => Ax::Other,
                    }
                }
                _ => Ax::Other,
            };
        }
        self.set(node, 0, out);
    }

    fn transposed(&mut self, node: &Node) {
        let Some(x) = self.input_axes(node, 0) else {
            return;
        };
        if x.len() < 3 || node.attr("output_shape").is_some() {
            return;
        }
        let spatial = x.len() - 2;
        let strides = match node.attr_ints("strides") {
            Ok(Some(v)) if v.len() == spatial => v.to_vec(),
            _ => vec![1; spatial],
        };
        let mut out = vec![Ax::Other; x.len()];
        out[0] = x[0];
        for i in 0..spatial {
            if let Ax::Follows(l) = x[2 + i]
                && let Some(n) = l.scaled(strides[i].max(1) as u64, 1)
            {
                out[2 + i] = Ax::Follows(n);
            }
        }
        self.set(node, 0, out);
    }

    /// Resize/Upsample by constant scales (a rational close to each) or to
    /// constant sizes.
    fn resize(&mut self, node: &Node) {
        let Some(x) = self.input_axes(node, 0) else {
            return;
        };
        let scales_slot = if node.is("Upsample") || node.inputs.len() == 2 {
            1
        } else {
            2
        };
        let scales = self
            .constant(node.inputs.get(scales_slot))
            .and_then(|t| t.to_f64_vec().ok())
            .filter(|s| s.len() == x.len())
            .or_else(|| {
                node.attr_floats("scales")
                    .ok()
                    .flatten()
                    .map(|s| s.iter().map(|&v| v as f64).collect())
                    .filter(|s: &Vec<f64>| s.len() == x.len())
            });
        if let Some(scales) = scales {
            let out: Vec<Ax> = x
                .iter()
                .zip(&scales)
                .map(|(ax, &s)| match (ax, rational(s)) {
                    (_, Some((1, 1))) => *ax,
                    (Ax::Follows(l), Some((p, q))) => match l.scaled(p, q) {
                        Some(n) => {
                            self.note_divisor(n);
                            Ax::Follows(n)
                        }
                        None => Ax::Other,
                    },
                    _ => Ax::Other,
                })
                .collect();
            self.set(node, 0, out);
            return;
        }
        if let Some(sizes) = self
            .constant(node.inputs.get(3))
            .and_then(|t| t.to_i64_vec().ok())
            .filter(|s| s.len() == x.len())
        {
            let out = sizes
                .iter()
                .map(|&n| {
                    if n > 0 {
                        Ax::Fixed(n as u64)
                    } else {
                        Ax::Other
                    }
                })
                .collect();
            self.set(node, 0, out);
        }
    }
}

/// `s` as `p / q` with `q <= 64`, when one is that close.
fn rational(s: f64) -> Option<(u64, u64)> {
    if !(s.is_finite() && s > 0.0) {
        return None;
    }
    (1..=64u64).find_map(|q| {
        let p = (s * q as f64).round();
        ((p / q as f64 - s).abs() <= 1e-6 * s && p >= 1.0).then(|| {
            let p = p as u64;
            let g = gcd(p, q);
            (p / g, q / g)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rationals_of_common_scales() {
        assert_eq!(rational(2.0), Some((2, 1)));
        assert_eq!(rational(0.5), Some((1, 2)));
        assert_eq!(rational(0.25), Some((1, 4)));
        assert_eq!(rational(1.5), Some((3, 2)));
        assert_eq!(rational(1.0 / 3.0), Some((1, 3)));
        assert_eq!(rational(std::f64::consts::PI), None);
        assert_eq!(rational(0.0), None);
    }

    #[test]
    fn fit_rounds_up_to_a_multiple_above_the_minimum() {
        let h = SizeHint {
            divisor: 32,
            min: 200,
            exact: None,
        };
        assert_eq!(h.fit(64), 224);
        assert_eq!(h.fit(512), 512);
        let e = SizeHint {
            exact: Some((14, "Add".into())),
            ..SizeHint::new()
        };
        assert_eq!(e.fit(64), 14);
    }
}
