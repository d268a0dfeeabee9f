"""A study notebook's collect: measure now with the notebook's parameters, then publish the run it analyzes.

Why apart from ``pglab.app.notebook``: collecting reads the host inventory and runs the study's collect module,
which pulls in the host and node layers; the notebook's analysis (what the DVC analyze stage runs, with
``collect=False``) must depend on none of them. So a notebook imports this module only when it measures::

    if notebook.collecting("fdw_overhead", globals()):
        from pglab.app import notebook_collect

        notebook_collect.collect("fdw_overhead", globals())
    result = notebook.run("fdw_overhead", globals())
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pglab.app import notebook
from pglab.app.collect import measure_campaign
from pglab.app.paths import repo_root
from pglab.errors import RunAborted
from pglab.hosts.inventory import load_inventory
from pglab.runs.reading import archive_dir, load_manifest, not_publishable, pipeline_dir
from pglab.runs.store import publish
from pglab.studies import module


def collect(study: str, namespace: dict[str, Any], *, progress: bool = True) -> Path:
    """Validate the notebook's parameters, measure, and publish the run (``data_root/raw/<study>``) for
    ``notebook.run`` to analyze; a run that did not complete stays in the archive (RunAborted naming why)."""
    root = repo_root()
    profile, values, overrides, inv_default = notebook.parameters(study, namespace, root)
    data = notebook.data_folder(namespace, root)
    inv = load_inventory(notebook.resolve(namespace.get("inventory") or inv_default or "params/hosts.yaml", root))
    label = profile + ("+" + ",".join(sorted(overrides)) if overrides else "")
    print(f"pglab: {study}, profile {label}; raw data goes to {archive_dir(data, study)}")
    if int(values.get("runs") or 1) > 1:  # a campaign: published whole or not at all
        p = module(study, "params").Params.model_validate(values)  # checked already by notebook.parameters
        runs, record, why = measure_campaign(study, p, data_root=data, profile=label, inventory=inv,
                                             progress=progress)
        if why:
            raise RunAborted(f"{why}; the campaign's runs stay in the archive and none was published")
        notebook.COLLECTED[study] = publish(runs[-1], pipeline_dir(data, study), runs[:-1], record)
        return notebook.COLLECTED[study]
    run_dir = module(study, "collect").collect(values, data_root=data, profile=label, inventory=inv,
                                               progress=progress)
    why = not_publishable(run_dir, load_manifest(run_dir).get("status"))
    if why:
        raise RunAborted(f"{why}; it stays in the archive and was not published (`pglab collect "
                         "--accept-failed` publishes a partial one)")
    published = publish(run_dir, pipeline_dir(data, study))
    notebook.COLLECTED[study] = published
    return published
