#!/usr/bin/env bash
# Create the Python virtualenv used by fixtures/generate.py and tests/interop.
#
#   scripts/setup-venv.sh          # creates .venv at the repo root if missing,
#                                  # installs tests/interop/requirements.txt
#                                  # (with TensorRT-RTX's libraries), and puts the
#                                  # TensorRT headers runtime/build.rs compiles the
#                                  # shims from into cargo's registry
#
# Idempotent: pip runs only when the requirements file (or the venv's Python)
# changed since the last successful install, tracked by a stamp file inside
# .venv. Set PYTHON to choose the interpreter used to create the venv.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
req="$root/tests/interop/requirements.txt"
stamp="$venv/.requirements.sha256"
python="${PYTHON:-python3}"

created=""
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
    created="created .venv, "
fi

want="$( { cat "$req"; "$venv/bin/python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"
# Headers for the built-in TensorRT shims (cheap when already there; a warning, not a
# failure, when offline: infopt then builds without them).
bash "$root/scripts/fetch-trt-headers.sh" >/dev/null || echo "setup-venv: TensorRT headers not fetched; build-engine will need --trt-shim" >&2

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "setup-venv: .venv up to date (requirements unchanged), nothing to do"
    exit 0
fi

"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
echo "$want" > "$stamp"
echo "setup-venv: ${created}installed $(grep -cE '^[A-Za-z0-9]' "$req") pinned packages from tests/interop/requirements.txt into .venv"
