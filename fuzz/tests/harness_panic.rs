//! The harness sees a panic inside a pass (injected: debug builds honour
//! INFOPT_INJECT_PANIC). Its own test binary: the variable is process-wide.

use infopt_fuzz::{Outcome, corpus, default_pipeline, make_case, run_case};

/// The harness sees a panic: a case that makes a pass crash is reported as one.
#[test]
fn the_harness_reports_a_panic_as_a_finding() {
    let corpus = corpus();
    let (which, _, bytes) = make_case(&corpus, 1, 0);
    let out = tempfile::tempdir().unwrap();
    // SAFETY: the only test in this binary (its own process), so no other
    // thread reads the environment meanwhile.
    unsafe { std::env::set_var("INFOPT_INJECT_PANIC", "constants-to-initializers") };
    let outcome = run_case(bytes, &corpus[which].dir, out.path(), &default_pipeline());
    unsafe { std::env::remove_var("INFOPT_INJECT_PANIC") };
    match outcome {
        Outcome::Panicked(text) => assert!(text.contains("injected panic"), "{text}"),
        // The mutated model may be refused before the passes run.
        Outcome::Rejected("load" | "validate") => {}
        other => panic!("{other:?}"),
    }
}
