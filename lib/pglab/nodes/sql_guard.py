"""Which SQL pglab may send to a server it did not start: an allow-list read from PostgreSQL's own grammar.

Why a parser and not a list of forbidden words: SQL has comments (``/* c */ CHECKPOINT``), several statements
in one string (``select 1; checkpoint``), Unicode-escaped names (``U&"pg\\005freload\\005fconf"()``), ``DO``
blocks that build a statement at run time, and data-modifying CTEs; a regular expression misses some of each.
``pglast`` is libpg_query, the server's parser as a library, so a statement is judged as the server would read
it. What passes is exactly what pglab's own statements on such a server need: one ``SELECT`` (no ``INTO``, no
row locks, no statement nested in a CTE) or ``SHOW``, reading only the catalogs and functions listed here.
"""

from __future__ import annotations

import pglast
import pglast.ast as ast
from pglast.visitors import Visitor

from pglab.errors import PglabError

STATEMENTS = {"SelectStmt": "SELECT", "VariableShowStmt": "SHOW"}
# Functions that only read: the session's own facts, settings the role may read, role membership
FUNCTIONS = frozenset({
    "count", "current_setting", "current_database", "current_schema", "has_schema_privilege",
    "has_database_privilege", "pg_has_role", "pg_backend_pid", "version", "host", "inet_server_addr",
    "inet_server_port", "pg_is_in_recovery", "now", "lower", "upper", "length", "format_type",
})
# Catalog views a role without privileges may read (rows it may not see come back empty or NULL)
RELATIONS = frozenset({
    "pg_settings", "pg_stat_activity", "pg_stat_ssl", "pg_roles", "pg_available_extensions", "pg_extension",
    "pg_database", "pg_namespace",
})
# Node types that never belong to a read, wherever they sit in the tree
_NAMES = {"VariableSetStmt": "SET", "CheckPointStmt": "CHECKPOINT", "AlterDatabaseSetStmt": "ALTER DATABASE ... SET",
          "DoStmt": "DO", "CopyStmt": "COPY", "CallStmt": "CALL"}
_NEVER = {"IntoClause": "SELECT ... INTO (creates a table)", "LockingClause": "row locks (FOR UPDATE/SHARE)"}


class SqlRefused(PglabError):
    """A statement pglab would send to somebody else's server that is not on the allow-list: a bug in pglab
    (its own statements all pass), so it is raised before sending and never reaches the server."""


class _Nodes(Visitor):
    """Every node of a parsed statement (CTE names must be known before the relations that use them)."""

    def __init__(self) -> None:
        self.nodes: list[ast.Node] = []

    def visit(self, ancestors, node) -> None:  # noqa: ANN001 (pglast's visitor protocol)
        self.nodes.append(node)


def _judge(nodes: list[ast.Node]) -> list[str]:
    """What the statement does that a plain read does not."""
    ctes = {n.ctename for n in nodes if isinstance(n, ast.CommonTableExpr)}
    found = []
    for node in nodes:
        kind = type(node).__name__
        if kind in _NEVER:
            found.append(_NEVER[kind])
        elif kind.endswith("Stmt") and kind not in STATEMENTS and kind != "RawStmt":
            found.append(f"statement {_statement_name(kind)}")
        elif isinstance(node, ast.FuncCall):
            name, schema = _qualified(node.funcname)
            if name not in FUNCTIONS or schema not in (None, "pg_catalog"):
                found.append(f"function {'.'.join(filter(None, (schema, name)))}()")
        elif isinstance(node, ast.RangeVar):
            cte = node.schemaname is None and node.relname in ctes
            if not cte and (node.relname not in RELATIONS or node.schemaname not in (None, "pg_catalog")):
                found.append(f"relation {'.'.join(filter(None, (node.schemaname, node.relname)))}")
    return found


def _qualified(names: tuple) -> tuple[str, str | None]:
    parts = [n.sval for n in names]
    return parts[-1], (parts[-2] if len(parts) > 1 else None)


def _statement_name(kind: str) -> str:
    """``CheckPointStmt`` -> ``CHECKPOINT``, ``AlterSystemStmt`` -> ``ALTER SYSTEM``: the words a user knows."""
    if kind in _NAMES:
        return _NAMES[kind]
    words, word = [], ""
    for ch in kind.removesuffix("Stmt"):
        if ch.isupper() and word and not word[-1].isupper():
            words.append(word)
            word = ""
        word += ch
    return " ".join([*words, word]).upper().replace("CHECK POINT", "CHECKPOINT")


def problems(sql: str) -> list[str]:
    """Why ``sql`` may not be sent to a server pglab did not start ([] when it may)."""
    try:
        parsed = pglast.parse_sql(sql)
    except pglast.parser.ParseError as exc:
        return [f"not valid SQL ({exc})"]
    if len(parsed) != 1:
        return [f"{len(parsed)} statements in one string (one at a time)"]
    kind = type(parsed[0].stmt).__name__
    if kind not in STATEMENTS:
        return [f"statement {_statement_name(kind)} (only {' and '.join(STATEMENTS.values())})"]
    walk = _Nodes()
    walk(parsed[0])
    return list(dict.fromkeys(_judge(walk.nodes)))


def refuse_unless_allowed(target: str, sql: str) -> None:
    """Raise before sending when ``sql`` is not a plain read pglab's workloads need."""
    found = problems(sql)
    if found:
        raise SqlRefused(f"target {target}: pglab did not start it, so it sends only reads there; refused before "
                         f"sending ({'; '.join(found)}): {sql[:80]!r}")
