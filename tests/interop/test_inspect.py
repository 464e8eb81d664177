"""`infopt inspect MODEL --json` reads every good fixture and prints one JSON document."""

from __future__ import annotations

import json

import pytest

import _interop as H

GOOD = H.good_fixtures()


@pytest.mark.parametrize("src", GOOD, ids=[H.fixture_id(p) for p in GOOD])
def test_inspect_json(infopt, src):
    proc = H.run_cli("inspect", src, "--json")
    assert proc.returncode == 0, H.describe(proc)
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        pytest.fail(f"stdout is not JSON ({e}): {proc.stdout[:500]!r}")
    assert isinstance(doc, dict), f"expected a JSON object, got {type(doc).__name__}"
