// index.d.ts type-checked (tests/integration/node/types.sh runs
// tsc --noEmit --strict over this file against the installed package).
// Every call below must type-check; every line after a @ts-expect-error
// must NOT (tsc fails on an unused @ts-expect-error), so a type made too
// loose fails this file as surely as one made wrong.
import {
  Inbox, Consumer, Dispatcher, DispatcherStats, Transaction, Message, Result, Outcome, QueryResult, Row,
  RetryableError, PermanentError, HandlerTimeoutError, InboxError, Stats, DeadLetter, LeaseResult, OutboxEvent, OutboxEvents,
  delivery, outboxKey, fingerprint, redactUrl, version,
} from 'libinbox';

interface OrderCreated { id: string; data: { orderId: string; totalCents: number } }

async function billing(event: OrderCreated, ack: () => void): Promise<void> {
  const ac = new AbortController();
  const inbox: Inbox = await Inbox.open('postgresql://app@db/billing', { tablePrefix: 'b_', signal: ac.signal });
  const consumer: Consumer = inbox.consumer({
    name: 'billing.order-created.v1',
    key: 'create-invoice:{/data/orderId}',
    fingerprint: '/data',
    handlerTimeout: 5000,
    maxAttempts: 5,
    replay: 'dead-letter',
    maxResultBytes: 1024,
  });
  const timeout: number = consumer.handlerTimeout;
  const r: Result = await consumer.process<OrderCreated>(event, async (trx: Transaction<OrderCreated>, msg: Message<OrderCreated>) => {
    const total: number = msg.event.data.totalCents;
    await trx.query('INSERT INTO invoices (order_id, total_cents) VALUES ($1, $2)', [msg.event.data.orderId, total]);
    const q: QueryResult = await trx.query('SELECT total_cents FROM invoices WHERE order_id = $1', [msg.event.data.orderId]);
    const row: Row = q.rows[0];
    const cents: string | null = row.total_cents;
    const names: string[] = q.fields.map((f) => f.name);
    const a = await trx.query('SELECT 1', [], { rowMode: 'array' });
    const first: string | null = a.rows[0][0];
    const typed = await trx.query<{ n: string }>('SELECT count(*) AS n FROM invoices');
    const n: string = typed.rows[0].n;
    const { rowCount } = await trx.exec('UPDATE invoices SET total_cents = $1', [1], { defer: true });
    const rc: number | null = rowCount;
    const written: boolean = await trx.upsertVersioned({ table: 'p', keyColumn: 'id', key: 'o-1', version: 2, values: { status: 'x' } });
    const { idempotencyKey, added } = await trx.outbox('charge', { url: 'https://pay.example/c', body: { a: 1 }, idempotent: true });
    await trx.setResult({ invoice: 'F-1' });
    await trx.setResult(Buffer.from('x'), 'application/octet-stream');
    void [cents, names, first, n, rc, written, idempotencyKey as string, added as boolean];
    if (total < 0) throw new PermanentError('negative total');
    if (total === 0) throw new RetryableError('later');
  });
  const o: Outcome = r.outcome;
  const stored: unknown = r.result;
  const bytes: Buffer | null = r.resultBytes;
  const firstOutcome: Outcome | null = r.firstOutcome;
  const resultType: string | null = r.resultType;
  void [stored, bytes, firstOutcome, resultType];
  if (r.ackable) ack();
  const rs: Result[] = await consumer.processBatch([event, delivery(Buffer.from('{}'), { id: 'x', timestamp: new Date() })],
    async (trx, msg) => { await trx.exec('SELECT $1', [msg.index]); });
  const st: Stats = await consumer.stats();
  const dls: DeadLetter[] = await inbox.deadLetters({ consumer: consumer.name, pendingOnly: true });
  if (dls.length) await consumer.replay(dls[0].id, async () => {});
  const { outcome, lease } = await consumer.acquire(event);
  if (outcome === 'acquired' && lease) await lease.complete(async () => {});
  const lr: LeaseResult = await consumer.acquire(event);
  const leased: unknown = lr.outcome === 'duplicate' ? lr.result : null;
  const leasedFirst: Outcome | null = lr.firstOutcome;
  void [leased, leasedFirst];
  const e = new HandlerTimeoutError(5000);
  const code: 'INBOX_HANDLER_TIMEOUT' = e.code;
  const asRetryable: RetryableError = e;
  try { await inbox.exec('SELECT 1'); } catch (err) { const ie = err as InboxError; const c: string = ie.code; void c; }
  const key: string = outboxKey('c', 'k', 'step');
  const fp: string = fingerprint({ a: 1 }, '/a');
  const red: string = redactUrl('postgresql://a:b@h/d');
  const v: string = version;
  const ac2 = new AbortController();
  const d: Dispatcher = inbox.dispatcher({ consumer: consumer.name, pollMs: 100, concurrency: 8, signal: ac2.signal });
  const evs: OutboxEvents = d.events({ signal: ac2.signal, highWaterMark: 100 });
  const running: Promise<DispatcherStats> = d.start();
  for await (const ev of evs) {
    const e: OutboxEvent = ev;
    const st2: string = e.state;
    const http: number | null = e.status;
    void [st2, http, evs.dropped];
    break;
  }
  const live: boolean = d.stats().running;
  const fin: DispatcherStats = await d.stop();
  const done: number = fin.done;
  await running;
  await d.close();
  void [timeout, o, rs, st, code, asRetryable, key, fp, red, v, live, done];
  await inbox.close();

  // What must not type-check:
  // @ts-expect-error a consumer needs a name
  inbox.consumer({ key: '{id}' });
  // @ts-expect-error handlerTimeout is a number of ms
  inbox.consumer({ name: 'x', handlerTimeout: '5s' });
  // @ts-expect-error an outbox event's state is one of the row states
  const badState: OutboxEvent['state'] = 'sent';
  // @ts-expect-error maxResultBytes is a number of bytes
  inbox.consumer({ name: 'x', maxResultBytes: '64k' });
  // @ts-expect-error no such outcome
  const bad: Outcome = 'applyed';
  // @ts-expect-error rowMode is 'object' or 'array'
  await inbox.query('SELECT 1', [], { rowMode: 'rows' });
  const arr = await inbox.query('SELECT 1', [], { rowMode: 'array' });
  // @ts-expect-error array rows are indexed, not keyed
  const k: string | null = arr.rows[0].total;
  // @ts-expect-error a result's attempts is a number
  const att: string = r.attempts;
  // @ts-expect-error the handler gets a Transaction, which has no commit()
  await consumer.process(event, async (trx) => { await trx.commit(); });
  // @ts-expect-error the dispatcher's counters are numbers
  const late: string = d.stats().done;
  void [bad, badState, k, att, late];
}

void billing;
