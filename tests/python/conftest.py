"""pytest configuration for the Python API tests.

Run:  bash scripts/setup-venv.sh && bash scripts/python-dev.sh && .venv/bin/pytest tests/python
The `infopt` package must be importable: scripts/python-dev.sh builds the native module
(debug) into the venv.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# A debug build's bound below which the INT8 speed check does not time a float model
# (ops/src/int8/speed.rs::min_float_ms): the fixtures' INT8 must not give way to float on
# a loaded machine's noise. Read by the module at each call.
os.environ.setdefault("INFOPT_TEST_MIN_FLOAT_MS", "0.25")

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "fixtures" / "models"


@pytest.fixture
def fixture_path():
    def path(name: str) -> Path:
        return MODELS / name

    return path


@pytest.fixture
def copied(tmp_path):
    """Copies fixture files into tmp_path (a model with its external data, say)."""

    def copy(*names: str) -> Path:
        for name in names:
            shutil.copy(MODELS / name, tmp_path / name)
        return tmp_path / names[0]

    return copy
