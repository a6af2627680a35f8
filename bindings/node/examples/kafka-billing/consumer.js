'use strict';
// The seed's billing consumer on Kafka with kafkajs and libinbox.
//
//   node consumer.js BROKERS STORE_URL TOPIC GROUP [--idle-exit MS]
// (--idle-exit: end once idle that long after a first batch)
//
// Each batch kafkajs fetches (eachBatch) is processed in one transaction
// with processBatch; only once it committed are the offsets resolved and
// committed to Kafka. A message answered 'retry' or 'in_progress' stops
// the resolving there: it and the ones after it are fetched again. A crash
// between the commit and the offset commit redelivers the batch, and the
// inbox answers 'duplicate'.
//
// EXAMPLE_CRASH_AFTER_BATCH=N (tests only): SIGKILL itself right after the
// N-th batch committed, before committing its offsets.
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
const { Kafka, logLevel } = require('kafkajs');
const lib = require(process.env.LIBINBOX_MODULE || 'libinbox');

async function main() {
  const [brokers, storeUrl, topic, group, ...rest] = process.argv.slice(2);
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

  const kafka = new Kafka({ brokers: brokers.split(','), logLevel: logLevel.ERROR });
  const kc = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 500 });
  await kc.connect();
  await kc.subscribe({ topic, fromBeginning: true });
  let batches = 0;
  let last = Date.now();
  let busy = false;
  const totals = { applied: 0, duplicate: 0, conflict: 0, retry: 0, dead_lettered: 0, other: 0 };

  await kc.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
      if (!isRunning() || isStale() || batch.messages.length === 0) return;
      busy = true;
      const msgs = batch.messages;
      const events = msgs.map((m) => lib.delivery(m.value, {
        id: m.headers && m.headers['message-id'] ? m.headers['message-id'].toString() : undefined,
        position: `${batch.topic}/${batch.partition}/${m.offset}`,
        timestamp: Number(m.timestamp),
      }));
      const results = await consumer.processBatch(events, async (trx, msg) => {
        const e = msg.event;
        await trx.exec(`INSERT INTO ${prefix}invoices (order_id, total_cents) VALUES ($1, $2)`,
          [e.data.orderId, e.data.totalCents]);
      }); // throws on a store error: nothing committed, kafkajs fetches again
      batches++;
      if (crashAfter && batches === crashAfter) process.kill(process.pid, 'SIGKILL');
      let next = null;
      for (let i = 0; i < msgs.length; i++) {
        const r = results[i];
        totals[r.outcome in totals ? r.outcome : 'other']++;
        if (!r.ackable) break; // retry / in_progress: from here on, again
        resolveOffset(msgs[i].offset);
        next = String(BigInt(msgs[i].offset) + 1n);
      }
      if (next !== null) await kc.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: next }]);
      await heartbeat();
      busy = false;
      last = Date.now();
    },
  });

  if (idleExit) {
    await new Promise((resolve) => {
      const t = setInterval(() => { if (!busy && batches > 0 && Date.now() - last > idleExit) { clearInterval(t); resolve(); } }, 50);
    });
    console.log(`RESULT batches=${batches} ${Object.entries(totals).map(([k, v]) => `${k}=${v}`).join(' ')}`);
    await kc.disconnect();
    await inbox.close();
  }
}

main().catch((e) => { console.error('consumer:', e.code || '', e.message); process.exit(1); });
