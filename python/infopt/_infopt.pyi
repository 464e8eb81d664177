# The native module (python/src/lib.rs). Use the functions of `infopt` instead.
from typing import Any, Callable, List, Optional, Tuple

__version__: str

Raw = List[Tuple[str, str, List[int], bytes]]

def run(
    command: str,
    keywords: str,
    data: Optional[Any] = None,
    inputs: Optional[Raw] = None,
    progress: Optional[Callable[[str, str], object]] = None,
    metric: Optional[Callable[[List[List[Tuple[str, str, List[int], bytes]]]], float]] = None,
) -> Tuple[int, Optional[str], Optional[Tuple[str, str, str, str]]]:
    """Runs one command ("optimize", "build-engine", "compare", "bench", "inspect",
    "calibrate") with its options as one JSON object of keywords (no command line),
    GIL released: (exit_code, one-line message, (command, json, markdown, text) or
    None). ``data``: calibration samples (an ``infopt._samples.Samples``: ``get(i)``,
    ``count()``); ``inputs``: arrays as ``[(name, dtype, shape, bytes)]``."""

def main(argv: List[str]) -> int:
    """The whole command line; prints like `infopt` and returns the exit code."""
