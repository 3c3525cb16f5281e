import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { startPostgresFaultProxy } from '@keystone-idempotency/local-aws/postgres-fault-proxy';
import { leaseOf } from '../../src/engine/decide';
import { joinScopedKey } from '../../src/engine/key';
import type { StepProgress } from '../../src/engine/steps';
import { MIGRATIONS, migrate, migrationSql } from '../../src/postgres/migrate';
import { type TableNames, tableNames } from '../../src/postgres/schema';
import { PostgresStore } from '../../src/postgres/store';
import { postgresUrl, testPostgres } from '../support/postgres';

/** The schema ships as migrations a team applies with `migrate()` (or as SQL, with its own tool), once each. */
const pg = testPostgres();
const ALL = MIGRATIONS.map((migration) => migration.version);
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

/** A table as a release with only the migrations up to `version` left it. */
async function tableAt(schema: string, version: number): Promise<TableNames> {
  const names = tableNames({ schema });
  await pg.pool.query(`CREATE SCHEMA "${schema}"`);
  await pg.pool.query(
    `CREATE TABLE ${names.migrations} (version integer PRIMARY KEY, description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
  );
  for (const migration of MIGRATIONS.filter((m) => m.version <= version)) {
    await pg.pool.query(migration.sql(names));
    await pg.pool.query(`INSERT INTO ${names.migrations} (version, description) VALUES ($1, $2)`, [
      migration.version,
      migration.description,
    ]);
  }
  return names;
}

/** The types of the columns version 3 changed, as the database has them. */
async function columnTypes(schema: string): Promise<Record<string, string>> {
  const { rows } = await pg.pool.query<{ column_name: string; data_type: string }>(
    `SELECT column_name, data_type FROM information_schema.columns
      WHERE table_schema = $1 AND table_name = 'idempotency_keys' AND column_name IN ('steps', 'response_headers')`,
    [schema],
  );
  return Object.fromEntries(rows.map((row) => [row.column_name, row.data_type]));
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
    expect(await versions(schema)).toEqual(ALL);
  });

  it('lets concurrent deploys race: one applies, the others wait for it and find nothing left to do', async () => {
    const schema = freshSchema();
    const pools = Array.from({ length: 4 }, () => pg.pool2({ max: 1 }));
    const results = await Promise.all(pools.map((pool) => migrate(pool, { schema })));
    expect(results.map((r) => r.applied.length).sort()).toEqual([0, 0, 0, ALL.length]);
    expect(await versions(schema)).toEqual(ALL);
  });

  it('puts a table of another name beside the first, each with its own functions and record of versions', async () => {
    const schema = freshSchema();
    await migrate(pg.pool, { schema });
    expect(await migrate(pg.pool, { schema, table: 'webhook_keys' })).toEqual({ applied: ALL });
    expect(await versions(schema, 'webhook_keys')).toEqual(ALL);
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
    expect(await versions(schema)).toEqual(ALL);
    expect(await migrate(pg.pool, { schema })).toEqual({ applied: [] });
  });
});

describe('version 2 (recovery points)', () => {
  it('upgrades a table of version 1 in place: its rows read as before, and the fence reports steps', async () => {
    const schema = freshSchema();
    const names = tableNames({ schema });
    const v1 = MIGRATIONS.find((m) => m.version === 1)!;
    await pg.pool.query(`CREATE SCHEMA "${schema}"`);
    await pg.pool.query(
      `CREATE TABLE ${names.migrations} (version integer PRIMARY KEY, description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    await pg.pool.query(v1.sql(names));
    await pg.pool.query(`INSERT INTO ${names.migrations} (version, description) VALUES (1, $1)`, [v1.description]);
    // A row as version 1 holds it: an operation in progress when the upgrade is deployed (migrate first, then code).
    const clientKey = randomUUID();
    const now = Date.now();
    await pg.pool.query(
      `INSERT INTO ${names.table} (scope, key, status, fingerprint, lease_token, lease_expires_at, downstream_key,
         attempt, created_at, expires_at)
       VALUES ('acct_1|op', $1, 'IN_PROGRESS', 'fp', 'token-1', $2, 'idk_1', 1, $3, $4)`,
      [clientKey, new Date(now + 60_000), new Date(now), new Date(now + 3_600_000)],
    );
    expect(await migrate(pg.pool, { schema })).toEqual({ applied: [2, 3] });
    const store = new PostgresStore({ pool: pg.pool, schema });
    const key = joinScopedKey('acct_1|op', clientKey);
    const record = await store.get(key);
    expect(record).toMatchObject({ status: 'IN_PROGRESS', leaseToken: 'token-1', downstreamKey: 'idk_1' });
    expect(record?.progress).toBeUndefined();
    const claimed = { kind: 'acquired' as const, lease: leaseOf(record!, false) };
    // The row claimed under version 1 is checkpointed under version 2.
    const progress = {
      revision: 1,
      steps: [{ name: 'charge', state: 'done' as const, result: { id: 'ch_1' }, attempt: 1, at: 1 }],
    };
    await store.checkpoint!(claimed.lease, progress);
    expect((await store.get(key))?.progress).toEqual(progress);
    // The fence's detail carries the steps: another owner's checkpoint learns the record with them.
    const stale = store.checkpoint!({ ...claimed.lease, leaseToken: 'token-2' }, { ...progress, revision: 2 });
    await expect(stale).rejects.toMatchObject({ name: 'LeaseLostError', record: { progress } });
  });
});

describe('version 3 (steps and response headers kept as sent)', () => {
  it('upgrades a table of version 2 in place: its rows read as before, and a NUL or a lone surrogate lands after', async () => {
    const schema = freshSchema();
    const names = await tableAt(schema, 2);
    const now = Date.now();
    const [running, done] = [randomUUID(), randomUUID()];
    const steps: StepProgress['steps'] = [
      { name: 'charge', state: 'done', result: { id: 'ch_1', note: 'é 😀 \ufffd' }, attempt: 1, at: 1 },
    ];
    // Rows as version 2 holds them (migrate first, then code): one in progress with its steps, one completed.
    await pg.pool.query(
      `INSERT INTO ${names.table} (scope, key, status, fingerprint, lease_token, lease_expires_at, downstream_key,
         attempt, created_at, expires_at, steps, step_revision)
       VALUES ('acct_1|op', $1, 'IN_PROGRESS', 'fp', 'token-1', $2, 'idk_1', 1, $3, $4, $5::jsonb, 1)`,
      [running, new Date(now + 60_000), new Date(now), new Date(now + 3_600_000), JSON.stringify(steps)],
    );
    await pg.pool.query(
      `INSERT INTO ${names.table} (scope, key, status, fingerprint, lease_token, lease_expires_at, downstream_key,
         attempt, created_at, completed_at, expires_at, response_status, response_headers, response_body)
       VALUES ('acct_1|op', $1, 'COMPLETED', 'fp', 'token-2', $2, 'idk_2', 1, $2, $2, $3, 201,
               '{"Content-Type": "application/json"}'::jsonb, convert_to('{"id":"pay_1"}', 'UTF8'))`,
      [done, new Date(now), new Date(now + 3_600_000)],
    );
    expect(await columnTypes(schema)).toEqual({ steps: 'jsonb', response_headers: 'jsonb' });
    expect(await migrate(pg.pool, { schema })).toEqual({ applied: [3] });
    expect(await columnTypes(schema)).toEqual({ steps: 'json', response_headers: 'json' });

    const store = new PostgresStore({ pool: pg.pool, schema });
    const runningKey = joinScopedKey('acct_1|op', running);
    const record = await store.get(runningKey);
    expect(record?.progress).toEqual({ revision: 1, steps });
    expect((await store.get(joinScopedKey('acct_1|op', done)))?.response).toEqual({
      statusCode: 201,
      body: '{"id":"pay_1"}',
      headers: { 'Content-Type': 'application/json' },
    });
    const lease = leaseOf(record!, false);
    const odd: StepProgress = {
      revision: 2,
      steps: [...steps, { name: 'email', state: 'done', result: ['\u0000', '\ud800', 'a\udfffb'], attempt: 1, at: 2 }],
    };
    await store.checkpoint!(lease, odd);
    expect((await store.get(runningKey))?.progress).toEqual(odd);
    // The fence's record is built as json too: another owner learns the steps exactly, from its error.
    const stale = store.checkpoint!({ ...lease, leaseToken: 'token-9' }, { ...odd, revision: 3 });
    await expect(stale).rejects.toMatchObject({ name: 'LeaseLostError', record: { progress: odd } });
  });

  it('leaves version 2 whole when its session is killed mid-way, and applies on the next call', async () => {
    const schema = freshSchema();
    const names = await tableAt(schema, 2);
    const applicationName = `migrate-${randomUUID().slice(0, 8)}`;
    const migrating = pg.pool2({ max: 1, application_name: applicationName });
    // A reader holding the table: the rewrite waits for its lock, and is killed while it waits.
    const reader = await pg.pool2({ max: 1 }).connect();
    try {
      await reader.query('BEGIN');
      await reader.query(`SELECT FROM ${names.table} LIMIT 1`);
      const upgrade = migrate(migrating, { schema });
      upgrade.catch(() => undefined);
      let waiting: number | undefined;
      for (let tries = 0; waiting === undefined && tries < 200; tries++) {
        const { rows } = await pg.pool.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
          [applicationName],
        );
        waiting = rows[0]?.pid;
        if (waiting === undefined) await delay(10);
      }
      expect(waiting).toBeDefined();
      await pg.pool.query('SELECT pg_terminate_backend($1)', [waiting]);
      await expect(upgrade).rejects.toThrow(/terminating connection/);
    } finally {
      await reader.query('ROLLBACK');
      reader.release();
    }
    expect(await versions(schema)).toEqual([1, 2]);
    expect(await columnTypes(schema)).toEqual({ steps: 'jsonb', response_headers: 'jsonb' });
    expect(await migrate(migrating, { schema })).toEqual({ applied: [3] });
    expect(await columnTypes(schema)).toEqual({ steps: 'json', response_headers: 'json' });
  });

  it('is found done when the reply to its COMMIT was lost: the deploy step, run again, applies nothing', async () => {
    const proxy = await startPostgresFaultProxy(postgresUrl());
    try {
      const schema = freshSchema();
      await tableAt(schema, 2);
      const rule = proxy.arm({
        match: {
          name: 'COMMIT of version 3',
          when: (request) =>
            request.text === 'COMMIT' && request.transaction.some((sent) => sent.text.includes('TYPE json')),
        },
        fault: { mode: 'drop-reply' },
        count: 1,
      });
      const pool = pg.pool2({ connectionString: proxy.url, max: 1 });
      await expect(migrate(pool, { schema })).rejects.toThrow();
      expect(rule.fired()).toBe(1);
      expect(await migrate(pool, { schema })).toEqual({ applied: [] });
      expect(await versions(schema)).toEqual(ALL);
      expect(await columnTypes(schema)).toEqual({ steps: 'json', response_headers: 'json' });
    } finally {
      await proxy.close();
    }
  });
});
