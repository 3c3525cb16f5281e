import { cpSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { Client } from 'pg';
import { type PostgresLocal, postgresBinaries, startPostgresLocal } from '../src/postgres-local';

/** Its own cluster (not the run's shared one), so the test can look at the processes and files it made. Linux: /proc. */
jest.setTimeout(60_000);

let server: PostgresLocal;

beforeAll(async () => {
  server = await startPostgresLocal({ settings: { work_mem: '8MB' } });
});
afterAll(() => server?.stop());

async function query<T>(url: string, text: string): Promise<T[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows as T[];
  } finally {
    await client.end();
  }
}

describe('startPostgresLocal', () => {
  it('serves PostgreSQL on loopback, with the settings asked for', async () => {
    expect(server.url).toMatch(/^postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres$/);
    const [row] = await query<{ work_mem: string; fsync: string; listen: string }>(
      server.url,
      "SELECT current_setting('work_mem') AS work_mem, current_setting('fsync') AS fsync, current_setting('listen_addresses') AS listen",
    );
    expect(row).toEqual({ work_mem: '8MB', fsync: 'off', listen: '127.0.0.1' });
  });

  it('keeps its cluster under the system temp directory, owned by a user PostgreSQL accepts (never root)', () => {
    expect(relative(tmpdir(), server.workDir).startsWith('..')).toBe(false);
    const owner = statSync(`${server.workDir}/data`).uid;
    expect(owner).not.toBe(0);
    if (userInfo().uid !== 0) expect(owner).toBe(userInfo().uid);
  });

  it('runs binaries only this process may reach (a checkout under /root, as root); stopped, leaves nothing', async () => {
    const hidden = mkdtempSync(join(tmpdir(), 'hidden-')); // mode 700, owned by whoever runs the test
    try {
      const native = join(hidden, 'native');
      cpSync(dirname(dirname(postgresBinaries().initdb)), native, { recursive: true, verbatimSymlinks: true });
      const other = await startPostgresLocal({ nativeDir: native });
      const processes = (await query<{ pid: number }>(other.url, 'SELECT pid FROM pg_stat_activity')).map((r) => r.pid);
      expect(processes.length).toBeGreaterThan(0);

      // and, stopped, leaves no server process and no directory behind
      await other.stop();
      expect(existsSync(other.workDir)).toBe(false);
      for (const pid of [other.pid, ...processes]) expect(existsSync(`/proc/${pid}`)).toBe(false);
    } finally {
      rmSync(hidden, { recursive: true, force: true });
    }
  });
});
