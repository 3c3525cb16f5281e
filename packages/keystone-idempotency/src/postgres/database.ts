import type { EventEmitter } from 'node:events';
import type { Pool, PoolClient, QueryResult, QueryResultRow } from 'pg';
import { IdempotencyError } from '../engine/errors.js';
import { isConflict, isConnectionFailure, isQueryTimeout, isSkipped } from './database-errors.js';

/** One SQL statement and its parameters (`$1`, `$2`, ...). */
export interface Statement {
  readonly text: string;
  readonly values?: readonly unknown[];
  /**
   * False for SQL the store did not write (an effect's): sent unnamed. Every other statement with parameters is
   * prepared once per connection (see {@link preparedName}).
   */
  readonly prepare?: false;
}

/**
 * Names given so far, by text. The store's own statements are few (one text per statement and table, a handful of
 * variants of a release), so this stays small; past {@link MAX_PREPARED} texts a statement goes unnamed, so that no
 * mistake (a text built with a value in it) can grow it, or each connection's prepared statements, without bound.
 */
const preparedNames = new Map<string, string>();
const MAX_PREPARED = 256;

/**
 * The name a statement is prepared under, so that each pooled connection parses and analyses it once and pg sends
 * its text once: the store's statements are long (CTEs, a UNION, the record built as JSON), and sent unnamed they
 * were parsed, analysed and planned on every call, most of a one-round-trip call's time on loopback (see
 * bench/README.md). Not for an effect's SQL (`prepare: false`): a team's SQL may be built with values in it, and
 * every distinct text would stay prepared on every connection. Nor for a statement without parameters (BEGIN,
 * COMMIT), which goes as a simple query. The name is this process's own (a counter): one name never stands for two
 * texts, which pg would refuse.
 */
function preparedName(statement: Statement): string | undefined {
  if (statement.prepare === false || !statement.values) return undefined;
  let name = preparedNames.get(statement.text);
  if (name === undefined && preparedNames.size < MAX_PREPARED) {
    name = `keystone_idempotency_${preparedNames.size + 1}`;
    preparedNames.set(statement.text, name);
  }
  return name;
}

/** A connection inside a transaction, as an effect function is handed it: query, and nothing else. */
export interface Queryable {
  query<R extends QueryResultRow = QueryResultRow>(text: string, values?: readonly unknown[]): Promise<QueryResult<R>>;
}

/** One step of a transaction: a statement, or a function that runs its own statements in it. */
export type Step = Statement | ((tx: Queryable) => Promise<unknown>);

export type Settled =
  | { readonly ok: true; readonly result: QueryResult | undefined }
  | { readonly ok: false; readonly error: unknown };

/** How a transaction ended: BEGIN's, each step's and COMMIT's own outcomes, and whether it committed. */
export interface TransactionOutcome {
  readonly begin: Settled;
  readonly steps: readonly Settled[];
  readonly end: Settled;
  readonly committed: boolean;
}

export interface RetryPolicy {
  /** Attempts of a call whose connection failed (whether its last request landed is unknown). Default 3. */
  readonly connectionAttempts?: number;
  /** Attempts of a transaction rolled back by a serialization failure or a deadlock (40001, 40P01). Default 5. */
  readonly conflictAttempts?: number;
}

export interface DatabaseOptions extends RetryPolicy {
  /**
   * When the current call must have had its answer, in epoch milliseconds (wall time, whatever clock the records
   * use), or undefined when it has no deadline of its own. Every query is sent with what is left as its timeout, a
   * transaction sets it as its `statement_timeout`, and no attempt starts once it has passed: a reply that never
   * comes (a partition, a proxy that stopped forwarding) costs the call its own remaining time, no more.
   */
  readonly deadline?: () => number | undefined;
  /**
   * Whether the store's own statements are prepared (named), so that each connection parses and plans them once.
   * Default true. Turn it off behind a pooler that multiplexes transactions and does not carry prepared statements
   * across (PgBouncer in transaction mode before 1.21 fails them; RDS Proxy pins the session that prepares one).
   */
  readonly prepareStatements?: boolean;
}

/** What a step never sent (an earlier step had already failed) reports. */
const NOT_SENT = Object.freeze(new Error('not sent: an earlier step of the transaction failed'));

/**
 * How the store's statements and transactions reach PostgreSQL: one pooled connection per call; a transaction's
 * BEGIN, statements and COMMIT written back to back when the pool pipelines (`new Pool({ pipeline: true })`), so
 * that the whole transaction is one round trip; the call made again, with the very same statements, when its
 * connection failed or PostgreSQL rolled it back for a serialization failure or a deadlock.
 *
 * Sending the same statements again is what makes a lost reply harmless: every write of the store names the lease
 * token it was built with, so a write that had landed meets itself the second time and is recognised as its own
 * (a claim, a takeover, a release), and a completion that had committed fails its fence against its own completion
 * and is recognised by its lease token, effects and all left unwritten a second time.
 */
export class Database {
  private readonly connectionAttempts: number;
  private readonly conflictAttempts: number;
  private readonly deadline: () => number | undefined;
  private readonly prepare: boolean;

  constructor(
    private readonly pool: Pick<Pool, 'connect'>,
    options: DatabaseOptions = {},
  ) {
    this.connectionAttempts = Math.max(1, options.connectionAttempts ?? 3);
    this.conflictAttempts = Math.max(1, options.conflictAttempts ?? 5);
    this.deadline = options.deadline ?? (() => undefined);
    this.prepare = options.prepareStatements ?? true;
    surviveIdleErrors(pool);
  }

  /**
   * What is left of the current call's time, in ms, or undefined without a deadline. Wall time, not the store's
   * injected clock: pg's timers and the invocation's end are real, and a frozen test clock must not freeze them.
   */
  timeLeftMs(): number | undefined {
    const deadline = this.deadline();
    return deadline === undefined ? undefined : Math.floor(deadline - Date.now());
  }

  /** One statement on its own (its own transaction): one round trip. */
  async query<R extends QueryResultRow = QueryResultRow>(statement: Statement): Promise<QueryResult<R>> {
    const outcome = await this.retrying(
      async (client, timeLeft) => outcomeOf(client, config(statement, timeLeft(), this.prepare)),
      (settled) => (settled.ok ? undefined : settled.error),
    );
    if (!outcome.ok) throw outcome.error;
    return outcome.result as QueryResult<R>;
  }

  /**
   * BEGIN, the steps in order, COMMIT. Statements are sent without waiting for one another when the connection
   * pipelines; a function step waits for what was sent before it (it is handed the transaction to query in). Once a
   * step has failed the rest are not run, and the transaction rolls back. The outcome says what became of each step;
   * it throws only when the call could not be made at all (the connection failed on every attempt).
   */
  async transaction(steps: readonly Step[]): Promise<TransactionOutcome> {
    return this.retrying((client, timeLeft) => run(client, steps, timeLeft, this.prepare), firstFailure);
  }

  /**
   * Runs `attempt` on a pooled connection, again on a fresh one while its first failure (as `failureOf` finds it) is
   * a failed connection or a conflict, within the attempts allowed and the call's deadline. A connection that failed
   * or timed out is destroyed, not returned to the pool: a timed-out query may still be running on it.
   */
  private async retrying<T>(
    attempt: (client: PoolClient, timeLeft: () => number | undefined) => Promise<T>,
    failureOf: (value: T) => unknown,
  ): Promise<T> {
    let connectionFailures = 0;
    let conflicts = 0;
    let lastFailure: unknown;
    for (;;) {
      const left = this.timeLeftMs();
      if (left !== undefined && left <= 0) {
        throw lastFailure ?? new IdempotencyError('the call ran out of time before PostgreSQL could be asked');
      }
      let client: PoolClient;
      try {
        client = await connectWithin(this.pool, left);
      } catch (error) {
        lastFailure = error;
        if (++connectionFailures >= this.connectionAttempts) throw error;
        await sleep(25 * connectionFailures);
        continue;
      }
      guardClient(client);
      let lost: unknown;
      const onError = (error: unknown) => {
        lost ??= error;
      };
      client.on('error', onError);
      let value: T;
      try {
        value = await attempt(client, () => this.timeLeftMs());
      } finally {
        client.removeListener('error', onError);
      }
      const failure = failureOf(value);
      const broken = lost ?? (failure !== undefined && (isConnectionFailure(failure) || isQueryTimeout(failure)));
      client.release(broken ? asError(lost ?? failure) : undefined);
      if (failure === undefined) return value;
      lastFailure = failure;
      // Out of time: the call's own deadline passed while PostgreSQL said nothing. Not sent again.
      if (isQueryTimeout(failure)) throw failure;
      if (lost !== undefined || isConnectionFailure(failure)) {
        if (++connectionFailures >= this.connectionAttempts) throw lost ?? failure;
        await sleep(25 * connectionFailures);
        continue;
      }
      if (isConflict(failure) && ++conflicts < this.conflictAttempts) {
        await sleep((5 + Math.random() * 20) * conflicts);
        continue;
      }
      return value;
    }
  }
}

/** Pools already given {@link surviveIdleErrors}'s listener: one each, however many stores share a pool. */
const listenedPools = new WeakSet<object>();

/**
 * pg emits the error of a connection that dies idle in the pool (a session the server ended: a failover, RDS Proxy's
 * idle cut, an administrator) on the Pool, and an 'error' nobody listens to ends the process. The pool has dropped
 * that connection already and the next call opens another, so nothing is lost: this listener keeps the process
 * alive, and says so once when it is the only one listening. The application's own listeners still hear every error.
 */
export function surviveIdleErrors(pool: Pick<Pool, 'connect'>): void {
  const emitter = pool as Partial<Pick<EventEmitter, 'on' | 'listenerCount'>>;
  const { on, listenerCount } = emitter;
  if (typeof on !== 'function' || typeof listenerCount !== 'function' || listenedPools.has(emitter)) return;
  listenedPools.add(emitter);
  let told = false;
  on.call(emitter, 'error', (error: unknown) => {
    if (told || listenerCount.call(emitter, 'error') !== 1) return;
    told = true;
    const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
    console.warn(
      'keystone-idempotency: the server closed an idle PostgreSQL connection; the pool dropped it and opens another ' +
        "for the next call. Told once: listen for the pool's 'error' event to hear each one.",
      { code, message },
    );
  });
}

/**
 * A client that ever passed through the store keeps a listener for its `error` event for good: pg emits it again
 * when a dead socket finally closes (after its queries already failed), possibly after the client left the pool,
 * and an `error` with no listener ends the process: a Lambda runtime, or the local stack's worker.
 */
const guarded = new WeakSet<PoolClient>();
export function guardClient(client: PoolClient): void {
  if (guarded.has(client)) return;
  guarded.add(client);
  client.on('error', () => undefined);
}

/**
 * A connection from the pool, waited for no longer than the call has left: a pool whose connections are all held
 * (by stalled calls, say) must not hang this one. One that arrives too late goes straight back.
 */
async function connectWithin(pool: Pick<Pool, 'connect'>, timeoutMs: number | undefined): Promise<PoolClient> {
  const connecting = pool.connect();
  if (timeoutMs === undefined) return connecting;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      connecting.then(
        (late) => late.release(),
        () => undefined,
      );
      reject(new IdempotencyError(`no PostgreSQL connection came free within the ${timeoutMs} ms the call had left`));
    }, timeoutMs);
  });
  try {
    return await Promise.race([connecting, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

function asError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

async function run(
  client: PoolClient,
  steps: readonly Step[],
  timeLeft: () => number | undefined,
  prepare: boolean,
): Promise<TransactionOutcome> {
  const pipelined = (client as { pipeline?: boolean }).pipeline === true;
  const batch = pipelined ? writeBatch(client) : undefined;
  const send = (statement: Statement) => {
    batch?.hold();
    return outcomeOf(client, config(statement, timeLeft(), prepare));
  };
  const tx: Queryable = {
    query: (text, values) => client.query(config({ text, ...(values ? { values } : {}) }, timeLeft())),
  };
  let begin: Promise<Settled>;
  let end: Promise<Settled>;
  const sent: Promise<Settled>[] = [];
  try {
    begin = send({ text: 'BEGIN' });
    let failed = !pipelined && !(await begin).ok;
    for (const step of steps) {
      if (failed) {
        sent.push(Promise.resolve({ ok: false, error: NOT_SENT }));
        continue;
      }
      // A function's queries, and its wait, go after what is queued: send that now.
      if (typeof step === 'function') batch?.flush();
      const outcome = typeof step === 'function' ? settle(step(tx).then(() => undefined)) : send(step);
      sent.push(outcome);
      // Without pipelining each statement waits for the last; a function's own queries queue behind what was sent.
      if (typeof step === 'function' || !pipelined) failed = !(await outcome).ok;
    }
    // After a failure PostgreSQL answers COMMIT with ROLLBACK anyway; say so when we know it already.
    end = send({ text: failed ? 'ROLLBACK' : 'COMMIT' });
  } finally {
    // Whatever happened, nothing queued stays unsent.
    batch?.flush();
  }
  const [begun, settled, ended] = await Promise.all([begin, Promise.all(sent), end]);
  return { begin: begun, steps: settled, end: ended, committed: ended.ok && ended.result?.command === 'COMMIT' };
}

/**
 * Holds a pipelining connection's writes back until flushed, so that a transaction's BEGIN, statements and COMMIT go
 * out as one write: pg writes each query as soon as it is queued, one system call (and one wake-up of the server)
 * each, and on loopback those cost more than the round trip they share (bench/README.md). pg corks its socket only
 * around each query's own messages; a cork held across them all is counted, so theirs nest inside it. A client
 * without a socket that corks (another stream) is written as before.
 */
function writeBatch(client: PoolClient): { hold(): void; flush(): void } | undefined {
  const stream = (client as { connection?: { stream?: { cork?: () => void; uncork?: () => void } } }).connection
    ?.stream;
  if (typeof stream?.cork !== 'function' || typeof stream.uncork !== 'function') return undefined;
  let held = false;
  return {
    hold() {
      if (held) return;
      stream.cork?.();
      held = true;
    },
    flush() {
      if (!held) return;
      held = false;
      stream.uncork?.();
    },
  };
}

/**
 * The error that decided a transaction's fate: the first one, not the statements skipped after it. `step` is its
 * index among the steps; undefined for BEGIN or COMMIT.
 */
export function firstFailedStep(outcome: TransactionOutcome): { step?: number; error: unknown } | undefined {
  const all = [outcome.begin, ...outcome.steps, outcome.end];
  for (const [index, settled] of all.entries()) {
    if (!settled.ok && settled.error !== NOT_SENT && !isSkipped(settled.error)) {
      return index >= 1 && index <= outcome.steps.length
        ? { step: index - 1, error: settled.error }
        : { error: settled.error };
    }
  }
  return undefined;
}

function firstFailure(outcome: TransactionOutcome): unknown {
  return firstFailedStep(outcome)?.error;
}

/** pg's query config; with the time the call has left as its `query_timeout` (pg's 0 would mean none). */
function config(
  statement: Statement,
  timeoutMs?: number,
  prepare = false,
): { text: string; name?: string; values?: unknown[]; query_timeout?: number } {
  const name = prepare ? preparedName(statement) : undefined;
  return {
    text: statement.text,
    ...(name ? { name } : {}),
    ...(statement.values ? { values: [...statement.values] } : {}),
    ...(timeoutMs === undefined ? {} : { query_timeout: Math.max(1, timeoutMs) }),
  };
}

/**
 * A query's outcome, through pg's callback rather than its promise: a refused statement (a fence met on every
 * duplicate, and each statement skipped after it) is an outcome here, not an exception. pg's promise rejects, and on
 * the way captures a second stack for each error (its own `catch`), all of it work on a path that must cost no more
 * than its round trip (bench/README.md).
 */
function outcomeOf(client: PoolClient, query: ReturnType<typeof config>): Promise<Settled> {
  return new Promise((resolve) => {
    client.query(query, (error: Error | undefined, result: QueryResult | undefined) => {
      resolve(error ? { ok: false, error } : { ok: true, result });
    });
  });
}

async function settle<T>(promise: Promise<T>): Promise<{ ok: true; result: T } | { ok: false; error: unknown }> {
  return promise.then(
    (result) => ({ ok: true as const, result }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
