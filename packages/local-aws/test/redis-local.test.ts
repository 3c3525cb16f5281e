import { existsSync } from 'node:fs';
import { createClient } from '@redis/client';
import { startRedisFaultProxy } from '../src/redis-fault-proxy';
import { startRedisCluster, startRedisLocal } from '../src/redis-local';

const connected = async (url: string) => {
  const client = createClient({ url, socket: { reconnectStrategy: () => 20 } });
  client.on('error', () => undefined);
  await client.connect();
  return client;
};

describe('startRedisLocal', () => {
  it('runs a redis-server on loopback that keeps what its append-only file holds across a crash, and leaves nothing', async () => {
    const server = await startRedisLocal(); // an append-only file, fsynced on every write, by default
    const client = await connected(server.url);
    try {
      expect(server.url).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
      expect(await client.configGet('maxmemory-policy')).toEqual({ 'maxmemory-policy': 'noeviction' });
      await client.set('kept', 'yes');
      await server.restart(); // SIGKILL
      expect(await client.get('kept')).toBe('yes');
    } finally {
      await client.close();
      await server.stop();
    }
    expect(existsSync(server.workDir)).toBe(false);
  });

  it('forgets everything across a restart without persistence', async () => {
    const server = await startRedisLocal({ appendOnly: false });
    const client = await connected(server.url);
    try {
      await client.set('lost', 'yes');
      await server.restart();
      expect(await client.get('lost')).toBeNull();
    } finally {
      await client.close();
      await server.stop();
    }
  });
});

describe('startRedisFaultProxy', () => {
  it('counts the commands it forwards, and drops the reply to a matched one after Redis ran it', async () => {
    const server = await startRedisLocal();
    const proxy = await startRedisFaultProxy(server.url);
    const direct = await connected(server.url);
    const client = await connected(proxy.url);
    try {
      proxy.reset();
      await client.set('a', '1');
      await client.get('a');
      expect(proxy.commands().map((c) => c.args)).toEqual([
        ['SET', 'a', '1'],
        ['GET', 'a'],
      ]);
      const lost = proxy.arm({
        match: { name: 'INCR b', when: (c) => c.args[0] === 'INCR' && c.args[1] === 'b' },
        fault: { mode: 'drop-reply' },
        count: 1,
      });
      await expect(client.incr('b')).rejects.toThrow();
      expect(lost.fired()).toBe(1);
      expect(await direct.get('b')).toBe('1'); // it ran
      expect(await client.incr('b')).toBe(2); // the next passes, on a new connection
    } finally {
      await client.close().catch(() => undefined);
      await direct.close();
      await proxy.close();
      await server.stop();
    }
  });

  it.each(['request', 'reply'] as const)(
    'goes silent at the %s of a matched command: no reply, no close, until its connections are dropped',
    async (at) => {
      const server = await startRedisLocal({ appendOnly: false });
      const proxy = await startRedisFaultProxy(server.url);
      const direct = await connected(server.url);
      const client = await connected(proxy.url);
      try {
        const silent = proxy.arm({
          match: { name: 'INCR c', when: (c) => c.args[0] === 'INCR' && c.args[1] === 'c' },
          fault: { mode: 'stall', at },
          count: 1,
        });
        let settled = false;
        const incr = client.incr('c').finally(() => {
          settled = true;
        });
        const after = client.get('c'); // behind it on the same connection
        await new Promise((resolve) => setTimeout(resolve, 500));
        expect(silent.fired()).toBe(1);
        expect(settled).toBe(false); // neither an answer nor a closed connection
        expect(await direct.get('c')).toBe(at === 'reply' ? '1' : null); // ran only when it reached Redis
        proxy.dropConnections(); // now the client hears of it, and reconnects
        await expect(incr).rejects.toThrow();
        await expect(after).rejects.toThrow();
        expect(await client.incr('c')).toBe(at === 'reply' ? 2 : 1);
      } finally {
        client.destroy();
        await direct.close();
        await proxy.close();
        await server.stop();
      }
    },
  );
});

describe('startRedisCluster', () => {
  it('forms a cluster of masters that together serve every slot, and stops them all', async () => {
    const cluster = await startRedisCluster({ masters: 3 });
    const clients = await Promise.all(cluster.nodes.map((node) => connected(node.url)));
    try {
      const info = String(await clients[0]!.sendCommand(['CLUSTER', 'INFO']));
      expect(info).toMatch(/cluster_state:ok/);
      expect(info).toMatch(/cluster_slots_assigned:16384/);
      expect(info).toMatch(/cluster_known_nodes:3/);
    } finally {
      for (const client of clients) await client.close();
      await cluster.stop();
    }
    for (const node of cluster.nodes) expect(existsSync(node.workDir)).toBe(false);
  });
});
