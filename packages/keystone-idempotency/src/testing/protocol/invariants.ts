import { isDeepStrictEqual } from 'node:util';
import { RecordStatus, type StoredResponse } from '../../engine/record.js';
import type { ModelRecord, ProtocolModel } from './reference-model.js';
import type { EffectRow, ProtocolSystem, Snapshot, StoredItem } from './system.js';

/** A promise of the protocol was broken: named, so that a failing run says which one. */
export class InvariantViolation extends Error {
  constructor(invariant: string, details: Record<string, unknown>) {
    super(`${invariant}\n${JSON.stringify(details, null, 2)}`);
    this.name = 'InvariantViolation';
  }
}

/**
 * The promises themselves, read from the real tables and the processor, whatever the model predicted:
 * - at most one effect row per operation generation;
 * - no effect row from an owner whose lease had been taken over (or had ended) before the row appeared;
 * - at most one charge per operation generation, however many owners and downstream keys it had;
 * - a completed record holds the response first committed for its generation, byte for byte.
 */
export function checkSafety(m: ProtocolModel, r: ProtocolSystem, snapshot: Snapshot): void {
  const rowsPerGeneration = new Map<string, EffectRow[]>();
  for (const row of snapshot.rows) {
    if (!m.rowSeenAt.has(row.sk)) m.rowSeenAt.set(row.sk, m.step);
    const generation = generationKeyOf(m, row.downstreamKey, { row });
    rowsPerGeneration.set(generation, [...(rowsPerGeneration.get(generation) ?? []), row]);
    const lostAt = m.heldUntil.get(row.leaseToken);
    const seenAt = m.rowSeenAt.get(row.sk)!;
    if (lostAt !== undefined && lostAt < seenAt) {
      throw new InvariantViolation('an owner fenced out committed an effect', {
        row,
        leaseLostInStep: lostAt,
        rowAppearedInStep: seenAt,
      });
    }
  }
  for (const [generation, rows] of rowsPerGeneration) {
    if (rows.length > 1) throw new InvariantViolation('two effects for one operation generation', { generation, rows });
  }

  const chargesPerGeneration = new Map<string, string[]>();
  for (const charge of r.processor.made) {
    const generation = generationKeyOf(m, charge.downstreamKey, { charge });
    chargesPerGeneration.set(generation, [...(chargesPerGeneration.get(generation) ?? []), charge.id]);
  }
  for (const [generation, charges] of chargesPerGeneration) {
    if (charges.length > 1)
      throw new InvariantViolation('two charges for one operation generation', { generation, charges });
  }

  snapshot.items.forEach((item, index) => {
    if (item?.status !== RecordStatus.Completed) return;
    expectCommittedResponse(
      m,
      String(item.downstreamKey),
      item.response as StoredResponse,
      `stored record of op ${index}`,
    );
  });
}

/**
 * Every replay (and every completed record) carries the response first committed for its generation, byte for byte.
 * The first one seen for a generation becomes the reference.
 */
export function expectCommittedResponse(
  m: ProtocolModel,
  downstreamKey: string,
  response: StoredResponse | undefined,
  where: string,
): void {
  const generation = generationKeyOf(m, downstreamKey, { where });
  const committed = m.committed.get(generation);
  if (committed === undefined) {
    if (response === undefined) throw new InvariantViolation('a completed record without a response', { where });
    m.committed.set(generation, response);
    return;
  }
  // Byte for byte: the same status, the same body string, the same headers.
  if (!isDeepStrictEqual(response, committed)) {
    throw new InvariantViolation('a replay differs from the committed response', {
      where,
      generation,
      committed,
      replayed: response,
    });
  }
}

/**
 * The model's prediction, held against the real tables: each record field for field, and exactly the effect rows
 * of the commits the model says landed.
 */
export function checkConformance(m: ProtocolModel, snapshot: Snapshot): void {
  snapshot.items.forEach((item, index) => {
    const op = m.ops[index]!;
    const actual = item === undefined ? undefined : storedFields(item);
    const expected = op.record === undefined ? undefined : modelFields(op.record);
    if (!isDeepStrictEqual(actual, expected)) {
      throw new Error(
        `op ${index} after step ${m.step}: the stored record is not what the protocol says\n` +
          `expected ${JSON.stringify(expected, null, 2)}\nstored   ${JSON.stringify(actual, null, 2)}`,
      );
    }
  });
  const rows = snapshot.rows.map((row) => row.sk).sort();
  const expectedRows = [...m.rows].sort();
  if (!isDeepStrictEqual(rows, expectedRows)) {
    throw new Error(
      `after step ${m.step}: effect rows ${JSON.stringify(rows)}, the model expects ${JSON.stringify(expectedRows)}`,
    );
  }
}

/**
 * A stored item is live: unfinished and recoverable (in the recovery index, with no expiry), or not yet past its
 * expiry. Read from the item itself, not the model.
 */
function isLiveItem(item: Record<string, unknown> | undefined, now: number): item is Record<string, unknown> {
  if (item === undefined) return false;
  if (item.recoverAt !== undefined) return true;
  return item.expiresAt !== undefined && Number(item.expiresAt) * 1000 > now;
}

/** After the completer has run past every lease: nothing live is left in progress or released. */
export function checkNothingUnfinished(m: ProtocolModel, snapshot: Snapshot): void {
  snapshot.items.forEach((item, index) => {
    if (!isLiveItem(item, m.now)) return;
    if (item.status !== RecordStatus.Completed && item.status !== RecordStatus.Abandoned) {
      throw new InvariantViolation('an operation is left unfinished after the completer ran past its lease', {
        op: index,
        status: item.status,
        leaseExpiresAt: item.leaseExpiresAt,
        recoverAt: item.recoverAt,
        now: m.now,
      });
    }
  });
}

/**
 * After the completer and the processor's witness have both run: every charge whose generation is still live
 * ended as that generation's completion (the money is never left without its record). A generation with a charge
 * is only ever forgotten (expired, deleted, or replaced by a fresh claim) once it was finished: never while
 * recovery still had it to do, or a late retry would have started a new generation and charged again.
 */
export function checkNoChargeLeftBehind(m: ProtocolModel, r: ProtocolSystem, snapshot: Snapshot): void {
  for (const charge of r.processor.made) {
    const origin = m.generationOf.get(charge.downstreamKey)!;
    const item = snapshot.items[origin.op];
    if (!isLiveItem(item, m.now) || item.downstreamKey !== charge.downstreamKey) {
      const generation = m.generationKey(origin.op, origin.generation);
      if (!m.finished.has(generation)) {
        throw new InvariantViolation('a charged operation was forgotten before it was finished', {
          charge,
          op: origin.op,
          generation,
          record: item ?? null,
        });
      }
      continue; // finished, then expired: its replay window is over
    }
    const body = (item.response as StoredResponse | undefined)?.body;
    if (item.status !== RecordStatus.Completed || JSON.parse(body ?? '{}').charge !== charge.id) {
      throw new InvariantViolation('a charge was left without its operation completing', {
        charge,
        op: origin.op,
        status: item.status,
        response: body,
      });
    }
  }
}

function generationKeyOf(m: ProtocolModel, downstreamKey: string, context: Record<string, unknown>): string {
  const origin = m.generationOf.get(downstreamKey);
  if (!origin) throw new InvariantViolation('an effect under a downstream key no lease ever carried', context);
  return m.generationKey(origin.op, origin.generation);
}

function storedFields(item: StoredItem) {
  return {
    status: item.status,
    leaseToken: item.leaseToken,
    leaseExpiresAt: Number(item.leaseExpiresAt),
    expiresAt: item.expiresAt === undefined ? null : Number(item.expiresAt),
    downstreamKey: item.downstreamKey,
    attempt: Number(item.attempt),
    recoverAt: item.recoverAt === undefined ? null : Number(item.recoverAt),
    inRecoveryIndex: item.inRecoveryIndex,
    response: item.response ?? null,
  };
}

function modelFields(record: ModelRecord) {
  return {
    status: record.status,
    leaseToken: record.leaseToken,
    leaseExpiresAt: record.leaseExpiresAt,
    expiresAt: record.expiresAt ?? null,
    downstreamKey: record.downstreamKey,
    attempt: record.attempt,
    recoverAt: record.recoverAt ?? null,
    inRecoveryIndex: record.recoverAt !== undefined,
    response: record.response ?? null,
  };
}
