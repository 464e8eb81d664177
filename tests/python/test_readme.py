"""The README's Python example runs as written, and prints what the README says."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil

from conftest import MODELS, ROOT


def python_example() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### From Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_python_example_runs(tmp_path):
    code = python_example()
    assert "infopt.optimize(model)" in code
    shutil.copy(MODELS / "cnn_bn_relu.onnx", tmp_path / "model.onnx")
    cwd = os.getcwd()
    out = io.StringIO()
    try:
        os.chdir(tmp_path)
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    assert (tmp_path / "model.opt.onnx").exists()
    # The comment beside print() in the README is what it prints.
    said = re.search(r"print\(.*\)\s+# (.*)", code).group(1).strip()
    assert out.getvalue().strip() == said
