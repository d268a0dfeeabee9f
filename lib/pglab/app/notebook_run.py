"""``python -m pglab.app.notebook_run STUDY [--root R] [--reference REF]``: a study's notebook run on an analysed
data root, then its HTML report: what a DVC analyze stage runs, and what ``pglab report`` runs on your runs.

Why not the papermill CLI: on an error in the notebook it prints papermill's traceback (75 dashes, every frame)
before the one line that says what was wrong. Here papermill's Python API runs the notebook, and a failing cell
gives one line: the error the notebook raised, the cell it was in, and the executed notebook to open.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from pglab import exits
from pglab.app.paths import repo_root
from pglab.errors import PglabError
from pglab.studies import STUDIES
from pglab.views import report


def _kernels() -> type:
    """Kernels over IPC sockets (files in the runtime folder), not TCP on 127.0.0.1: nothing listens on a port,
    and ipykernel does not print its warning about TCP without encryption into a successful run's output."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class IpcKernelManager(AsyncKernelManager):
        @default("transport")
        def _ipc(self) -> str:
            return "ipc"

    return IpcKernelManager


#: the kernel's own log (ipykernel logs "KeyboardInterrupt caught in kernel" when a failed run's kernel is shut
#: down) stays out of the one line a failure prints; a cell's error reaches it through papermill
QUIET_KERNEL = ["--IPKernelApp.log_level=CRITICAL"]


class NotebookError(PglabError):
    """A cell of a study's notebook raised: its message, without papermill's traceback."""


def execute(study: str, root: Path, reference: Path | None = None, log_level: int = logging.WARNING) -> Path:
    """``notebooks/<study>.ipynb`` run into ``<root>/reports/<study>.ipynb`` on ``<root>/data`` (collect False, figures
    into ``<root>/figures``), then ``<root>/reports/<study>.html`` (beside ``reference``'s run if given). The notebook
    is named relative to here: papermill records its path in the executed notebook, a DVC output, which must not
    depend on where the checkout is."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    logging.getLogger("papermill").setLevel(log_level)
    (root / "reports").mkdir(parents=True, exist_ok=True)
    executed = root / "reports" / f"{study}.ipynb"
    params = {"collect": False, "data_root": str(root / "data"), "figures_root": str(root / "figures")}
    try:
        source = os.path.relpath(repo_root() / "notebooks" / f"{study}.ipynb")
        papermill.execute_notebook(source, str(executed), parameters=params, progress_bar=False, log_output=False,
                                   kernel_manager_class=_kernels(), extra_arguments=QUIET_KERNEL)
    except PapermillExecutionError as exc:
        raise NotebookError(f"the {study} notebook stopped in cell {exc.exec_count}: {exc.ename}: "
                            f"{str(exc.evalue).splitlines()[0] if exc.evalue else ''} (the executed notebook, "
                            f"with the whole traceback: {executed})") from None
    return report.write_study(study, root, reference)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pglab.app.notebook_run", description=__doc__.splitlines()[0])
    p.add_argument("study", choices=STUDIES, help="the study whose notebook runs")
    p.add_argument("--root", type=Path, default=Path("."),
                   help="the folder holding data/raw/<study> (the run), where data/derived, figures and reports go "
                        "(default: here, the DVC pipeline's)")
    p.add_argument("--reference", type=Path, help="a checkout holding the shipped runs: the report sets each claim "
                                                  "beside the reference's")
    a = p.parse_args(argv)
    return exits.run(lambda a: execute(a.study, a.root, a.reference) and 0, a)


if __name__ == "__main__":
    sys.exit(main())
