import { randomUUID } from 'node:crypto';
import {
  IdempotencyError,
  type Lease,
  makeIdempotent,
  OperationInFlightError,
  type StoredResponse,
  scopedKey,
} from '../../src/engine';
import type { RedisStore } from '../../src/redis';
import { FakeClock } from '../support/fake-clock';
import { redisClient, redisEngineCommands, testRedis } from '../support/redis';

/**
 * A connection that goes silent (no FIN, no RST: a partition, a proxy that stopped forwarding), through the fault
 * proxy, mid-request (the script never reaches Redis) and mid-commit (Redis ran it, the reply never comes). Every call
 * ends by its deadline with a retryable error, the silent connection is not used again, and nothing is lost or done
 * twice.
 */
const redis = testRedis();
const commands = redisEngineCommands();
const created: StoredResponse = { statusCode: 201, body: '{"id":"pay_1"}', headers: {} };
const newKey = () => scopedKey({ accountId: 'acct_deadline', operation: 'POST /payments', key: randomUUID() });
/** What the tests allow past a deadline: a timer's lateness on a loaded machine. */
const SLACK_MS = 300;

/** A deadline `ms` from each call's start, as a Lambda invocation's end is its own. */
const within = (ms: number) => {
  let end = 0;
  return { start: () => (end = Date.now() + ms), deadline: () => end };
};

async function acquire(s: RedisStore, key: string): Promise<Lease> {
  const outcome = await s.claim(key, 'fp');
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

async function timed<T>(call: Promise<T>): Promise<{ ms: number; outcome: T | unknown }> {
  const started = Date.now();
  const outcome = await call.catch((error: unknown) => error);
  return { ms: Date.now() - started, outcome };
}

describe('a connection that goes silent, one sending per call', () => {
  it.each(['request', 'reply'] as const)(
    'mid-claim (at the %s): the call fails retryably by its deadline, and the next goes on a fresh connection',
    async (at) => {
      const time = within(1000);
      const s = redis.store({ client: await redis.newProxiedClient(), attempts: 1, deadline: time.deadline });
      const key = newKey();
      time.start();
      await s.get(newKey()); // the server's check made
      const silent = redis.proxy.arm({ match: commands.claim(key), fault: { mode: 'stall', at }, count: 1 });
      time.start();
      const { ms, outcome } = await timed(s.claim(key, 'fp'));
      expect(silent.fired()).toBe(1);
      expect(outcome).toBeInstanceOf(IdempotencyError);
      expect(String(outcome)).toMatch(/no reply from Redis/);
      expect(ms).toBeLessThan(1000 + SLACK_MS);
      // The next call (the client's retry) answers at once, on a fresh connection: acquired if the claim never
      // reached Redis, in flight if it landed (its lease runs out, then the same downstream key takes it over).
      time.start();
      const retry = await timed(s.claim(key, 'fp'));
      expect(retry.ms).toBeLessThan(500);
      expect(retry.outcome).toMatchObject({ kind: at === 'request' ? 'acquired' : 'in_flight' });
    },
  );

  it('mid-commit (at the request): fails by the deadline, nothing written; after the lease the retry takes over under the same downstream key, effects once', async () => {
    const clock = new FakeClock(Date.now());
    const time = within(800);
    const s = redis.store({ client: await redis.newProxiedClient(), attempts: 1, deadline: time.deadline, clock });
    const key = newKey();
    const count = s.effectKey(`charges:${key}`);
    time.start();
    const lease = await acquire(s, key);
    redis.proxy.arm({ match: commands.commit(key), fault: { mode: 'stall', at: 'request' }, count: 1 });
    time.start();
    const { ms, outcome } = await timed(s.commit(lease, created, [{ incrBy: count, by: 1 }]));
    expect(outcome).toBeInstanceOf(IdempotencyError);
    expect(ms).toBeLessThan(800 + SLACK_MS);
    expect(await redis.direct.exists(count)).toBe(0);
    clock.advance(30_001);
    time.start();
    const again = await acquire(s, key);
    expect(again).toMatchObject({ takeover: true, downstreamKey: lease.downstreamKey });
    await s.commit(again, created, [{ incrBy: count, by: 1 }]);
    expect(await redis.direct.get(count)).toBe('1');
  });

  it('mid-commit (at the reply): fails by the deadline though it landed; the retry recognises its own commit, effects once', async () => {
    const time = within(800);
    const s = redis.store({ client: await redis.newProxiedClient(), attempts: 1, deadline: time.deadline });
    const key = newKey();
    const count = s.effectKey(`charges:${key}`);
    time.start();
    const lease = await acquire(s, key);
    redis.proxy.arm({ match: commands.commit(key), fault: { mode: 'stall', at: 'reply' }, count: 1 });
    time.start();
    const { ms, outcome } = await timed(s.commit(lease, created, [{ incrBy: count, by: 1 }]));
    expect(outcome).toBeInstanceOf(IdempotencyError);
    expect(ms).toBeLessThan(800 + SLACK_MS);
    time.start();
    await s.commit(lease, created, [{ incrBy: count, by: 1 }]); // the caller's retry
    expect(await redis.direct.get(count)).toBe('1');
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
  });

  it('every call queued behind the silent one on the same client ends by its own deadline too', async () => {
    const time = within(800);
    const s = redis.store({ client: await redis.newProxiedClient(), attempts: 1, deadline: time.deadline });
    const key = newKey();
    time.start();
    await s.get(key);
    redis.proxy.arm({ match: commands.claim(key), fault: { mode: 'stall', at: 'reply' }, count: 1 });
    time.start();
    const calls = [s.claim(key, 'fp'), s.get(newKey()), s.findDue()].map((call: Promise<unknown>) => timed(call));
    for (const { ms, outcome } of await Promise.all(calls)) {
      expect(outcome).toBeInstanceOf(IdempotencyError);
      expect(ms).toBeLessThan(800 + SLACK_MS);
    }
    time.start();
    expect((await timed(s.get(newKey()))).ms).toBeLessThan(500);
  });
});

describe('a connection that goes silent, with time for a second sending', () => {
  it.each(['request', 'reply'] as const)(
    'mid-commit (at the %s): sent again on a fresh connection within the deadline; committed once',
    async (at) => {
      const time = within(2000);
      const s = redis.store({ client: await redis.newProxiedClient(), attempts: 2, deadline: time.deadline });
      const key = newKey();
      const count = s.effectKey(`charges:${key}`);
      time.start();
      const lease = await acquire(s, key);
      const silent = redis.proxy.arm({ match: commands.commit(key), fault: { mode: 'stall', at }, count: 1 });
      time.start();
      const { ms, outcome } = await timed(s.commit(lease, created, [{ incrBy: count, by: 1 }]));
      expect(outcome).toBeUndefined(); // committed: the second sending landed, or met the first's completion
      expect(silent.fired()).toBe(1);
      expect(ms).toBeGreaterThanOrEqual(900); // the first sending's share of the time, waited out
      expect(ms).toBeLessThan(2000 + SLACK_MS);
      expect(await redis.direct.get(count)).toBe('1');
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    },
  );

  it("a client built with a socket timeout (the README's) resends on its own reconnected socket, within the call's time", async () => {
    const client = await redisClient(redis.proxy.url, { socketTimeout: 300 });
    try {
      const s = redis.store({ client, attempts: 2 }); // no deadline of its own: the call's 10 s
      const key = newKey();
      const lease = await acquire(s, key);
      redis.proxy.arm({ match: commands.commit(key), fault: { mode: 'stall', at: 'reply' }, count: 1 });
      const { ms, outcome } = await timed(s.commit(lease, created));
      expect(outcome).toBeUndefined();
      expect(ms).toBeLessThan(2000);
    } finally {
      await client.close().catch(() => undefined);
    }
  });
});

describe('makeIdempotent over a commit whose connection goes silent', () => {
  it.each(['request', 'reply'] as const)(
    'at the %s: every call ends by its deadline; the work is never done twice under two downstream keys, its effect once',
    async (at) => {
      const clock = new FakeClock(Date.now());
      const time = within(1000);
      const s = redis.store({ client: await redis.newProxiedClient(), attempts: 1, deadline: time.deadline, clock });
      const count = s.effectKey(`charges:${randomUUID()}`);
      const downstreamKeys: string[] = [];
      const charge = makeIdempotent(
        async (_: { id: string }, idempotency) => {
          downstreamKeys.push(idempotency.downstreamKey);
          idempotency.stage({ incrBy: count, by: 1 });
          return { charged: true };
        },
        { store: s, name: 'charge', key: (input) => input.id },
      );
      const id = randomUUID();
      const key = scopedKey({ accountId: 'charge', operation: 'charge', key: id });
      redis.proxy.arm({ match: commands.commit(key), fault: { mode: 'stall', at }, count: 1 });
      const outcomes: unknown[] = [];
      for (let call = 0; call < 3; call++) {
        time.start();
        const { ms, outcome } = await timed(charge({ id }));
        expect(ms).toBeLessThan(1000 + SLACK_MS);
        outcomes.push(outcome);
        clock.advance(31_000); // the next call comes after the lease
      }
      expect(outcomes[0]).toBeInstanceOf(IdempotencyError);
      expect(outcomes.slice(1)).toEqual([{ charged: true }, { charged: true }]);
      expect(new Set(downstreamKeys).size).toBe(1);
      expect(downstreamKeys).toHaveLength(at === 'request' ? 2 : 1); // run again only when its commit never landed
      expect(await redis.direct.get(count)).toBe('1');
      expect(outcomes.some((outcome) => outcome instanceof OperationInFlightError)).toBe(false);
    },
  );
});
