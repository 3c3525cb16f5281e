import { randomUUID } from 'node:crypto';
import { type RedisLocalCluster, startRedisCluster } from '@keystone-idempotency/local-aws/redis-local';
import { createCluster } from '@redis/client';
import { ConfigurationError, type StoredResponse, scopedKey } from '../../src/engine';
import { RedisStore, type RedisStoreOptions } from '../../src/redis';
import { FakeClock } from '../support/fake-clock';
import { type RedisClient, redisClient } from '../support/redis';

/**
 * The store on a real Redis Cluster (three masters, each its third of the slots): stores under different prefixes
 * live on different shards, and each is checked on the node that serves its own slot, whatever another store on the
 * same client found on its own.
 */
const newCluster = (urls: string[]) => createCluster({ rootNodes: urls.map((url) => ({ url })) });
type ClusterClient = ReturnType<typeof newCluster>;

let cluster: RedisLocalCluster;
let client: ClusterClient;
let nodes: RedisClient[];
const created: StoredResponse = { statusCode: 201, body: '{"id":"ship_1"}', headers: {} };
const newKey = () => scopedKey({ accountId: 'acct_cluster', operation: 'POST /shipments', key: randomUUID() });

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3 });
  client = newCluster(cluster.nodes.map((node) => node.url));
  client.on('error', () => undefined);
  await client.connect();
  nodes = await Promise.all(cluster.nodes.map((node) => redisClient(node.url)));
});
afterAll(async () => {
  await client?.close().catch(() => undefined);
  for (const node of nodes ?? []) await node.close().catch(() => undefined);
  await cluster?.stop();
});

/** A prefix whose hash slot node `i` (of three) serves, as the cluster itself computes it. */
async function prefixOn(i: number): Promise<string> {
  for (;;) {
    const prefix = `shard-${randomUUID().slice(0, 8)}`;
    const slot = Number(await nodes[0]!.sendCommand(['CLUSTER', 'KEYSLOT', `{${prefix}}`]));
    if (Math.floor((slot * 3) / 16384) === i) return prefix;
  }
}

const store = (prefix: string, options: Partial<RedisStoreOptions> = {}) =>
  new RedisStore({ client, prefix, leaseSeconds: 30, ...options });

describe('each store on a cluster client, checked on its own shard', () => {
  afterEach(async () => {
    for (const node of nodes) {
      await node.configSet('maxmemory-policy', 'noeviction');
      await node.configSet('appendfsync', 'always');
    }
  });

  it('refuses the store whose shard could evict, and not the one beside it on the same client', async () => {
    await nodes[2]!.configSet('maxmemory-policy', 'allkeys-lru');
    expect((await store(await prefixOn(0)).claim(newKey(), 'fp')).kind).toBe('acquired');
    const evicting = store(await prefixOn(2));
    await expect(evicting.claim(newKey(), 'fp')).rejects.toThrow(ConfigurationError);
    await expect(evicting.claim(newKey(), 'fp')).rejects.toThrow(/maxmemory-policy is allkeys-lru/);
  });

  it('refuses the store whose shard does not fsync every write, and not the one beside it', async () => {
    await nodes[1]!.configSet('appendfsync', 'everysec');
    expect((await store(await prefixOn(0)).claim(newKey(), 'fp')).kind).toBe('acquired');
    await expect(store(await prefixOn(1)).claim(newKey(), 'fp')).rejects.toThrow(/appendfsync is everysec/);
  });
});

describe('the protocol on every shard', () => {
  it.each([0, 1, 2])(
    'node %i: a claim, a commit with effects in the slot, a replay; a lapsed claim swept by a later one',
    async (i) => {
      const clock = new FakeClock(Date.now());
      const s = store(await prefixOn(i), { clock, ttlSeconds: 60 });
      const forgotten = newKey();
      await s.claim(forgotten, 'fp');
      clock.advance(61_000);
      const key = newKey();
      const outcome = await s.claim(key, 'fp');
      if (outcome.kind !== 'acquired') throw new Error(`expected to acquire, got ${outcome.kind}`);
      const count = s.effectKey('shipments');
      await s.commit(outcome.lease, created, [
        { incrBy: count, by: 1 },
        { hset: s.effectKey(`ship:${key}`), field: 'id', value: 'ship_1' },
      ]);
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
      expect(await nodes[i]!.get(count)).toBe('1');
      // The claim's script deleted the lapsed record: a key it did not name, of the same slot, on the same node.
      expect(await nodes[i]!.exists(s.recordKey(forgotten))).toBe(0);
    },
  );
});
