"""Which server settings a params file may give: pglab owns the configuration it writes.

A profile's ``server_settings`` (and cloud_providers' ``provision.settings``) become lines of the ``pglab.conf``
that pglab writes and the server reads. Three kinds of name must never come from a profile:

* **directives** (``include``, ``include_if_exists``, ``include_dir``): a line that pulls in a file pglab did not
  write, whose settings (``port``, ``listen_addresses``...) then override pglab's own;
* **files and paths pglab owns** (``hba_file``, ``config_file``, ``data_directory``, the socket settings...): a
  profile that names another pg_hba.conf decides who may log in;
* **settings that run a command or load code** (``archive_command``, ``shared_preload_libraries``...): a params
  file is data a colleague hands you, not a script. A profile may still give one, named in its
  ``allow_command_settings`` list (a key a reviewer sees); the run record and the report then say so.

Names are compared as the server does: case-insensitively. Which names exist at all is the build's to say
(``postgres --describe-config``, in ``pglab.runs.preflight``): an unknown name would stop the server at start.
Base layer: the parameter models (runs, studies) check by these lists without the node layer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

#: configuration-file directives: not settings, but lines that read other files
DIRECTIVES = frozenset({"include", "include_if_exists", "include_dir"})

#: files, paths and addresses pglab sets itself on every node it starts (``pglab.nodes.node``)
OWNED = frozenset({"config_file", "hba_file", "ident_file", "data_directory", "external_pid_file",
                   "unix_socket_directories", "unix_socket_group", "unix_socket_permissions", "port",
                   "listen_addresses"})

#: settings that run a shell command on the server's host, or load a shared library into the server
RUNS_CODE = frozenset({"archive_command", "restore_command", "archive_cleanup_command", "recovery_end_command",
                       "ssl_passphrase_command", "shared_preload_libraries", "local_preload_libraries",
                       "session_preload_libraries", "dynamic_library_path", "archive_library", "jit_provider",
                       "extension_destdir"})

ALLOW_KEY = "allow_command_settings"


def owned_problems(settings: Mapping[str, Any]) -> list[str]:
    """A directive or a setting pglab owns, in ``settings`` (one message each)."""
    out = []
    for name in settings:
        low = str(name).lower()
        if low in DIRECTIVES:
            out.append(f"{name} is a configuration directive (it reads a file pglab did not write, whose lines would "
                       "override the settings pglab sets); give the settings themselves")
        elif low in OWNED:
            out.append(f"{name} is set by pglab on every node it starts (its files, sockets and addresses)")
    return out


def allowed_names(v: Iterable[Any]) -> list[str]:
    """``allow_command_settings`` checked: each entry a setting that runs a command or loads code."""
    names = [str(x).lower() for x in v]
    bad = [x for x in names if x not in RUNS_CODE]
    if bad:
        raise ValueError(f"{', '.join(bad)}: not settings that run a command or load code (only those need "
                         f"allowing: {', '.join(sorted(RUNS_CODE))})")
    return names


def code_problems(given: Mapping[str, Mapping[str, Any]], allowed: Iterable[str]) -> list[str]:
    """Settings that run a command or load code, in any of ``given`` ({where: settings}), not in ``allowed``."""
    ok = {a.lower() for a in allowed}
    out = []
    for where, settings in given.items():
        for name in settings:
            low = str(name).lower()
            if low in RUNS_CODE and low not in ok:
                out.append(f"{where}.{name}: runs a command or loads code on the server's host; refused unless "
                           f"the profile lists it in {ALLOW_KEY} (then recorded in the run record and the report)")
    return out


def unknown(names: Iterable[str], known: Iterable[str]) -> list[str]:
    """Names in ``names`` that a build does not know (``known``: its ``postgres --describe-config`` names).
    An extension's ``prefix.name`` is not listed there (the server accepts it as a placeholder): not judged."""
    have = {k.lower() for k in known}
    return [n for n in names if "." not in n and n.lower() not in have]


def parse_describe_config(text: str) -> set[str]:
    """Setting names from ``postgres --describe-config`` (tab-separated, the name first)."""
    return {line.split("\t", 1)[0].strip().lower() for line in text.splitlines() if "\t" in line}


def allowed_in_run(parameters: Mapping[str, Any]) -> list[str]:
    """``name = value`` of each setting that runs a command or loads code which a run's profile allowed (what the
    report says beside "Where it ran"): read from the parameters the run record keeps."""
    allowed = {str(a).lower() for a in parameters.get(ALLOW_KEY) or []}
    dicts = [parameters.get("server_settings") or {}, *((t.get("provision") or {}).get("settings") or {}
                                                       for t in parameters.get("targets") or [] if isinstance(t, dict))]
    return [f"{k} = {v!r}" for d in dicts if isinstance(d, dict) for k, v in d.items() if str(k).lower() in allowed]


_OPTION = re.compile(r"(?:^|\s)(?:-c\s*|--)([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(\S*)")


def in_options(options: str) -> dict[str, str]:
    """The settings a libpq ``options`` string (PGOPTIONS: ``-c name=value`` or ``--name=value``) gives each session:
    a connection string can load code into a server too (``-c session_preload_libraries=...``)."""
    return {m.group(1): m.group(2) for m in _OPTION.finditer(options)}
