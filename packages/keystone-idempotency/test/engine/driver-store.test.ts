import { randomUUID } from 'node:crypto';
import {
  type ClaimWriteOutcome,
  DriverStore,
  type IdempotencyDriver,
  RecordStatus,
  type WriteOutcome,
} from 'keystone-idempotency/engine';
import { describeStoreContract, type LostReplyStep } from 'keystone-idempotency/testing';
import { MemoryDriver, type MemoryEffect } from '../support/memory-driver';

/** A reply a test means to lose: the next `left` sendings of `step` on `key`. */
interface Fault {
  readonly step: LostReplyStep;
  readonly key: string;
  left: number;
  fired: number;
}

/**
 * The memory driver behind a client that loses armed replies after the write applied, and sends the same write
 * again, up to `attempts` times, as the AWS SDK and the PostgreSQL store do. The driver only reports what each
 * sending met; the engine must recognise its own earlier write.
 */
class LossyDriver implements IdempotencyDriver<MemoryEffect> {
  readonly maxEffects: number;
  readonly maxResponseBytes: number;

  constructor(
    private readonly inner: MemoryDriver,
    private readonly faults: Fault[],
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
  endLease(write: Parameters<MemoryDriver['endLease']>[0]): Promise<WriteOutcome> {
    const step = write.status === RecordStatus.Released ? 'release' : undefined;
    return this.send(step, write.lease.key, () => this.inner.endLease(write));
  }
  commitOneShot(write: Parameters<MemoryDriver['commitOneShot']>[0]): Promise<WriteOutcome> {
    return this.send('commit', write.record.key, () => this.inner.commitOneShot(write));
  }

  private async send<T>(step: LostReplyStep | undefined, key: string, write: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const answer = await write();
      const fault = this.faults.find((armed) => armed.step === step && armed.key === key && armed.left > 0);
      if (!fault) return answer;
      // Applied, and its answer lost on the way back.
      fault.left--;
      fault.fired++;
      if (attempt >= this.attempts) throw Object.assign(new Error('reply lost'), { name: 'TimeoutError' });
    }
  }
}

/**
 * A store of a team's own, proven as the package's are: the published contract suite, against a driver written
 * with nothing but the published entry points (test/support/memory-driver.ts), behind `DriverStore`.
 */
describeStoreContract({
  name: 'a driver of its own (in memory)',
  setup: () => {
    const db = new MemoryDriver();
    const faults: Fault[] = [];
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
        store: ({ attempts = 3, ...options }) => new DriverStore(new LossyDriver(db, faults, attempts), options),
        loseReplies(step, key, times = 1) {
          const fault: Fault = { step, key, left: times, fired: 0 };
          faults.push(fault);
          return { fired: () => fault.fired };
        },
      },
    };
  },
});
