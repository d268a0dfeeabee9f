"""The guard on SQL for a server pglab did not start: PostgreSQL's own grammar (pglast), an allow-list.

Every bypass of the earlier regular-expression guard that a review found is refused, and so is each statement
kind it did not list; pglab's own statements pass (``test_managed_target.py`` checks them too, and runs them
on a real server without superuser rights).
"""

from __future__ import annotations

import pytest
from pglab.errors import PglabError
from pglab.nodes import privileges, sql_guard
from pglab.studies.cloud_providers import targets
from pglab.workloads import waits

OWN = [targets.PREFLIGHT_SQL, targets.CONNECTION_SQL, targets.SETTINGS_SQL, "select version()", privileges.ROLE_SQL,
       *privileges.probe_statements(), waits.QUERY]

# (statement, a word the refusal must name)
HOSTILE = [
    ("select 1; checkpoint", "2 statements"),
    ("/* c */ CHECKPOINT", "CHECKPOINT"),
    ("-- c\nCHECKPOINT", "CHECKPOINT"),
    ("ALTER/**/SYSTEM SET work_mem = '1GB'", "ALTER SYSTEM"),
    ("create/**/extension pg_stat_statements", "CREATE EXTENSION"),
    ('select U&"pg\\005freload\\005fconf"()', "pg_reload_conf"),
    ("do $$ begin execute 'CHECK'||'POINT'; end $$", "DO"),
    ("copy (select 1) to program 'id > /tmp/x'", "COPY"),
    ("load 'auto_explain'", "LOAD"),
    ("select pg_switch_wal()", "pg_switch_wal"),
    ("set session_replication_role = replica", "SET"),
    ("alter database postgres set work_mem = '1MB'", "ALTER DATABASE"),
    ("select query from pg_stat_statements", "pg_stat_statements"),
    ("select pg_catalog.pg_stat_statements_reset()", "pg_stat_statements_reset"),
    ("select pg_stat_reset()", "pg_stat_reset"),
    ("select pg_ls_logdir()", "pg_ls_logdir"),
    ("select pg_read_file('postgresql.conf')", "pg_read_file"),
    ("select pg_terminate_backend(1)", "pg_terminate_backend"),
    ("select pg_catalog.pg_reload_conf()", "pg_reload_conf"),
    ("with gone as (delete from pgbench_accounts returning 1) select count(*) from gone", "DELETE"),
    ("select * into copied from pg_settings", "INTO"),
    ("select * from pg_settings for update", "row locks"),
    ("select set_config('work_mem', '1GB', false)", "set_config"),
    ("select * from public.pg_settings", "public.pg_settings"),
    ("select public.version()", "public.version"),
    ("select lo_export(1, '/tmp/x')", "lo_export"),
    ("begin; select 1; commit", "3 statements"),
    ("vacuum full", "VACUUM"),
    ("checkpoint", "CHECKPOINT"),
    ("select 1 from (select pg_reload_conf()) s", "pg_reload_conf"),
    ("select 'unterminated", "not valid SQL"),
]


@pytest.mark.parametrize("sql", OWN, ids=lambda s: s[:40])
def test_pglab_own_statements_pass(sql: str) -> None:
    assert sql_guard.problems(sql) == []
    sql_guard.refuse_unless_allowed("managed", sql)


@pytest.mark.parametrize(("sql", "named"), HOSTILE, ids=[h[0][:40] for h in HOSTILE])
def test_every_bypass_is_refused_before_sending_and_named(sql: str, named: str) -> None:
    with pytest.raises(PglabError, match="refused before sending") as caught:
        sql_guard.refuse_unless_allowed("managed", sql)
    assert named in str(caught.value)
    assert "\n" not in str(caught.value).split(": ", 1)[0]


def test_a_statement_refused_never_reaches_psql(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Handle.psql`` on a target pglab did not start raises before it runs psql."""
    ran: list = []
    monkeypatch.setattr(targets, "psql_rows", lambda *a, **k: ran.append(a) or [])
    spec = type("Spec", (), {"name": "managed", "database": "bench"})()
    client = type("Client", (), {"host": None, "bin": lambda self, p: p, "env": lambda self, t: {}})()
    h = targets.Handle(spec, None, client, None)  # type: ignore[arg-type]
    h.psql("select version()")
    assert len(ran) == 1
    with pytest.raises(sql_guard.SqlRefused):
        h.psql("select 1; checkpoint")
    assert len(ran) == 1
