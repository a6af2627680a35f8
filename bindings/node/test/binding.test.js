'use strict';
// What the binding itself promises: errors as Errors with the library's
// code and no password, outcomes as values, an event loop that never
// waits for the database, handles freed by the garbage collector.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const { lib, stores, openStore, count, sleep } = require('./helpers');
const { Inbox, PermanentError } = lib;

function threads() {
  return Number(/Threads:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]);
}

test('errors carry the code name and never the password', async () => {
  await assert.rejects(Inbox.open('postgresql://app:s3cr3t-pw@127.0.0.1:1/billing?connect_timeout=2'), (e) => {
    assert.ok(e instanceof Error);
    assert.equal(e.code, 'INBOX_ERR_CONNECT');
    assert.ok(!e.message.includes('s3cr3t-pw'), e.message);
    return true;
  });
  await assert.rejects(Inbox.open('mysql://x@y/z'), { code: 'INBOX_ERR_URL' });
  assert.equal(lib.redactUrl('postgresql://app:s3cr3t-pw@db/billing'), 'postgresql://app:***@db/billing');
});

for (const store of stores()) {
  test(`${store.kind}: outcomes are values; store errors are Errors`, async () => {
    const s = await openStore(store);
    // an invalid consumer is an error (code INBOX_ERR_INVALID) ...
    const bad = s.inbox.consumer({ name: 'x', key: '{/unclosed' });
    await assert.rejects(bad.ready, { code: 'INBOX_ERR_INVALID' });
    await assert.rejects(bad.process({ id: '1' }), { code: 'INBOX_ERR_INVALID' });
    const c = s.inbox.consumer({ name: 'billing', schema: { type: 'object', required: ['data'] } });
    // ... a message that is not JSON, or breaks the schema, is an outcome
    const r1 = await c.process('{not json', async () => {});
    assert.equal(r1.outcome, 'dead_lettered');
    const r2 = await c.process({ id: 'no-data' }, async () => {});
    assert.equal(r2.outcome, 'dead_lettered');
    assert.match(r2.reason, /schema violation/);
    // a permanent error from the handler: dead-lettered with its reason
    const r3 = await c.process({ id: 'p', data: {} }, async () => { throw new PermanentError('unknown customer'); });
    assert.equal(r3.outcome, 'dead_lettered');
    assert.match(r3.reason, /unknown customer/);
    // a failing statement inside the handler: the Error reaches the handler
    let seen;
    const r4 = await c.process({ id: 'q', data: {} }, async (trx) => {
      try { await trx.query('SELECT * FROM no_such_table'); } catch (e) { seen = e; throw e; }
    });
    assert.equal(seen.code, 'INBOX_ERR_STORE');
    assert.equal(r4.outcome, 'retry');
    // the transaction is over once the handler settled
    let late;
    await c.process({ id: 'l', data: {} }, async (trx) => { late = trx; });
    await assert.rejects(late.query('SELECT 1'), { code: 'INBOX_ERR_STATE' });
    // a call on the consumer from inside its own handler is refused, not a deadlock
    const r5 = await c.process({ id: 'self', data: {} }, async () => { await c.stats(); });
    assert.equal(r5.outcome, 'retry');
    assert.match(r5.reason, /inside its own handler/);
    await s.inbox.close();
    await assert.rejects(c.process({ id: 'after' }), { code: 'INBOX_ERR_STATE' });
  });

  test(`${store.kind}: the event loop runs while the database works`, async () => {
    const s = await openStore(store);
    const c = s.inbox.consumer({ name: 'slow', batchTimeoutMs: 30000 });
    await c.ready;
    // PostgreSQL: a sleeping statement. SQLite: the write lock, held by
    // another connection's transaction for 600 ms, waited for (a wait, not
    // CPU, so a loaded machine does not stretch it)
    let holder = null;
    if (store.kind === 'sqlite') {
      const h = s.inbox.consumer({ name: 'holder', batchTimeoutMs: 30000 });
      let entered;
      const inside = new Promise((r) => { entered = r; });
      holder = h.process({ id: 'h1' }, async (trx) => {
        await trx.exec(`INSERT INTO ${s.invoices} VALUES ('h', 1)`);
        entered();
        await sleep(600);
      });
      await inside;
    }
    const slow = store.kind === 'postgresql' ? 'SELECT pg_sleep(0.5)' : `INSERT INTO ${s.invoices} VALUES ('w', 2)`;
    let last = Date.now();
    let maxGap = 0;
    let ticks = 0;
    const timer = setInterval(() => { const n = Date.now(); maxGap = Math.max(maxGap, n - last); last = n; ticks++; }, 5);
    const t0 = Date.now();
    const r = await c.process({ id: 'm1' }, async (trx) => { await trx.exec(slow); });
    const took = Date.now() - t0;
    if (holder) assert.equal((await holder).outcome, 'applied');
    clearInterval(timer);
    assert.equal(r.outcome, 'applied');
    // had the call run on the main thread, the loop would have stalled
    // for the whole query; a loaded machine may delay a tick, not half
    assert.ok(took >= 300, `the query took ${took} ms (too quick to tell)`);
    assert.ok(maxGap < took / 2, `the event loop stalled ${maxGap} ms during a ${took} ms query`);
    assert.ok(ticks > 5);
    await s.inbox.close();
  });

  test(`${store.kind}: batches, leases, replay of a dead letter, stats`, async () => {
    const s = await openStore(store);
    const c = s.inbox.consumer({ name: 'billing', key: 'inv:{/data/orderId}', fingerprint: '/data' });
    const evs = [];
    for (let i = 0; i < 50; i++) evs.push({ id: `e${i}`, data: { orderId: `o${i}`, totalCents: i } });
    evs.push({ id: 'bad', data: { orderId: 'bad', totalCents: -1 } });
    const rs = await c.processBatch(evs, async (trx, msg) => {
      assert.equal(msg.event, evs[msg.index]);
      if (msg.event.data.totalCents < 0) throw new PermanentError('negative total');
      await trx.exec(`INSERT INTO ${s.invoices} VALUES ($1, $2)`, [msg.event.data.orderId, msg.event.data.totalCents]);
    });
    assert.equal(rs.length, 51);
    assert.equal(rs.filter((r) => r.outcome === 'applied').length, 50);
    assert.equal(rs[50].outcome, 'dead_lettered');
    assert.equal(await count(s.inbox, s.invoices), 50);
    // replay the dead letter once the handler accepts it
    const rr = await c.replay(rs[50].deadLetterId, async (trx, msg) => {
      await trx.exec(`INSERT INTO ${s.invoices} VALUES ($1, $2)`, [msg.event.data.orderId, 0]);
    });
    assert.equal(rr.outcome, 'applied');
    assert.equal(await count(s.inbox, s.invoices), 51);
    const dl = await s.inbox.deadLetter(rs[50].deadLetterId);
    assert.ok(dl.replayedAt > 0);
    // a long handler under a lease
    const ev = { id: 'long', data: { orderId: 'long', totalCents: 7 } };
    const a = await c.acquire(ev);
    assert.equal(a.outcome, 'acquired');
    assert.equal(a.lease.key, 'inv:long');
    assert.equal((await c.acquire(ev)).outcome, 'in_progress');
    await a.lease.extend();
    const done = await a.lease.complete(async (trx) => {
      await trx.exec(`INSERT INTO ${s.invoices} VALUES ($1, $2)`, ['long', 7]);
    });
    assert.equal(done, 'applied');
    assert.equal((await c.acquire(ev)).outcome, 'duplicate');
    const st = await c.stats();
    assert.equal(st.applied, 52);
    assert.equal(st.deadLetters, 1);
    const as = await s.inbox.stats('billing');
    assert.equal(as.completed, 52);
    assert.equal(as.deadLetters, 1);
    await s.inbox.close();
  });

  test(`${store.kind}: concurrent calls on one consumer run one after the other, in call order`, async () => {
    const s = await openStore(store);
    const c = s.inbox.consumer({ name: 'concurrent' });
    const order = [];
    const calls = [];
    for (let i = 0; i < 20; i++) {
      calls.push(c.process({ id: `m${i % 15}` }, async (trx, msg) => {
        order.push(msg.id);
        await trx.exec(`INSERT INTO ${s.invoices} VALUES ($1, $2)`, [msg.id, i]);
      }));
    }
    const rs = await Promise.all(calls);
    assert.deepEqual(rs.map((r) => r.outcome),
      [...Array(15).fill('applied'), ...Array(5).fill('duplicate')]);
    assert.deepEqual(order, [...Array(15).keys()].map((i) => `m${i}`));
    assert.equal(await count(s.inbox, s.invoices), 15);
    await s.inbox.close();
  });

  test(`${store.kind}: deferred statements: applied with the batch, a failing one is a retry`, async () => {
    const s = await openStore(store);
    const c = s.inbox.consumer({ name: 'deferred' });
    const evs = [{ id: 'a', n: 1 }, { id: 'b', n: 2 }, { id: 'c', n: 3 }];
    const rs = await c.processBatch(evs, async (trx, msg) => {
      const r = await trx.exec(`INSERT INTO ${s.invoices} VALUES ($1, $2)`, [msg.event.id, msg.event.n], { defer: true });
      assert.equal(r.rowCount, null);
    });
    assert.deepEqual(rs.map((r) => r.outcome), ['applied', 'applied', 'applied']);
    assert.equal(await count(s.inbox, s.invoices), 3);
    // 'e' collides with the primary key of an earlier row: its handler
    // never hears of it, yet it is not applied, and the others are
    const rs2 = await c.processBatch([{ id: 'd', n: 4 }, { id: 'e', n: 5 }], async (trx, msg) => {
      const k = msg.event.id === 'e' ? 'a' : msg.event.id;
      await trx.exec(`INSERT INTO ${s.invoices} VALUES ($1, $2)`, [k, msg.event.n], { defer: true });
    });
    assert.deepEqual(rs2.map((r) => r.outcome), ['applied', 'retry']);
    assert.equal(await count(s.inbox, s.invoices), 4);
    await s.inbox.close();
  });

  test(`${store.kind}: a batch run again after a fault: the old pass's handlers are void, the new pass runs them all`, { skip: store.kind !== 'postgresql' && 'a statement timeout is PostgreSQL\'s', timeout: 30000 }, async () => {
    const s = await openStore(store);
    // its statements are bounded by 500 ms: m1's first one times out,
    // the batch is rolled back and run again
    const c = s.inbox.consumer({ name: 'rerun', batchTimeoutMs: 500 });
    const log = [];
    const refused = [];
    let slow = 1;
    const evs = ['m0', 'm1', 'm2', 'm3'].map((id, n) => ({ id, n }));
    const rs = await c.processBatch(evs, async (trx, msg) => {
      const id = msg.event.id;
      log.push(id);
      if (id === 'm1' && slow-- > 0) await trx.query('SELECT pg_sleep(3)');
      try {
        await trx.exec(`INSERT INTO ${s.invoices} VALUES ($1, $2)`, [id, msg.event.n], id === 'm3' ? { defer: true } : undefined);
      } catch (e) {
        refused.push([id, e.code]);
        throw e;
      }
    });
    assert.deepEqual(rs.map((r) => r.outcome), ['applied', 'applied', 'applied', 'applied']);
    assert.deepEqual(rs.map((r) => r.attempts), [1, 1, 1, 1], 'a fault counts no attempt');
    // the first pass ran m0 and m1; m2 started at once after m1 (its
    // requests reach the worker tagged with the old pass: refused);
    // then the second pass ran every handler, in order
    assert.deepEqual(log.slice(0, 3), ['m0', 'm1', 'm2']);
    assert.deepEqual(log.slice(3), ['m0', 'm1', 'm2', 'm3']);
    assert.deepEqual(refused, [['m2', 'INBOX_ERR_STATE']]);
    // nothing of the old pass was written, everything of the new one was
    assert.equal(await count(s.inbox, s.invoices), 4);
    await s.inbox.close();
  });

  test(`${store.kind}: handles not closed are freed by the garbage collector`, { skip: !global.gc && 'needs --expose-gc' }, async () => {
    const s = await openStore(store);
    await s.inbox.query('SELECT 1');
    const before = threads();
    await (async () => {
      const cs = [];
      for (let i = 0; i < 8; i++) {
        const c = s.inbox.consumer({ name: `gc${i}` });
        cs.push(c.process({ id: 'x' }, async () => {}));
      }
      await Promise.all(cs);
    })();
    assert.ok(threads() >= before + 8, 'one worker per consumer');
    for (let i = 0; i < 200 && threads() > before; i++) {
      global.gc();
      await sleep(50);
    }
    assert.equal(threads(), before, 'the workers of the collected consumers ended');
    await s.inbox.close();
  });
}

for (const store of stores()) {
  test(`${store.kind}: a handler that never settles is rolled back after handlerTimeout`, { timeout: 30000 }, async () => {
    const s = await openStore(store);
    assert.throws(() => s.inbox.consumer({ name: 'x', handlerTimeout: 0 }), { code: 'INBOX_ERR_INVALID' });
    assert.equal(s.inbox.consumer({ name: 'dflt' }).handlerTimeout, 30000, 'the default');
    const c = s.inbox.consumer({ name: 'billing', key: '{/data/orderId}', handlerTimeout: 300 });
    assert.equal(c.handlerTimeout, 300);
    const ev = { id: 'e-1', data: { orderId: 'o-1', totalCents: 4200 } };
    let stuck = null;
    const t0 = Date.now();
    const r1 = await c.process(ev, async (trx, msg) => {
      stuck = trx;
      await trx.exec(`INSERT INTO ${s.invoices} (order_id, total_cents) VALUES ($1, $2)`,
        [msg.event.data.orderId, msg.event.data.totalCents]);
      await new Promise(() => {}); // never settles
    });
    const took = Date.now() - t0;
    assert.equal(r1.outcome, 'retry');
    assert.equal(r1.ackable, false);
    assert.equal(r1.attempts, 1, 'the attempt is counted');
    assert.match(r1.reason, /handlerTimeout/);
    assert.ok(took >= 300, `rolled back after the timeout, not before (${took} ms)`);
    // its transaction is over: the insert was rolled back, its trx refuses
    assert.equal(await count(s.inbox, s.invoices), 0);
    await assert.rejects(stuck.query('SELECT 1'), { code: 'INBOX_ERR_STATE' });
    // its locks are gone: another connection takes the same key at once
    const other = s.inbox.consumer({ name: 'billing', key: '{/data/orderId}', handlerTimeout: 5000 });
    const r2 = await other.process(ev, async (trx, msg) => {
      await trx.exec(`INSERT INTO ${s.invoices} (order_id, total_cents) VALUES ($1, $2)`,
        [msg.event.data.orderId, msg.event.data.totalCents]);
    });
    assert.equal(r2.outcome, 'applied');
    assert.equal(r2.attempts, 2);
    assert.equal(await count(s.inbox, s.invoices), 1);
    // in a batch: the stuck message retries, the others commit
    const evs = ['o-2', 'o-3', 'o-4'].map((o, i) => ({ id: `b-${i}`, data: { orderId: o, totalCents: 1 } }));
    const rs = await c.processBatch(evs, async (trx, msg) => {
      await trx.exec(`INSERT INTO ${s.invoices} (order_id, total_cents) VALUES ($1, $2)`,
        [msg.event.data.orderId, msg.event.data.totalCents]);
      if (msg.event.data.orderId === 'o-3') await new Promise(() => {});
    });
    assert.deepEqual(rs.map((r) => r.outcome), ['applied', 'retry', 'applied']);
    assert.match(rs[1].reason, /handlerTimeout/);
    assert.equal(await count(s.inbox, s.invoices), 3);
    await s.inbox.close();
  });
}

for (const store of stores()) {
  test(`${store.kind}: query rows are objects keyed by column name (rowMode 'array': arrays)`, async () => {
    const s = await openStore(store);
    await s.inbox.exec(`INSERT INTO ${s.invoices} (order_id, total_cents) VALUES ('o-1', 4200), ('o-2', 100)`);
    const q = await s.inbox.query(`SELECT order_id, total_cents AS cents, NULL AS missing FROM ${s.invoices} ORDER BY order_id`);
    assert.deepEqual(q.rows, [{ order_id: 'o-1', cents: '4200', missing: null }, { order_id: 'o-2', cents: '100', missing: null }]);
    assert.equal(q.rowCount, 2);
    assert.deepEqual(q.fields.map((f) => f.name), ['order_id', 'cents', 'missing']);
    const a = await s.inbox.query(`SELECT order_id, total_cents FROM ${s.invoices} ORDER BY order_id`, [], { rowMode: 'array' });
    assert.deepEqual(a.rows, [['o-1', '4200'], ['o-2', '100']]);
    const none = await s.inbox.query(`SELECT order_id FROM ${s.invoices} WHERE order_id = $1`, ['x']);
    assert.deepEqual(none.rows, []);
    assert.equal(none.rowCount, 0);
    await assert.rejects(s.inbox.query('SELECT 1', [], { rowMode: 'rows' }), { code: 'INBOX_ERR_INVALID' });
    // inside a handler, on the transaction's connection (its own insert seen)
    const c = s.inbox.consumer({ name: 'rows' });
    let seen;
    const r = await c.process({ id: 'm-1' }, async (trx) => {
      await trx.exec(`INSERT INTO ${s.invoices} (order_id, total_cents) VALUES ($1, $2)`, ['o-3', 7]);
      seen = await trx.query(`SELECT total_cents AS total, order_id FROM ${s.invoices} WHERE order_id = $1`, ['o-3']);
    });
    assert.equal(r.outcome, 'applied');
    assert.deepEqual(seen.rows, [{ total: '7', order_id: 'o-3' }]);
    assert.deepEqual(Object.keys(seen.rows[0]), ['total', 'order_id'], 'in column order');
    await s.inbox.close();
  });
}

async function waitFor(what, cond, ms = 15000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

for (const store of stores()) {
  test(`${store.kind}: a running dispatcher performs outbox rows until stop(), close() or its signal`, { timeout: 90000 }, async (t) => {
    const s = await openStore(store);
    const seen = [];
    const server = http.createServer((req, res) => {
      seen.push(req.headers['idempotency-key']);
      req.resume();
      res.setHeader('content-type', 'application/json');
      res.end('{"charged":true}');
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    t.after(() => { server.closeAllConnections(); server.close(); });
    const url = `http://127.0.0.1:${server.address().port}/charges`;
    const c = s.inbox.consumer({ name: 'pay', key: '{/order}' });
    const charge = async (trx, msg) => {
      await trx.outbox('charge', { url, body: { order: msg.event.order }, idempotent: true });
    };
    for (const o of ['o-1', 'o-2', 'o-3']) {
      assert.equal((await c.process({ id: o, order: o }, charge)).outcome, 'applied');
    }
    const d = s.inbox.dispatcher({ consumer: 'pay', pollMs: 50, backoffMs: 1 });
    assert.equal(d.running, false);
    assert.equal(d.stats().running, false);
    const run = d.start();
    assert.equal(d.running, true);
    await assert.rejects(d.start(), { code: 'INBOX_ERR_STATE' });
    await waitFor('the 3 rows', () => seen.length >= 3);
    // a row committed while it runs is performed too, nobody calls again
    assert.equal((await c.process({ id: 'o-4', order: 'o-4' }, charge)).outcome, 'applied');
    await waitFor('the row added while running', () => seen.length >= 4);
    await waitFor('4 rows done', () => d.stats().done >= 4);
    assert.equal(d.stats().running, true);
    const fin = await d.stop();
    assert.equal(await run, fin, 'start() and stop() settle with the same counters');
    assert.equal(fin.done, 4);
    assert.equal(d.running, false);
    assert.deepEqual([...seen].sort(), ['o-1', 'o-2', 'o-3', 'o-4'].map((o) => lib.outboxKey('pay', o, 'charge')).sort());
    const counts = await s.inbox.outboxCounts('pay');
    assert.equal(counts.pending + counts.failed + counts.unknown + counts.inFlight + counts.dead, 0);
    // stopped: a new row waits ...
    await c.process({ id: 'o-5', order: 'o-5' }, charge);
    await sleep(500);
    assert.equal(seen.length, 4, 'a stopped dispatcher performs nothing');
    // ... until it is started again; close() stops it and ends the run
    const run2 = d.start();
    await waitFor('the row after the restart', () => seen.length >= 5);
    await waitFor('it done', () => d.stats().done >= 1);
    await d.close();
    assert.equal((await run2).done, 1);
    await assert.rejects(d.start(), { code: 'INBOX_ERR_STATE' });
    // an AbortSignal stops and closes it; Inbox.close() closes a running one
    const ac = new AbortController();
    const d2 = s.inbox.dispatcher({ consumer: 'pay', pollMs: 50, signal: ac.signal });
    const run3 = d2.start();
    await sleep(200);
    assert.equal(d2.running, true);
    ac.abort();
    await run3;
    assert.equal(d2.running, false);
    const d3 = s.inbox.dispatcher({ consumer: 'pay', pollMs: 50 });
    const run4 = d3.start();
    await sleep(200);
    await s.inbox.close();
    await run4;
    assert.equal(d3.running, false);
    assert.equal(seen.length, 5, 'nothing performed twice');
  });
}
