"""Exit codes, one place: user errors 2, process errors 1, a partial run 3, Ctrl-C 130; one line on stderr,
no traceback."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from pglab.errors import ParseError, PglabError, UserError

OK, PROCESS, USER, PARTIAL, INTERRUPTED = 0, 1, 2, 3, 130  # docs/running.md, "A run's status, and the exit codes"


def run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``func(args)`` with pglab's errors turned into an exit code and one message."""
    try:
        return func(args)
    except (UserError, ParseError) as exc:
        print(f"pglab: {exc}", file=sys.stderr)
        return 2
    except PglabError as exc:
        print(f"pglab: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pglab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `pglab parse ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
