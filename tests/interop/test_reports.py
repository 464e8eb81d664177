"""The CLI's CI reports, checked by independent parsers.

- JSON reports of `infopt optimize` (passing, failing gates, failed verification)
  validate against the published schema docs/report.schema.json (jsonschema);
- the schema is strict: a report with an unknown field or a wrong type is rejected;
- the JUnit XML is well-formed (xml.etree) with one test case per gate and a
  `failure` element carrying the message for each failed gate.
"""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET

import jsonschema
import pytest

import _interop

SCHEMA = json.loads((_interop.REPO / "docs" / "report.schema.json").read_text())
CNN = _interop.MODELS / "cnn_bn_relu.onnx"


def _validate(report: dict) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.Draft202012Validator(SCHEMA).validate(report)


def _optimize(tmp_path, *args, env=None):
    out = tmp_path / "out.onnx"
    rj, rx, rm = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.md"
    proc = subprocess.run(
        [str(_interop.infopt_bin()), "optimize", str(CNN), "-o", str(out),
         "--report", str(rj), "--report", str(rx), "--report", str(rm), *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        timeout=_interop.CLI_TIMEOUT_S, cwd=_interop.REPO, env={**os.environ, **_interop.TEST_ENV, **(env or {})},
    )
    return proc, rj, rx, rm


def test_passing_report_with_every_kind_of_gate_validates(infopt, tmp_path):
    proc, rj, rx, rm = _optimize(
        tmp_path,
        "--gate", "min_cosine=0.999", "--gate", "max_abs@logits=1e-3", "--gate", "max_rel=0.1",
        "--gate", "min_topk_agreement=0.5,k=2", "--gate", "max_latency_ratio=5",
        "--gate", "max_file_size=1M", "--gate", "max_nodes=100",
        "--gate", "forbid_ops=com.microsoft", "--gate", "max_opset=21",
        "--runs", "30", "--warmup", "1",
    )
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(rj.read_text())
    _validate(report)
    assert report["gates"]["passed"] is True
    assert report["gates"]["latency"]["runs"] >= 30
    assert report["latency"]["before"]["runs"] == report["gates"]["latency"]["runs"]
    suite = ET.parse(rx).getroot()
    assert suite.tag == "testsuites"
    cases = suite.findall("./testsuite/testcase")
    names = [c.get("name") for c in cases]
    assert "max_latency_ratio" in names and "min_cosine@logits" in names
    assert len(cases) == len(report["gates"]["results"]) + 1  # + the verification check
    assert not suite.findall(".//failure")
    assert rm.read_text().startswith("## ✅ infopt optimize")


def test_failing_gates_report_validates_and_lists_failures(infopt, tmp_path):
    proc, rj, rx, rm = _optimize(tmp_path, "--gate", "max_nodes=1", "--gate", "forbid_ops=Conv,Gemm")
    assert proc.returncode == 5, _interop.describe(proc)
    report = json.loads(rj.read_text())
    _validate(report)
    failed = [g["gate"] for g in report["gates"]["results"] if not g["passed"]]
    assert failed == ["max_nodes", "forbid_ops@Conv", "forbid_ops@Gemm"]
    root = ET.parse(rx).getroot()
    assert root.get("failures") == "3"
    failures = root.findall(".//testcase/failure")
    assert [f.get("message").split(" ")[0] for f in failures] == ["13", "4", "1"]
    assert rm.read_text().startswith("## ❌ infopt optimize")


def test_failed_verification_report_validates(infopt, tmp_path):
    # A hidden test pass changes a weight: verification fails (exit 4), nothing is written.
    proc, rj, rx, rm = _optimize(tmp_path, "--passes", "perturb-weight", "--gate", "max_nodes=100",
                                 env={"INFOPT_TEST_PASSES": "1"})
    assert proc.returncode == 4, _interop.describe(proc)
    report = json.loads(rj.read_text())
    _validate(report)
    assert report["output"] is None and report["gates"] is None
    root = ET.parse(rx).getroot()
    assert root.find(".//testcase[@name='verification']/failure") is not None


@pytest.mark.parametrize("mutate", [
    lambda r: r.update(surprise=1),
    lambda r: r["input"].update(nodes="many"),
    lambda r: r.update(schema_version=2),
    lambda r: r["gates"]["results"][0].update(kind="vibes"),
])
def test_schema_rejects_reports_that_drift(infopt, tmp_path, mutate):
    proc, rj, _, _ = _optimize(tmp_path, "--gate", "max_nodes=100")
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(rj.read_text())
    _validate(report)
    mutate(report)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(SCHEMA).validate(report)
