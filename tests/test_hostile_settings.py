"""A params file is data: it cannot take over the server's configuration, run commands unannounced, or run for years.

The hostile cases of issue 47: configuration directives and pglab's own files and addresses refused in every
study's server settings (and cloud_providers' provisioned targets); settings that run a command or load code
refused unless the profile names them in ``allow_command_settings``; names the build does not know refused
before a run folder exists; a server whose running configuration is not pglab's stopped before its first block;
strict types and upper bounds on every parameter; YAML alias bombs refused in a fraction of a second.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from pglab.app.cli import main
from pglab.app.collect import load_params
from pglab.errors import ParameterError, UserError
from pglab.hosts.inventory import Inventory
from pglab.runs.session import session
from pglab.studies import STUDIES
from pglab.userfiles import FileError, yaml_mapping

REPO = Path(__file__).resolve().parents[1]
SETTINGS_STUDIES = [s for s in STUDIES if s != "cloud_providers"]


def profile_file(tmp_path: Path, study: str, change: dict[str, Any], profile: str = "smoke") -> Path:
    """``params/<study>.yaml``'s ``profile`` with ``change`` merged in, as a params file of its own."""
    data = yaml.safe_load((REPO / "params" / f"{study}.yaml").read_text())
    values = data["profiles"][profile]
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(values.get(key), dict):
            values[key] = {**values[key], **value}
        else:
            values[key] = value
    data["profile"] = profile
    data["inventory"] = str(REPO / "params" / "hosts.yaml")
    path = tmp_path / f"{study}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], study: str, params: Path, says: str) -> str:
    """`pglab collect` of ``params``: exit 2, one line naming ``says``, no run folder, no file written."""
    root = tmp_path / "data"
    before = set(tmp_path.rglob("*"))
    assert main(["collect", study, "--params", str(params), "--data-root", str(root), "--quiet"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in err, err
    assert set(tmp_path.rglob("*")) == before and not root.exists()
    return lines[0]


@pytest.mark.parametrize("name", ["include_if_exists", "include", "include_dir", "INCLUDE_IF_EXISTS", "hba_file",
                                  "config_file", "ident_file", "data_directory", "external_pid_file",
                                  "unix_socket_group", "Listen_Addresses", "port"])
@pytest.mark.parametrize("study", SETTINGS_STUDIES)
def test_directives_and_owned_files_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], study: str,
                                                name: str) -> None:
    params = profile_file(tmp_path, study, {"server_settings": {name: str(tmp_path / "evil.conf")}})
    line = refused(tmp_path, capsys, study, params, "server_settings")
    assert name in line or name.lower() in line


@pytest.mark.parametrize("name", ["archive_command", "restore_command", "ssl_passphrase_command",
                                  "session_preload_libraries", "dynamic_library_path", "Archive_Library"])
def test_settings_that_run_code_need_the_profile_to_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           name: str) -> None:
    study = "synchronous_commit"
    params = profile_file(tmp_path, study, {"server_settings": {name: "touch /tmp/pwned"}})
    line = refused(tmp_path, capsys, study, params, "allow_command_settings")
    assert name in line
    # named in the profile: accepted, and kept in the parameters the run record holds
    params = profile_file(tmp_path, study, {"server_settings": {name: "/bin/true"},
                                            "allow_command_settings": [name]})
    _, p, _ = load_params(study, str(params), None)
    assert p.allow_command_settings == [name.lower()]
    assert p.model_dump()["server_settings"] == {name: "/bin/true"}


def test_the_report_names_an_allowed_command_setting() -> None:
    from pglab.views.where_ran import allowed_html

    given = {"levels": ["on", "off"], "clients": [1], "allow_command_settings": ["archive_command"],
             "server_settings": {"archive_command": "cp %p /a/%f", "work_mem": "4MB"}}
    shown = allowed_html("synchronous_commit", {"run_id": "r", "parameters": given})
    assert "archive_command = &#x27;cp %p /a/%f&#x27;" in shown and "work_mem" not in shown
    given = {"levels": ["on"], "clients": [1], "server_settings": {"work_mem": "4MB"}}
    assert allowed_html("synchronous_commit", {"run_id": "r", "parameters": given}) == ""


def test_only_code_settings_can_be_allowed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = profile_file(tmp_path, "fdw_overhead", {"allow_command_settings": ["work_mem"]})
    refused(tmp_path, capsys, "fdw_overhead", params,
            "allow_command_settings: Value error, work_mem: not settings that run a command")


def test_a_study_reserved_setting_stays_reserved_even_when_allowed(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    params = profile_file(tmp_path, "fdw_overhead", {"server_settings": {"shared_preload_libraries": "x"},
                                                     "allow_command_settings": ["shared_preload_libraries"]})
    refused(tmp_path, capsys, "fdw_overhead", params, "set by the study itself")


@pytest.mark.parametrize("settings", [{"include_if_exists": "evil.conf"}, {"hba_file": "/tmp/hba"},
                                      {"archive_command": "true"}])
def test_cloud_providers_provisioned_settings_too(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  settings: dict[str, str]) -> None:
    data = yaml.safe_load((REPO / "params" / "cloud_providers.yaml").read_text())
    targets = data["profiles"]["smoke"]["targets"]
    targets[0]["provision"]["settings"] = {**targets[0]["provision"].get("settings", {}), **settings}
    params = profile_file(tmp_path, "cloud_providers", {"targets": targets})
    refused(tmp_path, capsys, "cloud_providers", params, next(iter(settings)))


@pytest.mark.servers
def test_a_name_the_build_does_not_know_is_refused_before_a_run_folder(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    params = profile_file(tmp_path, "synchronous_commit", {"server_settings": {"no_such_setting": 1,
                                                                                "pglab_ext.anything": "x"}})
    line = refused(tmp_path, capsys, "synchronous_commit", params, "no_such_setting")
    assert "--describe-config" in line and "pglab_ext.anything" not in line  # an extension's name is not judged


@pytest.mark.servers
def test_pglab_check_names_an_unknown_setting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = profile_file(tmp_path, "fdw_overhead", {"server_settings": {"shared_bufers": "64MB"}})
    assert main(["check", "fdw_overhead", "--params", str(params)]) != 0
    out = capsys.readouterr()
    assert "shared_bufers: not a setting of" in out.out + out.err


@pytest.mark.servers
@pytest.mark.parametrize("evil", ["listen_addresses = '*'", "port = 6543", "hba_file = 'evil_hba.conf'",
                                  "unix_socket_directories = '/tmp'"])
def test_a_server_whose_configuration_is_not_pglabs_stops_the_run(inventory: Inventory, evil: str) -> None:
    """What the parameter checks keep out, read back from the server: a line pglab did not write (here put in
    postgresql.conf by hand, after pglab's include) stops the node's start with every difference named."""
    with session(inventory) as s:
        node = s.deploy.node("primary", "local")
        port = 6543 if "6543" in evil else None
        if port:  # a port nothing else here uses (the test picks it free, as pglab picks its own)
            port = node.host.free_port(20000, 40000)
            evil = f"port = {port}"
        evil = evil.replace("'evil_hba.conf'", f"'{node.data_dir}/evil_hba.conf'")
        node.host.run(["sh", "-c", f"cp {node.data_dir}/pg_hba.conf {node.data_dir}/evil_hba.conf && "
                                   f"echo \"{evil}\" >> {node.data_dir}/postgresql.conf"], as_user=node.user)
        with pytest.raises(UserError, match="the server's configuration is not pglab's") as exc:
            node.start()
        assert evil.split(" ")[0] in str(exc.value), exc.value


@pytest.mark.servers
def test_a_server_as_pglab_wrote_it_passes_the_read_back(inventory: Inventory) -> None:
    from pglab.nodes import readback

    with session(inventory) as s:
        node = s.deploy.node("primary", "local", {"work_mem": "8MB"}).start()
        assert readback.problems(node) == []
        assert node.query("show work_mem") == [("8MB",)]


@pytest.mark.parametrize(("change", "says"), [
    ({"runs": 1_000_000_000}, "runs: Value error, 1,000,000,000 is past the largest runs"),
    ({"blocks": 1_000_000_000}, "blocks: Value error"),
    ({"seconds": 10**12}, "seconds: Value error"),
    ({"runs": "3"}, "runs: Input should be a valid integer"),
    ({"runs": True}, "runs: Input should be a valid integer"),
    ({"seconds": 2.5}, "seconds: Input should be a valid integer"),
    ({"warmup_s": "1"}, "warmup_s: Input should be a valid number"),
    ({"emulate": {"flush_latency_ms": [True]}}, "emulate.flush_latency_ms.0"),
    ({"emulate": {"flush_latency_ms": ["hdd_7200"], "flush_nodes": ["nosuchnode"]}},
     "'nosuchnode' is not a node of this study (its nodes: primary, standby1)"),
    ({"emulate": {"flush_latency_ms": ["hdd_7200"], "flush_nodes": []}}, "emulate.flush_nodes"),
    ({"levels": ["x" * 5000]}, "levels.0"),
])
def test_parameters_have_strict_types_and_bounds(tmp_path: Path, change: dict[str, Any], says: str) -> None:
    params = profile_file(tmp_path, "synchronous_commit", change)
    with pytest.raises(ParameterError) as exc:
        load_params("synchronous_commit", str(params), None)
    text = str(exc.value)
    assert says in text, text
    assert len(text) < 800 and "x" * 200 not in text  # never the whole input echoed


@pytest.mark.parametrize(("study", "nodes", "wrong"), [("fdw_overhead", ["source", "external"], "primary"),
                                                       ("streaming_scale_out", ["primary", "sb1"], "standby1"),
                                                       ("logical_replication", ["provider"], "primary")])
def test_flush_nodes_are_the_studys_node_names(tmp_path: Path, study: str, nodes: list[str], wrong: str) -> None:
    ok = profile_file(tmp_path, study, {"emulate": {"flush_latency_ms": [4], "flush_nodes": nodes}})
    load_params(study, str(ok), None)
    bad = profile_file(tmp_path, study, {"emulate": {"flush_latency_ms": [4], "flush_nodes": [*nodes, wrong]}})
    with pytest.raises(ParameterError, match=f"{wrong!r} is not a node of this study"):
        load_params(study, str(bad), None)


def test_a_role_names_every_generation_of_a_logical_pair() -> None:
    from pglab.emulated import Emulation

    e = Emulation(("hdd_7200",), ("provider",))
    assert e.flushes("pglogical_provider") and e.flushes("slony_provider_2")
    assert not e.flushes("pglogical_subscriber") and not e.flushes("slony_subscriber_2")


def test_a_plan_past_a_day_needs_yes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = profile_file(tmp_path, "synchronous_commit", {"seconds": 80_000, "warmup_s": 1})
    line = refused(tmp_path, capsys, "synchronous_commit", params, "past 24 h")
    assert "--yes" in line


BOMB = """a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
profiles: {smoke: {levels: *i}}
"""


@pytest.mark.parametrize("where", ["params", "inventory"])
def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    t0 = time.monotonic()
    with pytest.raises(FileError, match="expands to more than 100,000 YAML values"):
        yaml_mapping(bomb, "a params file")
    assert time.monotonic() - t0 < 2
    argv = (["collect", "synchronous_commit", "--params", str(bomb)] if where == "params" else
            ["collect", "synchronous_commit", "--inventory", str(bomb), "--data-root", str(tmp_path / "d")])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and len(err) < 400 and "lol" not in err, err


def test_anchors_a_params_file_uses_still_load(tmp_path: Path) -> None:
    """cloud_providers' params file shares its targets by anchors: a few aliases are fine."""
    data = yaml_mapping(REPO / "params" / "cloud_providers.yaml", "a params file")
    assert data["profiles"]["quick"]["targets"]


def test_a_dsn_cannot_load_code_through_its_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A server pglab did not start: its dsn's ``options`` set settings for every session pglab opens."""
    data = yaml.safe_load((REPO / "params" / "cloud_providers.yaml").read_text())
    targets = data["profiles"]["smoke"]["targets"]
    dsn = "host=127.0.0.1 port=1 dbname=bench options='-c session_preload_libraries=evil -c work_mem=4MB'"
    targets.append({"name": "managed", "dsn": dsn, "disposable": True})
    params = profile_file(tmp_path, "cloud_providers", {"targets": targets})
    line = refused(tmp_path, capsys, "cloud_providers", params, "dsn options.session_preload_libraries")
    assert "work_mem" not in line
