"""pytest configuration for the interop tests.

Run:  scripts/setup-venv.sh && .venv/bin/pytest tests/interop
The CLI under test is $INFOPT_BIN (default target/debug/infopt, relative to
the repo root); tests that need it skip when it does not exist.
"""

from __future__ import annotations

import os

import pytest

import _interop

@pytest.fixture(scope="session")
def infopt():
    path = _interop.infopt_bin()
    if not path.is_file() or not os.access(path, os.X_OK):
        if os.environ.get("CI"):
            pytest.fail(f"infopt binary not found at {path}: CI must build it before the interop tests")
        pytest.skip(f"infopt binary not found at {path} (build it or set INFOPT_BIN)")
    return path


def pytest_terminal_summary(terminalreporter):
    import conformance

    if conformance.SUMMARY:
        terminalreporter.section("ONNX conformance cases (informational)")
        for key, counts in sorted(conformance.SUMMARY.items()):
            terminalreporter.write_line(f"{key}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    report = _interop.BYTE_REPORT
    if not report:
        return
    same = [f for f, note in report if note == "identical"]
    differ = [(f, note) for f, note in report if note != "identical"]
    terminalreporter.section("round-trip byte identity (informational)")
    terminalreporter.write_line(f"{len(same)} of {len(report)} fixtures re-saved byte-identical to the input")
    for f, note in differ:
        terminalreporter.write_line(f"  {f}: {note}")
