import { randomUUID } from 'node:crypto';
import { compareAndSetEffect } from '../../src/dynamodb';
import { DynamoDbStore, type EffectItem } from '../../src/dynamodb/store';
import {
  EffectConditionFailedError,
  LeaseLostError,
  StagingClosedError,
  TooManyEffectsError,
} from '../../src/engine/errors';
import { RecordStatus } from '../../src/engine/record';
import {
  InvalidRecordKeyError,
  type ProcessRecordOptions,
  processRecordIdempotently,
  type SqsRecordContext,
} from '../../src/sqs';
import { testDatabase } from '../support/dynamodb';
import { FakeClock } from '../support/fake-clock';
import { sqsRecord } from './sqs-events';

const db = testDatabase();
const { doc } = db;

const store = (clock = new FakeClock(Date.now())) =>
  new DynamoDbStore({ client: doc, tableName: db.idempotencyTable, clock, leaseSeconds: 30 });
const row = (pk: string, sk = randomUUID()): EffectItem => ({ Put: { TableName: db.effectsTable, Item: { pk, sk } } });
const options = <T>(
  process: (ctx: SqsRecordContext<EffectItem>) => Promise<T>,
): ProcessRecordOptions<T, EffectItem> => ({
  name: 'ledger',
  process: (_record, ctx) => process(ctx),
});

describe('processRecordIdempotently', () => {
  it('commits the staged effects with the key and hands the summary back, then replays it', async () => {
    const s = store();
    const record = sqsRecord({ body: { amount: 5 }, receiveCount: 3 });
    const seen: Partial<SqsRecordContext<EffectItem>>[] = [];
    const run = options(async (ctx) => {
      seen.push({ key: ctx.key, attempt: ctx.attempt, receiveCount: ctx.receiveCount, record: ctx.record });
      ctx.stage(row(record.messageId), row(record.messageId));
      return { credited: 5, at: new Date(0) };
    });
    const first = await processRecordIdempotently(s, record, run);
    expect(first).toMatchObject({ kind: 'committed', summary: { credited: 5 }, attempt: 1 });
    expect(seen).toEqual([{ key: `ledger|ledger|${record.messageId}`, attempt: 1, receiveCount: 3, record }]);
    expect(await db.itemsUnder(record.messageId)).toBe(2);

    const again = await processRecordIdempotently(s, record, run);
    // A replay hands back the stored JSON: a Date comes back as its ISO string.
    expect(again).toEqual({ kind: 'replay', key: first.key, summary: { credited: 5, at: '1970-01-01T00:00:00.000Z' } });
    expect(seen).toHaveLength(1);
    expect(await db.itemsUnder(record.messageId)).toBe(2);
  });

  it('resumes a redelivered record after its last completed step, and tells each step outcome to onStep', async () => {
    const s = store();
    const record = sqsRecord({ body: { order: 7 } });
    const events: { step: string; outcome: string; attempt: number }[] = [];
    const ran: string[] = [];
    const process = (failAt: string | undefined) => ({
      ...options(async (ctx) => {
        const reserved = await ctx.step('reserve', async (step) => {
          ran.push('reserve');
          step.stage(row(record.messageId));
          return 'r1';
        });
        const shipped = await ctx.step('ship', async () => {
          ran.push('ship');
          if (failAt === 'ship') throw new Error('warehouse down');
          return 's1';
        });
        return { reserved, shipped };
      }),
      onStep: (event: { step: string; outcome: string; attempt: number }) =>
        events.push({ step: event.step, outcome: event.outcome, attempt: event.attempt }),
    });
    const failed = await processRecordIdempotently(s, record, process('ship'));
    expect(failed).toMatchObject({ kind: 'failed', released: true });
    const redelivered = await processRecordIdempotently(s, record, process(undefined));
    expect(redelivered).toMatchObject({ kind: 'committed', summary: { reserved: 'r1', shipped: 's1' }, attempt: 2 });
    // The reservation ran once and its row was written once, with its checkpoint; the failed step ran again.
    expect(ran).toEqual(['reserve', 'ship', 'ship']);
    expect(await db.itemsUnder(record.messageId)).toBe(1);
    expect(events).toEqual([
      { step: 'reserve', outcome: 'ran', attempt: 1 },
      { step: 'ship', outcome: 'failed', attempt: 1 },
      { step: 'reserve', outcome: 'replayed', attempt: 2 },
      { step: 'ship', outcome: 'ran', attempt: 2 },
    ]);
  });

  it('stores a function that returns nothing as a null summary', async () => {
    const s = store();
    const record = sqsRecord({ body: 'plain text' });
    const run = options(async () => undefined);
    await processRecordIdempotently(s, record, run);
    expect(await processRecordIdempotently(s, record, run)).toMatchObject({ kind: 'replay', summary: null });
  });

  it('releases the key when the function throws, writing none of what it staged; the retry keeps the downstream key', async () => {
    const s = store();
    const record = sqsRecord({ body: {} });
    const keys: string[] = [];
    const boom = new Error('downstream unavailable');
    const failed = await processRecordIdempotently(
      s,
      record,
      options(async (ctx) => {
        keys.push(ctx.downstreamKey);
        ctx.stage(row(record.messageId));
        throw boom;
      }),
    );
    expect(failed).toEqual({ kind: 'failed', key: expect.any(String), error: boom, released: true });
    expect(await s.get(failed.key)).toMatchObject({ status: RecordStatus.Released });
    expect(await db.itemsUnder(record.messageId)).toBe(0);

    const retried = await processRecordIdempotently(
      s,
      record,
      options(async (ctx) => {
        keys.push(ctx.downstreamKey);
        return ctx.attempt;
      }),
    );
    expect(retried).toMatchObject({ kind: 'committed', summary: 2, attempt: 2 });
    expect(keys[1]).toBe(keys[0]);
  });

  it('releases the key when a staged effect fails its condition, and nothing is written', async () => {
    const s = store();
    const record = sqsRecord({ body: {} });
    const outcome = await processRecordIdempotently(
      s,
      record,
      options(async (ctx) => {
        ctx.stage(row(record.messageId));
        ctx.stage(
          compareAndSetEffect({
            TableName: db.effectsTable,
            Key: { pk: `missing-${randomUUID()}`, sk: 'x' },
            attribute: 'status',
            expected: 'succeeded',
            next: 'settled',
          }),
        );
      }),
    );
    expect(outcome).toMatchObject({ kind: 'failed', released: true });
    if (outcome.kind === 'failed') expect(outcome.error).toBeInstanceOf(EffectConditionFailedError);
    expect(await db.itemsUnder(record.messageId)).toBe(0);
  });

  it('reports a fenced commit, writes nothing, and leaves the new owner’s claim alone', async () => {
    const clock = new FakeClock(Date.now());
    const s = store(clock);
    const record = sqsRecord({ body: {} });
    let newOwner: string | undefined;
    const outcome = await processRecordIdempotently(
      s,
      record,
      options(async (ctx) => {
        ctx.stage(row(record.messageId));
        clock.advance(30_001);
        const takeover = await s.claim(ctx.key, ctx.lease.fingerprint);
        if (takeover.kind === 'acquired') newOwner = takeover.lease.leaseToken;
      }),
    );
    expect(outcome.kind).toBe('fenced');
    if (outcome.kind === 'fenced') expect(outcome.error).toBeInstanceOf(LeaseLostError);
    expect(await db.itemsUnder(record.messageId)).toBe(0);
    expect(await s.get(outcome.key)).toMatchObject({ status: RecordStatus.InProgress, leaseToken: newOwner });
  });

  it('reports in flight without running while another owner holds the key', async () => {
    const s = store();
    const record = sqsRecord({ body: {} });
    let ran = false;
    const holder = await processRecordIdempotently(
      s,
      record,
      options(async () => {
        const duplicate = await processRecordIdempotently(
          s,
          record,
          options(async () => {
            ran = true;
          }),
        );
        return duplicate.kind;
      }),
    );
    expect(holder).toMatchObject({ kind: 'committed', summary: 'in_flight' });
    expect(ran).toBe(false);
  });

  it('refuses more staged effects than one transaction holds, as a failure of the record', async () => {
    const s = store();
    const record = sqsRecord({ body: {} });
    const outcome = await processRecordIdempotently(
      s,
      record,
      options(async (ctx) => {
        ctx.stage(...Array.from({ length: 100 }, () => row(record.messageId)));
      }),
    );
    expect(outcome).toMatchObject({ kind: 'failed', released: true });
    if (outcome.kind === 'failed') expect(outcome.error).toBeInstanceOf(TooManyEffectsError);
  });

  it('refuses a write staged after the function returned', async () => {
    const s = store();
    const record = sqsRecord({ body: {} });
    let late: SqsRecordContext<EffectItem> | undefined;
    await processRecordIdempotently(
      s,
      record,
      options(async (ctx) => {
        late = ctx;
      }),
    );
    expect(() => late?.stage(row(record.messageId))).toThrow(StagingClosedError);
  });

  it('throws for a record without a usable key, before claiming anything', async () => {
    const record = sqsRecord({ body: {} });
    await expect(
      processRecordIdempotently(store(), record, { ...options(async () => 1), key: () => '' }),
    ).rejects.toBeInstanceOf(InvalidRecordKeyError);
  });
});
