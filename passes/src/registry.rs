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

pub struct PassInfo {
    pub name: &'static str,
    pub kind: PassKind,
    /// The pass file's `//!` doc comment: What it does / When it declines / Numerics / Example.
    pub source: &'static str,
    /// The pass with default options.
    pub default_config: fn() -> PassConfig,
    /// Test-only passes: not listed, and usable only with `INFOPT_TEST_PASSES=1`.
    pub hidden: bool,
}

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
}

macro_rules! pass_info {
    ($name:literal, $kind:expr, $file:literal, $cfg:expr) => {
        PassInfo {
            name: $name,
            kind: $kind,
            source: include_str!($file),
            default_config: || $cfg,
            hidden: false,
        }
    };
}

/// Every pass, in the order a default pipeline would run them.
pub fn registry() -> &'static [PassInfo] {
    all_passes()
}

/// The passes a user can see and name (test-only passes left out).
pub fn visible() -> impl Iterator<Item = &'static PassInfo> {
    all_passes().iter().filter(|p| !p.hidden)
}

fn all_passes() -> &'static [PassInfo] {
    use PassKind::*;
    static REGISTRY: std::sync::OnceLock<Vec<PassInfo>> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(|| {
        vec![
            pass_info!(
                "remove-initializer-inputs",
                Canonicalize,
                "remove_initializer_inputs.rs",
                PassConfig::RemoveInitializerInputs
            ),
            pass_info!(
                "constants-to-initializers",
                Canonicalize,
                "constants_to_initializers.rs",
                PassConfig::ConstantsToInitializers
            ),
            pass_info!(
                "fix-shapes",
                Shape,
                "fix_shapes.rs",
                PassConfig::FixShapes(Default::default())
            ),
            pass_info!(
                "infer-shapes",
                Shape,
                "infer_shapes.rs",
                PassConfig::InferShapes
            ),
            pass_info!(
                "fold-constants",
                Fold,
                "fold_constants.rs",
                PassConfig::FoldConstants(Default::default())
            ),
            pass_info!(
                "simplify-reshape",
                Fold,
                "simplify_reshape.rs",
                PassConfig::SimplifyReshape
            ),
            pass_info!(
                "eliminate-identity",
                Eliminate,
                "eliminate_identity.rs",
                PassConfig::EliminateIdentity
            ),
            pass_info!(
                "eliminate-duplicates",
                Eliminate,
                "eliminate_duplicates.rs",
                PassConfig::EliminateDuplicates
            ),
            pass_info!(
                "fuse-pad-conv",
                Fuse,
                "fuse_pad_conv.rs",
                PassConfig::FusePadConv
            ),
            pass_info!(
                "fuse-conv-bn",
                Fuse,
                "fuse_conv_bn.rs",
                PassConfig::FuseConvBn
            ),
            pass_info!(
                "fuse-parallel-matmul",
                Fuse,
                "fuse_parallel_matmul.rs",
                PassConfig::FuseParallelMatmul
            ),
            pass_info!(
                "fuse-matmul-add",
                Fuse,
                "fuse_matmul_add.rs",
                PassConfig::FuseMatmulAdd
            ),
            pass_info!(
                "fuse-conv-activation",
                Fuse,
                "fuse_conv_activation.rs",
                PassConfig::FuseConvActivation
            ),
            pass_info!(
                "eliminate-dead",
                Eliminate,
                "eliminate_dead.rs",
                PassConfig::EliminateDead
            ),
            PassInfo {
                hidden: true,
                ..pass_info!(
                    "perturb-weight",
                    Canonicalize,
                    "perturb_weight.rs",
                    PassConfig::PerturbWeight
                )
            },
        ]
    })
}

pub fn find(name: &str) -> Option<&'static PassInfo> {
    registry().iter().find(|p| p.name == name)
}

/// "unknown pass 'fuse-conv-nb'; did you mean 'fuse-conv-bn'? valid passes: ...".
pub fn unknown_pass_message(name: &str) -> String {
    let names: Vec<&str> = visible().map(|p| p.name).collect();
    let best = names
        .iter()
        .map(|n| (edit_distance(name, n), *n))
        .min()
        .filter(|(d, n)| *d <= 3.max(n.len() / 3));
    let hint = best
        .map(|(_, n)| format!("did you mean '{n}'? "))
        .unwrap_or_default();
    format!(
        "unknown pass '{name}'; {hint}valid passes: {}",
        names.join(", ")
    )
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
