"""The ``infopt`` command of the wheel: the native command line, in this process."""

import signal
import sys

from . import _infopt


def main() -> None:
    # Like the native binary: Ctrl-C ends the process at once (Python would
    # only raise KeyboardInterrupt once the command returned).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    sys.exit(_infopt.main(["infopt", *sys.argv[1:]]))
