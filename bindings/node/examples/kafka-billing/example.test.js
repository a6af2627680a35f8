'use strict';
// The example against a Kafka mock cluster of its own (librdkafka's, the
// suite's tests/tools/kafka-mock: $KAFKA_MOCK) and the suite's
// PostgreSQL: 300 messages on 3 partitions (30 of them redeliveries of an
// earlier id), a consumer killed right after its first batch committed
// and before its offsets were committed, then a fresh one. Every invoice
// exactly once, every offset committed to the end, and the killed batch
// came back as duplicates.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
const { Kafka, logLevel } = require('kafkajs');
const lib = require(process.env.LIBINBOX_MODULE || 'libinbox');

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

function startMock(topic) {
  return new Promise((resolve, reject) => {
    const m = spawn(process.env.KAFKA_MOCK, ['--stdin-lifetime', `${topic}:3`], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    m.stdout.on('data', (d) => {
      out += d;
      const b = /bootstrap=(\S+)/.exec(out);
      if (b) resolve({ proc: m, brokers: b[1] });
    });
    m.on('exit', (c) => reject(new Error(`kafka-mock exited ${c}`)));
  });
}

test('kafkajs eachBatch: offsets committed after the transaction, a crash before is a duplicate', async (t) => {
  assert.ok(PG, 'INBOX_TEST_PG_URL is not set (run through tests/run-suite.sh)');
  assert.ok(process.env.KAFKA_MOCK, 'KAFKA_MOCK (tests/tools/kafka-mock) is not set');
  const topic = 'orders';
  const mock = await startMock(topic);
  t.after(() => { mock.proc.removeAllListeners('exit'); mock.proc.kill('SIGTERM'); });
  const prefix = `kx${process.pid}_`;
  const kafka = new Kafka({ brokers: mock.brokers.split(','), logLevel: logLevel.ERROR });
  const producer = kafka.producer();
  await producer.connect();
  const ids = new Set();
  const messages = [];
  for (let i = 0; i < 300; i++) {
    const n = i % 10 === 9 ? i - 5 : i; // one in ten: a redelivery
    ids.add(n);
    const ev = { id: `evt-${n}`, type: 'order-created', data: { orderId: `o-${n}`, totalCents: 100 + n } };
    messages.push({ key: `o-${n}`, value: JSON.stringify(ev), headers: { 'message-id': ev.id } });
  }
  await producer.send({ topic, messages });
  await producer.disconnect();
  const args = [mock.brokers, PG, topic, 'billing'];
  const env = { EXAMPLE_TABLE_PREFIX: prefix };

  const crashed = await run(args, { ...env, EXAMPLE_CRASH_AFTER_BATCH: '1' });
  assert.equal(crashed.signal, 'SIGKILL', crashed.out);
  const inbox = await lib.Inbox.open(PG, { tablePrefix: prefix });
  const committed = Number((await inbox.query(`SELECT count(*) AS n FROM ${prefix}invoices`)).rows[0].n);
  assert.ok(committed > 0, 'the first batch committed before the crash');

  const second = await run([...args, '--idle-exit', '2000'], env);
  assert.equal(second.code, 0, second.out);
  const line = /RESULT .*/.exec(second.out);
  assert.ok(line, second.out);
  const f = Object.fromEntries(line[0].split(' ').slice(1).map((kv) => kv.split('=')).map(([k, v]) => [k, Number(v)]));
  const invoices = Number((await inbox.query(`SELECT count(*) AS n FROM ${prefix}invoices`)).rows[0].n);
  assert.equal(invoices, ids.size, 'each order invoiced exactly once');
  assert.ok(f.duplicate >= committed, `the uncommitted batch came back as duplicates (${f.duplicate} >= ${committed})`);
  assert.equal(f.conflict + f.retry + f.dead_lettered + f.other, 0);
  // every partition's committed offset is its end
  const admin = kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(topic);
  const offs = await admin.fetchOffsets({ groupId: 'billing', topics: [topic] });
  await admin.disconnect();
  for (const p of ends) {
    const c = offs[0].partitions.find((x) => x.partition === p.partition);
    assert.equal(c.offset, p.offset, `partition ${p.partition} committed to its end`);
  }
  await inbox.close();
});
