// The seed's billing consumer on the libinbox Node.js binding
// (bindings/node), as bench/run measures it beside the seed's own code
// (bench/seed-node): the same workload, the same PostgreSQL, the same
// bench_invoices table; process() one message at a time (batch 1) or
// processBatch() of BATCH messages.
//
//   node [--expose-gc] bench.js URL WORKLOAD.jsonl|gen:N BATCH [defer|query]
//
// defer: the handler's INSERT is trx.exec(..., { defer: true }) (sent
// with the batch's COMMIT, no answer awaited). query: the handler awaits
// rows, trx.query('INSERT ... RETURNING order_id') (a round trip per
// message, as any handler that reads an answer).
// gen:N makes N events in the process (one in ten a redelivery of an
// earlier id, like bench/workload.h) instead of reading a file, for the
// 1M-message memory run. Prints one RESULT line, with the RSS after a
// tenth of the messages and at the end (after a GC when --expose-gc);
// exit 1 if the invoices are not exactly the distinct events.
'use strict';
const fs = require('fs');
const lib = require(process.env.LIBINBOX_MODULE || 'libinbox');

function* events(src) {
  if (src.startsWith('gen:')) {
    const n = Number(src.slice(4));
    for (let i = 0; i < n; i++) {
      const k = i % 10 === 9 ? i - 7 : i;
      yield { id: `evt-${k}`, data: { orderId: `o-${k}`, totalCents: 100 + (k % 1000) } };
    }
    return;
  }
  for (const l of fs.readFileSync(src, 'utf8').split('\n')) if (l) yield JSON.parse(l);
}

function rssKb() {
  if (global.gc) global.gc();
  return Math.round(process.memoryUsage.rss() / 1024);
}

async function main() {
  const [url, src, batchArg, mode] = process.argv.slice(2);
  const batch = Number(batchArg || 1);
  const opts = { defer: mode === 'defer' };
  const prefix = `nodeb${batch}_`;
  const inbox = await lib.Inbox.open(url, { tablePrefix: prefix });
  await inbox.exec(`CREATE TABLE IF NOT EXISTS bench_invoices (
    order_id text NOT NULL, total_cents bigint NOT NULL)`);
  await inbox.exec('TRUNCATE bench_invoices');
  await inbox.exec(`DELETE FROM ${prefix}inbox`);
  const consumer = inbox.consumer({ name: 'billing.order-created.v1', fingerprint: '/data' });
  await consumer.ready;
  const handler = async (trx, msg) => {
    const e = msg.event;
    if (mode === 'query') {
      const r = await trx.query('INSERT INTO bench_invoices (order_id, total_cents) VALUES ($1, $2) RETURNING order_id',
        [e.data.orderId, e.data.totalCents]);
      if (r.rows[0].order_id !== e.data.orderId) throw new Error('RETURNING gave another row');
      return;
    }
    await trx.exec('INSERT INTO bench_invoices (order_id, total_cents) VALUES ($1, $2)',
      [e.data.orderId, e.data.totalCents], opts);
  };
  const total = src.startsWith('gen:') ? Number(src.slice(4)) : null;
  const ids = new Set();
  let n = 0;
  let rssTenth = 0;
  let outcomesBad = 0;
  const t0 = process.hrtime.bigint();
  let buf = [];
  const flush = async () => {
    const rs = batch === 1 ? [await consumer.process(buf[0], handler)] : await consumer.processBatch(buf, handler);
    for (const r of rs) if (r.outcome !== 'applied' && r.outcome !== 'duplicate') outcomesBad++;
    buf = [];
  };
  for (const ev of events(src)) {
    if (total === null) ids.add(ev.id);
    buf.push(ev);
    n++;
    if (buf.length >= batch) await flush();
    if (total !== null && n === Math.floor(total / 10)) rssTenth = rssKb();
  }
  if (buf.length) await flush();
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const rssEnd = rssKb();
  const distinct = total === null ? ids.size : total - Math.floor(total / 10);
  const invoices = Number((await inbox.query('SELECT count(*) AS n FROM bench_invoices')).rows[0].n);
  const ok = invoices === distinct && outcomesBad === 0;
  console.log(`RESULT store=node-libinbox batch=${batch} defer=${opts.defer ? 1 : 0} query=${mode === 'query' ? 1 : 0} messages=${n} distinct=${distinct} ` +
    `invoices=${invoices} counts=${ok ? 'ok' : 'WRONG'} seconds=${seconds.toFixed(3)} ` +
    `rate=${Math.round(n / seconds)} rss_tenth_kb=${rssTenth} rss_end_kb=${rssEnd} ` +
    `maxrss_kb=${Math.round(process.resourceUsage().maxRSS)}`);
  await inbox.close();
  process.exit(ok ? 0 : 1);
}

main().catch((e) => { console.error('node-libinbox:', e.code || '', e.message); process.exit(2); });
