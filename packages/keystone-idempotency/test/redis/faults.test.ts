import { randomUUID } from 'node:crypto';
import { type Lease, type StoredResponse, scopedKey } from '../../src/engine';
import type { RedisStore } from '../../src/redis';
import { FakeClock } from '../support/fake-clock';
import { redisEngineCommands, testRedis } from '../support/redis';

/**
 * Faults on a real redis-server: replies lost after Redis ran the script (through the fault proxy), with a store that
 * does not send again (the caller sees an error and can't tell whether the write landed), and the server restarting
 * mid-operation. The server keeps an append-only file fsynced on every write, as a node with persistence does.
 */
const redis = testRedis();
const commands = redisEngineCommands();
const created: StoredResponse = { statusCode: 201, body: '{"id":"pay_1"}', headers: {} };
const newKey = () => scopedKey({ accountId: 'acct_faults', operation: 'POST /payments', key: randomUUID() });

async function acquire(s: RedisStore, key: string, recoverable = false): Promise<Lease> {
  const outcome = await s.claim(key, 'fp', { recoverable });
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

describe('a lost reply, not sent again', () => {
  it('to the claim: the call fails, the claim stands, and a retry after the lease takes it over', async () => {
    const clock = new FakeClock(Date.now());
    const s = redis.store({ clock, attempts: 1 });
    const key = newKey();
    const lost = redis.proxy.arm({ match: commands.claim(key), fault: { mode: 'drop-reply' }, count: 1 });
    await expect(s.claim(key, 'fp')).rejects.toThrow();
    expect(lost.fired()).toBe(1);
    const landed = await s.get(key);
    expect(landed).toMatchObject({ status: 'IN_PROGRESS', attempt: 1 });
    expect((await s.claim(key, 'fp')).kind).toBe('in_flight'); // nobody holds it, but nobody can tell yet
    clock.advance(30_001);
    const retry = await acquire(s, key);
    expect(retry).toMatchObject({ takeover: true, attempt: 2, downstreamKey: landed?.downstreamKey });
  });

  it('to the commit: its effects are written once, and committing again is recognised as its own', async () => {
    const s = redis.store({ attempts: 1 });
    const key = newKey();
    const lease = await acquire(s, key);
    const count = s.effectKey(`charges:${key}`);
    const lost = redis.proxy.arm({ match: commands.commit(key), fault: { mode: 'drop-reply' }, count: 1 });
    await expect(s.commit(lease, created, [{ incrBy: count, by: 1 }])).rejects.toThrow();
    expect(lost.fired()).toBe(1);
    await s.commit(lease, created, [{ incrBy: count, by: 1 }]); // the caller's retry: its own completion
    expect(await redis.direct.get(count)).toBe('1');
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
  });
});

describe('the server restarting mid-operation', () => {
  it('between the claim and the commit: the record survives, the scripts are sent again, the commit lands', async () => {
    const s = redis.store();
    const key = newKey();
    const lease = await acquire(s, key, true);
    await redis.server.restart(); // SIGKILL: a crash; the append-only file has every write
    redis.proxy.reset();
    await s.commit(lease, created, [{ set: s.effectKey(`done:${key}`), value: '1' }]);
    // The restarted server knows no script: EVALSHA, NOSCRIPT, then the script whole.
    const scripts = redis.proxy.commands().filter((c) => commands.any().when(c)); // not the client's reconnect handshake
    expect(scripts.map((c) => c.args[0])).toEqual(['EVALSHA', 'EVAL']);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    expect(await redis.direct.zScore(s.recoverySetKey, key)).toBeNull();
  });

  it('with the commit in flight: landed or not, the caller commits once more and the effect is there once', async () => {
    const s = redis.store({ attempts: 1 });
    const key = newKey();
    const lease = await acquire(s, key, true);
    const count = s.effectKey(`charges:${key}`);
    const inFlight = s.commit(lease, created, [{ incrBy: count, by: 1 }]).then(
      () => 'committed',
      () => 'failed',
    );
    await redis.server.restart();
    const first = await inFlight;
    if (first === 'failed') await s.commit(lease, created, [{ incrBy: count, by: 1 }]);
    expect(await redis.direct.get(count)).toBe('1');
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
  });

  it('while a recoverable operation is unfinished: it is still due for recovery after the restart', async () => {
    const clock = new FakeClock(Date.now());
    const s = redis.store({ clock });
    const key = newKey();
    await acquire(s, key, true);
    await redis.server.restart({ signal: 'SIGTERM' });
    clock.advance(30_001);
    expect((await s.findDue()).map((due) => due.key)).toContain(key);
  });
});
