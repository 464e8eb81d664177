//! "Did you mean": the nearest valid name to a misspelt one.

/// The candidate nearest to `name` by edit distance, if near enough to be a typo.
pub fn closest<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|n| (edit_distance(name, n), *n))
        .min()
        .filter(|(d, n)| *d <= 3.max(n.len() / 3))
        .map(|(_, n)| n)
}

pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Adds "did you mean `x`?" to serde's "unknown field `y`, expected one of ..." (any
/// section of a pipeline, gates included); other messages are returned as they are.
pub fn suggest_field(message: &str) -> String {
    let Some(rest) = message.split("unknown field `").nth(1) else {
        return message.to_string();
    };
    let Some((field, after)) = rest.split_once('`') else {
        return message.to_string();
    };
    let Some(expected) = after.split("expected").nth(1) else {
        return message.to_string();
    };
    // "one of a, b, c", "`a` or `b`": the names, with or without backticks.
    let expected = expected.trim().trim_start_matches("one of").trim();
    let valid: Vec<&str> = expected
        .split([',', ' '])
        .map(|w| w.trim().trim_matches('`'))
        .filter(|w| !w.is_empty() && *w != "or")
        .collect();
    let best = valid
        .iter()
        .map(|v| (edit_distance(field, v), *v))
        .min()
        .filter(|(d, v)| *d <= 3.max(v.len() / 3));
    match best {
        Some((_, v)) => format!("{message}; did you mean `{v}`?"),
        None => message.to_string(),
    }
}
