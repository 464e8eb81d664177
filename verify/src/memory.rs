//! Will running a model fit in memory? tract copies every weight onto the
//! heap (external data included) and ONNX Runtime reads external data into
//! its own buffers, so verifying a model needs about its weights' size per
//! model loaded, plus activations. A model that cannot fit is refused before
//! loading, with the estimate and the way out, instead of being killed by
//! the kernel's OOM killer halfway.

/// The environment variable that caps the memory verification may plan
/// for (bytes, or with a K/M/G/T suffix, powers of 1024): for a machine
/// shared with other jobs, where what is free now is not what this run
/// should take.
pub const MEMORY_ENV: &str = "INFOPT_MEMORY_AVAILABLE";

/// Bytes this process can still use: the smallest of the memory the kernel
/// reports available, what the cgroup (container) limit leaves, and
/// [`MEMORY_ENV`].
pub fn available_bytes() -> Option<u64> {
    let system = system_available_bytes();
    match std::env::var(MEMORY_ENV).ok().and_then(|v| parse_size(&v)) {
        Some(cap) => Some(system.map_or(cap, |s| s.min(cap))),
        None => system,
    }
}

/// `123`, `64M`, `4G`, `1.5T` (powers of 1024).
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, unit) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&t[..i], t[i..].to_ascii_uppercase()),
        None => (t, String::new()),
    };
    let shift = match unit.trim_end_matches("IB").trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return None,
    };
    let value: f64 = num.trim().parse().ok()?;
    (value.is_finite() && value >= 0.0).then(|| (value * (1u64 << shift) as f64) as u64)
}

fn system_available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let available = meminfo.as_deref().and_then(|m| {
        m.lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    let cgroup = cgroup_headroom();
    match (available, cgroup) {
        (Some(a), Some(c)) => Some(a.min(c)),
        (a, c) => a.or(c),
    }
}

/// What the memory cgroups of this process (and their ancestors) still
/// allow: the limit minus the memory in use, where reclaimable page cache
/// (inactive file pages) does not count as in use. cgroup v2 (`memory.max`)
/// and v1 (`memory.limit_in_bytes`) both; `None` when no limit is set.
fn cgroup_headroom() -> Option<u64> {
    let rel = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut best: Option<u64> = None;
    for line in rel.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let layout = if id == "0" && controllers.is_empty() {
            CgroupLayout::V2
        } else if controllers.split(',').any(|c| c == "memory") {
            CgroupLayout::V1
        } else {
            continue;
        };
        let root = match layout {
            CgroupLayout::V2 => std::path::PathBuf::from("/sys/fs/cgroup"),
            CgroupLayout::V1 => std::path::PathBuf::from("/sys/fs/cgroup/memory"),
        };
        // A limit set on an ancestor binds as well: walk up to the root.
        let mut dir = root.join(path.trim().trim_start_matches('/'));
        loop {
            if let Some(h) = headroom_of(&dir, layout) {
                best = Some(best.map_or(h, |b| b.min(h)));
            }
            if dir == root || !dir.pop() || !dir.starts_with(&root) {
                break;
            }
        }
    }
    best
}

#[derive(Clone, Copy)]
enum CgroupLayout {
    V1,
    V2,
}

fn headroom_of(dir: &std::path::Path, layout: CgroupLayout) -> Option<u64> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let (max_file, current_file, inactive_key) = match layout {
        CgroupLayout::V2 => ("memory.max", "memory.current", "inactive_file"),
        CgroupLayout::V1 => (
            "memory.limit_in_bytes",
            "memory.usage_in_bytes",
            "total_inactive_file",
        ),
    };
    let max = read(max_file)?.trim().parse::<u64>().ok()?;
    // v1 writes "no limit" as a huge page-rounded number.
    if max >= 1 << 60 {
        return None;
    }
    let current = read(current_file)
        .and_then(|c| c.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let inactive_file = read("memory.stat")
        .and_then(|stat| {
            stat.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == inactive_key).then(|| v.trim().parse::<u64>().ok())?
            })
        })
        .unwrap_or(0);
    Some(max.saturating_sub(current.saturating_sub(inactive_file)))
}

/// Memory verification is expected to need: the weights once per loaded
/// model (`models`), plus a quarter of them for activations and the
/// runtime's own structures.
pub fn verification_estimate(weight_bytes: u64, models: u64) -> u64 {
    weight_bytes.saturating_mul(models) + weight_bytes / 4
}

/// Heap reserved for activations and the runtime's own structures when the
/// weights stay mapped in their files: a sixteenth of the weights, between
/// 16 MiB and 512 MiB (a decoder's activations at verification sizes are
/// a few MB; a CNN's can be hundreds).
pub fn mapped_reserve(weight_bytes: u64) -> u64 {
    (weight_bytes / 16).clamp(16 << 20, 512 << 20)
}

/// `None` when the estimate fits in what is available (with 10% spare).
pub fn refusal(weight_bytes: u64, models: u64) -> Option<String> {
    refusal_given(available_bytes()?, weight_bytes, models)
}

fn fits(need: u64, have: u64) -> bool {
    need.saturating_add(need / 10) <= have
}

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

fn refusal_given(have: u64, weight_bytes: u64, models: u64) -> Option<String> {
    heap_shortfall(have, weight_bytes, models).map(|why| format!("{why}: {WAY_OUT}"))
}

const WAY_OUT: &str = "run with --no-verify to optimize without running the model, or verify on a machine with more memory";

/// Why a heap copy of the weights does not fit, without the way out.
fn heap_shortfall(have: u64, weight_bytes: u64, models: u64) -> Option<String> {
    let need = verification_estimate(weight_bytes, models);
    if fits(need, have) {
        return None;
    }
    Some(format!(
        "verification would need about {:.1} GiB (the {:.1} GiB of weights loaded {models} time(s) by the runtime, plus activations), and {:.1} GiB is available",
        gib(need),
        gib(weight_bytes),
        gib(have)
    ))
}

/// How verification holds a model's weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WeightPlan {
    /// Copied onto the heap by the runtime (tract always; ONNX Runtime with
    /// prepacking): fast, and it fits.
    Heap,
    /// Left in the external-data files, memory-mapped by ONNX Runtime: the
    /// page cache holds them, which the kernel can drop and re-read, so a
    /// model bigger than memory still runs. The note says why, for reports.
    Mapped { note: String },
}

/// The model's weights as verification sees them.
#[derive(Debug, Clone, Copy)]
pub struct WeightBytes {
    pub total: u64,
    /// Of `total`, the bytes in external-data files.
    pub external: u64,
    /// Times the runtime holds the model (1, or 2 when the original stays
    /// loaded for timing), plus one when the weights are inline in the
    /// serialized bytes handed to it.
    pub copies: u64,
}

/// Chooses where the weights live during verification, or why it cannot
/// run. `mapping_allowed`: ONNX Runtime may be used (no `--backend tract`).
pub fn plan(weights: WeightBytes, mapping_allowed: bool) -> Result<WeightPlan, String> {
    match available_bytes() {
        Some(have) => plan_given(have, weights, mapping_allowed),
        None => Ok(WeightPlan::Heap),
    }
}

fn plan_given(have: u64, w: WeightBytes, mapping_allowed: bool) -> Result<WeightPlan, String> {
    let Some(why) = heap_shortfall(have, w.total, w.copies) else {
        return Ok(WeightPlan::Heap);
    };
    if w.external == 0 {
        return Err(format!(
            "{why}: {WAY_OUT} (weights in external-data files can be memory-mapped instead: `infopt convert MODEL -o OUT --external-data` stores them so)"
        ));
    }
    let inline = w.total - w.external.min(w.total);
    let need = inline.saturating_mul(w.copies) + mapped_reserve(w.total);
    if !fits(need, have) {
        return Err(format!(
            "{why}; with the {:.1} GiB of external-data weights memory-mapped it would still need {:.1} GiB: {WAY_OUT}",
            gib(w.external),
            gib(need.saturating_add(need / 10))
        ));
    }
    if !mapping_allowed {
        return Err(format!(
            "{why}; ONNX Runtime could run it with its weights memory-mapped: drop --backend tract, or {WAY_OUT}"
        ));
    }
    Ok(WeightPlan::Mapped {
        note: format!(
            "the {:.1} GiB of weights do not fit in the {:.1} GiB available for a heap copy: verified in ONNX Runtime with the external-data weights memory-mapped (prepacking and graph optimization off)",
            gib(w.total),
            gib(have)
        ),
    })
}

/// `None` when a candidate whose weights hold `inline_bytes` outside the
/// source files (tensors the passes rewrote) can be loaded next to the
/// mapped original; else why not.
pub fn candidate_refusal(inline_bytes: u64, weight_bytes: u64) -> Option<String> {
    let have = available_bytes()?;
    // Serialized once by infopt, copied once more by the runtime.
    let need = inline_bytes.saturating_mul(2) + mapped_reserve(weight_bytes);
    if fits(need, have) {
        return None;
    }
    Some(format!(
        "the optimized model holds {:.1} GiB of weights the passes rewrote, which cannot be memory-mapped and need about {:.1} GiB to verify, and {:.1} GiB is available: run with --no-verify, or disable the passes that rewrite large weights (see the report's pass list)",
        gib(inline_bytes),
        gib(need),
        gib(have)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_larger_than_memory_is_refused_with_the_estimate_and_the_way_out() {
        // 1 PiB of weights fits nowhere.
        let why = refusal(1 << 50, 1).expect("refused");
        assert!(why.contains("--no-verify") && why.contains("GiB"), "{why}");
        assert!(!why.contains('\n'));
        // A few MB fit anywhere this test runs.
        assert_eq!(refusal(4 << 20, 2), None);
        assert!(available_bytes().is_some_and(|b| b > 0));
        assert_eq!(verification_estimate(100, 2), 225);
    }

    const GIB: u64 = 1 << 30;

    fn weights(total: u64, external: u64) -> WeightBytes {
        WeightBytes {
            total,
            external,
            copies: 1,
        }
    }

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("123"), Some(123));
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("4GiB"), Some(4 << 30));
        assert_eq!(parse_size("1.5k"), Some(1536));
        assert_eq!(parse_size("4 GB"), Some(4 << 30));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("-1G"), None);
    }

    #[test]
    fn weights_that_fit_stay_on_the_heap() {
        assert_eq!(
            plan_given(16 * GIB, weights(4 * GIB, 4 * GIB), true),
            Ok(WeightPlan::Heap)
        );
    }

    #[test]
    fn external_weights_bigger_than_memory_are_mapped() {
        let plan = plan_given(16 * GIB, weights(27 * GIB, 27 * GIB), true).expect("mapped");
        let WeightPlan::Mapped { note } = plan else {
            panic!("expected mapped, got {plan:?}");
        };
        assert!(
            note.contains("27.0 GiB") && note.contains("memory-mapped"),
            "{note}"
        );
    }

    #[test]
    fn inline_weights_bigger_than_memory_are_refused_with_the_way_out() {
        let why = plan_given(16 * GIB, weights(27 * GIB, 0), true).unwrap_err();
        assert!(
            why.contains("--no-verify") && why.contains("--external-data"),
            "{why}"
        );
        // Mostly inline: mapping the external part is not enough.
        let why = plan_given(16 * GIB, weights(27 * GIB, 5 * GIB), true).unwrap_err();
        assert!(
            why.contains(
                "with the 5.0 GiB of external-data weights memory-mapped it would still need"
            ),
            "{why}"
        );
    }

    #[test]
    fn mapping_needs_onnx_runtime() {
        let why = plan_given(16 * GIB, weights(27 * GIB, 27 * GIB), false).unwrap_err();
        assert!(why.contains("drop --backend tract"), "{why}");
    }

    #[test]
    fn cgroup_limits_are_read_from_v1_and_v2_files() {
        let dir = std::env::temp_dir().join(format!("infopt-cg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("memory.max"), "4294967296\n").unwrap();
        std::fs::write(dir.join("memory.current"), "3221225472\n").unwrap();
        std::fs::write(
            dir.join("memory.stat"),
            "anon 1\ninactive_file 1073741824\n",
        )
        .unwrap();
        // 4 GiB limit, 3 GiB in use of which 1 GiB is droppable cache.
        assert_eq!(headroom_of(&dir, CgroupLayout::V2), Some(2 * GIB));
        std::fs::write(dir.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(headroom_of(&dir, CgroupLayout::V1), None, "v1's 'no limit'");
        std::fs::write(dir.join("memory.limit_in_bytes"), "2147483648\n").unwrap();
        std::fs::write(dir.join("memory.usage_in_bytes"), "2147483648\n").unwrap();
        std::fs::write(dir.join("memory.stat"), "total_inactive_file 536870912\n").unwrap();
        assert_eq!(headroom_of(&dir, CgroupLayout::V1), Some(GIB / 2));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
