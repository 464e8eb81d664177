//! Strings for a model's string inputs when verification generates the
//! inputs: the ones the ops reading the input know (a LabelEncoder's
//! classes, a CategoryMapper's categories, a TfIdfVectorizer's pool), so
//! that the generated strings take the paths a real input takes rather
//! than every one the default's; a few plain strings where no op says.
//! The runtime feeds them as ids (`infopt_runtime::string_ids`).

use infopt_ir::{DataType, Model};

/// Ops through which an input reaches the op that reads its strings.
const PASS_THROUGH: &[&str] = &["Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze"];

/// String attributes that list the strings an op knows.
const VOCABULARY_ATTRIBUTES: &[&str] = &[
    "classes_strings",
    "keys_strings",
    "cats_strings",
    "pool_strings",
];

/// The strings of an input no op lists strings for.
const PLAIN: &[&str] = &["a", "b", "c", "the", "0", ""];

/// The strings to draw one string input's generated values from.
pub struct StringChoice {
    pub input: String,
    pub strings: Vec<String>,
    /// Whether the ops reading the input list them (else [`PLAIN`]).
    pub listed: bool,
}

/// Per string input of `model`, the strings to draw its generated values
/// from (those its readers list, without repeats, else [`PLAIN`]).
pub fn string_choices(model: &Model) -> Vec<StringChoice> {
    let g = &model.graph;
    g.inputs
        .iter()
        .filter(|io| {
            g.value_type(io.value)
                .is_some_and(|t| t.dtype == DataType::String)
        })
        .map(|io| {
            let mut known: Vec<String> = Vec::new();
            let mut frontier = vec![io.value];
            while let Some(v) = frontier.pop() {
                for n in g.value(v).uses.iter().map(|u| g.node(u.node)) {
                    if n.domain().is_empty() && PASS_THROUGH.contains(&n.op_type.as_str()) {
                        frontier.extend(n.outputs.iter().flatten().copied());
                        continue;
                    }
                    for a in VOCABULARY_ATTRIBUTES {
                        let Some(attr) = n.attr(a) else { continue };
                        for s in &attr.proto.strings {
                            let s = String::from_utf8_lossy(s).into_owned();
                            if !known.contains(&s) {
                                known.push(s);
                            }
                        }
                    }
                }
            }
            let listed = !known.is_empty();
            if !listed {
                known = PLAIN.iter().map(|s| s.to_string()).collect();
            }
            StringChoice {
                input: g.value(io.value).name.clone(),
                strings: known,
                listed,
            }
        })
        .collect()
}

/// `count` strings drawn from `choices` with `seed`: the same every time.
pub fn drawn(choices: &[String], count: usize, seed: u64) -> Vec<&str> {
    let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
    (0..count)
        .map(|_| {
            // SplitMix64: a seeded draw without a dependency.
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            choices[(z % choices.len().max(1) as u64) as usize].as_str()
        })
        .collect()
}
