//! `--input-shape` arguments: `NAME:1x3x224x224` fixes every dim of an input;
//! `NAME:batch=1,seq=128` binds the named symbols (of that input, and wherever
//! else they appear).

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShapeArg {
    Dims {
        input: String,
        dims: Vec<i64>,
    },
    Symbols {
        input: String,
        symbols: Vec<(String, i64)>,
    },
}

pub fn parse(arg: &str) -> Result<ShapeArg, String> {
    let (input, spec) = arg.rsplit_once(':').ok_or_else(|| {
        format!("--input-shape '{arg}': expected NAME:1x3x224x224 or NAME:batch=1")
    })?;
    if input.is_empty() || spec.is_empty() {
        return Err(format!(
            "--input-shape '{arg}': expected NAME:1x3x224x224 or NAME:batch=1"
        ));
    }
    let positive = |s: &str| -> Result<i64, String> {
        match s.trim().parse::<i64>() {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(format!(
                "--input-shape '{arg}': '{s}' is not a positive dimension"
            )),
        }
    };
    if spec.contains('=') {
        let symbols = spec
            .split(',')
            .map(|kv| {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| format!("--input-shape '{arg}': '{kv}' is not SYMBOL=VALUE"))?;
                Ok((k.trim().to_string(), positive(v)?))
            })
            .collect::<Result<_, String>>()?;
        return Ok(ShapeArg::Symbols {
            input: input.to_string(),
            symbols,
        });
    }
    let dims = spec
        .split(['x', 'X', ','])
        .map(positive)
        .collect::<Result<_, _>>()?;
    Ok(ShapeArg::Dims {
        input: input.to_string(),
        dims,
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
        assert!(
            parse("x:0x3")
                .unwrap_err()
                .contains("'0' is not a positive dimension")
        );
        assert!(parse("x").unwrap_err().contains("expected NAME:"));
    }
}
