import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { Pool } from 'pg';
import { scopedKey } from '../../src/engine/key';
import { migrate } from '../../src/postgres/migrate';
import { PostgresStore } from '../../src/postgres/store';
import { postgresUrl, testPostgres } from '../support/postgres';
import { runTsx, type TsxProgram } from '../support/tsx-program';

/**
 * pg emits an idle connection's error (a session the server ended: an administrator, a failover, RDS Proxy closing
 * idle connections) on the Pool itself, and an 'error' event nobody listens to ends the process. The store listens on
 * whatever pool it is given, so a team that builds its pool as the README does keeps its process.
 */
const pg = testPostgres();
const readme = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');

/** The README's own construction of a store, as a team copies it: a Pool built inline, nothing else on it. */
function readmeConstruction(): string {
  const line = readme.split('\n').find((text) => /new PostgresStore\(\{ pool: new Pool\(/.test(text));
  if (!line) throw new Error('the package README no longer builds a PostgresStore on an inline new Pool(...)');
  return line;
}

/** Backends of this test's child, by the application name its connection string gives them. */
async function backends(applicationName: string): Promise<number[]> {
  const { rows } = await pg.pool.query<{ pid: number }>(
    'SELECT pid FROM pg_stat_activity WHERE application_name = $1 ORDER BY pid',
    [applicationName],
  );
  return rows.map((row) => row.pid);
}

/**
 * A Node process (tsx, as a team runs its code locally) running the README's store: each line on its stdin is ids
 * to run one operation each for, side by side.
 */
function startReadmeProcess(applicationName: string): TsxProgram & { call(ids: string): Promise<unknown> } {
  const program = `
import { createInterface } from 'node:readline';
import { makeIdempotent } from 'keystone-idempotency';
import { PostgresStore } from 'keystone-idempotency/postgres';
import { Pool } from 'pg';

${readmeConstruction()}

const work = makeIdempotent(async (input: { id: string }) => ({ id: input.id }), {
  store,
  name: 'readme-pool',
  key: (input) => input.id,
});
for await (const line of createInterface({ input: process.stdin })) {
  try {
    console.log(JSON.stringify(await Promise.all(line.split(' ').map((id) => work({ id })))));
  } catch (error) {
    console.log(JSON.stringify({ error: String(error) }));
  }
}
`;
  const url = new URL(postgresUrl());
  // The README's table name, unqualified, resolved in this file's schema; the name tells its sessions apart.
  url.searchParams.set('options', `-c search_path=${pg.schema}`);
  url.searchParams.set('application_name', applicationName);
  const running = runTsx(program, { DATABASE_URL: url.toString() });
  const lines = createInterface({ input: running.child.stdout })[Symbol.asyncIterator]();
  return {
    ...running,
    async call(ids: string) {
      running.child.stdin.write(`${ids}\n`);
      const next = await Promise.race([lines.next(), running.exited.then(() => undefined)]);
      if (!next || next.done) throw new Error(`the process ended before it answered ${ids}:\n${running.stderr()}`);
      return JSON.parse(next.value);
    },
  };
}

describe('a pool whose idle connection the server ends', () => {
  it("keeps the README's process alive, and its next call runs on a new connection", async () => {
    const applicationName = `readme-pool-${randomUUID().slice(0, 8)}`;
    const running = startReadmeProcess(applicationName);
    try {
      // Side by side, so that the pool holds more than one connection.
      expect(await running.call('a b c')).toEqual([{ id: 'a' }, { id: 'b' }, { id: 'c' }]);
      const before = await backends(applicationName);
      expect(before.length).toBeGreaterThan(1);
      // Idle in the pool now: what RDS Proxy's idle cut, a failover or an operator does to it.
      await pg.pool.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [before]);
      const ended = await Promise.race([running.exited, delay(1000).then(() => undefined)]);
      expect({ ended, stderr: ended ? running.stderr().split('\n').slice(0, 5).join('\n') : '' }).toEqual({
        ended: undefined,
        stderr: '',
      });
      expect(await running.call('d')).toEqual([{ id: 'd' }]);
      const after = await backends(applicationName);
      expect(after.length).toBeGreaterThan(0);
      expect(after.filter((pid) => before.includes(pid))).toEqual([]);
      // Said once, for the several connections that went: nothing else listens in this process.
      expect(running.stderr().match(/closed an idle PostgreSQL connection/g)).toHaveLength(1);
    } finally {
      // Its pool keeps idle connections (and so the process) open: end it here.
      running.child.kill('SIGKILL');
      await running.exited;
    }
  }, 60_000);
});

describe("the store's listener on the pool", () => {
  it("leaves the application's own listener to hear every error, and says nothing itself", async () => {
    const applicationName = `own-listener-${randomUUID().slice(0, 8)}`;
    const pool = new Pool({ connectionString: postgresUrl(), application_name: applicationName, max: 4 });
    const heard: unknown[] = [];
    pool.on('error', (error) => heard.push(error));
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      await migrate(pool, { schema: pg.schema });
      const stores = [new PostgresStore({ pool, schema: pg.schema }), new PostgresStore({ pool, schema: pg.schema })];
      // One listener of the store's beside the application's, however many stores and migrations share the pool.
      expect(pool.listenerCount('error')).toBe(2);
      await Promise.all(
        stores.map((store) => store.claim(scopedKey({ accountId: 'a', operation: 'op', key: randomUUID() }), 'fp')),
      );
      const idle = await backends(applicationName);
      expect(idle.length).toBeGreaterThan(0);
      await pg.pool.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [idle]);
      for (let waited = 0; heard.length < idle.length && waited < 2000; waited += 20) await delay(20);
      expect(heard).toHaveLength(idle.length);
      expect(heard[0]).toMatchObject({ code: '57P01' });
      expect(warn).not.toHaveBeenCalled();
      // The pool opens another connection for the next call.
      const next = await stores[0]!.claim(scopedKey({ accountId: 'a', operation: 'op', key: randomUUID() }), 'fp');
      expect(next.kind).toBe('acquired');
    } finally {
      warn.mockRestore();
      await pool.end();
    }
  });
});
