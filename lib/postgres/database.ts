import type { Pool, PoolClient, QueryResult, QueryResultRow } from 'pg';
import { isConflict, isConnectionFailure, isSkipped } from './database-errors.js';

/** One SQL statement and its parameters (`$1`, `$2`, ...). */
export interface Statement {
  readonly text: string;
  readonly values?: readonly unknown[];
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

  constructor(
    private readonly pool: Pick<Pool, 'connect'>,
    policy: RetryPolicy = {},
  ) {
    this.connectionAttempts = Math.max(1, policy.connectionAttempts ?? 3);
    this.conflictAttempts = Math.max(1, policy.conflictAttempts ?? 5);
  }

  /** One statement on its own (its own transaction): one round trip. */
  async query<R extends QueryResultRow = QueryResultRow>(statement: Statement): Promise<QueryResult<R>> {
    const outcome = await this.retrying(
      async (client) => settle(client.query<R>(config(statement))),
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
    return this.retrying((client) => run(client, steps), firstFailure);
  }

  /**
   * Runs `attempt` on a pooled connection, again on a fresh one while its first failure (as `failureOf` finds it) is
   * a failed connection or a conflict, within the attempts allowed. A connection that failed is destroyed, not
   * returned to the pool.
   */
  private async retrying<T>(attempt: (client: PoolClient) => Promise<T>, failureOf: (value: T) => unknown): Promise<T> {
    let connectionFailures = 0;
    let conflicts = 0;
    for (;;) {
      let client: PoolClient;
      try {
        client = await this.pool.connect();
      } catch (error) {
        if (++connectionFailures >= this.connectionAttempts) throw error;
        await sleep(25 * connectionFailures);
        continue;
      }
      let lost: unknown;
      const onError = (error: unknown) => {
        lost ??= error;
      };
      client.on('error', onError);
      let value: T;
      try {
        value = await attempt(client);
      } finally {
        client.removeListener('error', onError);
        client.release(lost === undefined ? undefined : (lost as Error));
      }
      const failure = failureOf(value);
      if (failure === undefined) return value;
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

async function run(client: PoolClient, steps: readonly Step[]): Promise<TransactionOutcome> {
  const pipelined = (client as { pipeline?: boolean }).pipeline === true;
  const send = (statement: Statement) => settle(client.query(config(statement)));
  const tx: Queryable = {
    query: (text, values) => client.query({ text, ...(values ? { values: [...values] } : {}) }),
  };
  const begin = send({ text: 'BEGIN' });
  let failed = !pipelined && !(await begin).ok;
  const sent: Promise<Settled>[] = [];
  for (const step of steps) {
    if (failed) {
      sent.push(Promise.resolve({ ok: false, error: NOT_SENT }));
      continue;
    }
    const outcome = typeof step === 'function' ? settle(step(tx).then(() => undefined)) : send(step);
    sent.push(outcome);
    // Without pipelining each statement waits for the last; a function's own queries queue behind what was sent.
    if (typeof step === 'function' || !pipelined) failed = !(await outcome).ok;
  }
  // After a failure PostgreSQL answers COMMIT with ROLLBACK anyway; say so when we know it already.
  const end = send({ text: failed ? 'ROLLBACK' : 'COMMIT' });
  const [begun, settled, ended] = await Promise.all([begin, Promise.all(sent), end]);
  return { begin: begun, steps: settled, end: ended, committed: ended.ok && ended.result?.command === 'COMMIT' };
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

function config(statement: Statement): { text: string; values?: unknown[] } {
  return { text: statement.text, ...(statement.values ? { values: [...statement.values] } : {}) };
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
