'use strict';
// Stored results (issue 14): trx.setResult(value) stores the answer with
// the inbox record, in the same transaction; a duplicate's r.result is
// the first processing's answer (and r.firstOutcome how it ended), also
// inside one batch and from another connection; a conflict has none; a
// result over the limit is the handler's error, never a cut.
const test = require('node:test');
const assert = require('node:assert/strict');
const { lib, stores, openStore, count } = require('./helpers');
const { Inbox } = lib;

for (const store of stores()) {
  test(`${store.kind}: a duplicate gets the first processing's result`, async () => {
    const s = await openStore(store);
    const c = s.inbox.consumer({ name: 'billing.results' });
    let n = 0;
    const handler = async (trx, m) => {
      n++;
      await trx.exec(`INSERT INTO ${s.invoices} VALUES ($1, $2)`, [m.event.data.orderId, m.event.data.total]);
      await trx.setResult({ invoice: `F-${n}`, order: m.event.data.orderId });
    };
    const ev = { id: 'e-1', data: { orderId: 'o-1', total: 100 } };
    const r1 = await c.process(ev, handler);
    assert.equal(r1.outcome, 'applied');
    assert.deepEqual(r1.result, { invoice: 'F-1', order: 'o-1' });
    assert.equal(r1.resultType, 'application/json');
    const r2 = await c.process(ev, handler);
    assert.equal(r2.outcome, 'duplicate');
    assert.equal(r2.firstOutcome, 'applied');
    assert.deepEqual(r2.result, { invoice: 'F-1', order: 'o-1' });
    assert.equal(n, 1);
    // the same key, another payload: a conflict, no answer
    const r3 = await c.process({ id: 'e-1', data: { orderId: 'o-1', total: 999 } }, handler);
    assert.equal(r3.outcome, 'conflict');
    assert.equal(r3.result, null);
    // inside one batch: the repeat gets the primary's answer
    const ev2 = { id: 'e-2', data: { orderId: 'o-2', total: 5 } };
    const rs = await c.processBatch([ev2, ev2], handler);
    assert.deepEqual(rs.map((r) => r.outcome), ['applied', 'duplicate']);
    assert.deepEqual(rs[1].result, { invoice: 'F-2', order: 'o-2' });
    assert.equal(rs[1].firstOutcome, 'applied');
    // bytes and text keep their type; no result is null
    const bin = Buffer.from([0, 255, 1, 128]);
    await c.process({ id: 'b', data: {} }, async (trx) => { await trx.setResult(bin); });
    const rb = await c.process({ id: 'b', data: {} }, handler);
    assert.ok(Buffer.isBuffer(rb.result));
    assert.ok(rb.result.equals(bin));
    assert.equal(rb.resultType, 'application/octet-stream');
    await c.process({ id: 't', data: {} }, async (trx) => { await trx.setResult('ok: 42'); });
    assert.equal((await c.process({ id: 't', data: {} }, handler)).result, 'ok: 42');
    await c.process({ id: 'none', data: {} }, async () => {});
    const rn = await c.process({ id: 'none', data: {} }, handler);
    assert.equal(rn.outcome, 'duplicate');
    assert.equal(rn.result, null);
    assert.equal(rn.resultBytes, null);
    assert.equal(await count(s.inbox, s.invoices), 2);
    await s.inbox.close();
    // another connection (a restart): the database has the answer
    const again = await Inbox.open(s.url, { tablePrefix: s.prefix });
    const c2 = again.consumer({ name: 'billing.results' });
    const r4 = await c2.process(ev, async () => { throw new Error('must not run'); });
    assert.equal(r4.outcome, 'duplicate');
    assert.deepEqual(r4.result, { invoice: 'F-1', order: 'o-1' });
    await again.close();
  });

  test(`${store.kind}: a result over the limit is the handler's error`, async () => {
    const s = await openStore(store);
    const c = s.inbox.consumer({ name: 'billing.results' });
    let err;
    const r = await c.process({ id: 'big', data: {} }, async (trx) => {
      await trx.setResult('small');
      try { await trx.setResult(Buffer.alloc(64 * 1024 + 1)); } catch (e) { err = e; }
    });
    assert.equal(err && err.code, 'INBOX_ERR_TOO_LARGE');
    assert.equal(r.outcome, 'applied');
    assert.equal(r.result, 'small'); // the earlier one stays, whole
    let bad;
    await c.process({ id: 'u', data: {} }, async (trx) => {
      try { await trx.setResult(undefined); } catch (e) { bad = e; }
    });
    assert.equal(bad && bad.code, 'INBOX_ERR_INVALID');
    await s.inbox.close();
  });

  test(`${store.kind}: maxResultBytes bounds the stored result, never a cut`, async () => {
    const s = await openStore(store);
    for (const v of [0, -1, 1.5, '64k', NaN]) {
      assert.throws(() => s.inbox.consumer({ name: 'x', maxResultBytes: v }), { code: 'INBOX_ERR_INVALID' });
    }
    // more than the library allows (256 MiB): the open is refused
    await assert.rejects(s.inbox.consumer({ name: 'huge', maxResultBytes: 256 * 1024 * 1024 + 1 }).ready,
      { code: 'INBOX_ERR_INVALID' });
    const c = s.inbox.consumer({ name: 'billing.small', maxResultBytes: 16 });
    const errs = [];
    const r = await c.process({ id: 's-1', data: {} }, async (trx) => {
      await trx.setResult(Buffer.alloc(16, 0x61)); // exactly the limit
      try { await trx.setResult(Buffer.alloc(17, 0x62)); } catch (e) { errs.push(e); }
      try { await trx.setResult({ invoice: 'F-0000000001' }); } catch (e) { errs.push(e); }
    });
    assert.deepEqual(errs.map((e) => e.code), ['INBOX_ERR_TOO_LARGE', 'INBOX_ERR_TOO_LARGE']);
    assert.equal(r.outcome, 'applied');
    assert.ok(r.result.equals(Buffer.alloc(16, 0x61)), 'the result within the limit, whole');
    const dup = await c.process({ id: 's-1', data: {} }, async () => { throw new Error('must not run'); });
    assert.equal(dup.outcome, 'duplicate');
    assert.equal(dup.resultBytes.length, 16);
    // above the default 64 KiB when the consumer allows it
    const big = s.inbox.consumer({ name: 'billing.big', maxResultBytes: 128 * 1024 });
    const rb = await big.process({ id: 'b-1', data: {} }, async (trx) => { await trx.setResult(Buffer.alloc(100 * 1024, 7)); });
    assert.equal(rb.outcome, 'applied');
    assert.equal(rb.resultBytes.length, 100 * 1024);
    await s.inbox.close();
  });

  test(`${store.kind}: a lease on a done key carries the stored result`, async () => {
    const s = await openStore(store);
    const c = s.inbox.consumer({ name: 'billing.long' });
    const ev = { id: 'l-1', data: { orderId: 'o-1', total: 100 } };
    const a = await c.acquire(ev);
    assert.equal(a.outcome, 'acquired');
    assert.equal(a.key, 'l-1');
    assert.equal(a.result, null);
    assert.equal(a.lease.key, 'l-1');
    assert.equal(await a.lease.complete(async (trx, m) => {
      await trx.exec(`INSERT INTO ${s.invoices} VALUES ($1, $2)`, [m.event.data.orderId, m.event.data.total]);
      await trx.setResult({ invoice: 'F-9' });
    }), 'applied');
    const d = await c.acquire(ev);
    assert.equal(d.outcome, 'duplicate');
    assert.equal(d.lease, null);
    assert.deepEqual(d.result, { invoice: 'F-9' });
    assert.equal(d.resultType, 'application/json');
    assert.equal(d.firstOutcome, 'applied');
    // a key done without a result, through process()
    await c.process({ id: 'l-2', data: {} }, async () => {});
    const n = await c.acquire({ id: 'l-2', data: {} });
    assert.equal(n.outcome, 'duplicate');
    assert.equal(n.result, null);
    assert.equal(n.firstOutcome, 'applied');
    // the same key, another payload: a conflict, no answer
    const x = await c.acquire({ id: 'l-1', data: { orderId: 'o-1', total: 999 } });
    assert.equal(x.outcome, 'conflict');
    assert.equal(x.result, null);
    assert.match(x.reason, /fingerprint conflict/);
    assert.ok(x.deadLetterId > 0);
    assert.equal(await count(s.inbox, s.invoices), 1);
    await s.inbox.close();
  });
}
