import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'pg';
import { ConnectionTracker, RoundTrips } from '../src/pg-meter';
import { postgresUrl } from './databases';

describe('RoundTrips', () => {
  const roundTrips = new RoundTrips();
  const pool = new Pool({
    connectionString: postgresUrl(),
    max: 1,
    idleTimeoutMillis: 0,
    pipeline: true,
    stream: roundTrips.socket(),
  });
  afterAll(() => pool.end());

  it('counts a pipelined transaction as one round trip, and awaited statements as one each', async () => {
    await pool.query('SELECT 1'); // the connection's handshake, out of the way
    const client = await pool.connect();
    try {
      roundTrips.reset();
      await Promise.all([client.query('BEGIN'), client.query('SELECT 1'), client.query('COMMIT')]);
      expect(roundTrips.count).toBe(1);
      roundTrips.reset();
      await client.query('BEGIN');
      await client.query('SELECT 1');
      await client.query('COMMIT');
      expect(roundTrips.count).toBe(3);
    } finally {
      client.release();
    }
  });
});

describe('ConnectionTracker', () => {
  const pool = new Pool({ connectionString: postgresUrl(), max: 4, idleTimeoutMillis: 0 });
  const connections = new ConnectionTracker(pool);
  afterAll(() => pool.end());

  it("tells each call's connections from the others' while calls run at once", async () => {
    const seen: Record<string, number> = {};
    const holding = connections.within(async () => {
      const client = await pool.connect();
      await sleep(50);
      seen.holding = connections.heldByThisCall();
      client.release();
      seen.afterRelease = connections.heldByThisCall();
    });
    const between = connections.within(async () => {
      await pool.query('SELECT 1'); // pool.query takes and gives back a connection (the callback form)
      await sleep(20);
      seen.between = connections.heldByThisCall();
    });
    await Promise.all([holding, between]);
    expect(seen).toEqual({ holding: 1, afterRelease: 0, between: 0 });
  });

  it('reports the most connections held at once, and the mean over the watch', async () => {
    connections.start();
    const clients = await Promise.all([pool.connect(), pool.connect(), pool.connect()]);
    await sleep(40);
    for (const client of clients) client.release();
    await sleep(40);
    const use = connections.stop();
    expect(use.peakHeld).toBe(3);
    // Three held for about half of the watch: about 1.5 on average.
    expect(use.meanHeld).toBeGreaterThan(0.9);
    expect(use.meanHeld).toBeLessThan(2.5);
    expect(use.peakWaiting).toBe(0);
  });
});
