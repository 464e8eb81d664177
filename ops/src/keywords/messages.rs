//! The one-line usage errors of keyword arguments, in the command line's
//! wording (`invalid value 'gpu' for '--target <TARGET>'; possible values:
//! ...`), each naming the keyword.

/// The flag a keyword stands for, as the command line's messages show it.
fn flag(keyword: &str) -> String {
    format!(
        "--{} <{}>",
        keyword.replace('_', "-"),
        keyword.to_ascii_uppercase()
    )
}

/// An unknown keyword, with the nearest known one when there is one near.
pub fn unknown(command: &str, keyword: &str, known: &[&str]) -> String {
    let near = known
        .iter()
        .map(|k| (distance(keyword, k), *k))
        .filter(|(d, k)| *d <= (k.len() / 3).max(2))
        .min();
    match near {
        Some((_, k)) => format!(
            "unknown option '{keyword}' for {command}; did you mean '{k}'? (a similar argument exists: '--{}')",
            k.replace('_', "-")
        ),
        None => format!("unknown option '{keyword}' for {command}"),
    }
}

/// A value the keyword cannot take; `why` is what was expected.
pub fn invalid(keyword: &str, value: &str, why: &str) -> String {
    format!("invalid value '{value}' for '{}'; {why}", flag(keyword))
}

/// serde's reason (`unknown variant `gpu`, expected one of `a`, `b``,
/// `invalid type: string "x", expected usize`) in the command line's words.
pub fn reason(serde_message: &str) -> String {
    let plain = |s: &str| s.replace('`', "");
    if let Some((_, values)) = serde_message.split_once("expected one of ") {
        return format!("possible values: {}", plain(values));
    }
    let expected = serde_message
        .rsplit_once("expected ")
        .map(|(_, e)| e)
        .unwrap_or(serde_message);
    let words = match expected {
        "usize" | "u64" | "u32" | "u16" | "u8" => "a whole number (0 or more)",
        "i64" | "i32" => "a whole number",
        "f64" | "f32" => "a number",
        "a boolean" => "True or False",
        "a sequence" => "a list",
        "path string" => "a path",
        other => return format!("expected {}", plain(other)),
    };
    format!("expected {words}")
}

/// Edit distance (insertions, deletions, substitutions) between two names.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_keyword_names_the_nearest() {
        assert_eq!(
            unknown("optimize", "fp61", &["fp16", "bf16", "runs"]),
            "unknown option 'fp61' for optimize; did you mean 'fp16'? (a similar argument exists: '--fp16')"
        );
        assert_eq!(
            unknown("optimize", "colour", &["fp16"]),
            "unknown option 'colour' for optimize"
        );
    }

    #[test]
    fn serde_reasons_read_like_the_command_lines() {
        assert_eq!(
            reason("unknown variant `gpu`, expected one of `portable`, `onnxruntime`"),
            "possible values: portable, onnxruntime"
        );
        assert_eq!(
            reason("invalid type: string \"many\", expected usize"),
            "expected a whole number (0 or more)"
        );
        assert_eq!(
            invalid("target", "gpu", "possible values: a"),
            "invalid value 'gpu' for '--target <TARGET>'; possible values: a"
        );
    }
}
