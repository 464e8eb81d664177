//! The explicit, ordered list of passes.

use crate::config::PassConfig;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassKind {
    /// Removes nodes or values that do not change the result.
    Eliminate,
    /// Merges several nodes into fewer.
    Fuse,
    /// Computes constant parts of the graph ahead of time.
    Fold,
    /// Changes shapes or types (staticization, precision).
    Shape,
    /// Moves data between representations without changing the computation.
    Canonicalize,
}

impl PassKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PassKind::Eliminate => "eliminate",
            PassKind::Fuse => "fuse",
            PassKind::Fold => "fold",
            PassKind::Shape => "shape",
            PassKind::Canonicalize => "canonicalize",
        }
    }
}

/// Builds a [`PassConfig`] from the pass's YAML options (`None`: defaults).
pub type ParseOptions =
    fn(Option<&mut dyn erased_serde::Deserializer<'_>>) -> Result<PassConfig, String>;

/// What the registry knows of a pass. Each pass file declares its own with
/// [`crate::register_pass!`]; `lib.rs` lists the files once.
pub struct PassInfo {
    pub name: &'static str,
    pub kind: PassKind,
    /// What the pass does to the numbers the model computes.
    pub numerics: Numerics,
    /// The pass file's `//!` doc comment: What it does / When it declines / Numerics / Example.
    pub source: &'static str,
    /// Reads the pass's options and builds its configuration.
    pub parse: ParseOptions,
    /// Test-only passes: not listed, and usable only with `INFOPT_TEST_PASSES=1`.
    pub hidden: bool,
}

/// What a pass does to the numbers a model computes. Front ends ask this
/// instead of keeping lists of pass names: whether a pipeline needs
/// verifying at all, which steps set precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Numerics {
    /// Changes only how the model is stored, or removes what nothing reads:
    /// the outputs are the same bits.
    Exact,
    /// The same function up to float rounding (fusions, folding): the default.
    Rounding,
    /// Converts float32 to float16 or bfloat16.
    HalfPrecision,
    /// Quantizes to INT8 (Q/DQ).
    Quantize,
}

impl Numerics {
    /// The first of `given`, else [`Numerics::Rounding`] (what
    /// [`crate::register_pass!`] passes when a pass declares none).
    pub const fn declared_or_default(given: &[Numerics]) -> Numerics {
        match given {
            [n, ..] => *n,
            [] => Numerics::Rounding,
        }
    }

    /// The numerics of the pass named `name` (None for an unknown name).
    pub fn of(name: &str) -> Option<Numerics> {
        find(name).map(|p| p.numerics)
    }
}

/// The doc sections every pass documents, in this order.
pub const DOC_SECTIONS: [&str; 4] = ["What it does", "When it declines", "Numerics", "Example"];

impl PassInfo {
    /// The documentation written at the top of the pass's source file.
    pub fn doc(&self) -> String {
        let mut out = String::new();
        for line in self.source.lines() {
            let Some(rest) = line.strip_prefix("//!") else {
                break;
            };
            out.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            out.push('\n');
        }
        out
    }

    /// First sentence of the doc (which may span lines).
    pub fn summary(&self) -> String {
        let doc = self.doc();
        let paragraph: Vec<&str> = doc
            .lines()
            .skip_while(|l| l.trim().is_empty())
            .take_while(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(|l| l.trim())
            .collect();
        let text = paragraph.join(" ");
        match text.find(". ") {
            Some(i) => text[..=i].to_string(),
            None => text,
        }
    }

    /// The documentation sections the doc comment lacks (see [`DOC_SECTIONS`]).
    pub fn missing_doc_sections(&self) -> Vec<&'static str> {
        let doc = self.doc();
        DOC_SECTIONS
            .iter()
            .filter(|s| {
                !doc.lines()
                    .any(|l| l.trim_start_matches('#').trim().eq_ignore_ascii_case(s))
            })
            .copied()
            .collect()
    }

    /// The pass with default options.
    pub fn default_config(&self) -> PassConfig {
        match (self.parse)(None) {
            Ok(c) => c,
            // Options types derive `Default`, so this cannot fail for a
            // registered pass; a registry test builds every one.
            Err(e) => panic!("pass '{}' has no default options: {e}", self.name),
        }
    }
}

/// Declares a pass's registry entry in its own file:
/// ```ignore
/// crate::register_pass! {
///     name: "fuse-conv-bn", kind: Fuse, file: "fuse_conv_bn.rs",
///     options: crate::registry::NoOptions, build: |_o| FuseConvBn,
/// }
/// ```
/// `options` is a `Deserialize + Default + Clone + Debug + PartialEq` type
/// read from the pass's YAML map; `build` turns it into the pass;
/// `numerics: Exact` (or `HalfPrecision`, `Quantize`) after `build` declares
/// what it does to the numbers (default `Rounding`).
#[macro_export]
macro_rules! register_pass {
    (name: $name:literal, kind: $kind:ident, file: $file:literal, options: $opts:ty, build: $build:expr $(, numerics: $numerics:ident)? $(, hidden: $hidden:expr)? $(,)?) => {
        /// This pass's registry entry.
        pub const INFO: $crate::registry::PassInfo = $crate::registry::PassInfo {
            name: $name,
            kind: $crate::registry::PassKind::$kind,
            numerics: $crate::registry::Numerics::declared_or_default(&[
                $($crate::registry::Numerics::$numerics)?
            ]),
            source: include_str!($file),
            parse: |d| {
                let options: $opts = match d {
                    None => Default::default(),
                    Some(d) => $crate::__erased_serde::deserialize::<Option<$opts>>(d)
                        .map_err(|e| e.to_string())?
                        .unwrap_or_default(),
                };
                let build: fn(&$opts) -> Box<dyn $crate::pass::Pass> =
                    |o| Box::new(($build)(o));
                Ok($crate::config::PassConfig::new(&INFO, options, build))
            },
            hidden: false $(|| $hidden)?,
        };
    };
}

/// Options of a pass that takes none: `{}` or nothing.
#[derive(serde::Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NoOptions {}

static EXTRA: std::sync::RwLock<Vec<&'static PassInfo>> = std::sync::RwLock::new(Vec::new());

/// Adds a pass that lives outside this crate (e.g. `quantize-int8` in
/// infopt-calibration). Registering the same name twice keeps the first.
pub fn register(info: &'static PassInfo) {
    let mut extra = EXTRA.write().unwrap_or_else(|e| e.into_inner());
    let known = crate::builtin_passes().iter().any(|p| p.name == info.name)
        || extra.iter().any(|p| p.name == info.name);
    if !known {
        extra.push(info);
    }
}

/// Every pass: the built-in ones in the order a default pipeline would run
/// them, then the registered ones.
pub fn registry() -> Vec<&'static PassInfo> {
    let extra = EXTRA.read().unwrap_or_else(|e| e.into_inner());
    crate::builtin_passes()
        .iter()
        .copied()
        .chain(extra.iter().copied())
        .collect()
}

/// The passes a user can see and name (test-only passes left out).
pub fn visible() -> impl Iterator<Item = &'static PassInfo> {
    registry().into_iter().filter(|p| !p.hidden)
}

pub fn find(name: &str) -> Option<&'static PassInfo> {
    registry().into_iter().find(|p| p.name == name)
}

/// "unknown pass 'fuse-conv-nb'; did you mean 'fuse-conv-bn'? valid passes: ...".
pub fn unknown_pass_message(name: &str) -> String {
    let names: Vec<&str> = visible().map(|p| p.name).collect();
    let hint = closest(name, &names)
        .map(|n| format!("did you mean '{n}'? "))
        .unwrap_or_default();
    format!(
        "unknown pass '{name}'; {hint}valid passes: {}",
        names.join(", ")
    )
}

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
