import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { scopedKey } from '../../src/engine/key';
import { makeIdempotent } from '../../src/engine/make-idempotent';
import { ClaimedOperation, type IdempotencyHandle } from '../../src/engine/operation';
import { type PostgresEffect, PostgresStore } from '../../src/postgres/store';
import { FakeClock } from '../support/fake-clock';
import { postgresUrl, testPostgres } from '../support/postgres';
import { storeHarnesses } from '../support/stores';
import { runTsx } from '../support/tsx-program';

/**
 * Text a store must give back exactly as it was given: a NUL, lone surrogates. A step's result is kept as JSON, and
 * JSON.stringify writes both as escapes (`\u0000`, `\ud800`), which PostgreSQL's `jsonb` refuses: a step that
 * returned one (an email as a client typed it) failed its checkpoint on every retry, and a response header holding
 * one failed its commit. Both are kept as `json` now, the text as sent. Both stores, side by side: on the first call,
 * on a replay, to the owner that takes over after a crash between steps, and through a lost reply.
 */
const LEASE_MS = 30_000;
const newKey = () => scopedKey({ accountId: 'acct_odd', operation: 'POST /orders', key: randomUUID() });
const ODD: readonly [string, unknown][] = [
  ['a NUL', '\u0000'],
  ['a lone high surrogate', '\ud800'],
  ['a lone low surrogate', '\udfff'],
  ['a lone surrogate between characters', 'a\ud800b'],
  ['a NUL and a lone surrogate as member names', { '\u0000': 'nul', 'x\udc00': ['\u0000\ud800', 'ok'] }],
  ['a well-formed pair and U+FFFD beside them', ['\ud83d\ude00', '\ufffd', 'e\u0301', '\u0000']],
];

describe.each(storeHarnesses)('step results on %s', (_name, harness) => {
  const h = harness();

  it.each(ODD)('keeps %s exactly, on the first call and on its replay', async (_what, value) => {
    const clock = new FakeClock(Date.now());
    let runs = 0;
    const read = makeIdempotent(
      async (_input: { id: string }, idempotency: IdempotencyHandle<unknown>) => {
        const stepped = await idempotency.step('read', async () => {
          runs += 1;
          return { value };
        });
        return { value: stepped.value };
      },
      { store: h.store({ clock, leaseSeconds: LEASE_MS / 1000 }), name: 'odd-step', key: (input) => input.id },
    );
    const id = randomUUID();
    await expect(read({ id })).resolves.toEqual({ value });
    await expect(read({ id })).resolves.toEqual({ value });
    expect(runs).toBe(1);
  });

  it.each(ODD)(
    'gives %s back exactly to the owner that takes over after a crash between steps',
    async (_what, value) => {
      const clock = new FakeClock(Date.now());
      const store = h.store({ clock, leaseSeconds: LEASE_MS / 1000 });
      let runs = 0;
      let checkpointed: () => void = () => undefined;
      const firstStepDone = new Promise<void>((resolve) => {
        checkpointed = resolve;
      });
      // The first owner stops for good after its first step: what a process killed there leaves in the store.
      let crashed: (reason: Error) => void = () => undefined;
      const crash = new Promise<never>((_, reject) => {
        crashed = reject;
      });
      let owners = 0;
      const work = makeIdempotent(
        async (_input: { id: string }, idempotency: IdempotencyHandle<unknown>) => {
          const owner = ++owners;
          const stepped = await idempotency.step('read', async () => {
            runs += 1;
            return { value };
          });
          if (owner === 1) {
            checkpointed();
            await crash;
          }
          await idempotency.step('write', async () => 'written');
          return { value: stepped.value };
        },
        { store, name: 'odd-step-crash', key: (input) => input.id },
      );
      const id = randomUUID();
      const first = work({ id });
      first.catch(() => undefined);
      await Promise.race([firstStepDone, first]); // a first step whose checkpoint failed says so here

      clock.advance(LEASE_MS + 1);
      await expect(work({ id })).resolves.toEqual({ value });
      expect(runs).toBe(1);
      await expect(work({ id })).resolves.toEqual({ value });
      // The crashed owner, were it to wake, finds its lease gone and writes nothing.
      crashed(new Error('the first owner wakes after its lease ran out'));
      await expect(first).rejects.toThrow();
    },
  );

  it('keeps a result of NULs and lone surrogates as large as the checkpoint may be', async () => {
    const store = h.store();
    const limit = store.maxCheckpointBytes ?? 0;
    expect(limit).toBeGreaterThan(0);
    const key = newKey();
    const claimed = await store.claim(key, 'fp', { recoverable: true });
    if (claimed.kind !== 'acquired') throw new Error(claimed.kind);
    // Six bytes of JSON each (\u0000, \ud800): the progress comes within a few hundred bytes of the limit.
    const value = '\u0000\ud800'.repeat(Math.floor((limit - 300) / 12));
    await new ClaimedOperation(store, claimed.lease).handle.step('read', async () => value);
    const progress = (await h.stored(key))?.progress;
    expect(progress?.steps[0]?.result === value).toBe(true); // not toEqual: a diff of 100,000 characters
    expect(Buffer.byteLength(JSON.stringify(progress))).toBeGreaterThan(limit - 400);
  });

  it('knows a checkpoint holding them whose reply was lost for its own: the step and its effect once', async () => {
    const clock = new FakeClock(Date.now());
    const store = h.faults.store({ clock, leaseSeconds: LEASE_MS / 1000 });
    const key = newKey();
    const claimed = await store.claim(key, 'fp', { recoverable: true });
    if (claimed.kind !== 'acquired') throw new Error(claimed.kind);
    const value = { email: 'a\u0000b\ud800c', names: ['\udfff', '\u0000'] };
    const lost = h.faults.loseReplies('commit', key);
    const stepped = await new ClaimedOperation(store, claimed.lease).handle.step('read', async (step) => {
      step.stage(h.effect(key, 'read'));
      return value;
    });
    expect(stepped).toEqual(value);
    expect(lost.fired()).toBe(1);
    expect(await h.rowsUnder(key)).toBe(1);
    expect((await h.stored(key))?.progress?.steps).toMatchObject([{ name: 'read', state: 'done', result: value }]);
  });
});

describe.each(storeHarnesses)('stored responses on %s', (_name, harness) => {
  const h = harness();

  it.each([
    ['a NUL', '\u0000'],
    ['a lone high surrogate', '\ud800'],
    ['a lone low surrogate', '\udfff'],
    ['a lone surrogate between characters', 'a\ud800b'],
  ])('keeps a header holding %s exactly, and the body with a NUL', async (_what, odd) => {
    const store = h.store();
    const key = newKey();
    const claimed = await store.claim(key, 'fp');
    if (claimed.kind !== 'acquired') throw new Error(claimed.kind);
    const response = {
      statusCode: 201,
      body: `{"id":"ord_1"}\u0000`,
      headers: { 'X-Note': odd, [`X-${odd}`]: 'name' },
    };
    await store.commit(claimed.lease, response);
    await expect(store.claim(key, 'fp')).resolves.toMatchObject({ kind: 'replay', response });
  });

  it('keeps them exactly through a one-shot commit, which writes the record whole', async () => {
    const store = h.store();
    const key = newKey();
    const response = { statusCode: 201, body: '{"id":"ord_1"}\u0000', headers: { 'X-Note': 'a\u0000\ud800\udfffb' } };
    const first = await store.claimAndCommit(key, 'fp', async () => ({ response, effects: [] }));
    expect(first.kind).toBe('committed');
    await expect(store.claim(key, 'fp')).resolves.toMatchObject({ kind: 'replay', response });
  });
});

describe('a process killed between steps, on PostgreSQL', () => {
  const pg = testPostgres();

  it('leaves its first step holding a NUL and lone surrogates, which the next owner gets back exactly', async () => {
    const value = { email: 'ada\u0000@example.com', odd: ['\ud800', '\udfff', 'x\ud800y'] };
    const id = randomUUID();
    // SIGKILL inside the second step: the first step's checkpoint is all the process leaves.
    const killed = runTsx(
      `
import { makeIdempotent } from 'keystone-idempotency';
import { PostgresStore } from 'keystone-idempotency/postgres';
import { Pool } from 'pg';

const store = new PostgresStore({
  pool: new Pool({ connectionString: process.env.DATABASE_URL }),
  schema: process.env.SCHEMA,
  leaseSeconds: 1,
});
const work = makeIdempotent(
  async (input: { id: string }, idempotency) => {
    const read = await idempotency.step('read', async () => JSON.parse(process.env.VALUE ?? 'null'));
    await idempotency.step('write', async () => process.kill(process.pid, 'SIGKILL'));
    return read;
  },
  { store, name: 'killed-between-steps', key: (input) => input.id },
);
await work({ id: process.env.ID ?? '' });
`,
      // JSON.stringify spells the NUL and the surrogates as ASCII escapes: the environment can carry them.
      { DATABASE_URL: postgresUrl(), SCHEMA: pg.schema, VALUE: JSON.stringify(value), ID: id },
    );
    // tsx runs the program in a child of its own, and answers its SIGKILL with 128 + 9.
    const { code, signal } = await killed.exited;
    const sigkilled = signal === 'SIGKILL' || code === 137;
    expect({ sigkilled, stderr: sigkilled ? '' : killed.stderr() }).toEqual({ sigkilled: true, stderr: '' });
    await delay(1100); // its one-second lease runs out
    let reran = false;
    const work = makeIdempotent(
      async (_input: { id: string }, idempotency: IdempotencyHandle<PostgresEffect>) => {
        const read = await idempotency.step('read', async () => {
          reran = true;
          return 'ran again';
        });
        await idempotency.step('write', async () => 'written');
        return read;
      },
      {
        store: new PostgresStore({ pool: pg.pool, schema: pg.schema, leaseSeconds: 1 }),
        name: 'killed-between-steps',
        key: (input) => input.id,
      },
    );
    await expect(work({ id })).resolves.toEqual(value);
    expect(reran).toBe(false);
  }, 60_000);
});
