import type { Pool } from 'pg';
import { guardClient, surviveIdleErrors } from './database.js';
import { schemaV1, schemaV2, schemaV3, type TableNames, type TableOptions, tableNames } from './schema.js';

/** One step of the schema, applied once per table and recorded in the table's migrations table. */
export interface Migration {
  readonly version: number;
  readonly description: string;
  sql(names: TableNames): string;
}

/** Every migration, oldest first. A new version is appended here, never edited in place once released. */
export const MIGRATIONS: readonly Migration[] = [
  { version: 1, description: 'the keys table, its recovery and expiry indexes, the fence', sql: schemaV1 },
  { version: 2, description: 'recovery points: the steps of multi-step operations, in the fence too', sql: schemaV2 },
  {
    version: 3,
    description: 'steps and response headers as json, kept as sent: NUL and lone surrogates included',
    sql: schemaV3,
  },
];

function migrationsTable(names: TableNames): string {
  return `CREATE TABLE IF NOT EXISTS ${names.migrations} (
  version     integer     PRIMARY KEY,
  description text        NOT NULL,
  applied_at  timestamptz NOT NULL DEFAULT now()
)`;
}

/**
 * Applies the migrations this table has not had yet, in one transaction: at deploy (the CDK stack does), at the start
 * of a test run, or from a team's own deploy step. Safe to call from several processes at once: they queue on an
 * advisory lock, and the ones after the first find nothing left to do. The schema is created if missing.
 *
 * @returns the versions applied by this call (empty when the table was up to date).
 *
 * @example
 * const pool = new Pool({ connectionString: databaseUrl, pipeline: true });
 * await migrate(pool);                                   // idempotency_keys in the search_path's schema
 * await migrate(pool, { schema: 'payments', table: 'idempotency_keys' });
 */
export async function migrate(
  pool: Pick<Pool, 'connect'>,
  options: TableOptions = {},
): Promise<{ readonly applied: readonly number[] }> {
  const names = tableNames(options);
  // A deploy step's pool may have no 'error' listener of its own, and its connection goes back to it idle.
  surviveIdleErrors(pool);
  const client = await pool.connect();
  let broken: Error | undefined;
  // A session the server ends mid-migration is an 'error' on the client as well as on its query: heard, not fatal.
  guardClient(client);
  try {
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`keystone-idempotency ${names.table}`]);
      if (names.schema) await client.query(`CREATE SCHEMA IF NOT EXISTS ${names.schema}`);
      await client.query(migrationsTable(names));
      const { rows } = await client.query<{ version: number }>(`SELECT version FROM ${names.migrations}`);
      const done = new Set(rows.map((row) => row.version));
      const applied: number[] = [];
      for (const migration of MIGRATIONS) {
        if (done.has(migration.version)) continue;
        await client.query(migration.sql(names));
        await client.query(`INSERT INTO ${names.migrations} (version, description) VALUES ($1, $2)`, [
          migration.version,
          migration.description,
        ]);
        applied.push(migration.version);
      }
      await client.query('COMMIT');
      return { applied };
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

/**
 * Everything {@link migrate} runs on a database that has none of it, as one SQL script, for a team that applies
 * schema changes with a tool of its own (run it in one transaction). It records the versions it applies in the same
 * migrations table, so `migrate()` run later finds them done.
 */
export function migrationSql(options: TableOptions = {}): string {
  const names = tableNames(options);
  const steps = [
    ...(names.schema ? [`CREATE SCHEMA IF NOT EXISTS ${names.schema};`] : []),
    `${migrationsTable(names)};`,
    ...MIGRATIONS.flatMap((migration) => [
      migration.sql(names).trim(),
      `INSERT INTO ${names.migrations} (version, description) VALUES (${migration.version}, '${migration.description.replaceAll("'", "''")}');`,
    ]),
  ];
  return `${steps.join('\n\n')}\n`;
}
