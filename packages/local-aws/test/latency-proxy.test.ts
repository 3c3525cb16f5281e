import { Client } from 'pg';
import { type LatencyProxy, startLatencyProxy } from '../src/latency-proxy';
import { postgresUrl } from './databases';

/** The latency proxy, against PostgreSQL and the real driver: each way delayed, answers untouched, order kept. */
let proxy: LatencyProxy;
let client: Client;

beforeAll(async () => {
  proxy = await startLatencyProxy(postgresUrl(), { oneWayMs: 40 });
  client = new Client({ connectionString: proxy.url });
  await client.connect();
});
afterAll(async () => {
  await client?.end();
  await proxy?.close();
});

const elapsed = async (run: () => Promise<unknown>) => {
  const started = performance.now();
  await run();
  return performance.now() - started;
};

describe('startLatencyProxy', () => {
  it('answers as PostgreSQL does, a round trip later', async () => {
    let rows: unknown[] = [];
    const ms = await elapsed(async () => {
      ({ rows } = await client.query('SELECT $1::text AS echoed', ['through']));
    });
    expect(rows).toEqual([{ echoed: 'through' }]);
    expect(ms).toBeGreaterThanOrEqual(2 * 40 - 1);
  });

  it('delays pipelined requests together, as a link does, and keeps their replies in order', async () => {
    const pipelined = new Client({ connectionString: proxy.url, pipeline: true } as ConstructorParameters<
      typeof Client
    >[0]);
    await pipelined.connect();
    try {
      let answers: number[] = [];
      const ms = await elapsed(async () => {
        const replies = await Promise.all(
          [1, 2, 3].map((n) => pipelined.query<{ n: number }>('SELECT $1::int AS n', [n])),
        );
        answers = replies.map((reply) => reply.rows[0]?.n as number);
      });
      expect(answers).toEqual([1, 2, 3]);
      // One round trip for all three (80 ms), not three (240 ms).
      expect(ms).toBeGreaterThanOrEqual(2 * 40 - 1);
      expect(ms).toBeLessThan(3 * 2 * 40);
    } finally {
      await pipelined.end();
    }
  });
});
