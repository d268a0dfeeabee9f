"""Saving figures so that the same data gives the same bytes (DESIGN.md "Data contract")."""

from __future__ import annotations

from pathlib import Path

import matplotlib

if not matplotlib.get_backend().lower().startswith("module://"):  # keep Jupyter's inline backend
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SVG_HASH_SALT = "pglab"


def style() -> None:
    """One look for every study; fixed salt so SVG ids do not change between runs."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    plt.rcParams["svg.hashsalt"] = SVG_HASH_SALT
    plt.rcParams["svg.fonttype"] = "path"
    plt.rcParams["figure.dpi"] = 100


def save(fig: plt.Figure, out_dir: str | Path, name: str) -> list[Path]:
    """Write ``name``.png and ``name``.svg with no date or software stamp."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plt.rcParams["svg.hashsalt"] = SVG_HASH_SALT
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    fig.savefig(paths[0], dpi=110, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(paths[1], bbox_inches="tight", metadata={"Date": None, "Creator": None})
    return paths
