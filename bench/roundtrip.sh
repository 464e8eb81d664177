#!/usr/bin/env bash
# Load+save benchmark: `infopt convert` (no passes) next to `cp` of the same
# bytes, wall time and peak RSS. Prints figures; asserts nothing.
#   bash bench/roundtrip.sh [WORK_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${1:-/tmp/infopt-bench}"
mkdir -p "$work"
bash "$root/scripts/setup-venv.sh" >/dev/null
if [ ! -f "$work/external_2p5gb.onnx.data" ]; then
  "$root/.venv/bin/python" "$root/bench/make_big_models.py" "$work"
fi
cargo build --release --quiet --manifest-path "$root/Cargo.toml" --bin infopt
bin="$root/target/release/infopt"

measure() { # label, command...
  local label="$1"; shift
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  /usr/bin/time -f "%e %M" -o "$work/time.txt" "$@" >/dev/null 2>"$work/err.txt" || { cat "$work/err.txt"; return 1; }
  read -r secs kb < "$work/time.txt"
  printf '%-44s %8.2f s  peak RSS %8.1f MiB\n' "$label" "$secs" "$(echo "$kb / 1024" | bc -l)"
}

size() { stat -c %s "$@" | paste -sd+ | bc; }

echo "inline model: $(size "$work/inline_500mb.onnx") bytes"
measure "cp inline_500mb.onnx" cp "$work/inline_500mb.onnx" "$work/cp_inline.onnx"
measure "infopt convert (inline)" "$bin" convert "$work/inline_500mb.onnx" -o "$work/rt_inline.onnx"
measure "infopt convert --external-data" "$bin" convert "$work/inline_500mb.onnx" -o "$work/rt_inline_ext.onnx" --external-data

echo "external model: $(size "$work/external_2p5gb.onnx" "$work/external_2p5gb.onnx.data") bytes"
measure "cp model + data" sh -c "cp '$work/external_2p5gb.onnx' '$work/cp_ext.onnx' && cp '$work/external_2p5gb.onnx.data' '$work/cp_ext.onnx.data'"
measure "infopt convert (external stays external)" "$bin" convert "$work/external_2p5gb.onnx" -o "$work/rt_ext.onnx"
measure "infopt optimize --no-verify (default pipeline)" "$bin" optimize "$work/external_2p5gb.onnx" -o "$work/opt_ext.onnx" --no-verify
measure "infopt inspect" "$bin" inspect "$work/external_2p5gb.onnx"
rm -f "$work"/cp_* "$work"/rt_* "$work"/opt_*
