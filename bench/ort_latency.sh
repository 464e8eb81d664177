#!/usr/bin/env bash
# ONNX Runtime latency of the original model and of infopt's, onnxsim's and
# onnxslim's outputs: all four in one process, runs interleaved, at 1 and 2
# intra-op threads. Prints figures; asserts nothing.
#   bash bench/ort_latency.sh PEERS_PYTHON MODEL.onnx [MODEL.onnx ...]
# PEERS_PYTHON is a Python with onnxsim and onnxslim installed (see
# bench/compare_peers.py). Extra infopt options via INFOPT_ARGS.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$1"; shift
bin="$root/target/release/infopt"
[ -x "$bin" ] || cargo build --release --quiet --manifest-path "$root/Cargo.toml" --bin infopt
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for model in "$@"; do
  name="$(basename "$model" .onnx)"
  "$bin" optimize "$model" -o "$work/$name.infopt.onnx" ${INFOPT_ARGS:-} >/dev/null 2>&1
  "$py" -m onnxsim "$model" "$work/$name.onnxsim.onnx" >/dev/null 2>&1 || echo "onnxsim failed on $name"
  "$py" -m onnxslim "$model" "$work/$name.onnxslim.onnx" >/dev/null 2>&1 || echo "onnxslim failed on $name"
  others=()
  for t in infopt onnxsim onnxslim; do
    [ -f "$work/$name.$t.onnx" ] && others+=(--compare "$work/$name.$t.onnx")
  done
  for threads in 1 2; do
    echo "== $name, ONNX Runtime, $threads thread(s)"
    "$bin" bench "$model" "${others[@]}" --backend ort --threads "$threads" --warmup 20 --runs 200 2>/dev/null \
      | grep -E "^(model|other|  latency|ratio)" || true
  done
done
