//! What the registry knows of a pass ([`PassInfo`], declared in the pass's
//! own file with [`crate::register_pass!`]) and a pass with its typed options
//! ([`PassConfig`]). The two refer to each other (an entry parses options into
//! a config; a config points at its entry), so they share this file; the list
//! of passes and lookup by name are in registry.rs, above every pass file.

use std::any::Any;
use std::fmt;

use crate::pass::Pass;

/// The environment variable that unlocks test-only passes.
pub const TEST_PASSES_ENV: &str = "INFOPT_TEST_PASSES";

/// A pass and its typed options. The options type belongs to the pass's own
/// file (see [`crate::register_pass!`]).
pub struct PassConfig {
    info: &'static PassInfo,
    options: Box<dyn PassOptions>,
}

/// Type-erased options of one pass.
trait PassOptions: Send + Sync {
    fn build(&self) -> Box<dyn Pass>;
    fn clone_box(&self) -> Box<dyn PassOptions>;
    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
    fn eq_dyn(&self, other: &dyn PassOptions) -> bool;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

struct Typed<O> {
    options: O,
    build: fn(&O) -> Box<dyn Pass>,
}

impl<O: Clone + fmt::Debug + PartialEq + Send + Sync + 'static> PassOptions for Typed<O> {
    fn build(&self) -> Box<dyn Pass> {
        (self.build)(&self.options)
    }
    fn clone_box(&self) -> Box<dyn PassOptions> {
        Box::new(Typed {
            options: self.options.clone(),
            build: self.build,
        })
    }
    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.options.fmt(f)
    }
    fn eq_dyn(&self, other: &dyn PassOptions) -> bool {
        other
            .as_any()
            .downcast_ref::<O>()
            .is_some_and(|o| *o == self.options)
    }
    fn as_any(&self) -> &dyn Any {
        &self.options
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        &mut self.options
    }
}

impl PassConfig {
    /// Used by [`crate::register_pass!`].
    pub fn new<O: Clone + fmt::Debug + PartialEq + Send + Sync + 'static>(
        info: &'static PassInfo,
        options: O,
        build: fn(&O) -> Box<dyn Pass>,
    ) -> PassConfig {
        PassConfig {
            info,
            options: Box::new(Typed { options, build }),
        }
    }

    pub fn name(&self) -> &'static str {
        self.info.name
    }

    pub fn info(&self) -> &'static PassInfo {
        self.info
    }

    pub fn build(&self) -> Box<dyn Pass> {
        self.options.build()
    }

    /// The options, when they are of type `O`.
    pub fn options<O: 'static>(&self) -> Option<&O> {
        self.options.as_any().downcast_ref()
    }

    /// The options, mutably, when they are of type `O` (the command line
    /// adding shapes to `fix-shapes`, say).
    pub fn options_mut<O: 'static>(&mut self) -> Option<&mut O> {
        self.options.as_any_mut().downcast_mut()
    }
}

impl Clone for PassConfig {
    fn clone(&self) -> PassConfig {
        PassConfig {
            info: self.info,
            options: self.options.clone_box(),
        }
    }
}

impl fmt::Debug for PassConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ", self.info.name)?;
        self.options.debug(f)
    }
}

impl PartialEq for PassConfig {
    fn eq(&self, other: &PassConfig) -> bool {
        self.info.name == other.info.name && self.options.eq_dyn(other.options.as_ref())
    }
}

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
    /// Rewrites an op as other standard ops the runtime runs faster, the
    /// same function.
    Lower,
}

impl PassKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PassKind::Eliminate => "eliminate",
            PassKind::Fuse => "fuse",
            PassKind::Fold => "fold",
            PassKind::Shape => "shape",
            PassKind::Canonicalize => "canonicalize",
            PassKind::Lower => "lower",
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
        pub const INFO: $crate::pass_info::PassInfo = $crate::pass_info::PassInfo {
            name: $name,
            kind: $crate::pass_info::PassKind::$kind,
            numerics: $crate::pass_info::Numerics::declared_or_default(&[
                $($crate::pass_info::Numerics::$numerics)?
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
                Ok($crate::pass_info::PassConfig::new(&INFO, options, build))
            },
            hidden: false $(|| $hidden)?,
        };
    };
}

/// Options of a pass that takes none: `{}` or nothing.
#[derive(serde::Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NoOptions {}
