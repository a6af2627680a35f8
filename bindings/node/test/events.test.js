'use strict';
// dispatcher.events(): the rows' outcomes of a running outbox dispatcher
// as an async iterator (for await), ending with the run, on break, or on
// its signal (AbortError); a reader that falls behind drops events and
// says how many, and never holds the dispatcher back.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { lib, stores, openStore, sleep } = require('./helpers');

async function waitFor(what, cond, ms = 15000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

for (const store of stores()) {
  test(`${store.kind}: dispatcher.events() yields each row's outcome until the run ends`, { timeout: 90000 }, async (t) => {
    const s = await openStore(store);
    const seen = [];
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (b) => { body += b; });
      req.on('end', () => {
        seen.push(body);
        res.statusCode = JSON.parse(body).order === 'o-bad' ? 422 : 200;
        res.end('{}');
      });
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    t.after(() => { server.closeAllConnections(); server.close(); });
    // a token in the URL never reaches the events
    const url = `http://app:s3cret@127.0.0.1:${server.address().port}/charges`;
    const c = s.inbox.consumer({ name: 'pay', key: '{/order}' });
    const charge = async (trx, msg) => {
      await trx.outbox('charge', { url, body: { order: msg.event.order }, idempotent: true });
    };
    for (const o of ['o-1', 'o-2', 'o-bad']) {
      assert.equal((await c.process({ id: o, order: o }, charge)).outcome, 'applied');
    }
    const d = s.inbox.dispatcher({ consumer: 'pay', pollMs: 50, backoffMs: 1, maxAttempts: 3 });
    assert.throws(() => d.events({ highWaterMark: 0 }), { code: 'INBOX_ERR_INVALID' });
    // made before start(): it follows the next run
    const all = d.events();
    const slow = d.events({ highWaterMark: 1 }); // never read until the end
    const run = d.start();
    const got = [];
    let stopped = false;
    for await (const ev of all) {
      got.push(ev);
      if (got.length === 3 && !stopped) {
        stopped = true;
        d.stop(); // the loop ends once the run has
      }
    }
    const fin = await run;
    assert.equal(fin.done, 2);
    assert.equal(got.length, 3, 'three rows, one event each, then the end of the run');
    const byKey = Object.fromEntries(got.map((e) => [e.key, e]));
    for (const o of ['o-1', 'o-2']) {
      const e = byKey[o];
      assert.equal(e.state, 'done');
      assert.equal(e.outcome, 'done');
      assert.equal(e.status, 200);
      assert.equal(e.consumer, 'pay');
      assert.equal(e.step, 'charge');
      assert.equal(e.attempts, 1);
      assert.equal(e.idempotencyKey, lib.outboxKey('pay', o, 'charge'));
      assert.ok(e.id > 0);
    }
    assert.equal(byKey['o-bad'].state, 'dead');
    assert.equal(byKey['o-bad'].outcome, 'permanent');
    assert.equal(byKey['o-bad'].status, 422);
    for (const e of got) {
      assert.ok(!e.url.includes('s3cret'), `the URL is redacted: ${e.url}`);
      assert.match(e.url, /127\.0\.0\.1/);
    }
    // the reader that fell behind kept one, dropped two, and ended too
    const first = await slow.next();
    assert.equal(first.done, false);
    assert.equal(slow.dropped, 2);
    assert.deepEqual(await slow.next(), { value: undefined, done: true });
    // its signal ends a reader (here one waiting for the next run) with
    // an AbortError
    const ac = new AbortController();
    const aborted = d.events({ signal: ac.signal });
    const waiting = aborted.next();
    ac.abort();
    await assert.rejects(waiting, { name: 'AbortError', code: 'ABORT_ERR' });
    assert.deepEqual(await aborted.next(), { value: undefined, done: true });
    await assert.rejects(d.events({ signal: ac.signal }).next(), { name: 'AbortError' });
    // break leaves the loop; the next run's rows are seen by a new reader
    await c.process({ id: 'o-3', order: 'o-3' }, charge);
    await c.process({ id: 'o-4', order: 'o-4' }, charge);
    const run2 = d.start();
    let n = 0;
    for await (const ev of d.events()) {
      assert.equal(ev.state, 'done');
      if (++n === 1) break;
    }
    await waitFor('the second run\'s rows', () => d.stats().done >= 2);
    // close() ends a reader waiting on a stopped dispatcher's next run
    await d.stop();
    await run2;
    const idle = d.events();
    const pending = idle.next();
    await d.close();
    assert.deepEqual(await pending, { value: undefined, done: true });
    assert.equal(seen.length, 5);
    await s.inbox.close();
  });
}
