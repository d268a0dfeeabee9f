"""Thinned per-transaction logs (workloads/txlog_thin.py): a histogram and a sample instead of the full logs.

What must hold: counts, min, max and sum exact; every percentile merged over points within the stated
0.05% of the full logs' exact one (checked on the shipped runs' real logs); the shipped runs, which
keep their full logs, read exactly as before; a real pgbench run's logs thinned at collect.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, pulled_runs
from pglab.analysis import tables
from pglab.hosts.inventory import Inventory
from pglab.parsers.txlog import latency_sources, merged_histogram, merged_percentiles, parse_transaction_log_file
from pglab.runs.session import session
from pglab.runs.store import Point
from pglab.workloads import pgbench, txlog_thin
from pglab.workloads.txlog_thin import HISTOGRAM, RELATIVE_ERROR, SAMPLE, Histogram, bucket_bounds, bucket_of

PG = REPO / "tests/data/pgbench"
QS = (0, 1, 50, 90, 95, 99, 99.9, 100)


def within(got: float | None, exact: float | None) -> bool:
    """The stated bound (a midpoint within 1/2048 of each value), plus the rounding of a double."""
    if exact is None:
        return got is None
    return got is not None and abs(got - exact) <= exact * RELATIVE_ERROR * (1 + 1e-9) + 1e-12


def test_every_value_lies_in_its_bucket_a_1024th_wide_at_most() -> None:
    v = np.concatenate([np.arange(0, 1 << 22), np.random.default_rng(0).integers(0, 10**15, 200_000)])
    b = bucket_of(v)
    lo, width = bucket_bounds(b)
    assert ((lo <= v) & (v < lo + width)).all()
    assert (width[v < 2048] == 1).all() and (width * 1024 <= np.maximum(lo, 1024)).all()
    small = np.unique(b[v < 1 << 22])
    assert (np.diff(small) == 1).all()  # no gap, no overlap: each bucket is one range of values
    mid = lo + (width - 1) / 2
    assert (np.abs(mid - v) <= v * RELATIVE_ERROR).all()


def test_histograms_merge_round_trip_and_stay_small() -> None:
    rng = np.random.default_rng(1)
    parts = [rng.lognormal(7 + i, 1.2, 300_000).astype(np.int64) for i in range(4)]  # 1 ms .. seconds
    hs = []
    for p in parts:
        h = Histogram()
        h.add_us(p)
        hs.append(Histogram.from_json(h.to_json()))
    merged = Histogram()
    for h in hs:
        merged.merge(h)
    whole = Histogram()
    whole.add_us(np.concatenate(parts))
    assert (merged.counts == whole.counts).all() and merged.sum_us == whole.sum_us
    assert (merged.min_us, merged.max_us) == (whole.min_us, whole.max_us)
    text = whole.to_json()
    assert len(text) < 40_000 and Histogram.from_json(text).count == 1_200_000
    exact = np.sort(np.concatenate(parts)).astype(np.float64)
    for k, got in merged.values_at([0, 1, 600_000, 1_199_998, 1_199_999]).items():
        assert within(got, exact[k]), (k, got, exact[k])
    for bad in ("{}", '{"format": "other"}', text.replace('"count": 1200000', '"count": 5')):
        with pytest.raises(ValueError, match="histogram"):
            Histogram.from_json(bad)


def _folder(tmp: Path, *logs: Path) -> Path:
    d = tmp / "txlog"
    d.mkdir()
    for i, p in enumerate(logs):
        shutil.copy(p, d / f"pgbench_log.9{i}")
    return d


@pytest.mark.parametrize("rel", ["15/txlog_failures", "18/txlog_retries", "14/txlog_rate"])
def test_a_folder_thinned_keeps_exact_counts_and_every_100th_line(rel: str, tmp_path: Path) -> None:
    logs = [PG / rel, PG / "18/txlog"]
    d = _folder(tmp_path, *logs)
    full = [parse_transaction_log_file(p) for p in sorted(d.iterdir())]
    before = merged_percentiles(sorted(d.iterdir()), qs=QS)
    kept, meta = txlog_thin.thin(d, sorted(d.iterdir()))
    assert kept == [HISTOGRAM, SAMPLE] and sorted(p.name for p in d.iterdir()) == sorted(kept)
    lines = [p.read_bytes().splitlines(keepends=True) for p in logs]
    assert meta["kept"] == "histogram+1% sample" and meta["log_files"] == ["pgbench_log.90", "pgbench_log.91"]
    assert meta["log_lines"] == sum(map(len, lines)) and meta["log_bytes"] == sum(p.stat().st_size for p in logs)
    sample = gzip.open(d / SAMPLE).read()
    assert sample == b"".join(b"".join(ls[::100]) for ls in lines) and meta["sample_lines"] == sample.count(b"\n")
    h = Histogram.read(d / HISTOGRAM)
    assert h.count == sum(f["transactions"] for f in full) == meta["transactions"]
    assert h.min_us / 1000 == min(f["latency_min_ms"] for f in full)
    assert h.max_us / 1000 == max(f["latency_max_ms"] for f in full)
    assert h.sum_us / h.count / 1000 == pytest.approx(
        sum(f["latency_avg_ms"] * f["transactions"] for f in full) / h.count, rel=1e-12)
    assert h.words["skipped"] == sum(f["skipped"] for f in full)
    assert h.words["failed"] + h.words["serialization"] + h.words["deadlock"] == sum(f["failed"] for f in full)
    assert latency_sources(d) == [d / HISTOGRAM]
    after = merged_percentiles(latency_sources(d), qs=QS)
    assert after["n"] == before["n"] and all(within(after[q], before[q]) for q in QS), (before, after)
    json.loads((d / HISTOGRAM).read_text())  # plain JSON, a person can read its counts


def test_what_is_not_a_plain_log_stays_whole_and_gzipped(tmp_path: Path) -> None:
    good = (PG / "18/txlog").read_bytes()
    for name, text in {"tab": good.replace(b" ", b"\t", 1), "sign": b"0 1 -5 0 1 2\n" + good,
                       "word": b"0 1 slow 0 1 2\n", "columns": good + b"0 1 2 3 4 5 6 7 8\n",
                       "empty field": b"0  1 2 0 1 2\n"}.items():
        d = tmp_path / name.replace(" ", "_")
        d.mkdir()
        (d / "pgbench_log.1").write_bytes(good)
        (d / "pgbench_log.2").write_bytes(text)
        kept, meta = txlog_thin.thin(d, sorted(d.iterdir()))
        assert kept == ["pgbench_log.1.gz", "pgbench_log.2.gz"] and meta["kept"] == "full logs", name
        assert meta["why"].startswith("pgbench_log.2") and meta["log_files"] == ["pgbench_log.1", "pgbench_log.2"]
        assert sorted(p.name for p in d.iterdir()) == kept  # no histogram, no sample, no temporary file
        assert gzip.open(d / "pgbench_log.2.gz").read() == text
        assert latency_sources(d) == [d / k for k in kept]
    assert txlog_thin.thin(tmp_path, []) == ([], {"kept": "no logs"})


def test_a_histogram_merges_with_full_logs_and_arrays(tmp_path: Path) -> None:
    a, b = PG / "15/txlog_failures", PG / "18/txlog"
    d = _folder(tmp_path, a)
    txlog_thin.thin(d, sorted(d.iterdir()))
    arr = np.array([0.5, 1.25, 700.0])
    exact = merged_percentiles([a, b, arr], qs=QS)
    mixed = merged_percentiles([d / HISTOGRAM, b, arr], qs=QS)
    assert mixed["n"] == exact["n"] and all(within(mixed[q], exact[q]) for q in QS)
    assert merged_histogram([d / HISTOGRAM, b]).count == exact["n"] - 3
    bad = tmp_path / "other.json"
    bad.write_text("[1, 2]")
    with pytest.raises(Exception, match="other.json: not a latency histogram"):
        merged_percentiles([bad])


# -- the shipped runs' real logs ------------------------------------------------------------------------
def _points(run: Path) -> pd.DataFrame:
    rows = [json.loads(m.read_text()) for m in sorted(run.glob("*/meta.json"))]
    return pd.DataFrame(rows)


def _thinned_copy(run: Path, to: Path) -> Path:
    """The run's log folders only, each thinned as collect now does."""
    for d in sorted(run.glob("*/txlog*")):
        dest = to / d.parent.name / d.name
        shutil.copytree(d, dest)
        kept, meta = txlog_thin.thin(dest, sorted(dest.glob("pgbench_log*")))
        assert meta["kept"] == "histogram+1% sample", meta
    return to


GROUPS = {"fdw_overhead": (None, ["kind", "clients", "variant", "config"]),
          "synchronous_commit": ("write", ["config", "clients"]),
          "streaming_scale_out": ("read", ["layout", "query_type", "nodes"])}


def full_log_run(study: str, dest: Path) -> Path:
    """The newest run of ``study`` the in-repository DVC remote holds with its full ``-l`` logs (the runs
    shipped before thinning), taken out of the remote into ``dest``."""
    from pglab.ledger.shipped import materialize, remote_runs

    remote = REPO / "data" / "dvc-remote"
    for dir_hash, m in reversed(list(remote_runs(remote))):
        if "#" in dir_hash:  # a campaign's earlier run: campaigns came after thinning
            continue
        listing = json.loads((remote / "files" / "md5" / dir_hash[:2] / dir_hash[2:]).read_text())
        if m["study"] == study and any(Path(e["relpath"]).name.startswith("pgbench_log") for e in listing):
            return materialize(remote, dir_hash, dest / m["run_id"])
    raise AssertionError(f"no run of {study} with full logs in {remote}")


@pytest.mark.parametrize("study", sorted(GROUPS))
def test_the_shipped_run_keeps_histograms_and_samples(study: str) -> None:
    """The run the repository ships now was thinned at collect: every log folder a histogram and a sample."""
    pulled_runs(study)
    folders = sorted((REPO / "data" / "raw" / study).glob("*/txlog*"))
    assert folders
    for d in folders:
        assert sorted(p.name for p in d.iterdir()) == [HISTOGRAM, SAMPLE], d
        assert latency_sources(d) == [d / HISTOGRAM]


@pytest.mark.slow
@pytest.mark.parametrize("study", sorted(GROUPS))
def test_the_shipped_runs_read_the_same_and_thinned_within_the_bound(study: str, tmp_path: Path) -> None:
    run = full_log_run(study, tmp_path / "full")
    # full logs (every run shipped before thinning): the same files as the glob before, so the same latency
    # tables to the bit
    for d in sorted(run.glob("*/txlog*")):
        assert latency_sources(d) == sorted(d.glob("pgbench_log*")) and not (d / HISTOGRAM).exists()
    kind, by = GROUPS[study]
    points = _points(run)
    if kind:
        points = points[points.kind == kind]
    folder = "txlog_*" if study == "streaming_scale_out" else "txlog"
    thin = _thinned_copy(run, tmp_path / "thin")
    n = 0
    for _, g in points[points["copy"] == 1].groupby(by):
        logs = sorted(f for p in g.point for f in run.glob(f"{p}/{folder}/pgbench_log*"))
        if not logs:
            continue
        hists = sorted(f for p in g.point for d in sorted((thin / p).glob(folder)) for f in latency_sources(d))
        assert hists and all(h.name == HISTOGRAM for h in hists)
        exact, got = merged_percentiles(logs, qs=QS), merged_percentiles(hists, qs=QS)
        assert got["n"] == exact["n"] and all(within(got[q], exact[q]) for q in QS), (g.point.tolist(), exact, got)
        n += 1
    assert n >= 4
    if study != "streaming_scale_out":  # the analysis' own table, on the thinned copy: the same within the bound
        full = tables.latency_table(run, points, by)
        small = tables.latency_table(thin, points, by)
        assert (full.transactions == small.transactions).all()
        for c in ("p50_ms", "p95_ms", "p99_ms"):
            assert all(within(s, f) for s, f in zip(small[c], full[c], strict=True))


# -- collect: a real pgbench run -----------------------------------------------------------------------
@pytest.mark.servers
def test_collect_keeps_a_histogram_and_a_sample_of_a_real_run(tmp_path: Path, inventory: Inventory,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, bytes] = {}
    thin = txlog_thin.thin

    def keep_a_copy(folder: Path, logs: list[Path], every: int = txlog_thin.SAMPLE_EVERY):
        seen.update({p.name: p.read_bytes() for p in logs})  # the full logs, as fetched, before thinning
        return thin(folder, logs, every)

    monkeypatch.setattr(txlog_thin, "thin", keep_a_copy)
    (tmp_path / "run" / "p").mkdir(parents=True)
    point = Point(tmp_path / "run" / "p", {"point": "p"})
    with session(inventory) as s:
        primary = s.deploy.node("primary", "local", {})
        primary.start()
        primary.query("create database bench")
        pgbench.initialise(primary, point, "bench", 1)
        log, remote = pgbench.txlog_args(point, primary)
        argv = pgbench.pgbench_argv(primary, "bench", clients=2, jobs=2, duration_s=2, select_only=True,
                                    no_vacuum=True, extra=log)
        assert pgbench.run(primary, point, argv, timeout=60).exit_code == 0
        kept = pgbench.fetch_txlogs(point, primary, remote)
        assert not primary.host.exists(remote)
    d = point.dir / pgbench.TXLOG_DIR
    assert kept == [HISTOGRAM, SAMPLE] and sorted(p.name for p in d.iterdir()) == sorted(kept)
    assert len(seen) == 2  # one log per thread
    record = point.meta["txlog_kept"]["txlog"]
    lines = {k: v.splitlines(keepends=True) for k, v in sorted(seen.items())}
    assert record["kept"] == "histogram+1% sample" and record["log_files"] == sorted(seen)
    assert record["log_lines"] == sum(map(len, lines.values())) > 1000
    assert record["log_bytes"] == sum(map(len, seen.values()))
    assert gzip.open(d / SAMPLE).read() == b"".join(b"".join(v[::100]) for v in lines.values())
    full = tmp_path / "full"
    full.mkdir()
    for k, v in seen.items():
        (full / k).write_bytes(v)
    exact, got = merged_percentiles(sorted(full.iterdir()), qs=QS), merged_percentiles(latency_sources(d), qs=QS)
    assert got["n"] == exact["n"] == record["transactions"] and all(within(got[q], exact[q]) for q in QS)
    assert (d / HISTOGRAM).stat().st_size < 20_000
