//! Helpers shared by the CLI end-to-end tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/models")
        .join(rel)
}

/// Runs the infopt binary under test.
pub fn infopt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infopt"))
        .args(args)
        .output()
        .expect("run infopt")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 test path")
}
