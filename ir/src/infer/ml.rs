//! `ai.onnx.ml` ops whose output has the input's shape (scikit-learn
//! pipelines through skl2onnx start with them): without a rule, everything
//! after a `Scaler` has no known type or rank, so a Cast to its own type and
//! the MatMul + Add of an MLP's first layer stay.

use crate::dtype::DataType;

use super::facts::Fact;
use super::rule_cx::RuleCx;

pub(crate) fn infer(cx: &RuleCx) -> Option<Vec<Fact>> {
    let shape = || cx.shape(0).map(|s| s.to_vec());
    Some(match cx.node.op_type.as_str() {
        // The spec's output type is float whatever the input's.
        "Scaler" | "Normalizer" => vec![Fact::new(DataType::Float, shape())],
        // Same type and shape as the input.
        "Binarizer" | "Imputer" => vec![cx.like(0, shape())],
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::dtype::DataType;

    #[test]
    fn elementwise_ml_ops_keep_the_shape() {
        let ml = "ai.onnx.ml";
        let f = run_in(ml, "Scaler", 17, &[f32s(&["batch", "12"])], vec![], 1);
        assert_eq!(shape_of(&f[0]), "[batch,12]");
        assert_eq!(f[0].ty.dtype, DataType::Float);
        let f = run_in(ml, "Imputer", 17, &[f32s(&["n", "3"])], vec![], 1);
        assert_eq!(shape_of(&f[0]), "[n,3]");
        let f = run_in(ml, "LinearClassifier", 17, &[f32s(&["n", "3"])], vec![], 2);
        assert_eq!(f[0].shape(), None);
    }
}
