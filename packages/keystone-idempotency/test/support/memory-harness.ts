import { randomUUID } from 'node:crypto';
import {
  type ClaimWriteOutcome,
  DriverStore,
  type IdempotencyDriver,
  RecordStatus,
  type WriteOutcome,
} from 'keystone-idempotency/engine';
import type { LostReplyStep, StoreContractHarness } from 'keystone-idempotency/testing';
import type { MemoryDriver, MemoryEffect } from './memory-driver';

/** A reply a test means to lose: the next `left` sendings of `step` on `key`. */
interface Fault {
  readonly step: LostReplyStep;
  readonly key: string;
  left: number;
  fired: number;
}

/**
 * Whether the reply to this sending of a write is lost (after the write applied): `step` names the write as the
 * contract suite arms it (undefined for an abandonment), `sending` counts from 1.
 */
export type LosesReply = (step: LostReplyStep | undefined, key: string, sending: number) => boolean;

/**
 * The memory driver behind a client that loses replies after the write applied, and sends the same write again, up
 * to `attempts` times, as the AWS SDK and the PostgreSQL store do. The driver only reports what each sending met;
 * the engine must recognise its own earlier write.
 */
export class LossyDriver implements IdempotencyDriver<MemoryEffect> {
  readonly maxEffects: number;
  readonly maxResponseBytes: number;

  constructor(
    private readonly inner: MemoryDriver,
    private readonly losesReply: LosesReply,
    private readonly attempts: number,
  ) {
    this.maxEffects = inner.maxEffects;
    this.maxResponseBytes = inner.maxResponseBytes;
  }

  checkEffect(effect: unknown, index: number): void {
    this.inner.checkEffect(effect, index);
  }
  read(key: string) {
    return this.inner.read(key);
  }
  findDue(query: { now: number; limit: number; leaseMs: number }) {
    return this.inner.findDue(query);
  }
  putFresh(write: Parameters<MemoryDriver['putFresh']>[0]): Promise<ClaimWriteOutcome> {
    return this.send('claim', write.record.key, () => this.inner.putFresh(write));
  }
  takeOver(write: Parameters<MemoryDriver['takeOver']>[0]): Promise<ClaimWriteOutcome> {
    return this.send('takeover', write.previous.key, () => this.inner.takeOver(write));
  }
  commit(write: Parameters<MemoryDriver['commit']>[0]): Promise<WriteOutcome> {
    const step = write.effects.length === 0 ? 'completion' : 'commit';
    return this.send(step, write.lease.key, () => this.inner.commit(write));
  }
  /** A checkpoint's reply is lost as a commit's is (the suite arms `commit` for it). */
  checkpoint(write: Parameters<MemoryDriver['checkpoint']>[0]): Promise<WriteOutcome> {
    return this.send('commit', write.lease.key, () => this.inner.checkpoint(write));
  }
  endLease(write: Parameters<MemoryDriver['endLease']>[0]): Promise<WriteOutcome> {
    const step = write.status === RecordStatus.Released ? 'release' : undefined;
    return this.send(step, write.lease.key, () => this.inner.endLease(write));
  }
  commitOneShot(write: Parameters<MemoryDriver['commitOneShot']>[0]): Promise<WriteOutcome> {
    return this.send('commit', write.record.key, () => this.inner.commitOneShot(write));
  }

  private async send<T>(step: LostReplyStep | undefined, key: string, write: () => Promise<T>): Promise<T> {
    for (let sending = 1; ; sending++) {
      const answer = await write();
      if (!this.losesReply(step, key, sending)) return answer;
      // Applied, and its answer lost on the way back.
      if (sending >= this.attempts) throw Object.assign(new Error('reply lost'), { name: 'TimeoutError' });
    }
  }
}

/**
 * What the published contract suite needs of a store over `db` (`DriverStore`), with every optional part: round
 * trips counted, the record read behind the store's back, and replies lost after the write applied.
 */
export function memoryHarness(db: MemoryDriver): StoreContractHarness<MemoryEffect> {
  const faults: Fault[] = [];
  const armed: LosesReply = (step, key) => {
    const fault = faults.find((candidate) => candidate.step === step && candidate.key === key && candidate.left > 0);
    if (!fault) return false;
    fault.left--;
    fault.fired++;
    return true;
  };
  return {
    store: (options) => new DriverStore(db, options),
    effect: (pk, id): MemoryEffect => ({ insert: { pk, id } }),
    blockedEffect: (): MemoryEffect => ({ require: { pk: `missing-${randomUUID()}` } }),
    rowsUnder: async (pk) => db.rows.get(pk)?.size ?? 0,
    maxResponseBytes: db.maxResponseBytes,
    roundTrips: {
      reset: () => {
        db.calls = 0;
      },
      get count() {
        return db.calls;
      },
    },
    stored: async (key) => db.records.get(key),
    faults: {
      store: ({ attempts = 3, ...options }) => new DriverStore(new LossyDriver(db, armed, attempts), options),
      loseReplies(step, key, times = 1) {
        const fault: Fault = { step, key, left: times, fired: 0 };
        faults.push(fault);
        return { fired: () => fault.fired };
      },
    },
  };
}
