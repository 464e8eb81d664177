# The native module (python/src/lib.rs). Use the functions of `infopt` instead.
from typing import Callable, List, Optional, Tuple

__version__: str

def run(
    args: List[str],
    progress: Optional[Callable[[str, str], object]] = None,
    metric: Optional[Callable[[List[List[Tuple[str, str, List[int], bytes]]]], float]] = None,
) -> Tuple[int, Optional[str], Optional[Tuple[str, str, str, str]]]:
    """Runs one command (its arguments, without the program name), GIL released:
    (exit_code, one-line message, (command, json, markdown, text) or None)."""

def main(argv: List[str]) -> int:
    """The whole command line; prints like `infopt` and returns the exit code."""
