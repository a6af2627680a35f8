'use strict';
// The seed's eight scenarios ("Testes", shared/seeds/000_*), in
// JavaScript, against SQLite and the suite's PostgreSQL. Each asserts the
// behaviour it names, so it fails if that behaviour breaks.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { spawn } = require('node:child_process');
const path = require('node:path');
const { lib, modulePath, stores, openStore, count, sleep } = require('./helpers');
const { RetryableError } = lib;

const NAME = 'billing.order-created.v1';
const billing = { name: NAME, key: 'create-invoice:{/data/orderId}', fingerprint: '/data' };
const order = (id, orderId, totalCents) => ({ id, data: { orderId, totalCents } });

// The seed's billing handler.
function createInvoice(invoices) {
  return async (trx, msg) => {
    await trx.exec(`INSERT INTO ${invoices} (order_id, total_cents) VALUES ($1, $2)`,
      [msg.event.data.orderId, msg.event.data.totalCents]);
  };
}

for (const store of stores()) {
  test(`${store.kind}`, async (t) => {
    await t.test('1. the same message twice: applied once, then a duplicate', async () => {
      const s = await openStore(store);
      const c = s.inbox.consumer(billing);
      const ev = order('e-1', 'o-1', 4200);
      let calls = 0;
      const h = async (trx, msg) => { calls++; await createInvoice(s.invoices)(trx, msg); };
      const r1 = await c.process(ev, h);
      const r2 = await c.process(ev, h);
      assert.equal(r1.outcome, 'applied');
      assert.equal(r1.key, 'create-invoice:o-1');
      assert.equal(r2.outcome, 'duplicate');
      assert.equal(r2.ackable, true);
      assert.equal(calls, 1, 'the handler ran once');
      assert.equal(await count(s.inbox, s.invoices), 1);
      // in one batch too: the copy inside the batch is a duplicate
      const rs = await c.processBatch([order('e-2', 'o-2', 1), order('e-2', 'o-2', 1), ev], h);
      assert.deepEqual(rs.map((r) => r.outcome), ['applied', 'duplicate', 'duplicate']);
      assert.equal(await count(s.inbox, s.invoices), 2);
      await s.inbox.close();
    });

    await t.test('2. two concurrent deliveries: exactly one applied', async () => {
      const s = await openStore(store);
      // two instances: two consumers, two connections, two threads
      const a = s.inbox.consumer(billing);
      const b = s.inbox.consumer(billing);
      await Promise.all([a.ready, b.ready]);
      const ev = order('e-1', 'o-1', 4200);
      let inside = 0;
      let maxInside = 0;
      let ticks = 0;
      const timer = setInterval(() => { ticks++; }, 10);
      const h = async (trx, msg) => {
        inside++;
        maxInside = Math.max(maxInside, inside);
        await createInvoice(s.invoices)(trx, msg);
        await sleep(300); // hold the transaction while the other arrives
        inside--;
      };
      const [ra, rb] = await Promise.all([a.process(ev, h), b.process(ev, h)]);
      clearInterval(timer);
      const outcomes = [ra.outcome, rb.outcome].sort();
      assert.deepEqual(outcomes, ['applied', 'duplicate']);
      assert.equal(maxInside, 1, 'the database let one handler in');
      assert.equal(await count(s.inbox, s.invoices), 1);
      assert.ok(ticks > 0, 'the event loop ran meanwhile');
      await s.inbox.close();
    });

    await t.test('3. killed after the commit, before the ack: the redelivery is a duplicate', async () => {
      const s = await openStore(store);
      const ev = order('e-1', 'o-1', 4200);
      const child = spawn(process.execPath, [path.join(__dirname, 'crash-after-commit.js'),
        s.url, s.prefix, s.invoices, JSON.stringify(ev)], {
        stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, LIBINBOX_MODULE: modulePath },
      });
      let out = '';
      child.stdout.on('data', (d) => { out += d; });
      const [code, signal] = await new Promise((r) => child.on('exit', (c, sg) => r([c, sg])));
      assert.equal(signal, 'SIGKILL', `child exited ${code} ${signal}: ${out}`);
      assert.match(out, /committed applied/);
      // the broker never got the ack: it redelivers
      const c = s.inbox.consumer(billing);
      let calls = 0;
      const r = await c.process(ev, async () => { calls++; });
      assert.equal(r.outcome, 'duplicate');
      assert.equal(calls, 0);
      assert.equal(await count(s.inbox, s.invoices), 1);
      await s.inbox.close();
    });

    await t.test('4. a transient error rolls back; the retry applies it once', async () => {
      const s = await openStore(store);
      const c = s.inbox.consumer({ ...billing, maxAttempts: 3 });
      const ev = order('e-1', 'o-1', 4200);
      let fail = true;
      const h = async (trx, msg) => {
        await createInvoice(s.invoices)(trx, msg);
        if (fail) throw new RetryableError('payment service unavailable');
      };
      const r1 = await c.process(ev, h);
      assert.equal(r1.outcome, 'retry');
      assert.equal(r1.ackable, false);
      assert.equal(r1.attempts, 1);
      assert.match(r1.reason, /payment service unavailable/);
      assert.equal(await count(s.inbox, s.invoices), 0, 'the insert was rolled back');
      fail = false;
      const r2 = await c.process(ev, h);
      assert.equal(r2.outcome, 'applied');
      assert.equal(r2.attempts, 2);
      assert.equal(await count(s.inbox, s.invoices), 1);
      // a message that keeps failing ends as a dead letter, never lost
      const bad = order('e-9', 'o-9', 1);
      const hb = async () => { throw new Error('still down'); };
      const outs = [];
      for (let i = 0; i < 3; i++) outs.push((await c.process(bad, hb)).outcome);
      assert.deepEqual(outs, ['retry', 'retry', 'dead_lettered']);
      const dls = await s.inbox.deadLetters({ consumer: NAME });
      assert.equal(dls.length, 1);
      assert.equal(dls[0].key, 'create-invoice:o-9');
      const full = await s.inbox.deadLetter(dls[0].id);
      assert.deepEqual(JSON.parse(full.payload.toString()), bad);
      await s.inbox.close();
    });

    await t.test('5. the same key with another payload: a conflict, dead-lettered', async () => {
      const s = await openStore(store);
      const c = s.inbox.consumer(billing);
      const h = createInvoice(s.invoices);
      assert.equal((await c.process(order('e-1', 'o-1', 4200), h)).outcome, 'applied');
      // the producer retried with a new id and another total
      const r = await c.process(order('e-2', 'o-1', 9900), h);
      assert.equal(r.outcome, 'conflict');
      assert.ok(r.deadLetterId > 0);
      const q = await s.inbox.query(`SELECT total_cents FROM ${s.invoices}`);
      assert.deepEqual(q.rows, [{ total_cents: '4200' }]);
      const dl = await s.inbox.deadLetter(r.deadLetterId);
      assert.equal(dl.key, 'create-invoice:o-1');
      assert.equal(dl.fingerprint, lib.fingerprint({ orderId: 'o-1', totalCents: 9900 }));
      assert.equal(dl.storedFingerprint, lib.fingerprint({ orderId: 'o-1', totalCents: 4200 }));
      assert.notEqual(dl.fingerprint, dl.storedFingerprint);
      const st = await c.stats();
      assert.equal(st.conflicts, 1);
      await s.inbox.close();
    });

    await t.test('6. an event out of order: stale, the newer version kept', async () => {
      const s = await openStore(store);
      const proj = `${s.prefix}order_projection`;
      await s.inbox.exec(`CREATE TABLE ${proj} (id text PRIMARY KEY, status text, version bigint NOT NULL)`);
      const c = s.inbox.consumer({ name: 'orders.projection.v1' });
      const h = async (trx, msg) => {
        const e = msg.event;
        await trx.upsertVersioned({ table: proj, keyColumn: 'id', key: e.orderId,
          versionColumn: 'version', version: e.version, values: { status: e.status } });
      };
      const v2 = { id: 'ev-2', orderId: 'o-1', version: 2, status: 'confirmed' };
      const v1 = { id: 'ev-1', orderId: 'o-1', version: 1, status: 'created' };
      assert.equal((await c.process(v2, h)).outcome, 'applied');
      const r = await c.process(v1, h);
      assert.equal(r.outcome, 'stale');
      assert.equal(r.ackable, true);
      const q = await s.inbox.query(`SELECT status, version FROM ${proj}`);
      assert.deepEqual(q.rows, [{ status: 'confirmed', version: '2' }]);
      // and a newer one still applies
      const v3 = { id: 'ev-3', orderId: 'o-1', version: 3, status: 'shipped' };
      assert.equal((await c.process(v3, h)).outcome, 'applied');
      assert.deepEqual((await s.inbox.query(`SELECT status, version FROM ${proj}`)).rows, [{ status: 'shipped', version: '3' }]);
      await s.inbox.close();
    });

    await t.test('7. a replay after the retention window: guarded, not applied again', async () => {
      const s = await openStore(store);
      const opts = { ...billing, retentionSeconds: 1 };
      const c = s.inbox.consumer(opts);
      const ev = order('e-1', 'o-1', 4200);
      const sent = Date.now();
      const d = lib.delivery(ev, { timestamp: sent });
      assert.equal((await c.process(d, createInvoice(s.invoices))).outcome, 'applied');
      await sleep(2100);
      const deleted = await s.inbox.purge({ consumer: NAME });
      assert.equal(deleted, 1, 'the record left the inbox after its window');
      assert.equal(await s.inbox.inspect(NAME, 'create-invoice:o-1'), null);
      // a manual replay of the old message: its key is gone, its time
      // is older than the window
      let calls = 0;
      const r = await c.process(lib.delivery(ev, { timestamp: sent }), async () => { calls++; });
      assert.equal(r.outcome, 'dead_lettered');
      assert.match(r.reason, /too old to deduplicate/);
      assert.equal(calls, 0);
      assert.equal(await count(s.inbox, s.invoices), 1);
      // the 'drop' policy drops it instead
      const c2 = s.inbox.consumer({ ...opts, name: 'billing.drop', replay: 'drop' });
      const r2 = await c2.process(lib.delivery(order('e-7', 'o-7', 1), { timestamp: sent - 60000 }), async () => { calls++; });
      assert.equal(r2.outcome, 'duplicate');
      assert.equal(calls, 0);
      await s.inbox.close();
    });

    await t.test('8. an external effect with a timeout: outbox, the same key on every attempt', async (t) => {
      const s = await openStore(store);
      const seen = [];
      const server = http.createServer((req, res) => {
        seen.push(req.headers['idempotency-key']);
        req.resume();
        if (seen.length === 1) {
          setTimeout(() => { try { res.end('late'); } catch (e) { /* gone */ } }, 1500);
          return; // the first call times out: outcome unknown
        }
        res.setHeader('content-type', 'application/json');
        res.end('{"charged":true}');
      });
      await new Promise((r) => server.listen(0, '127.0.0.1', r));
      t.after(() => { server.closeAllConnections(); server.close(); });
      const url = `http://127.0.0.1:${server.address().port}/charges`;
      const c = s.inbox.consumer(billing);
      const ev = order('e-1', 'o-1', 4200);
      const keys = [];
      const h = async (trx, msg) => {
        await createInvoice(s.invoices)(trx, msg);
        const o = await trx.outbox('charge', { url, body: { order: msg.event.data.orderId, cents: msg.event.data.totalCents }, idempotent: true });
        keys.push(o);
      };
      assert.equal((await c.process(ev, h)).outcome, 'applied');
      assert.equal(keys.length, 1);
      assert.equal(keys[0].added, true);
      const expected = lib.outboxKey(NAME, 'create-invoice:o-1', 'charge');
      assert.equal(keys[0].idempotencyKey, expected);
      // the redelivery adds no second effect
      assert.equal((await c.process(ev, h)).outcome, 'duplicate');
      assert.equal(keys.length, 1);
      // first attempt: times out (unknown); the next: same key, done
      const d1 = await s.inbox.dispatchOnce({ consumer: NAME, timeoutMs: 300, backoffMs: 1 });
      assert.equal(d1.handled, 1);
      assert.equal(d1.unknownOutcomes, 1);
      let done = 0;
      for (let i = 0; i < 40 && !done; i++) {
        await sleep(50);
        done = (await s.inbox.dispatchOnce({ consumer: NAME, timeoutMs: 2000, backoffMs: 1 })).done;
      }
      assert.equal(done, 1);
      assert.equal(seen.length, 2);
      assert.deepEqual(seen, [expected, expected], 'both attempts carried the same Idempotency-Key');
      const counts = await s.inbox.outboxCounts(NAME);
      assert.equal(counts.pending + counts.failed + counts.unknown + counts.inFlight + counts.dead, 0);
      await s.inbox.close();
    });
  });
}
