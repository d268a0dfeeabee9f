"""``pglab papermill NOTEBOOK OUTPUT [papermill's options]``: papermill's own command line (``-p``, ``-y``, ``-f``,
``--help-notebook``...), ending in pglab's one line when the notebook refuses its parameters or stops.

Why: papermill's CLI ends a failed notebook with its traceback (about 25 lines of frames and dashes) after the line
that says what was wrong. Here the same command runs in-process (papermill's click command, ``standalone_mode``
off) and a cell's error becomes one line: pglab's own refusals (a misspelt parameter, a value out of range, a busy
machine) exit 2 with their message alone, any other error exits 1 naming the cell and the executed notebook, which
holds the whole traceback.
"""

from __future__ import annotations

import sys

#: what a notebook's cell raises when pglab refuses its input (``pglab.errors``): said in one line, exit 2
USER_ERRORS = frozenset({"UserError", "ParameterError", "PreflightError", "NotComparableError", "ManifestError",
                         "RecordError", "ParseError"})


def run(argv: list[str]) -> int:
    import click
    from papermill.cli import papermill as command
    from papermill.exceptions import PapermillExecutionError

    try:
        command.main(args=argv, prog_name="pglab papermill", standalone_mode=False)
    except PapermillExecutionError as exc:
        said = str(exc.evalue or "").strip()
        first = said.splitlines()[0] if said else ""
        if exc.ename in USER_ERRORS:  # its message as pglab's own commands print it (every bad key listed)
            print(f"pglab: {said}", file=sys.stderr)
            return 2
        named = [a for a in argv if a.endswith(".ipynb")]  # NOTEBOOK, then OUTPUT
        output = named[1] if len(named) > 1 else (named[0] if named else None)
        print(f"pglab: the notebook stopped in cell {exc.exec_count}: {exc.ename}: {first}"
              + (f" (the executed notebook, with the whole traceback: {output})" if output else ""), file=sys.stderr)
        return 1
    except click.exceptions.Exit as exc:  # --help, --help-notebook
        return int(exc.exit_code)
    except click.ClickException as exc:  # a usage error: click's own message
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        print("pglab: interrupted", file=sys.stderr)
        return 130
    return 0
