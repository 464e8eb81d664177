//! The explicit, ordered list of passes.

// The entry types are in pass_info.rs (below the pass files, which declare
// their entries); re-exported here, where callers have always found them.
pub use crate::pass_info::{DOC_SECTIONS, NoOptions, Numerics, ParseOptions, PassInfo, PassKind};
// The "did you mean" helpers are in suggest.rs.
pub use crate::suggest::{closest, edit_distance};

impl Numerics {
    /// The numerics of the pass named `name` (None for an unknown name).
    pub fn of(name: &str) -> Option<Numerics> {
        find(name).map(|p| p.numerics)
    }
}

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
