"""ONNX's conformance tests through `infopt optimize` (see conformance.py).

Every case of the pinned `onnx` wheel's node tests and of its `simple`,
`pytorch-converted` and `pytorch-operator` folders runs twice: as it is, and
with every graph input an initializer holding the test's values (so folding
computes every node). Each run must be folded or declined and give the
expected outputs, or be refused with a reason (exit 3 or 7). Cases that
cannot be scored are listed, each with its reason, in
conformance_skips.txt; a listed case that starts passing fails, so the list
only shrinks.

Set INFOPT_CONFORMANCE=0 to leave the whole set out of a local run. All
runs happen once per session, in parallel (one infopt process per run),
before the per-case tests read their results.
"""

from __future__ import annotations

import os
import re

import pytest

import conformance as C

_CASES = C.collect(C.FOLDERS)
# INFOPT_CONFORMANCE_FILTER=REGEX runs only the matching cases (local runs).
if os.environ.get("INFOPT_CONFORMANCE_FILTER"):
    _CASES = [c for c in _CASES if re.search(os.environ["INFOPT_CONFORMANCE_FILTER"], c.key)]
_SKIPS = C.load_skips()
_KEYS = {c.key for c in _CASES}


@pytest.fixture(scope="session")
def results(infopt):
    if os.environ.get("INFOPT_CONFORMANCE") == "0":
        pytest.skip("INFOPT_CONFORMANCE=0")
    got = C.run_all(str(infopt), _CASES, C.VARIANTS, skips=_SKIPS, check_skips=True)
    C.SUMMARY.update(C.summarize(got))
    return {(r.case, r.variant): r for r in got}


def test_every_listed_skip_names_a_case_and_a_variant():
    known = {c.key for c in C.collect(C.FOLDERS)} if os.environ.get("INFOPT_CONFORMANCE_FILTER") else _KEYS
    unknown = [k for k in _SKIPS if k.split("#")[0] not in known]
    assert not unknown, f"conformance_skips.txt lists cases the onnx wheel does not have: {unknown}"
    bad = [k for k in _SKIPS if "#" in k and k.split("#")[1] not in C.VARIANTS]
    assert not bad, f"unknown variants in conformance_skips.txt: {bad}"


@pytest.mark.parametrize("variant", C.VARIANTS)
@pytest.mark.parametrize("case", [c.key for c in _CASES])
def test_case(results, case, variant):
    r = results[(case, variant)]
    listed = _SKIPS.get(f"{case}#{variant}") or _SKIPS.get(case)
    passing = C.passing(r)
    if listed:
        # A random op's output can match the reference's by chance (a clean-clone CI run saw
        # node/test_bernoulli_double "pass" once): that says nothing about the listing.
        if not listed.startswith("random op"):
            assert not passing, (
                f"{case} ({variant}) now passes ({r.status}: {r.detail}): "
                f"remove it from conformance_skips.txt (listed: {listed})")
        pytest.skip(f"listed: {listed}")
    assert passing, f"{case} ({variant}): {r.status}: {r.detail}"
