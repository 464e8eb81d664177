//! Strings as int64 ids, one per distinct string, in the order the
//! process first meets them: host tensors have no string type, so a string
//! output is read as its ids (equal strings equal ids in every model and run
//! of the process) and a string input is fed from ids, each turned back into
//! its string where the runtime takes the input. The table only grows: an id
//! never changes its string, so the original and the optimized model are fed
//! the same strings.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

#[derive(Default)]
struct Table {
    ids: HashMap<String, i64>,
    strings: Vec<String>,
}

static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(Default::default);

/// The ids of `strings`, each string registered when first met.
pub fn ids_of<S: AsRef<str>>(strings: impl IntoIterator<Item = S>) -> Vec<i64> {
    let mut t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    strings
        .into_iter()
        .map(|s| {
            let s = s.as_ref();
            if let Some(&id) = t.ids.get(s) {
                return id;
            }
            let id = t.strings.len() as i64;
            t.strings.push(s.to_string());
            t.ids.insert(s.to_string(), id);
            id
        })
        .collect()
}

/// The strings of `ids`; an id no string was registered for (an integer
/// array given for a string input) reads as its decimal digits.
pub fn strings_of(ids: &[i64]) -> Vec<String> {
    let t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    ids.iter()
        .map(|&id| {
            usize::try_from(id)
                .ok()
                .and_then(|i| t.strings.get(i).cloned())
                .unwrap_or_else(|| id.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_strings_go_both_ways_and_never_change() {
        let a = ids_of(["cat", "dog", "cat"]);
        assert_eq!(a[0], a[2]);
        assert_ne!(a[0], a[1]);
        let b = ids_of(["bird", "dog"]);
        assert_eq!(b[1], a[1]);
        assert_eq!(strings_of(&[a[1], b[0], a[0]]), ["dog", "bird", "cat"]);
        assert_eq!(strings_of(&[-3]), ["-3"]);
    }
}
