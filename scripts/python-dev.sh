#!/usr/bin/env bash
# Builds the `infopt` Python module (debug, fast) into .venv, for tests/python:
#   bash scripts/python-dev.sh            # then: .venv/bin/pytest tests/python
# maturin develop installs the package from python/ as editable and puts the native
# module (python/infopt/_infopt.abi3.so, ignored by git) beside it. The release wheel
# is scripts/build-wheel.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup-venv.sh > /dev/null
VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH" maturin develop --quiet 2>&1 \
    | grep -vE "^(📦|✏️|🛠|🔗|🐍|⚠️ Warning: .*editable)" || true
.venv/bin/python -c "import infopt; print('python-dev: infopt', infopt.__version__, 'in .venv')"
