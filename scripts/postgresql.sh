#!/usr/bin/env bash
# A throwaway PostgreSQL cluster (the distribution's package: Debian's `postgresql`) for the
# PostgreSQL store (adapters/postgresql) and FerretDB's PostgreSQL backend in the tests and benchmarks. Nothing is installed or configured system-wide:
# the cluster lives in a directory of its own, listens on a Unix socket in that directory only (no
# TCP port to collide with anything), trusts local connections as user `arbiter`, and runs
# unprivileged (PostgreSQL refuses to run as root: as root, the cluster belongs to
# $POSTGRES_OS_USER, `nobody` by default, through runuser).
#
#   scripts/postgresql.sh bin           the directory of PostgreSQL's programs (PG_BIN, else the
#                                       newest /usr/lib/postgresql/*/bin, else pg_config's); fails without
#   scripts/postgresql.sh start <dir>   initdb <dir> when empty, start the server, print its connection URL
#   scripts/postgresql.sh stop <dir>    stop it (fast shutdown)
#   scripts/postgresql.sh sql <dir> <statement>   run one statement there (psql, unaligned output)
set -euo pipefail

os_user="${POSTGRES_OS_USER:-nobody}"

pg_bin() {
  if [[ -n "${PG_BIN:-}" ]]; then echo "$PG_BIN"; return; fi
  local newest
  newest="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  if [[ -n "$newest" ]]; then echo "$newest"; return; fi
  if command -v pg_config >/dev/null 2>&1; then pg_config --bindir; return; fi
  echo "PostgreSQL is not installed (apt-get install postgresql, or set PG_BIN to its bin directory)" >&2
  return 1
}

# Runs a PostgreSQL program as the cluster's owner: ourselves, or $os_user when we are root.
as_owner() {
  if [[ $EUID -eq 0 ]]; then runuser -u "$os_user" -- "$@"; else "$@"; fi
}

start() {
  local dir bin
  dir="$(realpath -m "$1")"
  bin="$(pg_bin)"
  mkdir -p "$dir"
  if [[ $EUID -eq 0 ]]; then
    chown "$os_user" "$dir"
    # The owner must be able to reach its directory: let it pass through the parent (not read it).
    chmod o+x "$(dirname "$dir")"
  fi
  if [[ ! -f "$dir/PG_VERSION" ]]; then
    as_owner "$bin/initdb" -D "$dir" -U arbiter --auth=trust --encoding=UTF8 --no-locale >"$dir.initdb.log" 2>&1 ||
      { cat "$dir.initdb.log" >&2; return 1; }
  fi
  # Durability as shipped (fsync on): the benchmark measures what a real deployment would pay.
  # pg_stat_statements lets bench:scale say which statements the time goes to. Custom plans: FerretDB
  # names the field of `_jsonb->$1 @> $2` as a parameter, so a generic plan cannot use the index
  # on `_jsonb->'_id'` (index_ids) and scans the whole collection again.
  as_owner "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses='' -k '$dir' -c max_connections=200 -c shared_preload_libraries=pg_stat_statements -c plan_cache_mode=force_custom_plan" \
    start >/dev/null ||
    { cat "$dir/server.log" >&2; return 1; }
  "$bin/psql" -h "$dir" -U arbiter -d postgres -qAt -c 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements' >/dev/null
  [[ "${POSTGRES_ID_INDEX:-1}" == 0 ]] || index_ids "$bin" "$dir"
  echo "postgres://arbiter@/postgres?host=$dir"
}

# FerretDB 1.24 looks a document up by _id with `_jsonb->'_id' @> $2`, which the btree index it
# makes on `_jsonb->'_id'` cannot serve: every such lookup (each upsert, each findAndModify by _id)
# is a sequential scan of its collection, slower with every token stored. An event trigger gives
# every table FerretDB creates a GIN index on _id that serves `@>`; POSTGRES_ID_INDEX=0 leaves it
# out (bench:scale then measures the scans).
index_ids() {
  local bin="$1" dir="$2"
  "$bin/psql" -h "$dir" -U arbiter -d postgres -qAt >/dev/null <<'SQL'
CREATE OR REPLACE FUNCTION arbiter_index_ids() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE created record;
BEGIN
  -- FerretDB's tables only (a _jsonb column): the PostgreSQL store's tables make their own indexes.
  FOR created IN SELECT object_identity FROM pg_event_trigger_ddl_commands() AS ddl
                 WHERE command_tag = 'CREATE TABLE' AND object_type = 'table'
                   AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = ddl.objid AND attname = '_jsonb') LOOP
    EXECUTE format('CREATE INDEX ON %s USING gin ((_jsonb->''_id'') jsonb_path_ops)', created.object_identity);
  END LOOP;
END $$;
DROP EVENT TRIGGER IF EXISTS arbiter_index_ids;
CREATE EVENT TRIGGER arbiter_index_ids ON ddl_command_end WHEN TAG IN ('CREATE TABLE')
  EXECUTE FUNCTION arbiter_index_ids();
SQL
}

stop() {
  local dir
  dir="$(realpath -m "$1")"
  [[ -f "$dir/postmaster.pid" ]] || return 0
  as_owner "$(pg_bin)/pg_ctl" -D "$dir" -m fast -w stop >/dev/null
}

case "${1:-}" in
  bin) pg_bin ;;
  sql)
    [[ $# -eq 3 ]] || { echo "usage: $0 sql <dir> <statement>" >&2; exit 2; }
    "$(pg_bin)/psql" -h "$(realpath -m "$2")" -U arbiter -d postgres -qAt -F $'\t' -c "$3"
    ;;
  start)
    [[ $# -eq 2 ]] || { echo "usage: $0 start <dir>" >&2; exit 2; }
    start "$2"
    ;;
  stop)
    [[ $# -eq 2 ]] || { echo "usage: $0 stop <dir>" >&2; exit 2; }
    stop "$2"
    ;;
  *)
    echo "usage: $0 bin | start <dir> | stop <dir>" >&2
    exit 2
    ;;
esac
