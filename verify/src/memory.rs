//! Will running a model fit in memory? tract copies every weight onto the
//! heap (external data included) and ONNX Runtime reads external data into
//! its own buffers, so verifying a model needs about its weights' size per
//! model loaded, plus activations. A model that cannot fit is refused before
//! loading, with the estimate and the way out, instead of being killed by
//! the kernel's OOM killer halfway.

/// Bytes this process can still use: the smaller of the memory the kernel
/// reports available and what the cgroup (container) limit leaves.
pub fn available_bytes() -> Option<u64> {
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

/// `memory.max - memory.current` of this process's cgroup (v2), if limited.
fn cgroup_headroom() -> Option<u64> {
    let rel = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = rel.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    let base = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let read = |f: &str| std::fs::read_to_string(base.join(f)).ok();
    let max = read("memory.max")?.trim().parse::<u64>().ok()?;
    let current = read("memory.current")
        .and_then(|c| c.trim().parse::<u64>().ok())
        .unwrap_or(0);
    Some(max.saturating_sub(current))
}

/// Memory verification is expected to need: the weights once per loaded
/// model (`models`), plus a quarter of them for activations and the
/// runtime's own structures.
pub fn verification_estimate(weight_bytes: u64, models: u64) -> u64 {
    weight_bytes.saturating_mul(models) + weight_bytes / 4
}

/// `None` when the estimate fits in what is available (with 10% spare).
pub fn refusal(weight_bytes: u64, models: u64) -> Option<String> {
    let need = verification_estimate(weight_bytes, models);
    let have = available_bytes()?;
    if need.saturating_add(need / 10) <= have {
        return None;
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    Some(format!(
        "verification would need about {:.1} GiB (the {:.1} GiB of weights loaded {models} time(s) by the runtime, plus activations), and {:.1} GiB is available: run with --no-verify to optimize without running the model, or verify on a machine with more memory",
        gib(need),
        gib(weight_bytes),
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
}
