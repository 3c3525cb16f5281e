import type { Pool, PoolClient, QueryResult, QueryResultRow } from 'pg';

/**
 * The reference this benchmark measures the PostgreSQL store against: `withIdempotency` exactly as the design
 * documents write it (/work/shared/seeds/000_*: "Storing keys next to the work"). One transaction for everything:
 *
 * ```
 * BEGIN
 * INSERT INTO idempotency_keys ... ON CONFLICT DO NOTHING RETURNING key
 *   ├─ no row: SELECT ... FOR UPDATE; stored response, or a conflict, or "in progress"
 *   └─ a row:  work(tx)  (the handler's own writes, and any outside call it makes)
 *              UPDATE idempotency_keys SET status = 'completed', response = ...
 * COMMIT
 * ```
 *
 * What it costs, and what the benchmark shows: the transaction, with its pooled connection and the row lock on the
 * key, is held for the whole of `work`, including an outside call; a concurrent duplicate's INSERT waits on the
 * unique index until that transaction ends, holding a connection of its own while it waits. Every statement is
 * awaited before the next is sent, as the document's code does (a pipelining pool changes nothing here).
 *
 * It is here as the reference it is, not as library code: nothing outside bench/ uses it. It is kept faithful to the
 * document (its table, its statements, its two errors); the only additions are what the document leaves to its
 * helpers: `db.transaction` (take a pooled connection, BEGIN, COMMIT or ROLLBACK, give it back) and `tx.one`.
 */

/** The document's table, as written (in a schema of the benchmark's choosing). */
export function documentTableSql(schema: string): string {
  return `CREATE SCHEMA IF NOT EXISTS "${schema}";
CREATE TABLE IF NOT EXISTS "${schema}".idempotency_keys (
  account_id   bigint      not null,
  key          text        not null,
  request_hash text        not null,
  status       text        not null check (status in ('started', 'completed')),
  response     jsonb,
  created_at   timestamptz not null default now(),
  primary key (account_id, key)
);`;
}

/** What the document's handlers return and store: any JSON value. */
export type StoredResponse = unknown;

/** A connection inside the transaction: `query`, and `one` for a statement that must return exactly one row. */
export interface Tx {
  query<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>>;
  one<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<R>;
}

export class ConflictError extends Error {
  override readonly name = 'ConflictError';
}

export class RetryLaterError extends Error {
  override readonly name = 'RetryLaterError';
}

/** The document's `Db`: a pool, and a transaction helper as any query builder has one. */
export class Db {
  constructor(
    private readonly pool: Pick<Pool, 'connect'>,
    readonly schema: string,
  ) {}

  /** A pooled connection for the whole of `work`: BEGIN, `work`, COMMIT (ROLLBACK if it throws). */
  async transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      try {
        const result = await work(txOf(client));
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch((rollbackError: Error) => {
          broken = rollbackError;
        });
        throw error;
      }
    } finally {
      client.release(broken);
    }
  }
}

function txOf(client: PoolClient): Tx {
  return {
    query: (text, values) => client.query(text, values),
    async one(text, values) {
      const { rows } = await client.query(text, values);
      if (rows.length !== 1) throw new Error(`expected one row, got ${rows.length}`);
      return rows[0] as never;
    },
  };
}

/** The document's function, statement for statement (the table qualified by the Db's schema). */
export async function withIdempotency(
  db: Db,
  scope: { accountId: number; key: string; requestHash: string },
  work: (tx: Tx) => Promise<StoredResponse>,
): Promise<StoredResponse> {
  const table = `"${db.schema}".idempotency_keys`;
  return db.transaction(async (tx) => {
    const claimed = await tx.query(
      `insert into ${table} (account_id, key, request_hash, status)
       values ($1, $2, $3, 'started')
       on conflict (account_id, key) do nothing
       returning key`,
      [scope.accountId, scope.key, scope.requestHash],
    );

    if (claimed.rowCount === 0) {
      const existing = await tx.one<{ request_hash: string; status: string; response: StoredResponse }>(
        `select request_hash, status, response from ${table}
         where account_id = $1 and key = $2 for update`,
        [scope.accountId, scope.key],
      );
      if (existing.request_hash !== scope.requestHash) throw new ConflictError('Key reused with a different request');
      if (existing.status === 'completed') return existing.response;
      throw new RetryLaterError('A request with this key is still in progress');
    }

    const response = await work(tx);
    await tx.query(
      `update ${table} set status = 'completed', response = $3
       where account_id = $1 and key = $2`,
      [scope.accountId, scope.key, response],
    );
    return response;
  });
}
