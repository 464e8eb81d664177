"""The user's accuracy metric for ``infopt.optimize(..., int8=True, metric=f)``.

``f(outputs)`` gets a list with a dict of the model's outputs by name as
numpy arrays for each judged sample, in order, and returns a score, higher is
better. The judged samples are the held-out ones (after ``calib_samples``,
default 256), or the calibration ones when there are no others; a probe of the
search passes only the first few of them and a finalist all, so labels kept
beside ``f`` line up as ``labels[:len(outputs)]`` (``zip`` does that). The
INT8 search then keeps in float what it must for the INT8 model's score to stay
within ``int8_max_drop`` (default 0.01) of the float model's on the same
samples; the report gives both scores (``int8.held_out.metric``: ``original``
is FP32's, ``candidate`` INT8's) and what was kept (``int8.kept_float``).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

Raw = Sequence[Sequence[Tuple[str, str, Sequence[int], bytes]]]


def adapter(metric: Callable[[List[Dict[str, Any]]], Any]) -> Callable[[Raw], float]:
    """``metric`` as the native module calls it: outputs arrive as
    ``(name, dtype, shape, bytes)`` and become numpy arrays."""
    if not callable(metric):
        raise TypeError(f"metric must be callable (got {type(metric).__name__})")
    import numpy as np

    def call(samples: Raw) -> float:
        outputs = [
            {name: np.frombuffer(data, dtype=dtype).reshape(shape) for name, dtype, shape, data in sample}
            for sample in samples
        ]
        return float(metric(outputs))

    return call
