//! Every pipeline in configs/ loads, with every pass registered the way the
//! CLI registers them (built-in passes plus quantize-int8 from this crate).

use infopt_passes::config::PipelineConfig;

#[test]
fn every_config_in_the_repo_loads() {
    infopt_calibration::quantize::register();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let cfg = PipelineConfig::from_yaml(&text, &path.display().to_string())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(!cfg.passes.is_empty(), "{}", path.display());
            n += 1;
        }
    }
    assert!(n >= 5, "{n} configs");
}
