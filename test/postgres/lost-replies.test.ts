import { randomUUID } from 'node:crypto';
import { scopedKey } from '../../lib/engine/key';
import { type Lease, RecordStatus, type StoredResponse } from '../../lib/engine/record';
import type { PostgresEffect, PostgresStore } from '../../lib/postgres/store';
import { FakeClock } from '../support/fake-clock';
import { testPostgres } from '../support/postgres';
import {
  type PostgresFaultProxy,
  type RequestMatcher,
  startPostgresFaultProxy,
  type WireRequest,
} from '../support/postgres-fault-proxy';

/**
 * Replies lost on the wire, after PostgreSQL ran the request: the store sends the call again on a fresh connection
 * (or the caller does, once the store has given up), and every write recognises what its first sending did by its
 * lease token. The COMMIT's reply is the one that matters most: the transaction committed, its caller cannot tell.
 */
const pg = testPostgres();
let proxy: PostgresFaultProxy;

beforeAll(async () => {
  proxy = await startPostgresFaultProxy(process.env.POSTGRES_URL!);
});
afterAll(() => proxy?.close());

const created: StoredResponse = { statusCode: 201, body: '{"id":"pay_1"}', headers: {} };
const newKey = () => scopedKey({ accountId: 'acct_lost', operation: 'POST /payments', key: randomUUID() });
const row = (pk: string, sk: string): PostgresEffect => ({
  text: `INSERT INTO ${pg.effectsTable} (pk, sk) VALUES ($1, $2)`,
  values: [pk, sk],
});

/** A store whose connections go through the proxy; `connectionAttempts: 1` shows a fault without the store's retry. */
function throughProxy(options: { clock?: FakeClock; connectionAttempts?: number } = {}): PostgresStore {
  return pg.store({ pool: pg.pool2({ connectionString: proxy.url, pipeline: true }), ...options });
}

/** The client key of a stored key: what the statements about it carry as a parameter. */
const clientKeyOf = (key: string) => key.split('|').slice(2).join('|');
const about = (key: string) => (request: WireRequest) => request.params.includes(clientKeyOf(key));
const claimOf = (key: string): RequestMatcher => ({
  name: `claim of ${key}`,
  when: (request) => about(key)(request) && /^WITH written AS \(INSERT/.test(request.text),
});
const takeoverOf = (key: string): RequestMatcher => ({
  name: `takeover of ${key}`,
  when: (request) => about(key)(request) && /^WITH written AS \(UPDATE/.test(request.text),
});
const completionOf = (key: string): RequestMatcher => ({
  name: `completion of ${key}`,
  when: (request) => about(key)(request) && request.text.includes(`status = '${RecordStatus.Completed}'`),
});
const commitOf = (key: string): RequestMatcher => ({
  name: `COMMIT of ${key}`,
  when: (request) => request.text === 'COMMIT' && request.transaction.some(about(key)),
});
const releaseOf = (key: string): RequestMatcher => ({
  name: `release of ${key}`,
  when: (request) => about(key)(request) && request.text.startsWith('WITH ended'),
});
const dropOnce = (match: RequestMatcher) => proxy.arm({ match, fault: { mode: 'drop-reply' }, count: 1 });
const outcomes = (match: RequestMatcher) => proxy.requests(match).map((request) => request.outcome);

async function acquire(s: PostgresStore, key: string): Promise<Lease> {
  const outcome = await s.claim(key, 'fp');
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

describe('a claim whose reply is lost', () => {
  it('is sent again by the store, which recognises its own claim', async () => {
    const key = newKey();
    const lost = dropOnce(claimOf(key));
    const lease = await acquire(throughProxy(), key);
    expect(lost.fired()).toBe(1);
    expect(outcomes(claimOf(key))).toEqual(['dropped', 'answered']);
    expect(lease).toMatchObject({ attempt: 1, takeover: false });
    expect((await pg.store().get(key))?.leaseToken).toBe(lease.leaseToken);
  });

  it('recognises its own takeover too', async () => {
    const clock = new FakeClock();
    const key = newKey();
    const dead = await acquire(pg.store({ clock }), key);
    clock.advance(30_001);
    const lost = dropOnce(takeoverOf(key));
    const lease = await acquire(throughProxy({ clock }), key);
    expect(lost.fired()).toBe(1);
    expect(lease).toMatchObject({ takeover: true, attempt: 2, downstreamKey: dead.downstreamKey });
  });
});

describe('a commit whose COMMIT reply is lost', () => {
  it('is sent again by the store: its completion meets its own, and the effect is written once', async () => {
    const s = throughProxy();
    const key = newKey();
    const lease = await acquire(s, key);
    const lost = dropOnce(commitOf(key));
    await s.commit(lease, created, [row(key, 'once')]);
    expect(lost.fired()).toBe(1);
    expect(outcomes(commitOf(key))).toEqual(['dropped', 'answered']);
    expect(await pg.rowsUnder(key)).toBe(1);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
  });

  it('succeeds when the caller commits again after the store gave up', async () => {
    const s = throughProxy({ connectionAttempts: 1 });
    const key = newKey();
    const lease = await acquire(s, key);
    const lost = dropOnce(commitOf(key));
    await expect(s.commit(lease, created, [row(key, 'once')])).rejects.toThrow('Connection terminated unexpectedly');
    expect(lost.fired()).toBe(1);
    await s.commit(lease, created, [row(key, 'once')]);
    expect(await pg.rowsUnder(key)).toBe(1);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
  });
});

describe('a commit with nothing staged whose reply is lost', () => {
  it('is sent again by the store, which recognises its own completion', async () => {
    const s = throughProxy();
    const key = newKey();
    const lease = await acquire(s, key);
    const lost = dropOnce(completionOf(key));
    await s.commit(lease, created);
    expect(lost.fired()).toBe(1);
    expect(outcomes(completionOf(key))).toEqual(['dropped', 'answered']);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
  });

  it('succeeds when the caller commits again after the store gave up', async () => {
    const s = throughProxy({ connectionAttempts: 1 });
    const key = newKey();
    const lease = await acquire(s, key);
    dropOnce(completionOf(key));
    await expect(s.commit(lease, created)).rejects.toThrow();
    await s.commit(lease, created);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
  });
});

describe('a one-shot commit whose COMMIT reply is lost', () => {
  it('is sent again by the store, which recognises its own commit: committed, the effect once', async () => {
    const s = throughProxy();
    const key = newKey();
    const lost = dropOnce(commitOf(key));
    const outcome = await s.claimAndCommit(key, 'fp', async () => ({ response: created, effects: [row(key, 'x')] }));
    expect(lost.fired()).toBe(1);
    expect(outcome).toMatchObject({ kind: 'committed', response: created });
    expect(await pg.rowsUnder(key)).toBe(1);
  });
});

describe('a release whose reply is lost', () => {
  it('is recognised as done when sent again', async () => {
    const s = throughProxy();
    const key = newKey();
    const lease = await acquire(s, key);
    const lost = dropOnce(releaseOf(key));
    expect(await s.release(lease)).toBe(true);
    expect(lost.fired()).toBe(1);
    expect((await s.get(key))?.status).toBe(RecordStatus.Released);
  });
});

describe('a slow COMMIT reply', () => {
  it('is waited for: the transaction has committed before its reply arrives, and a duplicate replays it', async () => {
    const s = throughProxy();
    const key = newKey();
    const lease = await acquire(s, key);
    proxy.arm({ match: commitOf(key), fault: { mode: 'delay-reply', ms: 500 }, count: 1 });
    const startedAt = Date.now();
    const commit = s.commit(lease, created, [row(key, 'slow')]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await pg.store().claim(key, 'fp')).toMatchObject({ kind: 'replay' });
    await commit;
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(500);
    expect(await pg.rowsUnder(key)).toBe(1);
  });
});
