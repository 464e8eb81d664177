//! MatMul, Gemm, Einsum, and the Fourier transforms (DFT, STFT).

use std::collections::BTreeMap;

use crate::dtype::DataType;
use crate::shape::Dim;

use super::elementwise::{broadcast, broadcast_dim};
use super::facts::Fact;
use super::rule_cx::RuleCx;

pub(crate) fn infer(cx: &RuleCx) -> Option<Vec<Fact>> {
    Some(vec![match cx.node.op_type.as_str() {
        "MatMul" => Fact::new(cx.dtype(0), matmul_shape(cx.shape(0), cx.shape(1))),
        "MatMulInteger" => Fact::new(DataType::Int32, matmul_shape(cx.shape(0), cx.shape(1))),
        "Gemm" => gemm(cx),
        "Einsum" => einsum(cx),
        // Their element type is the signal's: what the float16 rules for a
        // log spectrum's front end follow from the square back to the input.
        "STFT" => Fact::new(cx.dtype(0), stft_shape(cx)),
        "DFT" => Fact::new(cx.dtype(0), dft_shape(cx)),
        _ => return None,
    }])
}

/// STFT's `[batch, frames, bins, 2]` from a `[batch, samples, 1|2]` signal,
/// its frame step, and its window (or frame length): the frames and bins
/// where those are known.
fn stft_shape(cx: &RuleCx) -> Option<Vec<Dim>> {
    let signal = cx.shape(0)?;
    let batch = signal.first()?.clone();
    let length = match cx.shape(2).and_then(|w| w.first().cloned()) {
        Some(Dim::Known(n)) => Some(n),
        _ => cx.ints(3).and_then(|v| v.first().copied()),
    }
    .filter(|&l| l > 0);
    let step = cx.ints(1).and_then(|v| v.first().copied());
    let onesided = cx.node.attr_int_or("onesided", 1).ok()? != 0;
    let frames = match (signal.get(1), length, step) {
        (Some(Dim::Known(n)), Some(l), Some(s)) if s > 0 && *n >= l => Dim::Known((n - l) / s + 1),
        _ => Dim::Unknown,
    };
    let bins = match length {
        Some(l) if onesided => Dim::Known(l / 2 + 1),
        Some(l) => Dim::Known(l),
        None => Dim::Unknown,
    };
    Some(vec![batch, frames, bins, Dim::Known(2)])
}

/// DFT's output: the input's dims with a last axis of 2 (complex), the
/// transformed axis unknown where a length or a one-sided output changes it.
fn dft_shape(cx: &RuleCx) -> Option<Vec<Dim>> {
    let mut dims = cx.shape(0)?.to_vec();
    let rank = dims.len();
    if rank < 2 {
        return None;
    }
    dims[rank - 1] = Dim::Known(2);
    let axis = if cx.opset() >= 20 {
        cx.ints(2).and_then(|v| v.first().copied()).unwrap_or(-2)
    } else {
        cx.node.attr_int_or("axis", 1).ok()?
    };
    let axis = if axis < 0 { axis + rank as i64 } else { axis };
    let resized = cx.has_input(1) || cx.node.attr_int_or("onesided", 0).ok()? != 0;
    if resized && let Some(d) = usize::try_from(axis).ok().and_then(|a| dims.get_mut(a)) {
        *d = Dim::Unknown;
    }
    Some(dims)
}

/// numpy matmul: batch dims broadcast; rank-1 operands are promoted and the
/// promoted dim removed from the result.
pub(crate) fn matmul_shape(a: Option<&[Dim]>, b: Option<&[Dim]>) -> Option<Vec<Dim>> {
    let (a, b) = (a?, b?);
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let a_vec = a.len() == 1;
    let b_vec = b.len() == 1;
    let a2: Vec<Dim> = if a_vec {
        vec![Dim::Known(1), a[0].clone()]
    } else {
        a.to_vec()
    };
    let b2: Vec<Dim> = if b_vec {
        vec![b[0].clone(), Dim::Known(1)]
    } else {
        b.to_vec()
    };
    // The contracted dims must agree when both are known.
    if let (Dim::Known(p), Dim::Known(q)) = (&a2[a2.len() - 1], &b2[b2.len() - 2])
        && p != q
    {
        return None;
    }
    let batch = broadcast(&[Some(&a2[..a2.len() - 2]), Some(&b2[..b2.len() - 2])])?;
    let mut out = batch;
    if !a_vec {
        out.push(a2[a2.len() - 2].clone());
    }
    if !b_vec {
        out.push(b2[b2.len() - 1].clone());
    }
    Some(out)
}

fn gemm(cx: &RuleCx) -> Fact {
    let dtype = cx.dtype(0);
    let (Some(a), Some(b)) = (cx.shape(0), cx.shape(1)) else {
        return Fact::new(dtype, Some(vec![Dim::Unknown, Dim::Unknown]));
    };
    if a.len() != 2 || b.len() != 2 {
        return Fact::new(dtype, None);
    }
    let m = if cx.attr_int("transA", 0) != 0 {
        &a[1]
    } else {
        &a[0]
    };
    let n = if cx.attr_int("transB", 0) != 0 {
        &b[0]
    } else {
        &b[1]
    };
    Fact::new(dtype, Some(vec![m.clone(), n.clone()]))
}

fn einsum(cx: &RuleCx) -> Fact {
    let dtype = cx.dtype(0);
    let Some(eq) = cx.attr_string("equation") else {
        return Fact::new(dtype, None);
    };
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != cx.n_inputs() {
        return Fact::new(dtype, None);
    }
    let mut letters: BTreeMap<char, Dim> = BTreeMap::new();
    let mut counts: BTreeMap<char, usize> = BTreeMap::new();
    let mut ellipsis: Option<Vec<Dim>> = None;
    let mut ellipsis_seen = false;
    for (i, term) in terms.iter().enumerate() {
        let Some(shape) = cx.shape(i) else {
            return Fact::new(dtype, None);
        };
        // One ellipsis per operand at most (the spec's grammar): a second
        // would take the same broadcast dims twice (fuzz seed 4242 case
        // 1040 indexed past the shape).
        if term.matches("...").count() > 1 {
            return Fact::new(dtype, None);
        }
        let has_ell = term.contains("...");
        let named: Vec<char> = term.replace("...", "").chars().collect();
        if named.iter().any(|c| !c.is_ascii_alphabetic()) {
            return Fact::new(dtype, None);
        }
        let ell_rank = if has_ell {
            match shape.len().checked_sub(named.len()) {
                Some(r) => r,
                None => return Fact::new(dtype, None),
            }
        } else if shape.len() != named.len() {
            return Fact::new(dtype, None);
        } else {
            0
        };
        let mut pos = 0;
        let mut chars = term.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '.' {
                chars.next();
                chars.next();
                let dims = &shape[pos..pos + ell_rank];
                ellipsis = match ellipsis.take() {
                    None => Some(dims.to_vec()),
                    Some(prev) => broadcast(&[Some(&prev), Some(dims)]),
                };
                ellipsis_seen = true;
                pos += ell_rank;
                continue;
            }
            let d = &shape[pos];
            let merged = match letters.get(&c) {
                None => d.clone(),
                Some(prev) => match broadcast_dim(prev, d) {
                    Some(x) => x,
                    None => return Fact::new(dtype, None),
                },
            };
            letters.insert(c, merged);
            *counts.entry(c).or_default() += 1;
            pos += 1;
        }
    }
    let ell = if ellipsis_seen {
        ellipsis
    } else {
        Some(vec![])
    };
    let mut out = Vec::new();
    match rhs {
        Some(r) => {
            let mut chars = r.chars().peekable();
            while let Some(c) = chars.next() {
                if c == '.' {
                    chars.next();
                    chars.next();
                    match &ell {
                        Some(e) => out.extend(e.iter().cloned()),
                        None => return Fact::new(dtype, None),
                    }
                    continue;
                }
                match letters.get(&c) {
                    Some(d) => out.push(d.clone()),
                    None => return Fact::new(dtype, None),
                }
            }
        }
        None => {
            // Implicit output: ellipsis dims, then letters seen once, alphabetically.
            match &ell {
                Some(e) => out.extend(e.iter().cloned()),
                None => return Fact::new(dtype, None),
            }
            for (c, n) in &counts {
                if *n == 1 {
                    out.push(letters[c].clone());
                }
            }
        }
    }
    Fact::new(dtype, Some(out))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::attr::Attribute;

    #[test]
    fn matmul_and_gemm() {
        let f = run(
            "MatMul",
            17,
            &[f32s(&["b", "s", "32"]), f32s(&["32", "64"])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[b,s,64]");
        let f = run(
            "MatMul",
            17,
            &[f32s(&["b", "h", "s", "16"]), f32s(&["b", "h", "16", "s"])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[b,h,s,s]");
        let f = run(
            "MatMul",
            17,
            &[f32s(&["3"]), f32s(&["2", "3", "4"])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[2,4]");
        let f = run("MatMul", 17, &[f32s(&["2", "3"]), f32s(&["3"])], vec![], 1);
        assert_eq!(shape_of(&f[0]), "[2]");
        let f = run(
            "MatMul",
            17,
            &[f32s(&["2", "3"]), f32s(&["4", "5"])],
            vec![],
            1,
        );
        assert_eq!(f[0].shape(), None);
        let f = run(
            "Gemm",
            17,
            &[f32s(&["b", "32"]), f32s(&["10", "32"]), f32s(&["10"])],
            vec![Attribute::int("transB", 1)],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[b,10]");
        let f = run(
            "Gemm",
            17,
            &[f32s(&["32", "b"]), f32s(&["32", "10"])],
            vec![Attribute::int("transA", 1)],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[b,10]");
    }

    #[test]
    fn stft_and_dft_keep_the_signal_type_and_count_frames_and_bins() {
        let window = Input::C(Box::new(crate::Tensor::from_f32(vec![400], &[1.0; 400])));
        let f = run(
            "STFT",
            17,
            &[f32s(&["1", "8001", "1"]), i64s(160), window],
            vec![Attribute::int("onesided", 1)],
            1,
        );
        assert_eq!(f[0].ty.dtype, crate::dtype::DataType::Float);
        assert_eq!(shape_of(&f[0]), "[1,48,201,2]");
        let f = run(
            "STFT",
            17,
            &[f32s(&["b", "n", "1"]), i64s(160), Input::None, i64s(512)],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[b,?,257,2]");
        // A frame length that is no length sizes nothing.
        let f = run(
            "STFT",
            17,
            &[f32s(&["1", "800", "1"]), i64s(160), Input::None, i64s(-4)],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[1,?,?,2]");
        let f = run(
            "DFT",
            17,
            &[f32s(&["2", "512", "1"])],
            vec![Attribute::int("onesided", 1)],
            1,
        );
        assert_eq!(f[0].ty.dtype, crate::dtype::DataType::Float);
        assert_eq!(shape_of(&f[0]), "[2,?,2]");
    }

    #[test]
    fn einsum_with_two_ellipses_in_one_operand_has_no_shape() {
        let f = run(
            "Einsum",
            17,
            &[f32s(&["2", "3", "4", "5"])],
            vec![Attribute::string("equation", "...a...->a")],
            1,
        );
        assert_eq!(shape_of(&f[0]), "?");
    }

    #[test]
    fn einsum() {
        let f = run(
            "Einsum",
            17,
            &[f32s(&["b", "i", "j"]), f32s(&["b", "j", "k"])],
            vec![Attribute::string("equation", "bij,bjk->bik")],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[b,i,k]");
        let f = run(
            "Einsum",
            17,
            &[f32s(&["3", "4"]), f32s(&["4", "5"])],
            vec![Attribute::string("equation", "ij,jk")],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[3,5]");
        let f = run(
            "Einsum",
            17,
            &[f32s(&["n", "h", "s", "d"]), f32s(&["n", "h", "t", "d"])],
            vec![Attribute::string("equation", "...sd,...td->...st")],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,h,s,t]");
        let f = run(
            "Einsum",
            17,
            &[f32s(&["3", "3"])],
            vec![Attribute::string("equation", "ii->i")],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[3]");
    }
}
