//! Which node the current thread is working on. Inference, folding and rule
//! sweeps record it as they go, so a panic caught further up (the pass driver)
//! can name the node that triggered it instead of printing a backtrace.

use std::cell::RefCell;
use std::fmt::Write;

use crate::graph::Node;

thread_local! {
    static NODE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Records `node` as the one being worked on (reuses one buffer: no
/// allocation per call once it has grown).
pub fn enter_node(node: &Node) {
    NODE.with(|cell| {
        if let Ok(mut s) = cell.try_borrow_mut() {
            s.clear();
            let _ = write!(s, "'{}' ({})", node.name_or_op(), node.op_type);
        }
    });
}

/// Forgets the recorded node (at the start of a pass).
pub fn clear_node() {
    NODE.with(|cell| {
        if let Ok(mut s) = cell.try_borrow_mut() {
            s.clear();
        }
    });
}

/// The node recorded last, as `'name' (OpType)`.
pub fn current_node() -> Option<String> {
    NODE.with(|cell| {
        cell.try_borrow()
            .ok()
            .filter(|s| !s.is_empty())
            .map(|s| s.clone())
    })
}
