"""The errors pglab raises on purpose, split the way pyperf splits them.

A ``UserError`` is something the caller can fix (parameters, inventory, missing packages) and is
raised before anything starts. A ``ProcessError`` is a command that failed and carries everything
needed to diagnose it without re-running it.
"""

from __future__ import annotations


class PglabError(Exception):
    """Base of every error pglab raises on purpose."""


class ParseError(PglabError, ValueError):
    """A file is not the tool output the parser expected."""


class UserError(PglabError):
    """Bad input: raised before any server or process starts."""


class ParameterError(UserError):
    """Parameters that do not validate; ``problems`` names every bad key."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid parameters in {source}:\n{lines}")


class PreflightError(UserError):
    """The machine is not ready for the requested run (binaries, ports, connections, hosts)."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"preflight failed, nothing was started:\n{lines}")


class ProcessError(PglabError):
    """A command exited non-zero or timed out."""

    def __init__(self, host: str, command: str, exit_code: int | None, stdout: str, stderr: str,
                 timed_out: bool = False):
        self.host = host
        self.command = command
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out
        why = "timed out" if timed_out else f"exited with {exit_code}"
        tail = (stderr or stdout).strip().splitlines()[-5:]
        detail = "\n".join(f"    {line}" for line in tail)
        super().__init__(f"[{host}] {command!s} {why}" + (f":\n{detail}" if detail else ""))
