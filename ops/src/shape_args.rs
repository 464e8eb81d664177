//! `--input-shape` arguments: `NAME:1x3x224x224` fixes every dim of an input;
//! `NAME:batch=1,seq=128` binds the named symbols (of that input, and wherever
//! else they appear). The syntax is parsed by the `fix-shapes` pass so the
//! pipeline and the runtime read it the same way.

use infopt_passes::fix_shapes::{ShapeBinding, parse_input_shape};

pub use infopt_verify::inputs::ShapeArg;

pub fn parse(arg: &str) -> Result<ShapeArg, String> {
    let spec = parse_input_shape(arg).map_err(|e| format!("--input-shape {e}"))?;
    Ok(match spec.binding {
        ShapeBinding::Dims(dims) => ShapeArg::Dims {
            input: spec.input,
            dims,
        },
        ShapeBinding::Symbols(symbols) => ShapeArg::Symbols {
            input: spec.input,
            symbols,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_forms() {
        assert_eq!(
            parse("x:1x3x4").unwrap(),
            ShapeArg::Dims {
                input: "x".into(),
                dims: vec![1, 3, 4]
            }
        );
        assert_eq!(
            parse("ids:batch=1,seq=8").unwrap(),
            ShapeArg::Symbols {
                input: "ids".into(),
                symbols: vec![("batch".into(), 1), ("seq".into(), 8)]
            }
        );
        assert!(parse("x:0x3").is_err());
        assert!(parse("x").unwrap_err().contains("expected NAME:"));
    }
}
