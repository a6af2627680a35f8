// The seed's implementation (shared/seeds/000_*.txt), as bench/run runs it:
// one transaction per message — INSERT INTO inbox ... ON CONFLICT DO
// NOTHING RETURNING message_id; no row: return; else insert the invoice;
// COMMIT — with the `pg` package, on W connections (workers take the next
// message from one shared cursor, like competing consumers of a queue).
//
//   node seed.js URL WORKLOAD.jsonl WORKERS
//
// Prints one RESULT line; exit 1 if the invoices are not exactly the
// distinct events.
'use strict';
const fs = require('fs');
const { Client } = require('pg');

const CONSUMER = 'billing.order-created.v1';

// The seed's function, with its table names (seed_inbox, bench_invoices).
async function processar(db, event) {
  await db.query('BEGIN');
  try {
    const result = await db.query(
      `INSERT INTO seed_inbox (consumer, message_id, processed_at)
       VALUES ($1, $2, now())
       ON CONFLICT DO NOTHING
       RETURNING message_id`,
      [CONSUMER, event.id]
    );
    if (result.rowCount === 0) {
      await db.query('COMMIT');
      return;
    }
    await db.query(
      'INSERT INTO bench_invoices (order_id, total_cents) VALUES ($1, $2)',
      [event.data.orderId, event.data.totalCents]
    );
    await db.query('COMMIT');
  } catch (e) {
    await db.query('ROLLBACK');
    throw e;
  }
}

async function main() {
  const [url, file, workersArg] = process.argv.slice(2);
  const workers = Number(workersArg || 1);
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l);
  const admin = new Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE TABLE IF NOT EXISTS seed_inbox (
    consumer text NOT NULL,
    message_id text NOT NULL,
    processed_at timestamptz NOT NULL,
    PRIMARY KEY (consumer, message_id))`);
  await admin.query(`CREATE TABLE IF NOT EXISTS bench_invoices (
    order_id text NOT NULL, total_cents bigint NOT NULL)`);
  await admin.query('TRUNCATE seed_inbox, bench_invoices');
  const distinct = new Set(lines.map((l) => JSON.parse(l).id)).size;

  const clients = [];
  for (let w = 0; w < workers; w++) {
    const c = new Client({ connectionString: url });
    await c.connect();
    clients.push(c);
  }
  let next = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(clients.map(async (db) => {
    while (next < lines.length) {
      const line = lines[next++];
      await processar(db, JSON.parse(line));
    }
  }));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const invoices = Number((await admin.query(
    'SELECT count(*) AS n FROM bench_invoices')).rows[0].n);
  const ok = invoices === distinct;
  console.log(`RESULT store=node-pg workers=${workers} messages=${lines.length} ` +
    `distinct=${distinct} invoices=${invoices} counts=${ok ? 'ok' : 'WRONG'} ` +
    `seconds=${seconds.toFixed(3)} rate=${Math.round(lines.length / seconds)} ` +
    `maxrss_kb=${Math.round(process.resourceUsage().maxRSS)}`);
  for (const c of clients) await c.end();
  await admin.end();
  process.exit(ok ? 0 : 1);
}

main().catch((e) => { console.error('seed:', e.message); process.exit(2); });
