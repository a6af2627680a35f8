#!/bin/sh
# bench/probe-big-index.sh PG_URL [ROWS]
#
# The experiment behind bench/README.md section 4: why random ids on a big
# inbox cost ~40%, and why partitioning the inbox by time alone would not
# win it back. Pure SQL through pgbench (no libinbox), 1,000 transactions
# of 100 random (UUIDv4) keys each, on the server given (use one started
# like bench/run's: shared_buffers 128MB, fsync on):
#
#   empty        claim into an empty inbox-shaped table
#   one index    claim into a table already holding ROWS random keys
#   partitioned  ROWS keys in a sealed partition that is only *read*
#                (NOT EXISTS probe), new keys inserted into an empty
#                partition: what a time-partitioned inbox would do
#
# Prints transactions per second (x100 = keys per second) for each, twice.
# Loads ROWS (default 10,000,000) rows twice: about 5 minutes. Drops its
# tables (xprobe_*) at the end.
set -eu
url=$1
rows=${2:-10000000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; psql -q "$url" -c "DROP TABLE IF EXISTS xprobe_one,
	xprobe_part, xprobe_empty, xprobe_inv" >/dev/null 2>&1 || true' EXIT

cols="consumer text NOT NULL, key text NOT NULL, fingerprint text NOT NULL,
 status text NOT NULL, attempts int NOT NULL DEFAULT 1,
 fence bigint NOT NULL DEFAULT 1, lease_until timestamptz, message_id text,
 created_at timestamptz NOT NULL DEFAULT now(), processed_at timestamptz,
 updated_at timestamptz NOT NULL DEFAULT now()"
psql -q -v ON_ERROR_STOP=1 "$url" <<EOF
DROP TABLE IF EXISTS xprobe_one, xprobe_part, xprobe_empty, xprobe_inv;
CREATE TABLE xprobe_one ($cols, PRIMARY KEY (consumer, key));
CREATE INDEX ON xprobe_one (consumer, processed_at);
CREATE TABLE xprobe_empty ($cols, PRIMARY KEY (consumer, key));
CREATE INDEX ON xprobe_empty (consumer, processed_at);
CREATE TABLE xprobe_part (gen int NOT NULL, $cols,
 PRIMARY KEY (consumer, key, gen)) PARTITION BY LIST (gen);
CREATE INDEX ON xprobe_part (consumer, processed_at);
CREATE TABLE xprobe_part0 PARTITION OF xprobe_part FOR VALUES IN (0);
CREATE TABLE xprobe_part1 PARTITION OF xprobe_part FOR VALUES IN (1);
CREATE TABLE xprobe_inv (order_id text, total_cents bigint);
INSERT INTO xprobe_one (consumer, key, fingerprint, status, processed_at)
 SELECT 'bench', gen_random_uuid()::text, md5(i::text) || md5((i + 1)::text),
 'completed', now() - interval '1 day' FROM generate_series(1, $rows) i;
INSERT INTO xprobe_part (gen, consumer, key, fingerprint, status,
 processed_at)
 SELECT 0, 'bench', gen_random_uuid()::text,
 md5(i::text) || md5((i + 1)::text), 'completed', now() - interval '1 day'
 FROM generate_series(1, $rows) i;
EOF
psql -q "$url" -c "VACUUM ANALYZE xprobe_one" -c "VACUUM ANALYZE xprobe_part"

claim() { # TABLE
	cat <<EOF
BEGIN;
WITH ins AS (INSERT INTO $1 (consumer, key, fingerprint, status,
 processed_at) SELECT 'bench', gen_random_uuid()::text,
 md5(random()::text) || md5(random()::text), 'completed', now()
 FROM generate_series(1, 100) ON CONFLICT DO NOTHING RETURNING key)
INSERT INTO xprobe_inv SELECT key, 100 FROM ins;
COMMIT;
EOF
}
claim xprobe_empty >"$tmp/empty.sql"
claim xprobe_one >"$tmp/one.sql"
cat >"$tmp/part.sql" <<'EOF'
BEGIN;
WITH k AS MATERIALIZED (SELECT gen_random_uuid()::text AS k
 FROM generate_series(1, 100)),
ins AS (INSERT INTO xprobe_part (gen, consumer, key, fingerprint, status,
 processed_at) SELECT 1, 'bench', k.k,
 md5(random()::text) || md5(random()::text), 'completed', now() FROM k
 WHERE NOT EXISTS (SELECT 1 FROM xprobe_part y WHERE y.consumer = 'bench'
 AND y.key = k.k AND y.gen = 0) ON CONFLICT DO NOTHING RETURNING key)
INSERT INTO xprobe_inv SELECT key, 100 FROM ins;
COMMIT;
EOF
for round in 1 2; do
	for v in empty one part; do
		psql -q "$url" -c CHECKPOINT
		tps=$(pgbench -n -c 1 -t 1000 -f "$tmp/$v.sql" "$url" 2>&1 |
			sed -n 's/^tps = \([0-9.]*\).*/\1/p')
		echo "round $round  $v  ${tps:-failed} tps"
	done
done
psql -q "$url" -Atc "SELECT 'primary key of the big table: ' ||
	pg_size_pretty(pg_relation_size('xprobe_one_pkey'))"
