'use strict';
// Shared by the test files: which stores to run against, fresh names.
const os = require('os');
const path = require('path');
const fs = require('fs');

// The package under test: the installed copy (tests/integration/node
// installs the packed tarball and points LIBINBOX_MODULE at it), or this
// source tree.
const modulePath = process.env.LIBINBOX_MODULE || path.join(__dirname, '..');
const lib = require(modulePath);

// Every store the suite has. PostgreSQL is the suite's server
// (tests/run-suite.sh exports INBOX_TEST_PG_URL); a run without it fails
// unless INBOX_NODE_STORES=sqlite says so explicitly.
function stores() {
  const want = (process.env.INBOX_NODE_STORES || 'sqlite,postgresql').split(',');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'inbox-node-'));
  const out = [];
  if (want.includes('sqlite')) out.push({ kind: 'sqlite', url: () => `sqlite:${tmp}/t${seq++}.db` });
  if (want.includes('postgresql')) {
    const pg = process.env.INBOX_TEST_PG_URL;
    if (!pg) throw new Error('INBOX_TEST_PG_URL is not set: run through tests/run-suite.sh (or INBOX_NODE_STORES=sqlite)');
    out.push({ kind: 'postgresql', url: () => pg });
  }
  return out;
}
let seq = 0;

// Table prefix unique to this process and call: runs never share rows.
function prefix() {
  return `n${process.pid}_${seq++}_`;
}

async function openStore(store, opts = {}) {
  const p = prefix();
  const url = store.url();
  const inbox = await lib.Inbox.open(url, { tablePrefix: p, ...opts });
  const invoices = `${p}invoices`;
  await inbox.exec(`CREATE TABLE ${invoices} (order_id text PRIMARY KEY, total_cents bigint NOT NULL)`);
  return { inbox, url, prefix: p, invoices };
}

async function count(inbox, table) {
  const r = await inbox.query(`SELECT count(*) AS n FROM ${table}`);
  return Number(r.rows[0].n);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

module.exports = { lib, modulePath, stores, prefix, openStore, count, sleep };
