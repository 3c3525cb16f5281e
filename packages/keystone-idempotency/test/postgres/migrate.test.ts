import { randomUUID } from 'node:crypto';
import { MIGRATIONS, migrate, migrationSql } from '../../src/postgres/migrate';
import { testPostgres } from '../support/postgres';

/** The schema ships as migrations a team applies with `migrate()` (or as SQL, with its own tool), once each. */
const pg = testPostgres();
const created: string[] = [];
const freshSchema = () => {
  const schema = `m_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  created.push(schema);
  return schema;
};

async function versions(schema: string, table = 'idempotency_keys'): Promise<number[]> {
  const { rows } = await pg.pool.query<{ version: number }>(
    `SELECT version FROM "${schema}"."${table}_migrations" ORDER BY version`,
  );
  return rows.map((row) => row.version);
}

afterEach(async () => {
  for (const schema of created.splice(0)) await pg.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
});

describe('migrate', () => {
  it('creates the keys table with its primary key on (scope, key), its indexes and its functions', async () => {
    const schema = freshSchema();
    expect(await migrate(pg.pool, { schema })).toEqual({ applied: MIGRATIONS.map((m) => m.version) });
    const { rows: key } = await pg.pool.query(
      `SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
        WHERE i.indrelid = $1::regclass AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)`,
      [`"${schema}".idempotency_keys`],
    );
    expect(key.map((row) => row.attname)).toEqual(['scope', 'key']);
    const { rows: indexes } = await pg.pool.query<{ indexname: string; indexdef: string }>(
      'SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = $2 ORDER BY indexname',
      [schema, 'idempotency_keys'],
    );
    expect(indexes.map((index) => index.indexname)).toEqual([
      'idempotency_keys_expiry',
      'idempotency_keys_pkey',
      'idempotency_keys_recovery',
    ]);
    // Partial: only unfinished recoverable operations are in it.
    expect(indexes.find((index) => index.indexname === 'idempotency_keys_recovery')?.indexdef).toContain(
      'WHERE (recover_at IS NOT NULL)',
    );
    const { rows: functions } = await pg.pool.query<{ proname: string }>(
      'SELECT proname FROM pg_proc WHERE pronamespace = $1::regnamespace ORDER BY proname',
      [schema],
    );
    expect(functions.map((f) => f.proname)).toEqual(['idempotency_keys_expect_rows', 'idempotency_keys_fence']);
  });

  it('applies each migration once, however often it is called', async () => {
    const schema = freshSchema();
    await migrate(pg.pool, { schema });
    expect(await migrate(pg.pool, { schema })).toEqual({ applied: [] });
    expect(await versions(schema)).toEqual([1]);
  });

  it('lets concurrent deploys race: one applies, the others wait for it and find nothing left to do', async () => {
    const schema = freshSchema();
    const pools = Array.from({ length: 4 }, () => pg.pool2({ max: 1 }));
    const results = await Promise.all(pools.map((pool) => migrate(pool, { schema })));
    expect(results.map((r) => r.applied.length).sort()).toEqual([0, 0, 0, 1]);
    expect(await versions(schema)).toEqual([1]);
  });

  it('puts a table of another name beside the first, each with its own functions and record of versions', async () => {
    const schema = freshSchema();
    await migrate(pg.pool, { schema });
    expect(await migrate(pg.pool, { schema, table: 'webhook_keys' })).toEqual({ applied: [1] });
    expect(await versions(schema, 'webhook_keys')).toEqual([1]);
  });

  it('rolls back a migration that fails half-way, leaving nothing behind', async () => {
    const schema = freshSchema();
    await pg.pool.query(`CREATE SCHEMA "${schema}"`);
    // Taken already: the migration creates the table, then fails on its index.
    await pg.pool.query(`CREATE TABLE "${schema}"."idempotency_keys_recovery" (id int)`);
    await expect(migrate(pg.pool, { schema })).rejects.toThrow(/already exists/);
    const { rows } = await pg.pool.query('SELECT to_regclass($1) AS keys', [`"${schema}".idempotency_keys`]);
    expect(rows[0].keys).toBeNull();
  });
});

describe('migrationSql', () => {
  it('is what migrate() runs, as a script a team applies with its own tool; migrate() then finds it done', async () => {
    const schema = freshSchema();
    const client = await pg.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(migrationSql({ schema }));
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(await versions(schema)).toEqual([1]);
    expect(await migrate(pg.pool, { schema })).toEqual({ applied: [] });
  });
});
