//! `infopt doctor`'s row of built-in TensorRT shims, and the guarantee that a release
//! build carries them: a release binary (or any build under `INFOPT_REQUIRE_TRT_SHIMS=1`,
//! which scripts/test.sh and scripts/build-wheel.sh set) without them fails here.

use std::process::Command;

fn doctor() -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_infopt"))
        .args(["doctor", "--json"])
        .env_remove("INFOPT_TRT_SHIM")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn row<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no `{name}` row in {r}"))
}

#[test]
fn doctor_lists_the_built_in_shims_in_a_row_of_their_own() {
    let r = doctor();
    let shims = row(&r, "TensorRT shims (built in)");
    let required = cfg!(not(debug_assertions))
        || std::env::var_os("INFOPT_REQUIRE_TRT_SHIMS").is_some_and(|v| v == "1");
    if shims["status"] == "missing" {
        assert!(
            !required,
            "this build has no built-in TensorRT shims (a release build, or INFOPT_REQUIRE_TRT_SHIMS=1, must): {shims}"
        );
        assert!(
            shims["fix"]
                .as_str()
                .unwrap()
                .contains("network access to crates.io"),
            "{shims}"
        );
        return;
    }
    assert_eq!(shims["status"], "ok", "{shims}");
    // Every header folder of the flavour table compiled: TensorRT 11.4, RTX 1.3-1.7.
    assert_eq!(
        shims["version"], "TensorRT 11 11.4; TensorRT-RTX 1.3, 1.4, 1.5, 1.6, 1.7",
        "{shims}"
    );
    assert!(
        shims["detail"]
            .as_str()
            .unwrap()
            .starts_with("compiled from the trtx-sys 0.9.1+rtx1.7 headers: TRT-Enterprise-11.4"),
        "{shims}"
    );
}
