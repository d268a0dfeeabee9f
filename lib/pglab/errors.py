"""The errors pglab raises on purpose, split the way pyperf splits them.

A ``UserError`` is something the caller can fix (parameters, inventory, missing packages) and is
raised before anything starts. A ``ProcessError`` is a command that failed and carries everything
needed to diagnose it without re-running it.
"""

from __future__ import annotations

# Secrets (the run's generated password) registered by whoever creates them: every message and
# output an error carries is scrubbed of them, so a failing command can never print one.
_SECRETS: set[str] = set()
REDACTED = "[redacted]"


def register_secret(secret: str) -> None:
    """Remember ``secret`` so that ``redact`` removes it from error messages and reprs."""
    if secret and len(secret) >= 8:  # short strings would redact ordinary words
        _SECRETS.add(secret)


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``[redacted]``."""
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


class PglabError(Exception):
    """Base of every error pglab raises on purpose."""


class ParseError(PglabError, ValueError):
    """A file is not the tool output the parser expected."""


class UserError(PglabError):
    """Bad input: raised before any server or process starts."""


def listed(problems: list[str]) -> str:
    """One problem on the message's own line (a refusal a script can read as one line); several, one a line."""
    if len(problems) == 1:
        return f" {problems[0]}"
    return "".join(f"\n  - {p}" for p in problems)


class ParameterError(UserError):
    """Parameters that do not validate; ``problems`` names every bad key."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__(f"invalid parameters in {source}:{listed(problems)}")


class PreflightError(UserError):
    """The machine is not ready for the requested run (binaries, ports, connections, hosts)."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(f"preflight failed, nothing was started:{listed(problems)}")


class NotComparableError(UserError):
    """Two runs differ in host facts, placement, tool versions or parameters (``pglab.analysis.comparable``).

    ``differences`` holds every refuse-level difference; ``override`` names how to mix them anyway.
    """

    def __init__(self, differences: list, override: str = "--allow-mixed"):
        self.differences = differences
        self.override = override
        lines = "\n".join(f"  - {d}" for d in differences)
        super().__init__(f"the runs are not comparable, they differ in:\n{lines}\n"
                         f"pass {override} to compare them anyway (the output then says what was mixed)")


class RunAborted(PglabError):
    """The run cannot go on (a node died, a host stopped answering, a disk filled): it ends at once,
    with the point that showed it recorded as failed, instead of failing every later point alike."""


class ProcessError(PglabError):
    """A command exited non-zero or timed out."""

    def __init__(self, host: str, command: str, exit_code: int | None, stdout: str, stderr: str,
                 timed_out: bool = False):
        self.host = host
        self.command = redact(command)
        self.exit_code = exit_code
        self.stdout = redact(stdout)
        self.stderr = redact(stderr)
        self.timed_out = timed_out
        why = "timed out" if timed_out else f"exited with {exit_code}"
        tail = (self.stderr or self.stdout).strip().splitlines()[-5:]
        detail = "\n".join(f"    {line}" for line in tail)
        super().__init__(f"[{host}] {self.command!s} {why}" + (f":\n{detail}" if detail else ""))


class QueryTimeout(ProcessError):
    """A statement outlived its client-side deadline and was cancelled.

    A commit waiting for a synchronous standby ignores statement_timeout, so only the client can end
    it; the message says what the backend was waiting for, read just before the cancel. A
    ProcessError, so that the studies' ``except ProcessError`` marks the point failed.
    """

    def __init__(self, node: str, host: str, port: int, statement: str, timeout_s: float, waited_for: str,
                 note: str = ""):
        short = shorten(statement)
        super().__init__(host, short, None, "", waited_for, timed_out=True)
        self.node = node
        self.port = port
        self.timeout_s = timeout_s
        self.waited_for = redact(waited_for)
        message = (f"node {node} (host {host}, port {port}): {self.command!r} did not finish within its "
                   f"{timeout_s:g} s deadline and was cancelled; it was waiting for {self.waited_for}")
        self.args = (redact(message + (f". {note}" if note else "")),)


def shorten(statement: str, limit: int = 160) -> str:
    """One line of at most ``limit`` characters: enough to recognise a statement in a message."""
    flat = " ".join(statement.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def first_line(text: object, limit: int = 200) -> str:
    """The first line of an error, capped: what a one-line summary of a failed point or host shows."""
    lines = str(text or "").strip().splitlines()
    return lines[0][:limit] if lines else ""
