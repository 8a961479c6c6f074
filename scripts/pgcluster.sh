#!/usr/bin/env bash
# pg_cluster_start DIR: a throwaway PostgreSQL cluster in DIR/pg for the load scripts
# (serve-ledgers.sh, serve-batching.sh), durable (its defaults: fsync, synchronous_commit on), on a
# unix socket only, run as the user postgres when run as root, with the database nvdp; stopped when
# the calling shell exits. It sets PGBIN, PG_AS (the command prefix) and NVDP_LEDGER_DSN (the
# database's URL, for --ledger env:NVDP_LEDGER_DSN), and writes DIR/pg-settings.txt (fsync and
# synchronous_commit as the server reports them).
pg_cluster_start() {
  local O=$1
  PGBIN=$(dirname "$(readlink -f "$(command -v pg_ctl || ls /usr/lib/postgresql/*/bin/pg_ctl | tail -1)")")
  PG_AS=(); [ "$(id -u)" = 0 ] && PG_AS=(runuser -u postgres --)
  rm -rf "$O/pg"; mkdir -p "$O/pg"; [ "$(id -u)" = 0 ] && chown postgres "$O/pg"
  "${PG_AS[@]}" "$PGBIN/initdb" -D "$O/pg/data" --auth=trust -U postgres -E UTF8 --locale=C >"$O/pg-initdb.log" 2>&1 || return 1
  printf "listen_addresses = ''\nunix_socket_directories = '%s'\nmax_connections = 100\n" "$O/pg" >> "$O/pg/data/postgresql.auto.conf"
  "${PG_AS[@]}" "$PGBIN/pg_ctl" -D "$O/pg/data" -l "$O/pg/log" -w start >/dev/null || return 1
  PG_DIR=$O/pg
  trap '"${PG_AS[@]}" "$PGBIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null' EXIT
  "${PG_AS[@]}" "$PGBIN/psql" -h "$O/pg" -U postgres -qc "SHOW fsync" -c "SHOW synchronous_commit" > "$O/pg-settings.txt"
  "${PG_AS[@]}" "$PGBIN/createdb" -h "$O/pg" -U postgres nvdp || return 1
  export NVDP_LEDGER_DSN="postgres://postgres@/nvdp?host=$O/pg&sslmode=disable"
}
