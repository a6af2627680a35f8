// Types of the libinbox package (lib/index.js).

/** What happened to one message. Never an exception. */
export type Outcome =
  | 'applied' | 'duplicate' | 'conflict' | 'stale' | 'retry'
  | 'dead_lettered' | 'in_progress' | 'acquired' | 'none';

/** Errors are Errors with the library's code name; the message never holds a password. */
export interface InboxError extends Error {
  code:
    | 'INBOX_ERR_NOMEM' | 'INBOX_ERR_INVALID' | 'INBOX_ERR_URL' | 'INBOX_ERR_CONNECT'
    | 'INBOX_ERR_STORE' | 'INBOX_ERR_SCHEMA' | 'INBOX_ERR_TRANSIENT' | 'INBOX_ERR_BUSY'
    | 'INBOX_ERR_FENCED' | 'INBOX_ERR_STATE' | 'INBOX_ERR_NOTFOUND' | 'INBOX_ERR_SOURCE'
    | 'INBOX_ERR_CONFIG' | 'INBOX_ERR_IO' | 'INBOX_ERR_TIMEOUT' | 'INBOX_ERR_HANDLER'
    | 'INBOX_ERR_NUL' | 'INBOX_ERR_TOO_LARGE';
  /** The negative inbox_err value. */
  errno: number;
  /** SQLSTATE (PostgreSQL) or SQLite result code name, when there is one. */
  detailCode?: string;
}

export interface Result {
  outcome: Outcome;
  /** True when the message may be acked now (its transaction committed). */
  ackable: boolean;
  attempts: number;
  key: string | null;
  reason: string | null;
  deadLetterId: number | null;
  /** The stored result (trx.setResult): this processing's when applied
   * (or stale, or dead-lettered by a rejecting handler that set one), the
   * first processing's on a duplicate; null when none, and on a conflict.
   * Decoded by its type: JSON values back, text as a string, else a Buffer. */
  result: unknown;
  /** The stored bytes themselves, or null. */
  resultBytes: Buffer | null;
  resultType: string | null;
  /** On a duplicate: the outcome the key was first recorded with. */
  firstOutcome: Outcome | null;
}

export interface StoreOptions {
  /** Prefix of every libinbox table ("billing_" -> billing_inbox). */
  tablePrefix?: string;
  /** PostgreSQL schema of the tables. */
  schema?: string;
  /** Run migrations on open (default true). */
  autoMigrate?: boolean;
  busyTimeoutMs?: number;
  lockTimeoutMs?: number;
  statementTimeoutMs?: number;
  /** Aborting it closes the Inbox. */
  signal?: AbortSignal;
}

export interface ConsumerOptions {
  /** e.g. "billing.order-created.v1" */
  name: string;
  /** Key template, e.g. "create-invoice:{/data/orderId}"; default "{id}". */
  key?: string;
  /** RFC 6901 pointer of the part fingerprinted (default: the whole payload). */
  fingerprint?: string;
  /** Pointer of the message id when the delivery has none (default "/id"). */
  idPointer?: string;
  /** JSON Schema (draft 7) every message must satisfy (object or text). */
  schema?: object | string;
  retentionSeconds?: number;
  maxAttempts?: number;
  leaseMs?: number;
  maxPayload?: number;
  /** Limit of a stored result (trx.setResult), in bytes: a whole number
   * > 0, at most 256 MiB (default 64 KiB). A larger result is refused to
   * the handler with INBOX_ERR_TOO_LARGE, never cut. */
  maxResultBytes?: number;
  /** What to do with a message older than the window whose key is gone. */
  replay?: 'dead-letter' | 'drop' | 'apply';
  batchTimeoutMs?: number;
  /** ms a handler may take (default 30000; Infinity: no limit). A handler
   * that has not settled by then is abandoned: its transaction is rolled
   * back and the outcome is 'retry' (the attempt counts toward maxAttempts;
   * reason: HandlerTimeoutError's message). */
  handlerTimeout?: number;
  /** Aborting it closes the consumer. */
  signal?: AbortSignal;
}

/** A message as the handler sees it. */
export interface Message<E = any> {
  key: string;
  id: string | null;
  fingerprint: string;
  /** 1 on the first try. */
  attempt: number;
  /** Index of the message in processBatch's array (0 for process). */
  index: number;
  /** The payload text. */
  payload: string;
  /** The event object given to process (or the payload parsed). */
  readonly event: E;
}

/** A row: column name -> text (null for SQL NULL), as the server names the columns. */
export type Row = Record<string, string | null>;

export interface QueryResult<R = Row> {
  /** Rows as objects keyed by column name (a repeated name: the last column
   * wins), or with { rowMode: 'array' } as arrays of the column texts. */
  rows: R[];
  rowCount: number;
  /** The result's columns, in order (empty when no row came back). */
  fields: { name: string }[];
}

export interface QueryOptions { rowMode?: 'object' | 'array' }

export type Param = string | number | bigint | boolean | Date | Buffer | object | null | undefined;

export interface OutboxRequest {
  url: string;
  method?: string;
  headers?: Record<string, string> | string;
  body?: string | Buffer | object;
  /** Whether the provider honours the idempotency key (default true). */
  idempotent?: boolean;
  reconcileUrl?: string;
  keyHeader?: string;
  kind?: string;
  maxAttempts?: number;
}

/** The transaction a handler runs in; over once the handler settles. */
export interface Transaction<E = any> {
  readonly message: Message<E>;
  query(sql: string, values: Param[] | null | undefined, opts: { rowMode: 'array' }): Promise<QueryResult<(string | null)[]>>;
  query<R = Row>(sql: string, values?: Param[], opts?: { rowMode?: 'object' }): Promise<QueryResult<R>>;
  /** { defer: true }: sent with the batch's COMMIT (PostgreSQL, processBatch); rowCount null. */
  exec(sql: string, values?: Param[], opts?: { defer?: boolean }): Promise<{ rowCount: number | null }>;
  /** Insert or update only when `version` is newer; false (outcome 'stale') otherwise. */
  upsertVersioned(o: {
    table: string; keyColumn: string; key: Param; versionColumn?: string;
    version: number; values?: Record<string, Param>;
  }): Promise<boolean>;
  /** Declare an external effect, performed after the commit with a deterministic idempotency key. */
  outbox(step: string, request: OutboxRequest): Promise<{ idempotencyKey: string; added: boolean }>;
  markStale(): void;
  /** Store this processing's answer with the record; duplicates get it back (r.result). */
  setResult(value: unknown, contentType?: string): Promise<void>;
}

/** Return (or resolve) to commit; throw RetryableError (or any Error) to retry, PermanentError to dead-letter. */
export type Handler<E = any> = (trx: Transaction<E>, msg: Message<E>) => unknown | Promise<unknown>;

export class Delivery {
  constructor(payload: string | Buffer | object, meta?: DeliveryMeta);
  payload: string | Buffer | object;
  id: string | null;
  headers: object | string | null;
  position: string | null;
  timestamp: number | Date;
  deliveryCount: number;
}
export interface DeliveryMeta {
  id?: string;
  headers?: object | string;
  position?: string;
  /** Producer time (ms since the epoch, or a Date): feeds the replay guard. */
  timestamp?: number | Date;
  deliveryCount?: number;
}
export type Event = object | string | Buffer | Delivery;

export interface Stats {
  applied: number; duplicates: number; conflicts: number; stale: number;
  retries: number; deadLetters: number; leaseTakeovers: number; inProgress: number;
  fenced: number; batches: number; messages: number; transientRetries: number;
  processingSecondsSum: number; processingCount: number;
}

export interface DeadLetter {
  id: number; consumer: string; key: string | null; messageId: string | null;
  /** The raw payload (dead letter read by id), null in listings. */
  payload: Buffer | null; payloadLength: number;
  headers: string | null; position: string | null; attempts: number;
  reason: string; fingerprint: string | null; storedFingerprint: string | null;
  createdAt: number; replayedAt: number; deliveries: number; lastSeenAt: number;
}

/** consumer.acquire()'s answer: a Result (a duplicate's stored result
 * too) and the lease, set only when the outcome is 'acquired'. */
export interface LeaseResult extends Result {
  lease: Lease | null;
}

export class Lease {
  readonly key: string;
  readonly fence: number;
  extend(): Promise<void>;
  complete(handler?: Handler): Promise<Outcome>;
  fail(reason?: string): Promise<void>;
  release(): Promise<void>;
}

export class Consumer {
  readonly name: string;
  /** Resolves when the consumer is open (rejects with its error). */
  readonly ready: Promise<Consumer>;
  /** The handlerTimeout in force (ms). */
  readonly handlerTimeout: number;
  process<E = any>(event: E | Event, handler?: Handler<E>): Promise<Result>;
  processBatch<E = any>(events: (E | Event)[], handler?: Handler<E>): Promise<Result[]>;
  /** A lease on a long message: the lease when 'acquired'; a key already
   * done is a 'duplicate' with the first processing's stored result. */
  acquire<E = any>(event: E | Event): Promise<LeaseResult>;
  replay(deadLetterId: number, handler?: Handler): Promise<Result>;
  stats(): Promise<Stats>;
  close(): Promise<void>;
}

export interface DispatcherOptions {
  /** Only this consumer's rows (default: every consumer's). */
  consumer?: string;
  timeoutMs?: number; connectTimeoutMs?: number; backoffMs?: number;
  maxAttempts?: number; batch?: number;
  /** Pause when nothing is due (default 200). */
  pollMs?: number;
  /** Calls in flight at once per provider (default 32). */
  concurrency?: number;
  /** Aborting it stops and closes the dispatcher. */
  signal?: AbortSignal;
}

/** The dispatcher's counters (since its start()). */
export interface DispatcherStats {
  claimed: number; attempts: number; done: number; retries: number;
  unknownOutcomes: number; leaseExpired: number; reconciliations: number;
  deadLetters: number; fenced: number; released: number;
}

/** A running outbox dispatcher (its own connection and thread). */
/** One outbox row's outcome, as a running dispatcher committed it. */
export interface OutboxEvent {
  id: number;
  consumer: string;
  /** The message's inbox key. */
  key: string;
  step: string;
  idempotencyKey: string;
  /** The row's URL with any password or token redacted. */
  url: string | null;
  /** The row's state now ('in_flight': it went to a newer claim). */
  state: 'done' | 'failed' | 'unknown' | 'dead' | 'in_flight' | 'pending';
  attempts: number;
  /** What the call came to; null when none was made (reconciled, released). */
  outcome: 'done' | 'retry' | 'unknown' | 'permanent' | null;
  /** HTTP status, or null. */
  status: number | null;
  error: string | null;
  reason: string | null;
  /** Events this reader dropped (it fell behind) just before this one. */
  missed?: number;
}

export interface OutboxEvents extends AsyncIterableIterator<OutboxEvent> {
  /** Events dropped so far because this reader fell behind. */
  readonly dropped: number;
}

export class Dispatcher {
  /** The rows' outcomes as an async iterator, until the run in progress
   * (or the next) ends, the loop breaks, or `signal` aborts (AbortError).
   * A reader keeps at most highWaterMark events (default 1000) and drops
   * newer ones meanwhile; the dispatcher never waits for it. */
  events(opts?: { signal?: AbortSignal; highWaterMark?: number }): OutboxEvents;
  /** Resolves when its connection is open. */
  readonly ready: Promise<Dispatcher>;
  /** From start() until its run has ended. */
  readonly running: boolean;
  /** Settles when it stops (stop(), close(), the signal): the final counters. */
  start(): Promise<DispatcherStats>;
  /** Stop claiming; the calls in flight finish. Resolves as start()'s promise. */
  stop(): Promise<DispatcherStats>;
  /** The counters so far, without waiting. */
  stats(): DispatcherStats & { running: boolean };
  close(): Promise<void>;
}

export class Inbox {
  static open(url: string, opts?: StoreOptions): Promise<Inbox>;
  consumer(opts: ConsumerOptions): Consumer;
  exec(sql: string, values?: Param[]): Promise<{ rowCount: number }>;
  query(sql: string, values: Param[] | null | undefined, opts: { rowMode: 'array' }): Promise<QueryResult<(string | null)[]>>;
  query<R = Row>(sql: string, values?: Param[], opts?: { rowMode?: 'object' }): Promise<QueryResult<R>>;
  schemaVersion(): Promise<number>;
  stats(consumer: string): Promise<Record<string, number>>;
  inspect(consumer: string, key: string): Promise<Record<string, unknown> | null>;
  deadLetters(filter?: { consumer?: string; key?: string; afterId?: number; limit?: number;
    pendingOnly?: boolean; messagesOnly?: boolean }): Promise<DeadLetter[]>;
  deadLetter(id: number, consumer?: string): Promise<DeadLetter | null>;
  dropDeadLetter(id: number): Promise<void>;
  purge(o: { consumer: string; retentionSeconds?: number; batchLimit?: number; dryRun?: boolean }): Promise<number>;
  dispatchOnce(o?: { consumer?: string; timeoutMs?: number; connectTimeoutMs?: number;
    backoffMs?: number; maxAttempts?: number; batch?: number }): Promise<Record<string, number>>;
  outboxCounts(consumer?: string): Promise<Record<string, number>>;
  /** A running dispatcher on its own connection: start() / stop(). */
  dispatcher(opts?: DispatcherOptions): Dispatcher;
  /** Closes the store and every consumer opened from it. */
  close(): Promise<void>;
}

export class RetryableError extends Error {}
export class PermanentError extends Error {}
/** The reason given for a handler abandoned after handlerTimeout (outcome 'retry'). */
export class HandlerTimeoutError extends RetryableError {
  constructor(ms: number);
  readonly code: 'INBOX_HANDLER_TIMEOUT';
}
export function delivery(payload: string | Buffer | object, meta?: DeliveryMeta): Delivery;
export function outboxKey(consumer: string, key: string, step: string): string;
export function fingerprint(json: string | Buffer | object, pointer?: string): string;
export function redactUrl(url: string): string;
export const version: string;
