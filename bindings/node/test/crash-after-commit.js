'use strict';
// Scenario 3's victim: process one message, then die by SIGKILL after
// the commit and before any ack could be sent.
const [url, prefix, invoices, event] = process.argv.slice(2);
const lib = require(process.env.LIBINBOX_MODULE);
(async () => {
  const inbox = await lib.Inbox.open(url, { tablePrefix: prefix });
  const c = inbox.consumer({ name: 'billing.order-created.v1', key: 'create-invoice:{/data/orderId}', fingerprint: '/data' });
  const r = await c.process(JSON.parse(event), async (trx, msg) => {
    await trx.exec(`INSERT INTO ${invoices} (order_id, total_cents) VALUES ($1, $2)`,
      [msg.event.data.orderId, msg.event.data.totalCents]);
  });
  process.stdout.write(`committed ${r.outcome}\n`, () => process.kill(process.pid, 'SIGKILL'));
})();
