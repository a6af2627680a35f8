'use strict';
// The example against the suite's RabbitMQ and PostgreSQL: 300 messages
// (30 of them redeliveries of an earlier id), a consumer killed right
// after its first batch committed and before it acked, then a fresh one.
// Every invoice exactly once, the queue empty (everything acked), and the
// killed batch came back as duplicates.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
const amqp = require('amqplib');
const lib = require(process.env.LIBINBOX_MODULE || 'libinbox');

const AMQP = process.env.INBOX_TEST_AMQP_URL;
const PG = process.env.INBOX_TEST_PG_URL;

function run(args, env) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [path.join(__dirname, 'consumer.js'), ...args], {
      env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    p.on('exit', (code, signal) => resolve({ code, signal, out }));
  });
}

test('amqplib: ack after commit, a crash before the ack is a duplicate', async () => {
  assert.ok(AMQP, 'INBOX_TEST_AMQP_URL is not set (run through tests/run-suite.sh)');
  assert.ok(PG, 'INBOX_TEST_PG_URL is not set');
  const queue = `orders.${process.pid}`;
  const prefix = `ex${process.pid}_`;
  const conn = await amqp.connect(AMQP);
  const ch = await conn.createChannel();
  await ch.assertQueue(queue, { durable: true });
  const ids = new Set();
  for (let i = 0; i < 300; i++) {
    const n = i % 10 === 9 ? i - 5 : i; // one in ten: a redelivery
    ids.add(n);
    const ev = { id: `evt-${n}`, type: 'order-created', data: { orderId: `o-${n}`, totalCents: 100 + n } };
    ch.sendToQueue(queue, Buffer.from(JSON.stringify(ev)), { messageId: ev.id, persistent: true });
  }
  await ch.waitForConfirms?.();
  const env = { EXAMPLE_TABLE_PREFIX: prefix };

  const crashed = await run([AMQP, PG, queue], { ...env, EXAMPLE_CRASH_AFTER_BATCH: '1' });
  assert.equal(crashed.signal, 'SIGKILL', crashed.out);

  const inbox = await lib.Inbox.open(PG, { tablePrefix: prefix });
  const committed = Number((await inbox.query(`SELECT count(*) AS n FROM ${prefix}invoices`)).rows[0].n);
  assert.ok(committed > 0, 'the first batch committed before the crash');

  const second = await run([AMQP, PG, queue, '--idle-exit', '1500'], env);
  assert.equal(second.code, 0, second.out);
  const line = /RESULT .*/.exec(second.out);
  assert.ok(line, second.out);
  const f = Object.fromEntries(line[0].split(' ').slice(1).map((kv) => kv.split('=')).map(([k, v]) => [k, Number(v)]));
  const invoices = Number((await inbox.query(`SELECT count(*) AS n FROM ${prefix}invoices`)).rows[0].n);
  assert.equal(invoices, ids.size, 'each order invoiced exactly once');
  assert.equal(f.applied, ids.size - committed, 'the second consumer applied the rest');
  assert.ok(f.duplicate >= committed, `the unacked batch came back as duplicates (${f.duplicate} >= ${committed})`);
  assert.equal(f.conflict + f.retry + f.dead_lettered + f.other, 0);
  const q = await ch.checkQueue(queue);
  assert.equal(q.messageCount, 0, 'everything was acked');
  await ch.deleteQueue(queue);
  await conn.close();
  await inbox.close();
});
