import { isDeepStrictEqual } from 'node:util';
import { RecordStatus, type StoredResponse } from '../../engine/record.js';
import type { StepProgress } from '../../engine/steps.js';
import { type ModelRecord, type ProtocolModel, STEPS } from './reference-model.js';
import { type EffectRow, type ProtocolSystem, type Snapshot, type StoredItem, stepOfRow } from './system.js';

/** A promise of the protocol was broken: named, so that a failing run says which one. */
export class InvariantViolation extends Error {
  constructor(invariant: string, details: Record<string, unknown>) {
    super(`${invariant}\n${JSON.stringify(details, null, 2)}`);
    this.name = 'InvariantViolation';
  }
}

/**
 * The promises themselves, read from the real tables and the processor, whatever the model predicted:
 * - at most one effect row per operation generation (and per step of it), each written once;
 * - no effect row from an owner whose lease had been taken over (or had ended) before the row appeared;
 * - at most one charge per operation generation, however many owners and downstream keys it had;
 * - a completed record holds the response first committed for its generation, byte for byte.
 */
export function checkSafety(m: ProtocolModel, r: ProtocolSystem, snapshot: Snapshot): void {
  const rowsPerGeneration = new Map<string, EffectRow[]>();
  for (const row of snapshot.rows) {
    if (!m.rowSeenAt.has(row.sk)) m.rowSeenAt.set(row.sk, m.step);
    const step = stepOfRow(row);
    const generation = `${generationKeyOf(m, row.downstreamKey, { row })}${step ? `/${step}` : ''}`;
    rowsPerGeneration.set(generation, [...(rowsPerGeneration.get(generation) ?? []), row]);
    if (row.writes !== undefined && Number(row.writes) !== 1) {
      throw new InvariantViolation('an effect was written more than once', { row });
    }
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
    if (rows.length > 1) {
      throw new InvariantViolation('two effects for one operation generation (or one step of it)', {
        generation,
        rows,
      });
    }
  }
  checkSteps(m, r, snapshot);

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
 * The promises of recovery points, read from the real tables and the steps' outside systems:
 * - every call of one step of one operation generation went out under one downstream key, and no two steps (nor two
 *   generations) shared one: a takeover or a retry asks again under the same key, a new generation under a new one;
 * - a step whose outside system does not dedupe made its thing at most once per generation;
 * - checkpointed progress never goes backwards: its revision never falls, a step done stays done;
 * - a step's local write is there exactly when its checkpoint recorded it done;
 * - a multi-step operation completed holds every one of its steps done.
 */
export function checkSteps(m: ProtocolModel, r: ProtocolSystem, snapshot: Snapshot): void {
  const keyOf = new Map<string, string>();
  const stepOfKey = new Map<string, string>();
  for (const [name, outside] of Object.entries(r.stepOutside)) {
    const made = new Map<string, number>();
    for (const call of outside.calls) {
      const step = `${m.generationKey(call.op, call.generation)}/${call.step}`;
      if (call.step !== name) throw new InvariantViolation('a step called another step’s outside system', { call });
      if ((keyOf.get(step) ?? call.key) !== call.key) {
        throw new InvariantViolation('one step of one generation called its outside system under two keys', {
          step,
          keys: [keyOf.get(step), call.key],
        });
      }
      if ((stepOfKey.get(call.key) ?? step) !== step) {
        throw new InvariantViolation('two steps (or generations) called out under one downstream key', {
          key: call.key,
          steps: [stepOfKey.get(call.key), step],
        });
      }
      if (call.alreadyDone && (call.holder || !outside.dedupes)) {
        // A stale owner may call a deduping system again (it answers the same); the holder never runs a done step.
        throw new InvariantViolation('a step recorded done ran again', { step, call });
      }
      keyOf.set(step, call.key);
      stepOfKey.set(call.key, step);
      if (call.made) made.set(step, (made.get(step) ?? 0) + 1);
      if (!outside.dedupes && (made.get(step) ?? 0) > 1) {
        throw new InvariantViolation('a step whose outside system does not dedupe made its effect twice', {
          step,
          calls: outside.calls.filter((c) => c.key === call.key),
        });
      }
    }
  }

  snapshot.items.forEach((item, index) => {
    const progress = item?.progress as StepProgress | undefined;
    if (!item || !progress) return;
    const generation = generationKeyOf(m, String(item.downstreamKey), { op: index, progress });
    const done = progress.steps.filter((step) => step.state === 'done').map((step) => step.name);
    const seen = m.progressSeen.get(generation);
    if (seen && (progress.revision < seen.revision || seen.done.some((name) => !done.includes(name)))) {
      throw new InvariantViolation('checkpointed progress went backwards', { generation, seen, stored: progress });
    }
    m.progressSeen.set(generation, { revision: progress.revision, done });
    const rows = snapshot.rows.filter((row) => row.downstreamKey === item.downstreamKey && stepOfRow(row));
    for (const name of STEPS.map((step) => step.name)) {
      const written = rows.filter((row) => stepOfRow(row) === name).length;
      if (written !== (done.includes(name) ? 1 : 0)) {
        throw new InvariantViolation('a step’s local write is not there exactly when its checkpoint is', {
          generation,
          step: name,
          rows: written,
          progress,
        });
      }
    }
    if (item.status === RecordStatus.Completed && m.ops[index]?.multiStep && done.length !== STEPS.length) {
      throw new InvariantViolation('a multi-step operation completed without all its steps done', {
        generation,
        progress,
      });
    }
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
    progress: progressFields(item.progress as StepProgress | undefined),
  };
}

/** The progress as compared, each entry's time included: every handle dates its entries by the store's clock. */
function progressFields(progress: StepProgress | ModelRecord['progress'] | undefined) {
  if (!progress) return null;
  return {
    revision: progress.revision,
    steps: progress.steps.map((step) => ({
      name: step.name,
      state: step.state,
      attempt: step.attempt,
      result: step.result ?? null,
      at: step.at,
    })),
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
    progress: progressFields(record.progress),
  };
}
