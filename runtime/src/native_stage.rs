//! Which native library the process is inside, for the one line a crash
//! there leaves (see the CLI's fatal-signal handler). ONNX Runtime's CPU
//! session segfaulted loading a float16 graph it should have refused
//! (pyannote's segmentation: `optimize --fp16` ended with exit 139 and no
//! word); a fault inside a native library is not a verdict on the model,
//! and the user needs to know which library and what to try instead.
//!
//! One process-wide stage, set around the calls into ONNX Runtime: with
//! probes side by side the last thread to enter names it, which is the
//! library either way.

use std::sync::atomic::{AtomicU8, Ordering};

static STAGE: AtomicU8 = AtomicU8::new(0);

/// What the process is doing in native code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Stage {
    OrtLoad = 1,
    OrtRun = 2,
}

/// Restores the stage it replaced when dropped.
pub struct Entered(u8);

/// Marks the process as inside `stage` until the guard is dropped.
pub fn enter(stage: Stage) -> Entered {
    Entered(STAGE.swap(stage as u8, Ordering::Relaxed))
}

impl Drop for Entered {
    fn drop(&mut self) {
        STAGE.store(self.0, Ordering::Relaxed);
    }
}

/// The stage as words for the crash line (static: a signal handler cannot
/// allocate), empty outside native code.
pub fn describe() -> &'static str {
    match STAGE.load(Ordering::Relaxed) {
        1 => "inside ONNX Runtime, creating a session (its graph optimizations)",
        2 => "inside ONNX Runtime, running a model",
        _ => "",
    }
}

/// Whether the process is running a model in ONNX Runtime (where input
/// sizes the graph cannot take end it too), for the crash line.
pub fn running() -> bool {
    STAGE.load(Ordering::Relaxed) == Stage::OrtRun as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_is_named_while_entered_and_restored_after() {
        assert_eq!(describe(), "");
        {
            let _load = enter(Stage::OrtLoad);
            assert!(describe().contains("creating a session"));
            assert!(!running());
            {
                let _run = enter(Stage::OrtRun);
                assert!(describe().contains("running a model"));
                assert!(running());
            }
            assert!(describe().contains("creating a session"));
        }
        assert_eq!(describe(), "");
    }
}
