"""pglogical 2 (2ndQuadrant's extension): provider and subscriber nodes, the ``default`` set.

Order of calls (see base.py): ``pgbench -i`` and ``add_history_key`` on the provider, then
``prepare()`` (settings, extension, nodes, subscriber schema, replication set), then ``start()``
(subscription and initial copy). pgbench_history can join the ``default`` set (which replicates
updates and deletes) only because ``add_history_key`` gave it a primary key.
"""

from __future__ import annotations

from pglab.errors import ProcessError
from pglab.hosts.base import Host
from pglab.nodes.node import Node
from pglab.replication.base import TABLES, System
from pglab.replication.builtin import (
    SUBSCRIPTION,
    apply_settings,
    dsn,
    ensure_database,
    lsn_reached,
    slot_lag,
    subscriber_schema,
    wait_for,
)

PROVIDER_NODE = "pglab_provider"
SUBSCRIBER_NODE = "pglab_subscriber"
SLOT_WHERE = "s.plugin = 'pglogical_output' and s.database = %s"


def _settings(node: Node) -> dict[str, object]:
    """pglogical's needs on top of what the node already has (other preloaded libraries are kept).

    Recent minor releases (seen on 15.20 Debian) only let replication connections create slots with
    plugins listed in ``output_plugin_libraries`` (default 'pgoutput, test_decoding'), superusers
    included; pglogical's slot uses ``pglogical_output``. Older servers do not know the setting, and an
    unknown setting in the file would stop them from starting, so it is only added where it exists.
    """
    def listed(value: object) -> list[str]:
        return [x.strip() for x in str(value or "").split(",") if x.strip()]

    libs = listed(node.settings.get("shared_preload_libraries"))
    if "pglogical" not in libs:
        libs.append("pglogical")

    def at_least(key: str, n: int) -> int:
        return max(n, int(node.settings.get(key, 0) or 0))

    out: dict[str, object] = {
        "shared_preload_libraries": ",".join(libs), "wal_level": "logical", "track_commit_timestamp": "on",
        "max_worker_processes": at_least("max_worker_processes", 16),
        "max_replication_slots": at_least("max_replication_slots", 10),
        "max_wal_senders": at_least("max_wal_senders", 10)}
    rows = node.query("select setting from pg_settings where name = 'output_plugin_libraries'")
    if rows:
        plugins = listed(node.settings.get("output_plugin_libraries", rows[0][0]))
        if "pglogical_output" not in plugins:
            plugins.append("pglogical_output")
        out["output_plugin_libraries"] = ", ".join(plugins)
    return out


class Pglogical(System):
    """One pglogical subscription to the provider's ``default`` set; caught up when its slot confirms."""

    name = "pglogical"
    debian_packages = ("postgresql-15-pglogical",)

    @classmethod
    def unavailable(cls, host: Host, bindir: str) -> str | None:
        """Checked on the files: control file and shared library."""
        pg_config = f"{bindir}/pg_config"
        res = host.run([pg_config, "--sharedir", "--pkglibdir"], check=False)
        if res.exit_code != 0:
            return f"{pg_config} did not run on {host.name}: {res.stderr.strip()[:200]}"
        sharedir, pkglibdir = res.stdout.split()[:2]
        for path in (f"{sharedir}/extension/pglogical.control", f"{pkglibdir}/pglogical.so"):
            if not host.exists(path):
                return (f"pglogical is not installed on {host.name} ({path} is missing; "
                        f"install {' '.join(cls.debian_packages)})")
        return None

    def prepare(self) -> None:
        """Settings (restart), extension and node on both, empty tables on the subscriber, the set."""
        for node, node_name in ((self.provider, PROVIDER_NODE), (self.subscriber, SUBSCRIBER_NODE)):
            apply_settings(node, _settings(node))
            ensure_database(node, self.dbname)
            node.query("create extension if not exists pglogical", dbname=self.dbname)
            if not node.query("select 1 from pglogical.node where node_name = %s", (node_name,), dbname=self.dbname):
                node.query("select pglogical.create_node(node_name := %s, dsn := %s)",
                           (node_name, dsn(node, self.dbname)), dbname=self.dbname)
        subscriber_schema(self.subscriber, self.dbname)
        for table in TABLES:
            self.provider.query("select pglogical.replication_set_add_table('default', %s::regclass, true)",
                                (table,), dbname=self.dbname)

    def start(self, timeout: float = 120) -> None:
        """Subscribe (copies the data); wait for the status 'replicating', then for every table's sync.

        Polled rather than a bare wait_for_subscription_sync_complete, which would block until the
        statement timeout when the apply worker keeps failing (its error is in the log tail we raise).
        """
        s = self.subscriber
        s.query("select pglogical.create_subscription(subscription_name := %s, provider_dsn := %s, "
                "replication_sets := array['default'], synchronize_structure := false, "
                "synchronize_data := true, forward_origins := '{}')",
                (SUBSCRIPTION, dsn(self.provider, self.dbname)), dbname=self.dbname)

        def replicating() -> bool | None:
            status = s.query("select status from pglogical.show_subscription_status(%s)", (SUBSCRIPTION,),
                             dbname=self.dbname)[0][0]
            return True if status == "replicating" else None

        try:
            wait_for(replicating, timeout, s, f"{self.name}: subscription {SUBSCRIPTION} replicating")
        except ProcessError as exc:
            raise ProcessError(exc.host, exc.command, None, "", s.log_tail() + "\n" + self.provider.log_tail(),
                               timed_out=True) from None
        s.query("select pglogical.wait_for_subscription_sync_complete(%s)", (SUBSCRIPTION,), dbname=self.dbname)

    def caught_up(self) -> bool:
        return lsn_reached(self.provider, self.dbname, SLOT_WHERE, (self.dbname,))

    def lag(self) -> dict[str, float | None]:
        return slot_lag(self.provider, self.dbname, SLOT_WHERE, (self.dbname,))

    def teardown(self) -> None:
        """Drop the subscription (pglogical drops the provider's slot too); a no-op when there is none."""
        super().teardown()
        s = self.subscriber
        if not s.is_running() or not s.query("select 1 from pg_database where datname = %s", (self.dbname,)):
            return
        if not s.query("select 1 from pg_extension where extname = 'pglogical'", dbname=self.dbname):
            return
        s.query("select pglogical.drop_subscription(%s, ifexists := true)", (SUBSCRIPTION,), dbname=self.dbname)

