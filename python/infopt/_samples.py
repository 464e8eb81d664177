"""Samples and arrays as the native module reads them, without files.

Each array crosses as ``(name, dtype, shape, bytes)``: numpy's dtype string
(``<f4``), the shape, and the elements in C order.
"""

from collections.abc import Mapping, Sequence
from typing import Any, Iterable, List, Optional, Tuple

from .errors import UsageError

Raw = List[Tuple[str, str, List[int], bytes]]


def raw(arrays: Any, what: str) -> Raw:
    """A dict of input name -> array as the native module takes it."""
    if not isinstance(arrays, Mapping):
        raise UsageError(
            f"{what} is a {type(arrays).__name__}; each sample must be a dict of input name -> "
            "numpy array"
        )
    import numpy as np

    out = []
    for name, value in arrays.items():
        a = np.ascontiguousarray(value)
        out.append((str(name), a.dtype.str, [int(d) for d in a.shape], a.tobytes()))
    return out


class Samples:
    """Calibration samples from an iterable of ``{input_name: array}``, read by index.

    The command reads the data more than once (INT8: the first sample for the input
    sizes, the calibration samples, then the held-out ones). A list or tuple is read by
    index each time (nothing copied ahead); any other iterable, a generator say, is
    iterated once, only as far as the command reads, and the samples it yielded are kept
    in memory (as bytes) for the next reading.
    """

    def __init__(self, iterable: Iterable[Any]):
        if isinstance(iterable, Mapping):
            raise UsageError(
                "calibration data must be a path or an iterable of samples (dicts); got one "
                "dict: wrap it in a list"
            )
        self._indexed = iterable if isinstance(iterable, Sequence) else None
        self._iterator = None if self._indexed is not None else iter(iterable)
        self._kept: List[Raw] = []

    def count(self) -> Optional[int]:
        """The number of samples, when known ahead."""
        return len(self._indexed) if self._indexed is not None else None

    def get(self, i: int) -> Optional[Raw]:
        """Sample ``i``, or None after the last."""
        if self._indexed is not None:
            if i < len(self._indexed):
                return raw(self._indexed[i], f"calibration sample {i}")
            return self._none_after(i)
        while len(self._kept) <= i and self._iterator is not None:
            try:
                sample = next(self._iterator)
            except StopIteration:
                self._iterator = None
                break
            self._kept.append(raw(sample, f"calibration sample {len(self._kept)}"))
        if i < len(self._kept):
            return self._kept[i]
        return self._none_after(i)

    @staticmethod
    def _none_after(i: int) -> None:
        if i == 0:
            raise UsageError("the calibration data iterable yielded no samples")
        return None
