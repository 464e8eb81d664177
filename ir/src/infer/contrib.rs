//! `com.microsoft` ops that exporters and ONNX Runtime's optimizer emit.

use crate::dtype::DataType;
use crate::shape::Dim;

use super::facts::Fact;
use super::linalg::matmul_shape;
use super::rule_cx::RuleCx;

pub(crate) fn infer(cx: &RuleCx) -> Option<Vec<Fact>> {
    Some(match cx.node.op_type.as_str() {
        "FusedConv" => vec![super::nn::conv(cx, false)],
        "Gelu" | "FastGelu" | "BiasGelu" | "QuickGelu" | "BiasAdd" | "Gelu_Grad" => {
            vec![cx.like(0, cx.shape(0).map(|s| s.to_vec()))]
        }
        "LayerNormalization" | "SimplifiedLayerNormalization" => {
            super::nn::layer_norm(cx, cx.attr_int("axis", -1))
        }
        "SkipLayerNormalization" | "SkipSimplifiedLayerNormalization" => {
            let shape = cx.shape(0).map(|s| s.to_vec());
            let stats = shape.as_ref().map(|s| {
                let mut st = s.clone();
                if let Some(last) = st.last_mut() {
                    *last = Dim::Known(1);
                }
                st
            });
            let mut out = vec![cx.like(0, shape.clone())];
            let n = cx.node.outputs.len();
            if n > 1 {
                out.push(Fact::new(DataType::Float, stats.clone()));
            }
            if n > 2 {
                out.push(Fact::new(DataType::Float, stats));
            }
            if n > 3 {
                out.push(cx.like(0, shape));
            }
            out
        }
        // Packed-QKV attention: [B, S, v_hidden], v_hidden from
        // qkv_hidden_sizes or a third of the packed weight's width.
        "Attention" => {
            let v_hidden = match cx.attr_ints("qkv_hidden_sizes") {
                Some(h) if h.len() == 3 => Dim::Known(h[2]),
                _ => match cx.shape(1).and_then(|w| w.get(1).cloned()) {
                    Some(Dim::Known(w)) if w % 3 == 0 => Dim::Known(w / 3),
                    _ => Dim::Unknown,
                },
            };
            let y = cx
                .shape(0)
                .filter(|s| s.len() == 3)
                .map(|s| vec![s[0].clone(), s[1].clone(), v_hidden]);
            let mut out = vec![cx.like(0, y)];
            for _ in 1..cx.node.outputs.len() {
                out.push(cx.like(0, None));
            }
            out
        }
        "FusedMatMul" => {
            let swap = |s: Option<&[Dim]>, t: bool| -> Option<Vec<Dim>> {
                let mut v = s?.to_vec();
                if t {
                    let n = v.len();
                    if n < 2 {
                        return None;
                    }
                    v.swap(n - 1, n - 2);
                }
                Some(v)
            };
            // transBatchA/B move batch dims around: only the plain forms are inferred.
            if cx.attr_int("transBatchA", 0) != 0 || cx.attr_int("transBatchB", 0) != 0 {
                return Some(vec![cx.like(0, None)]);
            }
            let a = swap(cx.shape(0), cx.attr_int("transA", 0) != 0);
            let b = swap(cx.shape(1), cx.attr_int("transB", 0) != 0);
            vec![cx.like(0, matmul_shape(a.as_deref(), b.as_deref()))]
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::attr::Attribute;

    #[test]
    fn microsoft_ops() {
        let ms = "com.microsoft";
        let f = run_in(
            ms,
            "FusedMatMul",
            17,
            &[f32s(&["b", "16"]), f32s(&["8", "16"])],
            vec![Attribute::int("transB", 1)],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[b,8]");
        let f = run_in(ms, "Gelu", 17, &[f32s(&["b", "16"])], vec![], 1);
        assert_eq!(shape_of(&f[0]), "[b,16]");
        let f = run_in(
            ms,
            "SkipLayerNormalization",
            17,
            &[
                f32s(&["b", "s", "32"]),
                f32s(&["b", "s", "32"]),
                f32s(&["32"]),
            ],
            vec![],
            4,
        );
        assert_eq!(shape_of(&f[1]), "[b,s,1]");
        assert_eq!(shape_of(&f[3]), "[b,s,32]");
        let f = run_in(
            ms,
            "FusedConv",
            17,
            &[f32s(&["n", "3", "8", "8"]), f32s(&["4", "3", "1", "1"])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,4,8,8]");
        let f = run_in("com.example", "Gelu", 17, &[f32s(&["b"])], vec![], 1);
        assert_eq!(f[0].shape(), None);
    }
}
