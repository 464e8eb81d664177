#!/usr/bin/env bash
# Builds the `pip install infopt` wheel into dist/: one abi3 wheel (CPython >= 3.9)
# with the `infopt` Python module and the `infopt` command (a script that calls the
# module's command-line entry point; pyproject.toml):
#   1. maturin (pyo3 bindings) builds the release native module and the wheel, checking
#      that it only needs the glibc of the manylinux policy asked for;
#   2. the module's debug info (line tables, for symbolized backtraces) moves to
#      dist/infopt-VERSION-PLATFORM.debug and the wheel ships the stripped module, which
#      points at that file with a .gnu_debuglink (gdb/addr2line find it beside it);
#   3. the wheel must build engines: its module is asked (`infopt doctor --json`) for
#      its built-in TensorRT shims, and a wheel without them fails the build (runtime/
#      build.rs has cargo fetch their headers; offline it builds without them);
#   4. auditwheel shows the wheel's policy.
#
#   bash scripts/build-wheel.sh                # manylinux tag: $MANYLINUX, else the
#                                              # lowest of 2_17 / 2_28 / 2_34 / 2_35 / 2_36 that this binary meets
#   PROFILE=dev bash scripts/build-wheel.sh    # package the debug build (checks the packaging
#                                              # only: the module is unoptimized)
# Tools come from PyPI into .venv-wheel (pinned). A release build takes ~8 min on 2 cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
venv="$root/.venv-wheel"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/maturin" ]; then
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        maturin==1.16.0 wheel==0.48.0 auditwheel==6.8.2
fi
export PATH="$venv/bin:$PATH"
mkdir -p dist
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT

# maturin refuses a tag the module does not meet; try the oldest first.
tags="${MANYLINUX:-manylinux_2_17 manylinux_2_28 manylinux_2_34 manylinux_2_35 manylinux_2_36}"
built=""
for tag in $tags; do
    profile=(--release)
    [ "${PROFILE:-release}" = dev ] && profile=()
    echo "build-wheel: maturin build ${profile[*]} --compatibility $tag"
    if maturin build "${profile[@]}" --compatibility "$tag" --out "$raw" 2> "$raw/maturin.log"; then
        built="$tag"
        break
    fi
    grep -iE "error|glibc|symbol" "$raw/maturin.log" | tail -n 3 || true
done
[ -n "$built" ] || { cat "$raw/maturin.log" >&2; echo "build-wheel: no manylinux tag accepted" >&2; exit 1; }
whl="$(ls "$raw"/*.whl)"

# Split the debug info off the shipped native module.
wheel unpack "$whl" -d "$raw/unpacked" > /dev/null
pkg="$(ls -d "$raw"/unpacked/*/)"
bin="$(ls "$pkg"infopt/_infopt*.so)"
name="$(basename "$whl" .whl)"
debug="dist/${name}.debug"
before=$(stat -c %s "$bin")
objcopy --only-keep-debug "$bin" "$debug"
# --strip-debug keeps the symbol table: backtraces still name functions without the .debug file.
objcopy --strip-debug --add-gnu-debuglink="$debug" "$bin"
after=$(stat -c %s "$bin")
# A wheel that cannot build engines is not released: ask the module itself.
report="$(cd "$raw" && env -u INFOPT_TRT_SHIM PYTHONPATH="$pkg" "$venv/bin/python" -c \
    'import sys; from infopt import _infopt; sys.exit(_infopt.main(["infopt", "doctor", "--json"]))')" \
    || { echo "build-wheel: the built module does not run (infopt doctor failed)" >&2; exit 1; }
shims="$(printf '%s' "$report" | "$venv/bin/python" -c '
import json, sys
row = [i for i in json.load(sys.stdin)["items"] if i["name"] == "TensorRT shims (built in)"]
print(row[0]["version"] if row and row[0]["status"] == "ok" else "")')"
if [ -z "$shims" ]; then
    grep -h "no built-in TensorRT shims\|did not compile" "$raw/maturin.log" >&2 || true
    echo "build-wheel: the wheel carries no built-in TensorRT shims, so it cannot build engines; build with network access to crates.io (cargo fetches the trtx-sys headers), or run bash scripts/fetch-trt-headers.sh first" >&2
    exit 1
fi
echo "build-wheel: built-in TensorRT shims: $shims"
rm -f "dist/${name}.whl"
wheel pack "$pkg" -d dist > /dev/null
echo "build-wheel: native module $before bytes with line tables -> $after bytes shipped; debug info in $debug ($(stat -c %s "$debug") bytes)"
echo "build-wheel: dist/${name}.whl ($(stat -c %s "dist/${name}.whl") bytes), tag $built"
auditwheel show "dist/${name}.whl"
