//! The long fuzz run: `cargo run --release -p infopt-fuzz -- --cases 1000000`.
//!
//! Options: `--cases N` (default 1000000), `--seconds S` (time budget,
//! default unlimited), `--seed S` (default 1), `--threads T` (default 1),
//! `--case-limit S` (seconds before a case counts as a hang, default 10),
//! `--case I` (replay one case and print what it does; `--write FILE` saves
//! its model), `--corpus DIR` (repeatable: mutate the `.onnx` models of DIR,
//! real exports, instead of the fixtures), `--emit DIR` (write cases
//! `--from` (default 0) up to `--cases` to DIR as files, run nothing: for
//! `bench/fuzz_cli.sh`, which runs the infopt binary on them with
//! verification on). Prints each finding and a summary line (cases, cases/s,
//! panics, hangs); exit 1 on any panic, hang or multi-line error.

use std::time::Duration;

use std::path::PathBuf;

use infopt_fuzz::{FuzzConfig, Seed, corpus, corpus_from, default_pipeline, make_case, run_case};

fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    let i = args.iter().position(|a| a == name)?;
    let v = args.get(i + 1)?;
    match v.parse() {
        Ok(x) => Some(x),
        Err(_) => {
            eprintln!("{name}: cannot parse '{v}'");
            std::process::exit(2);
        }
    }
}

/// Every value of a repeatable option.
fn all_args(args: &[String], name: &str) -> Vec<String> {
    args.windows(2)
        .filter(|w| w[0] == name)
        .map(|w| w[1].clone())
        .collect()
}

fn seeds(dirs: &[PathBuf]) -> Vec<Seed> {
    if dirs.is_empty() {
        return corpus();
    }
    corpus_from(dirs).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2);
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seed: u64 = arg(&args, "--seed").unwrap_or(1);
    let corpus_dirs: Vec<PathBuf> = all_args(&args, "--corpus")
        .into_iter()
        .map(PathBuf::from)
        .collect();
    if let Some(dir) = arg::<String>(&args, "--emit") {
        emit(
            &seeds(&corpus_dirs),
            seed,
            arg(&args, "--from").unwrap_or(0)..arg(&args, "--cases").unwrap_or(1000),
            std::path::Path::new(&dir),
        );
        return;
    }
    if let Some(case) = arg::<u64>(&args, "--case") {
        let corpus = seeds(&corpus_dirs);
        let (which, mutations, bytes) = make_case(&corpus, seed, case);
        let out = tempfile::tempdir().expect("temp dir");
        println!(
            "case {case}: {} with {mutations:?} ({} bytes)",
            corpus[which].name,
            bytes.len()
        );
        if let Some(path) = arg::<String>(&args, "--write") {
            std::fs::write(&path, &bytes).expect("write the case");
            println!("wrote {path}");
        }
        let outcome = run_case(bytes, &corpus[which].dir, out.path(), &default_pipeline());
        println!("{outcome:?}");
        return;
    }
    let config = FuzzConfig {
        seed,
        cases: arg(&args, "--cases").unwrap_or(1_000_000),
        time_budget: Duration::from_secs_f64(arg(&args, "--seconds").unwrap_or(1e9)),
        case_limit: Duration::from_secs_f64(arg(&args, "--case-limit").unwrap_or(10.0)),
        threads: arg(&args, "--threads").unwrap_or(1),
        max_hangs: 5,
        trace: arg::<String>(&args, "--trace").map(Into::into),
        corpus_dirs: corpus_dirs.clone(),
    };
    // Refuse a bad corpus folder here, as a usage error, not in a worker.
    seeds(&corpus_dirs);
    eprintln!("fuzzing: {config:?}");
    let report = infopt_fuzz::fuzz(config);
    for f in report
        .panics
        .iter()
        .chain(&report.hangs)
        .chain(&report.multi_line)
    {
        println!(
            "finding: case {} ({} with {:?}): {}",
            f.case, f.model, f.mutations, f.what
        );
    }
    for f in report.broke_graph.iter().take(10) {
        println!(
            "broken graph: case {} ({} with {:?}): {}",
            f.case, f.model, f.mutations, f.what
        );
    }
    println!("{}", report.summary());
    if !(report.panics.is_empty() && report.hangs.is_empty() && report.multi_line.is_empty()) {
        std::process::exit(1);
    }
}

/// Writes cases `range` to `dir/case-<i>.onnx`, with the seeds'
/// external-data files copied beside them so references still resolve.
fn emit(corpus: &[Seed], seed: u64, range: std::ops::Range<u64>, dir: &std::path::Path) {
    let fail = |what: String| -> ! {
        eprintln!("error: {what}");
        std::process::exit(2);
    };
    std::fs::create_dir_all(dir).unwrap_or_else(|e| fail(format!("{}: {e}", dir.display())));
    let mut copied = std::collections::BTreeSet::new();
    for s in corpus {
        let mut locations = Vec::new();
        infopt_ir::external::for_each_external(&s.proto, &mut |_, location| {
            locations.push(location.to_string());
        });
        // Plain file names only: a location with folders is itself a
        // hostile case, and resolving it is what infopt is tested on.
        for location in locations.into_iter().filter(|l| !l.contains(['/', '\\'])) {
            if copied.insert(location.clone()) {
                let from = s.dir.join(&location);
                if let Err(e) = std::fs::copy(&from, dir.join(&location)) {
                    eprintln!("warning: {}: {e}", from.display());
                }
            }
        }
    }
    for case in range {
        let (which, mutations, bytes) = make_case(corpus, seed, case);
        let path = dir.join(format!("case-{case}.onnx"));
        std::fs::write(&path, &bytes).unwrap_or_else(|e| fail(format!("{}: {e}", path.display())));
        println!(
            "case-{case}.onnx\t{}\t{}",
            corpus[which].name,
            mutations.join(",")
        );
    }
}
