import { randomUUID } from 'node:crypto';
import { RoundTrips } from '@keystone-idempotency/local-aws/pg-meter';
import { Pool, type PoolConfig } from 'pg';
import { migrate } from '../../src/postgres/migrate';
import { PostgresStore, type PostgresStoreOptions } from '../../src/postgres/store';

/** The PostgreSQL the jest global setup started. */
export function postgresUrl(): string {
  const url = process.env.POSTGRES_URL;
  if (!url) throw new Error('POSTGRES_URL is not set: run tests through jest (global setup starts PostgreSQL)');
  return url;
}

export interface TestPostgres {
  /** A pipelined pool of up to 8 connections, counting its round trips. */
  readonly pool: Pool;
  readonly roundTrips: RoundTrips;
  /** This file's schema: the keys table, its functions, and an `effects (pk, sk)` table. */
  readonly schema: string;
  /** `"schema".effects`, quoted. */
  readonly effectsTable: string;
  /** Another pool on the same database (closed with the file), e.g. without pipelining, or through a proxy. */
  pool2(config?: PoolConfig): Pool;
  /** A store on this file's keys table. */
  store(options?: Partial<PostgresStoreOptions>): PostgresStore;
  /** How many effect rows hold this pk: the witness for "the effect happened". */
  rowsUnder(pk: string): Promise<number>;
}

/**
 * The PostgreSQL a test file works against: a schema of its own (created, migrated and given an effects table in
 * `beforeAll`, dropped in `afterAll`), so files never see each other's data, and pools that are closed with it.
 */
export function testPostgres(): TestPostgres {
  const schema = `test_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const effectsTable = `"${schema}".effects`;
  const roundTrips = new RoundTrips();
  const pools: Pool[] = [];
  const pool2 = (config: PoolConfig = {}) => {
    const pool = new Pool({ connectionString: postgresUrl(), max: 8, idleTimeoutMillis: 0, ...config });
    pool.on('error', () => undefined); // a connection a test broke on purpose, while idle
    pools.push(pool);
    return pool;
  };
  // Idle connections are kept (no idle timeout), so a later test never pays, or counts, a new connection's handshake.
  const pool = pool2({ pipeline: true, stream: roundTrips.socket() });
  beforeAll(async () => {
    await migrate(pool, { schema });
    await pool.query(`CREATE TABLE ${effectsTable} (pk text NOT NULL, sk text NOT NULL, PRIMARY KEY (pk, sk))`);
  });
  afterAll(async () => {
    await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
    await Promise.all(pools.map((p) => p.end()));
  });
  return {
    pool,
    roundTrips,
    schema,
    effectsTable,
    pool2,
    store: (options = {}) => new PostgresStore({ pool, schema, leaseSeconds: 30, ...options }),
    async rowsUnder(pk: string) {
      const { rows } = await pool.query<{ count: string }>(`SELECT count(*) FROM ${effectsTable} WHERE pk = $1`, [pk]);
      return Number(rows[0]?.count);
    },
  };
}
