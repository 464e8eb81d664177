//! The calibration data decides the sizes the model runs with: a model with
//! a dynamic batch calibrated on batch-1 samples runs at batch 1, an OCR
//! model at the width of its text lines. The first sample's dims bind each
//! input the user did not fix (and the symbols of its dynamic dims), for
//! calibration and for verification alike, so that sizes chosen for random
//! inputs never fight the data.

use infopt_ir::{DataType, Dim, Model};
use infopt_runtime::{DType, DimSpec, InputShapes, IoSpec};
use infopt_verify::dataset::Dataset;

use crate::data_source::{DataSource, open_files};

/// The runtime element type of an IR type, where samples can hold it.
fn dtype_of(t: DataType) -> Option<DType> {
    Some(match t {
        DataType::Float => DType::F32,
        DataType::Double => DType::F64,
        DataType::Float16 => DType::F16,
        DataType::Bfloat16 => DType::BF16,
        DataType::Int8 => DType::I8,
        DataType::Int16 => DType::I16,
        DataType::Int32 => DType::I32,
        DataType::Int64 => DType::I64,
        DataType::Uint8 => DType::U8,
        DataType::Uint16 => DType::U16,
        DataType::Uint32 => DType::U32,
        DataType::Uint64 => DType::U64,
        DataType::Bool => DType::Bool,
        _ => return None,
    })
}

/// The model's inputs as declared (initializers left out).
pub fn declared_specs(model: &Model) -> Vec<IoSpec> {
    let g = &model.graph;
    g.inputs
        .iter()
        .filter(|io| g.value(io.value).initializer.is_none())
        .map(|io| {
            let t = g.value_type(io.value);
            IoSpec {
                name: g.value(io.value).name.clone(),
                dtype: t
                    .as_ref()
                    .and_then(|t| dtype_of(t.dtype))
                    .unwrap_or(DType::F32),
                dims: t.and_then(|t| t.shape).map(|dims| {
                    dims.iter()
                        .map(|d| match d {
                            Dim::Known(v) if *v > 0 => DimSpec::Known(*v as usize),
                            Dim::Sym(s) => DimSpec::Symbol(s.clone()),
                            _ => DimSpec::Unknown,
                        })
                        .collect()
                }),
            }
        })
        .collect()
}

/// Binds the inputs of `shapes` that nothing fixed yet to the dims of the
/// first sample of `source`, and the symbols of their dynamic dims to the
/// same sizes. Returns a note saying what was bound (`None` for random data,
/// which has no sizes of its own, or when everything was fixed already). A
/// sample the model cannot take is an error naming the file, the input and
/// its dims.
pub fn bind_from_data(
    model: &Model,
    source: &DataSource,
    shapes: &mut InputShapes,
) -> Result<Option<String>, String> {
    let Some(mut data) = open_files(source)? else {
        return Ok(None);
    };
    bind_from_dataset(model, data.as_mut(), shapes)
}

/// [`bind_from_data`] on an open dataset (its first sample is consumed).
pub fn bind_from_dataset(
    model: &Model,
    data: &mut dyn Dataset,
    shapes: &mut InputShapes,
) -> Result<Option<String>, String> {
    let specs = declared_specs(model);
    let Some(sample) = data.next_sample(&specs)? else {
        return Ok(None);
    };
    let mut bound = Vec::new();
    for (spec, t) in specs.iter().zip(&sample.tensors) {
        if shapes.shapes.contains_key(&spec.name) {
            continue;
        }
        let dims = t.shape().to_vec();
        for (d, &n) in spec.dims.iter().flatten().zip(&dims) {
            if let DimSpec::Symbol(s) = d {
                shapes.symbols.entry(s.clone()).or_insert(n);
            }
        }
        bound.push(format!(
            "{} [{}]",
            spec.name,
            dims.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ));
        shapes.shapes.insert(spec.name.clone(), dims);
    }
    Ok((!bound.is_empty()).then(|| {
        format!(
            "input sizes from the calibration data ({}): {}",
            sample.origin,
            bound.join(", ")
        )
    }))
}
