'use strict';
// The seed's billing consumer on RabbitMQ with amqplib and libinbox.
//
//   node consumer.js AMQP_URL STORE_URL QUEUE [--idle-exit MS]
// (--idle-exit: end once idle that long after a first batch)
//
// Messages are gathered into micro-batches (up to 100, or what arrived
// within 10 ms), processed in one transaction with processBatch, and each
// one is acked only after that transaction committed — or, for 'retry' /
// 'in_progress', handed back to the broker (nack + requeue) to come again.
// A crash between the commit and the acks redelivers the batch, and the
// inbox answers 'duplicate': the invoice is written once.
//
// EXAMPLE_CRASH_AFTER_BATCH=N (tests only): SIGKILL itself right after the
// N-th batch committed, before acking it.
const amqp = require('amqplib');
const lib = require(process.env.LIBINBOX_MODULE || 'libinbox');

async function main() {
  const [amqpUrl, storeUrl, queue, ...rest] = process.argv.slice(2);
  const idleExit = rest[0] === '--idle-exit' ? Number(rest[1]) : 0;
  const crashAfter = Number(process.env.EXAMPLE_CRASH_AFTER_BATCH || 0);
  const prefix = process.env.EXAMPLE_TABLE_PREFIX || '';

  const inbox = await lib.Inbox.open(storeUrl, { tablePrefix: prefix });
  await inbox.exec(`CREATE TABLE IF NOT EXISTS ${prefix}invoices (
    order_id text PRIMARY KEY, total_cents bigint NOT NULL)`);
  const consumer = inbox.consumer({
    name: 'billing.order-created.v1',
    key: 'create-invoice:{/data/orderId}',
    fingerprint: '/data',
  });
  await consumer.ready;

  const conn = await amqp.connect(amqpUrl);
  const ch = await conn.createChannel();
  await ch.assertQueue(queue, { durable: true });
  await ch.prefetch(200);

  let pending = [];
  let running = false;
  let batches = 0;
  let last = Date.now();
  const totals = { applied: 0, duplicate: 0, conflict: 0, retry: 0, dead_lettered: 0, other: 0 };

  const flush = async () => {
    if (running || pending.length === 0) return;
    running = true;
    const msgs = pending.splice(0, 100);
    const events = msgs.map((m) => lib.delivery(m.content, {
      id: m.properties.messageId,
      headers: m.properties.headers,
      position: `${queue}/${m.fields.deliveryTag}`,
      deliveryCount: m.fields.redelivered ? 2 : 1,
    }));
    try {
      const results = await consumer.processBatch(events, async (trx, msg) => {
        const e = msg.event;
        await trx.exec(`INSERT INTO ${prefix}invoices (order_id, total_cents) VALUES ($1, $2)`,
          [e.data.orderId, e.data.totalCents]);
      });
      // committed: now, and only now, the broker hears about it
      batches++;
      if (crashAfter && batches === crashAfter) process.kill(process.pid, 'SIGKILL');
      results.forEach((r, i) => {
        totals[r.outcome in totals ? r.outcome : 'other']++;
        if (r.ackable) ch.ack(msgs[i]);
        else ch.nack(msgs[i], false, true);
      });
    } catch (err) {
      // nothing committed: every message of the batch comes again
      console.error(`batch failed (${err.code}): ${err.message}`);
      for (const m of msgs) ch.nack(m, false, true);
    } finally {
      running = false;
      last = Date.now();
      if (pending.length) setImmediate(flush);
    }
  };

  await ch.consume(queue, (m) => {
    if (!m) return;
    pending.push(m);
    last = Date.now();
    if (pending.length >= 100) flush(); else setTimeout(flush, 10);
  });

  if (idleExit) {
    await new Promise((resolve) => {
      const t = setInterval(() => {
        if (!running && batches > 0 && pending.length === 0 && Date.now() - last > idleExit) { clearInterval(t); resolve(); }
      }, 50);
    });
    console.log(`RESULT batches=${batches} ${Object.entries(totals).map(([k, v]) => `${k}=${v}`).join(' ')}`);
    await ch.close();
    await conn.close();
    await inbox.close();
  }
}

main().catch((e) => { console.error('consumer:', e.code || '', e.message); process.exit(1); });
