#!/usr/bin/env bash
# Puts the TensorRT 11.4 and TensorRT-RTX 1.3-1.7 headers (shipped in the source of the
# `trtx-sys` crate on crates.io) into cargo's registry, where runtime/build.rs finds them
# to compile infopt's built-in TensorRT shims. Network to crates.io once; nothing is
# copied into this repository. Prints the headers folder.
#
# Not needed for an ordinary build: runtime/build.rs has cargo fetch the crate itself.
# This is for a build made offline: after fetching, it touches runtime/build.rs, so the
# next cargo build reruns it and embeds the shims (cargo does not watch its registry).
set -euo pipefail

version="0.9.1+rtx1.7"
home="${CARGO_HOME:-$HOME/.cargo}"

find_headers() {
    local dir
    for dir in "$home"/registry/src/*/trtx-sys-"$version"/TensorRT-Headers; do
        if [ -f "$dir/TRT-RTX-1.7/NvInfer.h" ] && [ -f "$dir/TRT-Enterprise-11.4/NvInfer.h" ]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

if find_headers; then
    exit 0
fi
command -v cargo >/dev/null || { echo "fetch-trt-headers: cargo not found" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cat >"$work/Cargo.toml" <<TOML
[package]
name = "infopt-trt-headers"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
trtx-sys = { version = "=$version", default-features = false }

[workspace]
TOML
: >"$work/src/lib.rs"
echo "fetch-trt-headers: fetching trtx-sys $version (TensorRT and TensorRT-RTX headers) with cargo" >&2
(cd "$work" && cargo fetch --quiet) || {
    echo "fetch-trt-headers: cargo fetch of trtx-sys failed (network to crates.io needed once)" >&2
    exit 1
}
find_headers || { echo "fetch-trt-headers: trtx-sys fetched but its TensorRT-Headers folder is not complete" >&2; exit 1; }
# A build made before this fetch has no shims: make the next one rerun runtime/build.rs.
touch "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/runtime/build.rs"
