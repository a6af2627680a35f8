'use strict';
// The README's first example (the seed's billing consumer), run as
// written: its code block is read from README.md here, so the README
// cannot drift from what works. The only change made to it is the URL
// (the README's 'postgresql://app@db/billing' becomes a fresh database
// on the suite's PostgreSQL, or a fresh SQLite file); `event` and `ack`
// are what the example expects from its surroundings.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { lib, stores } = require('./helpers');

const README = path.join(__dirname, '..', 'README.md');
const README_URL = "'postgresql://app@db/billing'";
const AsyncFunction = (async () => {}).constructor;

function firstExample() {
  const md = fs.readFileSync(README, 'utf8');
  const m = /```js\n([\s\S]*?)```/.exec(md);
  assert.ok(m, 'README.md has a ```js code block');
  const code = m[1];
  for (const s of [`Inbox.open(${README_URL})`, "require('libinbox')",
    'inbox.consumer({', 'consumer.process(event, async (trx) =>', 'trx.query(']) {
    assert.ok(code.includes(s), `the README's first example has ${s}`);
  }
  return code;
}

// Runs the block as the body of an async function (it uses top-level
// await), with require('libinbox') giving the package under test.
async function runExample(code, url, event) {
  const body = code.split(README_URL).join(JSON.stringify(url)) +
    '\n;return { r, inbox, consumer };';
  let acks = 0;
  const fn = new AsyncFunction('require', 'event', 'ack', body);
  const req = (m) => (m === 'libinbox' ? lib : require(m));
  const out = await fn(req, event, () => { acks++; });
  await out.inbox.close();
  return { r: out.r, acks };
}

// A database (PostgreSQL) or file (SQLite) of its own: the example's
// table names are the README's, unprefixed.
async function freshStore(store) {
  if (store.kind === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inbox-readme-'));
    return { url: `sqlite:${dir}/billing.db`, drop: async () => fs.rmSync(dir, { recursive: true, force: true }) };
  }
  const base = store.url();
  const db = `readme_${process.pid}_${Date.now()}`;
  const admin = await lib.Inbox.open(base, { autoMigrate: false });
  await admin.exec(`CREATE DATABASE "${db}"`);
  const u = new URL(base);
  u.pathname = `/${db}`;
  return {
    url: u.toString(),
    drop: async () => {
      await admin.exec(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`);
      await admin.close();
    },
  };
}

for (const store of stores()) {
  test(`${store.kind}: the README's first example, as written`, async () => {
    const code = firstExample();
    const s = await freshStore(store);
    try {
      const setup = await lib.Inbox.open(s.url);
      await setup.exec('CREATE TABLE invoices (order_id text PRIMARY KEY, total_cents bigint NOT NULL)');
      const rows = async () => (await setup.query('SELECT order_id, total_cents FROM invoices ORDER BY order_id')).rows
        .map((r) => [r.order_id, r.total_cents]);

      const event = { id: 'evt-1', type: 'order.created', data: { orderId: 'o-1', totalCents: 4200 } };
      const a = await runExample(code, s.url, event);
      assert.equal(a.r.outcome, 'applied');
      assert.equal(a.r.key, 'create-invoice:o-1');
      assert.equal(a.acks, 1, 'acked after the commit');
      assert.deepEqual(await rows(), [['o-1', '4200']]);

      // redelivered with a new message id (a producer retry): the
      // business key decides, the invoice is not created twice
      const b = await runExample(code, s.url, { ...event, id: 'evt-2' });
      assert.equal(b.r.outcome, 'duplicate');
      assert.equal(b.acks, 1, 'a duplicate is acked');
      assert.deepEqual(await rows(), [['o-1', '4200']]);

      // same key, other data: a conflict, dead-lettered, nothing written
      const c = await runExample(code, s.url, { ...event, id: 'evt-3', data: { orderId: 'o-1', totalCents: 9900 } });
      assert.equal(c.r.outcome, 'conflict');
      assert.ok(c.r.deadLetterId > 0, 'the conflict is a dead letter');
      assert.deepEqual(await rows(), [['o-1', '4200']]);

      const d = await runExample(code, s.url, { id: 'evt-4', data: { orderId: 'o-2', totalCents: 100 } });
      assert.equal(d.r.outcome, 'applied');
      assert.deepEqual(await rows(), [['o-1', '4200'], ['o-2', '100']]);
      const dls = await setup.deadLetters({ consumer: 'billing.order-created.v1' });
      assert.equal(dls.length, 1);
      assert.equal(dls[0].key, 'create-invoice:o-1');
      await setup.close();
    } finally {
      await s.drop();
    }
  });
}
