'use strict';
// libinbox for Node.js: the JS side of the Node-API addon (src/addon.c).
//
// Every Inbox and every consumer owns a native handle with its own worker
// thread and its own database connection; calls on one handle run one
// after the other on its thread (in the order they were made), calls on
// different handles run in parallel. Handlers run on the main thread;
// their trx.* requests are executed by the worker that holds the
// transaction. Outcomes are values; errors are Errors with err.code =
// 'INBOX_ERR_...'.
const native = require('../build/inbox.node');

const OP = {
  OPEN: 1, CLOSE: 2, EXEC: 3, QUERY: 4, PROCESS: 5, BATCH: 6, STATS: 7,
  ADMIN_STATS: 8, DLQ_LIST: 9, DLQ_GET: 10, DLQ_REPLAY: 11, DLQ_DROP: 12,
  INSPECT: 13, PURGE: 14, SCHEMA_VERSION: 15, LEASE_ACQUIRE: 16,
  LEASE_EXTEND: 17, LEASE_COMPLETE: 18, LEASE_FAIL: 19, LEASE_FREE: 20,
  DISPATCH_ONCE: 21, OUTBOX_COUNTS: 22, DISPATCH_RUN: 23,
  T_EXEC: 100, T_QUERY: 101, T_UPSERT: 102, T_OUTBOX: 103, T_DONE: 104,
  T_RESULT: 105,
};

// A stored result as the addon hands it (resultBytes, resultType) into
// r.result: JSON parsed back for application/json (what setResult(value)
// stores for a value), a string for text/*, the bytes (a Buffer) else;
// null when none was stored. r.resultBytes keeps the bytes themselves.
function decodeResult(r) {
  if (!r || typeof r !== 'object') return r;
  const b = r.resultBytes;
  let v = null;
  if (b) {
    const t = (r.resultType || '').toLowerCase();
    if (/^application\/([a-z0-9.+-]*\+)?json\b/.test(t)) {
      try { v = JSON.parse(b.toString('utf8')); } catch (e) { v = b; }
    } else if (t.startsWith('text/')) {
      v = b.toString('utf8');
    } else {
      v = b;
    }
  }
  r.result = v;
  return r;
}
const VERDICT = { OK: 0, RETRY: 1, REJECT: 2 };
const REPLAY = { 'dead-letter': 0, drop: 1, apply: 2 };

function inboxError(code, message) {
  const e = new Error(message);
  e.code = code;
  return e;
}

/** Thrown by a handler: transient failure, roll back and redeliver later. */
class RetryableError extends Error {
  constructor(message) { super(message); this.name = 'RetryableError'; }
}
/** Thrown by a handler: permanent failure, roll back and dead-letter. */
class PermanentError extends Error {
  constructor(message) { super(message); this.name = 'PermanentError'; }
}

/** The verdict given for a handler that did not settle within the
 * consumer's handlerTimeout: its transaction was rolled back (RETRY). */
class HandlerTimeoutError extends RetryableError {
  constructor(ms) {
    super(`the handler did not settle within ${ms} ms (handlerTimeout): its transaction was rolled back`);
    this.name = 'HandlerTimeoutError';
    this.code = 'INBOX_HANDLER_TIMEOUT';
  }
}

// setTimeout's limit; a larger handlerTimeout (Infinity) sets no timer
const MAX_TIMER_MS = 2147483647;
const DEFAULT_HANDLER_TIMEOUT_MS = 30000;

/** A message as it came from a broker, with what the dead letters keep. */
class Delivery {
  constructor(payload, meta = {}) {
    this.payload = payload;
    this.id = meta.id == null ? null : String(meta.id);
    this.headers = meta.headers == null ? null : meta.headers;
    this.position = meta.position == null ? null : String(meta.position);
    this.timestamp = meta.timestamp == null ? 0 : meta.timestamp;
    this.deliveryCount = meta.deliveryCount == null ? 0 : meta.deliveryCount;
  }
}

function payloadOf(v) {
  if (typeof v === 'string' || Buffer.isBuffer(v)) return v;
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  return JSON.stringify(v);
}

// [id, payload, headers, position, timestampMs, deliveryCount]
function toDelivery(ev) {
  if (ev instanceof Delivery) {
    const h = ev.headers;
    const ts = ev.timestamp instanceof Date ? ev.timestamp.getTime() : Number(ev.timestamp) || 0;
    return [ev.id, payloadOf(ev.payload),
      h == null ? null : (typeof h === 'string' ? h : JSON.stringify(h)),
      ev.position, ts, Number(ev.deliveryCount) || 0];
  }
  if (ev === undefined) throw inboxError('INBOX_ERR_INVALID', 'no message given');
  return [null, payloadOf(ev), null, null, 0, 0];
}

// SQL parameters travel as text ($1..$n), null as SQL NULL.
function param(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (v instanceof Date) return v.toISOString();
  if (Buffer.isBuffer(v)) return v.toString('utf8');
  return JSON.stringify(v);
}
function params(list) {
  if (list == null) return null;
  if (!Array.isArray(list)) throw inboxError('INBOX_ERR_INVALID', 'params must be an array');
  return list.map(param);
}

// query options: rows as objects (column name -> text), or with
// { rowMode: 'array' } as arrays of the column texts (as in pg)
function rowMode(opts) {
  const m = opts && opts.rowMode;
  if (m != null && m !== 'array' && m !== 'object') {
    throw inboxError('INBOX_ERR_INVALID', `rowMode: ${m}? ('object' or 'array')`);
  }
  return [m === 'array' ? 1 : 0];
}

// The native handle calls this on the main thread.
function dispatch(obj, kind, id, err, value) {
  obj._event(kind, id, err, value);
}

class Handle extends native.Handle {
  constructor() {
    super(dispatch);
    this._seq = 0;
    this._pending = new Map();
    this._jobs = new Map(); // job id -> { handler, events }
    this._inHandler = 0;
    this._closed = false;
    this._handlerTimeout = DEFAULT_HANDLER_TIMEOUT_MS;
    this._running = null; // the handler running: { deadline, settle }
    this._timer = null; // the watchdog of its handlerTimeout
  }

  _next() {
    do { this._seq = (this._seq + 1) >>> 0; } while (this._seq === 0 || this._pending.has(this._seq));
    return this._seq;
  }

  // Queue op on the worker; resolves with its value.
  _call(op, s, p, i, f, d, handler, events, open) {
    if (this._closed && op < OP.T_EXEC) {
      return Promise.reject(inboxError('INBOX_ERR_STATE', 'closed'));
    }
    if (this._inHandler > 0 && op < OP.T_EXEC) {
      return Promise.reject(inboxError('INBOX_ERR_STATE',
        'a call on this consumer from inside its own handler would wait for itself; use trx'));
    }
    return new Promise((resolve, reject) => {
      const id = this._next();
      if (open) {
        open.add(id);
        const res = resolve, rej = reject;
        resolve = (v) => { open.delete(id); res(v); };
        reject = (e) => { open.delete(id); rej(e); };
      }
      this._pending.set(id, { resolve, reject });
      if (handler) this._jobs.set(id, { handler, events });
      try {
        this.call(op, id, s || null, p || null, i || null, f || null, d || null, !!handler);
      } catch (e) {
        this._pending.delete(id);
        this._jobs.delete(id);
        reject(e);
      }
    });
  }

  _event(kind, id, err, value) {
    if (kind === 0) {
      const p = this._pending.get(id);
      if (!p) return;
      this._pending.delete(id);
      const job = this._jobs.get(id);
      if (job) this._endJob(job);
      if (this._jobs.delete(id) && this._timer && !this._running) {
        // its handlers are done: the watchdog (which holds this handle)
        // goes, so an idle handle can be collected
        clearTimeout(this._timer);
        this._timer = null;
      }
      if (err) p.reject(err); else p.resolve(value);
    } else if (kind === 2) {
      this._outboxEvent(value); // a running dispatcher's row outcome
    } else if (kind === 3) {
      this._runPass(id, err, value); // a pass's messages, its tag
    } else {
      this._runHandler(id, err); // the message rides in the third slot
    }
  }

  _outboxEvent() {}

  // A batch's pass: the messages whose handlers the library runs next,
  // posted at once. They run one after another (each awaited before the
  // next), their requests and verdicts tagged [pass, place]. A newer
  // pass of the same batch (it was rolled back and runs again) replaces
  // what is left of an older one, once its running handler settles.
  _runPass(jobId, msgs, pass) {
    const job = this._jobs.get(jobId) || { handler: null, events: null };
    job.queue = msgs;
    job.qi = 0;
    job.pass = pass;
    this._pump(job);
  }

  _pump(job) {
    if (job.pumping) return; // the loop below goes on
    job.pumping = true;
    while (!job.busy && job.queue && job.qi < job.queue.length) {
      const k = job.qi++;
      job.busy = true;
      this._runHandler(job, job.queue[k], [0, 0, 0, 0, 0, 0, job.pass, k], () => {
        job.busy = false;
        job.trx = null;
        this._pump(job);
      });
    }
    job.pumping = false;
  }

  // The batch is over: a handler of a pass that was rolled back and is
  // still running gets its transaction closed and its requests refused.
  _endJob(job) {
    job.queue = null;
    const trx = job.trx;
    if (!trx || !trx._open) return;
    trx._done = true;
    for (const rid of trx._open) {
      const p = this._pending.get(rid);
      if (!p) continue;
      this._pending.delete(rid);
      p.reject(inboxError('INBOX_ERR_STATE', 'the handler\'s transaction is over (its batch was rolled back)'));
    }
    trx._open.clear();
  }

  // One handler call: its verdict goes to the worker as soon as it
  // settles (a handler that returns without a promise: at once, in the
  // same turn). No per-call timer: one watchdog timer per handle
  // (_watchdog) checks the running handler's deadline.
  _runHandler(jobOrId, m, tag, done) {
    const job = typeof jobOrId === 'object' ? jobOrId : this._jobs.get(jobOrId);
    const trx = new Transaction(this, m, job && job.events, tag);
    if (tag) job.trx = trx;
    this._inHandler++;
    const ms = this._handlerTimeout;
    const run = { deadline: 0, settle: null };
    let settled = false;
    const settle = (failed, e) => {
      if (settled) return; // settling late (after its timeout)
      settled = true;
      if (this._running === run) this._running = null;
      this._inHandler--;
      trx._done = true;
      let verdict = VERDICT.OK;
      let reason = null;
      if (failed) {
        verdict = e instanceof PermanentError || (e && e.permanent === true) ? VERDICT.REJECT : VERDICT.RETRY;
        reason = e && e.message ? String(e.message) : String(e);
      }
      this.call(OP.T_DONE, 0, [reason], null, [verdict, trx._stale ? 1 : 0], tag, null, false);
      if (done) done();
    };
    run.settle = settle;
    let r;
    try {
      if (!job || !job.handler) throw new RetryableError('no handler');
      r = job.handler(trx, trx.message);
    } catch (e) {
      settle(true, e);
      return;
    }
    if (r === null || (typeof r !== 'object' && typeof r !== 'function') || typeof r.then !== 'function') {
      settle(false);
      return;
    }
    // a handler that never settles must not hold the transaction (and
    // its locks): after handlerTimeout it is rolled back as a RETRY
    if (ms <= MAX_TIMER_MS) {
      run.deadline = Date.now() + ms;
      this._running = run;
      if (!this._timer) this._armWatchdog(ms);
    }
    Promise.resolve(r).then(() => settle(false), (e) => settle(true, e));
  }

  _armWatchdog(ms) {
    this._timer = setTimeout(() => this._watchdog(), Math.max(1, Math.min(ms, MAX_TIMER_MS)));
    // a running handler keeps the process alive through its pending job
    this._timer.unref();
  }

  _watchdog() {
    this._timer = null;
    const run = this._running;
    if (!run) return;
    const left = run.deadline - Date.now();
    if (left <= 0) run.settle(true, new HandlerTimeoutError(this._handlerTimeout));
    else this._armWatchdog(left);
  }

  close() {
    if (this._closed) return this._closing || Promise.resolve();
    const p = this._call(OP.CLOSE);
    this._closed = true;
    this._closing = p;
    return p;
  }
}

/** The transaction a handler runs in (valid until the handler settles). */
class Transaction {
  constructor(h, m, events, tag) {
    this._h = h;
    this._tag = tag || null; // [.., pass, place] of a batch's pass
    this._open = tag ? new Set() : null; // its awaited requests' ids
    this._done = false;
    this._stale = false;
    const ev = events ? events[m.index] : undefined;
    let parsed;
    const msg = {
      key: m.key, id: m.id, fingerprint: m.fingerprint, attempt: m.attempt,
      index: m.index, payload: m.payload,
      get event() {
        if (parsed === undefined) {
          if (ev !== undefined && !(ev instanceof Delivery) && typeof ev !== 'string' && !Buffer.isBuffer(ev)) parsed = ev;
          else parsed = JSON.parse(m.payload);
        }
        return parsed;
      },
    };
    this.message = msg;
  }

  _req(op, s, p, i) {
    if (this._done) {
      return Promise.reject(inboxError('INBOX_ERR_STATE', 'the handler has returned: its transaction is over'));
    }
    return this._h._call(op, s, p, i, this._tag, null, null, null, this._open);
  }

  /** Run a query on the transaction's connection: { rows, rowCount, fields }
   * (rows as objects keyed by column name; { rowMode: 'array' }: arrays). */
  query(sql, values, opts) {
    try {
      return this._req(OP.T_QUERY, [sql], params(values), rowMode(opts));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Run a statement; { rowCount } (rows changed). With { defer: true }
   * (rowCount null) it resolves at once, without waiting for the worker;
   * inside processBatch on PostgreSQL the statement is sent with the
   * batch's COMMIT (one round trip for all). A statement that fails then
   * makes the message RETRY (or, on PostgreSQL, reruns the batch with
   * every statement executed when issued): the handler never sees its
   * error. */
  exec(sql, values, opts) {
    if (!(opts && opts.defer)) return this._req(OP.T_EXEC, [sql], params(values), [0]);
    // nobody waits for the worker: it runs the statement before the
    // verdict, and one that fails turns the verdict into RETRY
    if (this._done) return this._req(OP.T_EXEC);
    try {
      this._h.call(OP.T_EXEC, 0, [sql], params(values), [1], this._tag, null, false);
    } catch (e) {
      return Promise.reject(e);
    }
    return Promise.resolve({ rowCount: null });
  }

  /** Versioned upsert; true if written, false if the stored version is newer (outcome 'stale'). */
  upsertVersioned(o) {
    const cols = Object.keys(o.values || {});
    const vals = cols.map((c) => param(o.values[c]));
    return this._req(OP.T_UPSERT, [o.table, o.keyColumn, param(o.key), o.versionColumn || 'version'],
      [...cols, ...vals], [Number(o.version)]);
  }

  /** Declare an external effect (outbox row) in this transaction: { idempotencyKey, added }. */
  outbox(step, r = {}) {
    let body = r.body;
    if (body != null && typeof body !== 'string' && !Buffer.isBuffer(body)) body = JSON.stringify(body);
    const blen = body == null ? 0 : Buffer.byteLength(body);
    const headers = r.headers == null ? null : (typeof r.headers === 'string' ? r.headers : JSON.stringify(r.headers));
    return this._req(OP.T_OUTBOX, null,
      [step, r.kind || null, r.method || null, r.url || null, headers,
        body == null ? null : (Buffer.isBuffer(body) ? body.toString('utf8') : body),
        r.reconcileUrl || null, r.keyHeader || null],
      [r.idempotent === false ? 0 : 1, blen, r.maxAttempts || 0]);
  }

  /** Mark the message stale (its outcome becomes 'stale'). */
  markStale() { this._stale = true; }

  /** Store the answer of this processing with the inbox record, in the
   * same transaction: every later duplicate of the message gets it back
   * (r.result, with r.firstOutcome). A Buffer/Uint8Array is stored as its
   * bytes (default type application/octet-stream), a string as UTF-8
   * (text/plain; charset=utf-8), anything else as JSON (application/json:
   * a duplicate's r.result is the value again). contentType overrides the
   * type. Calling it again replaces the result. Rejects with
   * INBOX_ERR_TOO_LARGE over the consumer's maxResultBytes (default 64
   * KiB): nothing is stored then, never a cut; the handler decides
   * (throw, or store less). */
  setResult(value, contentType) {
    let bytes;
    let type;
    if (Buffer.isBuffer(value) || value instanceof Uint8Array) {
      bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
      type = 'application/octet-stream';
    } else if (typeof value === 'string') {
      bytes = Buffer.from(value, 'utf8');
      type = 'text/plain; charset=utf-8';
    } else {
      const json = value === undefined ? undefined : JSON.stringify(value);
      if (json === undefined) {
        return Promise.reject(inboxError('INBOX_ERR_INVALID', 'setResult: a value JSON can hold, a string or a Buffer'));
      }
      bytes = Buffer.from(json, 'utf8');
      type = 'application/json';
    }
    if (contentType != null) type = String(contentType);
    return this._req(OP.T_RESULT, [type, bytes.toString('hex')]).then(() => undefined);
  }
}

// The consumer's limit on a stored result (trx.setResult), in bytes: a
// positive integer (the library refuses more than 256 MiB at open); not
// given: the library's default, 64 KiB.
function maxResultBytes(v) {
  if (v == null) return 0;
  if (!Number.isSafeInteger(v) || v <= 0) {
    throw inboxError('INBOX_ERR_INVALID', `maxResultBytes: ${v}? (a whole number of bytes > 0)`);
  }
  return v;
}

function storeInts(o) {
  return [o.autoMigrate === false ? 0 : 1, o.busyTimeoutMs || 0, o.lockTimeoutMs || 0,
    o.statementTimeoutMs || 0];
}

/** A consumer: its own connection and worker thread. */
class Consumer extends Handle {
  constructor(inbox, opts) {
    // options checked before super(): a refused one starts no native
    // handle (nor its worker thread)
    if (!opts || !opts.name) throw inboxError('INBOX_ERR_INVALID', 'a consumer needs a name');
    let handlerTimeout = DEFAULT_HANDLER_TIMEOUT_MS;
    if (opts.handlerTimeout != null) {
      handlerTimeout = Number(opts.handlerTimeout);
      if (!(handlerTimeout > 0)) throw inboxError('INBOX_ERR_INVALID', `handlerTimeout: ${opts.handlerTimeout}? (ms > 0)`);
    }
    const replay = opts.replay == null ? 0 : REPLAY[opts.replay];
    if (replay === undefined) throw inboxError('INBOX_ERR_INVALID', `replay: ${opts.replay}?`);
    const maxResult = maxResultBytes(opts.maxResultBytes);
    super();
    this.name = opts.name;
    this._handlerTimeout = handlerTimeout;
    const so = inbox._storeOpts;
    const schema = opts.schema == null ? null
      : (typeof opts.schema === 'string' ? opts.schema : JSON.stringify(opts.schema));
    this._ok = false;
    this.ready = this._call(OP.OPEN,
      [inbox._url, so.tablePrefix || null, so.schema || null, opts.name, opts.key || null,
        opts.fingerprint == null ? null : opts.fingerprint],
      [opts.idPointer || null, schema],
      [...storeInts(so), opts.retentionSeconds || 0, opts.maxAttempts || 0, replay,
        opts.batchTimeoutMs || 0],
      [opts.leaseMs || 0, opts.maxPayload || 0, maxResult])
      .then(() => { this._ok = true; return this; });
    this.ready.catch(() => {});
    if (opts.signal) onAbort(opts.signal, this);
  }

  _after(fn) { return this._ok ? fn() : this.ready.then(fn); }

  /** Process one message in its own transaction; the result says what happened. */
  process(event, handler) {
    const d = [toDelivery(event)];
    return this._after(() => this._call(OP.PROCESS, null, null, null, null, d, handler, [event]))
      .then(decodeResult);
  }

  /** Process messages in one transaction; one result per message, in order. */
  processBatch(events, handler) {
    const d = events.map(toDelivery);
    if (d.length === 0) return Promise.resolve([]);
    return this._after(() => this._call(OP.BATCH, null, null, null, null, d, handler, events))
      .then((rs) => rs.map(decodeResult));
  }

  /** Take a lease on a long message: a result as process()'s ({ outcome,
   * key, attempts, reason, ... }) with `lease` set when 'acquired'. A key
   * already done is a 'duplicate' carrying the first processing's stored
   * result (r.result, r.firstOutcome), read by the statement that looked
   * the key up. */
  acquire(event) {
    const d = [toDelivery(event)];
    return this._after(() => this._call(OP.LEASE_ACQUIRE, null, null, null, null, d)).then((r) => {
      decodeResult(r);
      r.lease = r.lease ? new Lease(this, r.lease, r.key, r.fence, event) : null;
      delete r.fence;
      return r;
    });
  }

  /** Replay dead letter `id` through this consumer (its dedup decides). */
  replay(id, handler) {
    return this._after(() => this._call(OP.DLQ_REPLAY, null, null, [id], null, null, handler, undefined))
      .then(decodeResult);
  }

  /** ms a handler may take before its transaction is rolled back (RETRY). */
  get handlerTimeout() { return this._handlerTimeout; }

  /** Counters since the consumer was opened. */
  stats() { return this._after(() => this._call(OP.STATS)); }
}

/** A lease from consumer.acquire(): do the work, then complete() or fail(). */
class Lease {
  constructor(c, id, key, fence, event) {
    this._c = c; this._id = id; this.key = key; this.fence = fence; this._event = event;
  }
  extend() { return this._c._call(OP.LEASE_EXTEND, null, null, [this._id]); }
  /** Commit the handler's effect with the 'completed' record; resolves with the outcome. */
  complete(handler) {
    return this._c._call(OP.LEASE_COMPLETE, null, null, [this._id], null, null, handler, [this._event]);
  }
  fail(reason) { return this._c._call(OP.LEASE_FAIL, [String(reason || 'failed')], null, [this._id]); }
  release() { return this._c._call(OP.LEASE_FREE, null, null, [this._id]); }
}

function dispatcherInts(o) {
  return [o.timeoutMs || 0, o.connectTimeoutMs || 0, o.backoffMs || 0, o.maxAttempts || 0,
    o.batch || 0, o.pollMs || 0, o.concurrency || 0];
}

/** A running outbox dispatcher: inbox.dispatcher(opts), then start() /
 * stop(). It has its own store connection and its own thread (a libuv
 * pool thread would be taken for as long as it runs), and performs rows
 * as they come due (the library's inbox_dispatcher_run: up to
 * `concurrency` calls in flight per provider) until stop(), close() or
 * its AbortSignal. While it runs it keeps the process alive. */
class Dispatcher extends Handle {
  constructor(inbox, opts = {}) {
    super();
    const so = inbox._storeOpts;
    this._opts = opts;
    this._run = null;
    this._readers = new Set(); // events() iterators
    this.ready = this._call(OP.OPEN, [inbox._url, so.tablePrefix || null, so.schema || null], null,
      storeInts(so)).then(() => this);
    this.ready.catch(() => {});
    if (opts.signal) onAbort(opts.signal, this);
  }

  /** True from start() until its run has ended. */
  get running() { return this._run !== null; }

  /** Start performing due rows; resolves with the final counters once it
   * stops (stop(), close(), the signal) and rejects on an error it does
   * not retry (a transient store error is retried after pollMs). */
  start() {
    if (this._run) return Promise.reject(inboxError('INBOX_ERR_STATE', 'the dispatcher is running already'));
    if (this._closed) return Promise.reject(inboxError('INBOX_ERR_STATE', 'closed'));
    const o = this._opts;
    const run = this.ready
      .then(() => this._call(OP.DISPATCH_RUN, [o.consumer || null], null, dispatcherInts(o)))
      .then((v) => { this._endReaders(null); return v; }, (e) => { this._endReaders(e); throw e; })
      .finally(() => { if (this._run === run) this._run = null; });
    run.catch(() => {}); // observed through start()/stop()'s promise
    this._run = run;
    return run;
  }

  /** Stop claiming rows; the calls in flight finish (bounded by timeoutMs)
   * and their outcomes are committed. Resolves with the final counters. */
  stop() {
    const run = this._run;
    if (!run) return Promise.resolve(this.stats());
    // after start()'s own then (which queued the run): a stop() made
    // before the store was open still counts
    this.ready.then(() => native.Handle.prototype.stop.call(this), () => {});
    return run;
  }

  /** The counters so far ({ claimed, attempts, done, retries, ...,
   * running }), read without waiting for the dispatcher. */
  stats() { return this.dispatcherStats(); }

  /** The rows' outcomes as this dispatcher commits them, as an async
   * iterator: `for await (const ev of d.events({ signal })) ...`. Each is
   * { id, consumer, key, step, idempotencyKey, url (redacted), state
   * ('done', 'failed', 'unknown', 'dead'; 'in_flight': the row went to a
   * newer claim), attempts, outcome ('done', 'retry', 'unknown',
   * 'permanent'; null when no call was made: reconciled, released),
   * status (HTTP, or null), error, reason }. Only rows finished after the
   * iterator was made; it ends when the run in progress (or, before
   * start(), the next run) ends — stop(), close(), the dispatcher's
   * signal; it throws the run's error if the run fails — or when the loop
   * breaks. Its own `signal` ends it with an AbortError. A reader that
   * falls behind keeps at most `highWaterMark` events (default 1000);
   * newer ones are dropped meanwhile, and the next event it gets carries
   * `missed` (how many; the iterator's `dropped` counts them all). The
   * dispatcher never waits for a reader. */
  events(opts = {}) {
    const hwm = opts.highWaterMark == null ? 1000 : opts.highWaterMark;
    if (!Number.isSafeInteger(hwm) || hwm <= 0) {
      throw inboxError('INBOX_ERR_INVALID', `highWaterMark: ${opts.highWaterMark}? (a whole number > 0)`);
    }
    const { signal } = opts;
    const buf = [];
    let missed = 0;
    let dropped = 0;
    let waiting = null;
    let ended = false;
    let error = null;
    const onAbort = () => {
      const e = new Error('The operation was aborted');
      e.name = 'AbortError';
      e.code = 'ABORT_ERR';
      e.cause = signal.reason;
      buf.length = 0;
      reader.end(e);
    };
    const reader = {
      push: (ev) => {
        if (ended) return;
        if (missed) { ev.missed = missed; missed = 0; }
        if (waiting) {
          const w = waiting;
          waiting = null;
          w.resolve({ value: ev, done: false });
        } else if (buf.length < hwm) {
          buf.push(ev);
        } else {
          missed += 1 + (ev.missed || 0);
          dropped++;
        }
      },
      end: (e) => {
        if (ended) return;
        ended = true;
        error = e || null;
        this._readers.delete(reader);
        if (this._readers.size === 0) native.Handle.prototype.wantEvents.call(this, false);
        if (signal) signal.removeEventListener('abort', onAbort);
        if (waiting) {
          const w = waiting;
          waiting = null;
          if (error) { w.reject(error); error = null; } else w.resolve({ value: undefined, done: true });
        }
      },
    };
    const it = {
      next: () => {
        if (buf.length) return Promise.resolve({ value: buf.shift(), done: false });
        if (ended) {
          if (error) { const e = error; error = null; return Promise.reject(e); }
          return Promise.resolve({ value: undefined, done: true });
        }
        return new Promise((resolve, reject) => { waiting = { resolve, reject }; });
      },
      return: () => {
        buf.length = 0;
        error = null;
        reader.end(null);
        return Promise.resolve({ value: undefined, done: true });
      },
      [Symbol.asyncIterator]() { return this; },
      /** Events dropped so far because this reader fell behind. */
      get dropped() { return dropped; },
    };
    if (this._closed) {
      ended = true;
      return it;
    }
    if (signal && signal.aborted) {
      onAbort();
      return it;
    }
    this._readers.add(reader);
    if (this._readers.size === 1) native.Handle.prototype.wantEvents.call(this, true);
    if (signal) signal.addEventListener('abort', onAbort, { once: true });
    return it;
  }

  _outboxEvent(ev) {
    for (const r of this._readers) r.push({ ...ev });
  }

  _endReaders(err) {
    for (const r of [...this._readers]) r.end(err);
  }

  /** Stops it (as stop()) and closes its connection. */
  async close() {
    if (this._run) {
      this.stop();
      await this._run.catch(() => {});
    }
    this._endReaders(null);
    return super.close();
  }
}

function onAbort(signal, h) {
  const close = () => { h.close().catch(() => {}); };
  if (signal.aborted) close(); else signal.addEventListener('abort', close, { once: true });
}

/** A store (PostgreSQL or SQLite) and the consumers on it. */
class Inbox extends Handle {
  /** Open a store by URL (postgresql://... or sqlite:PATH); resolves when it is open. */
  static async open(url, opts = {}) {
    const ib = new Inbox(url, opts);
    await ib._call(OP.OPEN, [url, opts.tablePrefix || null, opts.schema || null], null, storeInts(opts));
    if (opts.signal) onAbort(opts.signal, ib);
    return ib;
  }

  constructor(url, opts) {
    super();
    this._url = url;
    this._storeOpts = opts;
    this._consumers = new Set();
  }

  /** A running outbox dispatcher on its own connection (see Dispatcher);
   * options as dispatchOnce's plus pollMs, concurrency and signal. */
  dispatcher(opts = {}) {
    if (this._closed) throw inboxError('INBOX_ERR_STATE', 'closed');
    const d = new Dispatcher(this, opts);
    this._consumers.add(new WeakRef(d));
    return d;
  }

  /** A consumer with its own connection (process calls wait until it is open: see .ready). */
  consumer(opts) {
    if (this._closed) throw inboxError('INBOX_ERR_STATE', 'closed');
    const c = new Consumer(this, opts);
    this._consumers.add(new WeakRef(c));
    return c;
  }

  exec(sql, values) { return this._call(OP.EXEC, [sql], params(values)); }
  /** A query outside any inbox transaction: { rows, rowCount, fields } (see Transaction.query). */
  query(sql, values, opts) {
    try {
      return this._call(OP.QUERY, [sql], params(values), rowMode(opts));
    } catch (e) {
      return Promise.reject(e);
    }
  }
  schemaVersion() { return this._call(OP.SCHEMA_VERSION); }
  /** Per-consumer numbers (records by status, dead letters, outbox). */
  stats(consumer) { return this._call(OP.ADMIN_STATS, [consumer]); }
  /** One inbox record, or null. */
  inspect(consumer, key) { return this._call(OP.INSPECT, [consumer, key]); }

  /** Dead letters (without payload), in id order. */
  deadLetters(f = {}) {
    return this._call(OP.DLQ_LIST, [f.consumer || null, f.key || null], null,
      [f.afterId || 0, f.limit || 0, f.pendingOnly ? 1 : 0, f.messagesOnly ? 1 : 0]);
  }
  /** One dead letter with its payload (a Buffer), or null. */
  deadLetter(id, consumer) {
    return this._call(OP.DLQ_GET, [consumer || null], null, [id]).catch((e) => {
      if (e.code === 'INBOX_ERR_NOTFOUND') return null;
      throw e;
    });
  }
  dropDeadLetter(id) { return this._call(OP.DLQ_DROP, null, null, [id]); }

  /** Delete records older than the window (never inside it); resolves with the count. */
  purge(o) {
    return this._call(OP.PURGE, [o.consumer], null,
      [o.retentionSeconds || 0, o.batchLimit || 0, o.dryRun ? 1 : 0]);
  }

  /** Claim and perform the due outbox rows once (the built-in HTTP performer). */
  dispatchOnce(o = {}) {
    return this._call(OP.DISPATCH_ONCE, [o.consumer || null], null,
      [o.timeoutMs || 0, o.connectTimeoutMs || 0, o.backoffMs || 0, o.maxAttempts || 0, o.batch || 0]);
  }
  outboxCounts(consumer) { return this._call(OP.OUTBOX_COUNTS, [consumer || null]); }

  /** Close the store and every consumer and dispatcher opened from it. */
  async close() {
    const all = [];
    for (const w of this._consumers) {
      const c = w.deref();
      if (c) all.push(c.close().catch(() => {}));
    }
    this._consumers.clear();
    all.push(super.close());
    await Promise.all(all);
  }
}

module.exports = {
  Inbox, Consumer, Dispatcher, Lease, Transaction, Delivery, RetryableError, PermanentError,
  HandlerTimeoutError,
  delivery: (payload, meta) => new Delivery(payload, meta),
  outboxKey: native.outboxKey,
  fingerprint: (json, pointer) => native.fingerprint(typeof json === 'string' || Buffer.isBuffer(json) ? json : JSON.stringify(json), pointer || ''),
  redactUrl: native.redactUrl,
  version: native.version,
};
