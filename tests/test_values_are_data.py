"""Values are data (issue 33 §1): a value from a file reaches a configuration file, a connection string, an
identifier or a shell command as itself, or is refused naming its key before anything starts.

One test per sink with hostile values; the configuration file and the identifier are checked on a real server
(``postgres -C`` reads the file the way the server does; ``create database`` runs).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import refused_with_key
from pglab.errors import ParameterError, UserError
from pglab.hosts.inventory import Inventory, load_inventory
from pglab.nodes import conf
from pglab.replication import builtin
from pglab.runs.params import validate
from pglab.runs.session import session
from pglab.studies.cloud_providers import collect as cloud
from pglab.studies.cloud_providers.params import Params as CloudParams
from pglab.studies.synchronous_commit.params import Params as SyncParams
from psycopg.conninfo import conninfo_to_dict

# The review's value, and others that would end a line or a quoted value early
INJECTIONS = ["x\\'\nunix_socket_permissions = 0777 #", "x'\nport = 1", "a\rb", "a\x00b", "a\x1bb"]
# Values that are odd but data: each must come back from the server exactly
ODD = ["it's", "back\\slash", "x\\'", "# not a comment", "a = b", "tab\there", "semi;colon", "$(id)", "ünïcödé"]


@pytest.mark.parametrize("value", INJECTIONS, ids=repr)
def test_a_setting_value_that_would_start_a_line_is_refused_with_its_key(value: str) -> None:
    for name in ("cluster_name", "application_name"):
        with pytest.raises(ParameterError, match=f"settings: .*{name}: .*control character"):
            validate(CloudParams, {"targets": [{"name": "t", "provision": {"settings": {name: value}}}]}, "p.yaml")
        with pytest.raises(ParameterError, match=f"server_settings: .*{name}: .*control character"):
            validate(SyncParams, {"server_settings": {name: value}}, "p.yaml")
        with pytest.raises(ValueError, match=name):
            conf.line(name, value)


@pytest.mark.parametrize("name", ["port\n", "work_mem = 1\nport", "a b", "x;y", "", "1abc", "a.b.c", "PORT"])
def test_a_setting_name_is_a_name_and_reserved_names_hold_in_any_case(name: str) -> None:
    with pytest.raises(ParameterError, match="server_settings"):
        validate(SyncParams, {"server_settings": {name: 1}}, "p.yaml")


def test_numbers_and_booleans_are_written_bare_and_non_finite_refused() -> None:
    assert conf.line("work_mem", 4096) == "work_mem = 4096\n"
    assert conf.line("fsync", False) == "fsync = off\n"
    assert conf.line("random_page_cost", 1.5) == "random_page_cost = 1.5\n"
    with pytest.raises(ParameterError, match="server_settings: .*not a finite number"):
        validate(SyncParams, {"server_settings": {"random_page_cost": float("nan")}}, "p.yaml")


@pytest.mark.servers
def test_the_server_reads_every_odd_value_back_as_given_and_a_hostile_one_is_never_written(
        inventory: Inventory) -> None:
    """conf-file sink: ``postgres -C`` reads pglab.conf as the server would; each value comes back exactly."""
    with session(inventory) as s:
        node = s.deploy.node("conf", "local")
        for value in ODD:
            node.configure({"log_line_prefix": value})  # a string the server keeps as given (cluster_name is ASCII)
            shown = node.host.run([node.bin("postgres"), "-D", node.data_dir, "-C", "log_line_prefix"],
                                  as_user=node.user).stdout.rstrip("\n")
            assert shown == value
        before = node.host.read_text(f"{node.data_dir}/pglab.conf")
        with pytest.raises(UserError, match="node conf: setting cluster_name: .*control character"):
            node.configure({"cluster_name": INJECTIONS[0]})
        assert "cluster_name" not in node.settings
        assert node.host.read_text(f"{node.data_dir}/pglab.conf") == before  # nothing written
        perms = node.host.run([node.bin("postgres"), "-D", node.data_dir, "-C", "unix_socket_permissions"],
                              as_user=node.user).stdout.strip()
        assert perms == str(0o700)  # pglab's own (postgres -C prints it in decimal), untouched


@pytest.mark.servers
def test_a_database_name_with_quotes_is_an_identifier_not_sql(inventory: Inventory) -> None:
    """identifier sink: ``we"ird`` and a name with a statement in it become databases of exactly that name."""
    names = ['we"ird', 'x"; drop database postgres; --', "it's"]
    with session(inventory) as s:
        node = s.deploy.node("ident", "local").start()
        for name in names:
            builtin.ensure_database(node, name)
        got = {r[0] for r in node.query("select datname from pg_database")}
        assert set(names) <= got and "postgres" in got


def test_a_dsn_keeps_each_value_in_its_key(inventory: Inventory) -> None:
    """DSN sink: libpq's quoting (make_conninfo); a space, quote or ``key=`` in a value stays in that value."""
    with session(inventory) as s:
        node = s.deploy.node("dsn", "local")
        for db in ["plain", "two words", "it's", "x host=198.18.0.66", "back\\slash"]:
            for from_host in (None, node.host):
                parsed = conninfo_to_dict(node.dsn(db, from_host=from_host))
                assert parsed["dbname"] == db and parsed["port"] == str(node.port)
                assert parsed["host"] in (node.host.data_address, node.ws.socket_dir)
        parsed = conninfo_to_dict(node.replication_conninfo("sb 1' x=y"))
        assert parsed["application_name"] == "sb 1' x=y" and set(parsed) == {"host", "port", "user",
                                                                              "application_name"}


def test_a_path_or_user_in_the_inventory_cannot_become_shell(tmp_path: Path) -> None:
    """shell sink: inventory paths and users are refused unless plain, before any command runs."""
    marker = tmp_path / "ran"
    hostile = {"bindir": f"/usr/bin; touch {marker}", "workdir": f"/tmp/$(touch {marker})",
               "server_user": "postgres; id", "user": "a b"}
    for key, value in hostile.items():
        path = tmp_path / f"hosts-{key}.yaml"
        path.write_text(f"hosts:\n  local:\n    {key}: {value!r}\n" if key != "user" else
                        f"hosts:\n  h:\n    kind: ssh\n    address: 127.0.0.1\n    user: {value!r}\n")
        with pytest.raises(ParameterError, match=key):
            load_inventory(path)
    assert not marker.exists()


def test_a_hostile_cloud_target_is_refused_before_a_node_starts(tmp_path: Path) -> None:
    """The review's case end to end: collect refuses it (exit 2's error) and makes no run folder."""
    bad = {
        "targets.0.provision.settings": {"targets": [{"name": "a", "provision": {
            "settings": {"cluster_name": INJECTIONS[0]}}}]},
        "targets.0.dbname": {"targets": [{"name": "a", "provision": {}, "dbname": "x\ny"}]},
        "targets.0.provider": {"targets": [{"name": "a", "provision": {}, "provider": "p\n<meta>"}]},
    }
    refused_with_key(cloud.collect, bad, tmp_path)
    assert not any(tmp_path.rglob("manifest.json"))


def test_the_cli_answers_a_hostile_setting_with_exit_2_naming_the_key(tmp_path: Path) -> None:
    params = tmp_path / "cloud.yaml"
    params.write_text("profile: smoke\nprofiles:\n  smoke:\n    targets:\n      - name: a\n        provision:\n"
                      "          settings:\n            cluster_name: \"x\\\\'\\nunix_socket_permissions = 0777 #\"\n")
    res = subprocess.run(["pglab", "collect", "cloud_providers", "--params", str(params), "--data-root",
                          str(tmp_path / "data")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "cluster_name" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("manifest.json"))
