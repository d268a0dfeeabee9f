"""TLS with the run's own CA, on a real server: verify-full accepts the run's server and nothing else."""

from __future__ import annotations

import psycopg
import pytest
from pglab.hosts import tls
from pglab.hosts.local import LocalHost
from pglab.nodes.node import Node
from pglab.nodes.workspace import SUPERUSER, Workspace

pytestmark = pytest.mark.servers
BINDIR = "/usr/lib/postgresql/15/bin"


def test_verify_full_against_the_run_ca() -> None:
    host = LocalHost()
    ws = Workspace.create(host)
    ca = tls.RunCA.create("test")
    node = Node(ws, "n1", host.free_port(), BINDIR,
                fixed=tls.install_server(host, f"{ws.base}/tls", ca, ["127.0.0.1"], owner=host.server_user))
    try:
        node.init()
        node.start()
        root = tls.install_client(host, f"{ws.base}/client", ca)
        common = {"host": "127.0.0.1", "port": node.port, "user": SUPERUSER, "dbname": "postgres",
                  "passfile": ws.local_passfile, "connect_timeout": 5}
        with psycopg.connect(**common, **tls.client_params(root)) as conn:
            assert conn.execute("select ssl from pg_stat_ssl where pid = pg_backend_pid()").fetchone() == (True,)
        with pytest.raises(psycopg.OperationalError, match="no encryption"):  # hostssl only
            psycopg.connect(**common, sslmode="disable")
        # another run's CA: the server is not trusted
        other = tls.install_client(host, f"{ws.base}/other", tls.RunCA.create("other"))
        with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
            psycopg.connect(**common, **tls.client_params(other))
        # a certificate for another address: verify-full refuses it
        cert, key = ca.server_cert(["198.18.0.9"], "elsewhere")
        host.write_text(f"{ws.base}/tls/server.crt", cert, 0o644, owner=host.server_user)
        host.write_text(f"{ws.base}/tls/server.key", key, 0o600, owner=host.server_user)
        node.reload()
        with pytest.raises(psycopg.OperationalError, match="does not match host name"):
            psycopg.connect(**common, **tls.client_params(root))
        st = host.run(["stat", "-c", "%a %U", f"{ws.base}/tls/server.key"]).stdout.split()
        assert st == ["600", host.server_user]
        assert ca.key_pem not in repr(ca) and "PRIVATE KEY" not in repr(ca)
    finally:
        node.stop()
        ws.remove()
