import {
  type DueOperation,
  EffectConditionFailedError,
  type IdempotencyRecord,
  RecordStatus,
  type WriteOutcome,
} from 'keystone-idempotency/engine';
import { completed, holds, isAsSeen, isFree, leaseEnded, MemoryDriver, type MemoryEffect } from './memory-driver';

/**
 * Drivers that each drop exactly one guarantee the driver contract states (src/engine/driver.ts), built from the
 * memory driver by overriding one method (or one limit): what a hostile review of the contract would write, and what
 * the published suites must fail. broken-drivers.test.ts runs each against the contract suite's cases named in
 * `killedBy`, and against the protocol model where `model` says it fails.
 */
export interface BrokenDriver {
  /** What the driver does wrong. */
  readonly name: string;
  /** The part of the driver contract it breaks. */
  readonly method: string;
  /** The guarantee it drops, in the contract's words. */
  readonly dropped: string;
  /** The contract suite's cases that fail on it, as `block > case`: each must fail. */
  readonly killedBy: readonly string[];
  /**
   * The protocol model fails it too (it must, within its runs); absent where the model does not reach the fault, or
   * not reliably (it runs no one-shot commit, no odd response, no limit): the contract suite's cases do.
   */
  readonly model?: true;
  make(): MemoryDriver;
}

const DAY_MS = 24 * 3_600_000;

/** Text as a database that stores it as UTF-8 gives it back: a lone surrogate becomes U+FFFD. */
const utf8 = (text: string) => Buffer.from(text).toString();

type Write<M extends 'putFresh' | 'takeOver' | 'commit' | 'checkpoint' | 'endLease' | 'commitOneShot'> = Parameters<
  MemoryDriver[M]
>[0];

/** A memory driver that remembers each record as it was before its last write. */
class RemembersPreviousVersions extends MemoryDriver {
  readonly previous = new Map<string, IdempotencyRecord | undefined>();
  protected override transact(
    key: string,
    condition: (current: IdempotencyRecord | undefined) => boolean,
    next: (current: IdempotencyRecord | undefined) => IdempotencyRecord,
    effects: readonly MemoryEffect[],
  ): WriteOutcome {
    const before = this.records.get(key);
    const outcome = super.transact(key, condition, next, effects);
    if (outcome.kind === 'written') this.previous.set(key, before);
    return outcome;
  }
  /** The record as it was before its last write, where it has had one. */
  protected previousVersion(key: string): IdempotencyRecord | undefined {
    return this.previous.has(key) ? this.previous.get(key) : this.records.get(key);
  }
}

const claim = 'claim > ';
const lostReply = 'a write whose reply is lost > ';
const takeover = 'takeover > ';
const release = 'release > ';
const commit = 'commit > ';
const completion = 'commit with nothing staged > ';
const findDue = 'findDue (the recovery set) > ';
const resume = 'resume (recovery taking over by key) > ';
const abandon = 'abandon > ';
const expiry = 'expiry and clocks > ';
const steps = 'recovery points (steps) > ';
const oneShot = 'claimAndCommit (one-shot local work) > ';

export const brokenDrivers: readonly BrokenDriver[] = [
  {
    name: 'checkEffect accepts anything',
    method: 'checkEffect',
    dropped: 'an EffectKindError for an effect this database can’t write',
    killedBy: [`${commit}refuses an effect it cannot write, before anything is written`],
    make: () =>
      new (class extends MemoryDriver {
        override checkEffect(): void {}
      })(),
  },
  {
    name: 'read answers the record as it was before its last write',
    method: 'read',
    dropped: 'read strongly consistently: a read after a write answered sees that write',
    killedBy: [`${lostReply}recognizes its own release when sent again`],
    model: true,
    make: () =>
      new (class extends RemembersPreviousVersions {
        override async read(key: string) {
          this.calls++;
          return this.previousVersion(key);
        }
      })(),
  },
  {
    name: 'read leaves out the progress (a column it forgot)',
    method: 'read',
    dropped: 'the record under key as stored',
    killedBy: [`${steps}keeps the progress through release, takeover and abandon`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async read(key: string) {
          const record = await super.read(key);
          if (record === undefined) return undefined;
          const { progress: _forgotten, ...rest } = record;
          return rest;
        }
      })(),
  },
  {
    name: 'putFresh overwrites a live record',
    method: 'putFresh',
    dropped: 'writes record only if no record is under its key, or the one there is past its expiry',
    killedBy: [`${claim}lets exactly one of 50 concurrent claims win, and exactly one effect commit`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async putFresh({ record }: Write<'putFresh'>) {
          return this.transact(
            record.key,
            () => true,
            () => record,
            [],
          );
        }
      })(),
  },
  {
    name: 'putFresh frees an unfinished recoverable record a day after its creation',
    method: 'putFresh',
    dropped: 'an unfinished recoverable operation is never free, however old',
    killedBy: [`${expiry}never frees, expires or drops unfinished recoverable work, 30 days past any TTL`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async putFresh({ record, now }: Write<'putFresh'>) {
          const aged = (current: IdempotencyRecord | undefined) =>
            current?.recoverAt !== undefined && current.createdAt + DAY_MS <= now;
          return this.transact(
            record.key,
            (current) => isFree(current, now) || aged(current),
            () => record,
            [],
          );
        }
      })(),
  },
  {
    name: 'putFresh frees a record a second before its expiry',
    method: 'putFresh',
    dropped: 'free only when past its expiry at now (expiresAt * 1000 <= now)',
    killedBy: [
      `${expiry}replays a completed record up to the millisecond before its expiry, and treats it as new from then`,
    ],
    make: () =>
      new (class extends MemoryDriver {
        override async putFresh({ record, now }: Write<'putFresh'>) {
          return this.transact(
            record.key,
            (current) => isFree(current, now + 1000),
            () => record,
            [],
          );
        }
      })(),
  },
  {
    name: 'putFresh keeps a record at the very millisecond of its expiry (< for <=)',
    method: 'putFresh',
    dropped: 'free when past its expiry at now (expiresAt * 1000 <= now)',
    killedBy: [
      `${expiry}replays a completed record up to the millisecond before its expiry, and treats it as new from then`,
    ],
    make: () =>
      new (class extends MemoryDriver {
        override async putFresh({ record, now }: Write<'putFresh'>) {
          return this.transact(
            record.key,
            (current) => isFree(current, now - 1),
            () => record,
            [],
          );
        }
      })(),
  },
  {
    name: 'putFresh frees a released record before its expiry',
    method: 'putFresh',
    dropped: 'writes record only if no record is under its key, or the one there is past its expiry',
    killedBy: [`${release}frees the key for a retry that keeps the fingerprint check and the downstream key`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async putFresh({ record, now }: Write<'putFresh'>) {
          const released = (current: IdempotencyRecord | undefined) => current?.status === RecordStatus.Released;
          return this.transact(
            record.key,
            (current) => isFree(current, now) || released(current),
            () => record,
            [],
          );
        }
      })(),
  },
  {
    name: 'putFresh judges expiry by the database’s clock',
    method: 'putFresh',
    dropped: 'a driver never reads a clock of its own: every condition uses the now it is given',
    killedBy: [`${expiry}judges expiry by the store’s clock, never the database’s: a store an hour ahead of it`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async putFresh({ record }: Write<'putFresh'>) {
          return this.transact(
            record.key,
            (current) => isFree(current, Date.now()),
            () => record,
            [],
          );
        }
      })(),
  },
  {
    name: 'putFresh leaves recoverAt out of the record it writes',
    method: 'putFresh',
    dropped: 'writes record (the record whole: recoverAt puts it in the recovery set)',
    killedBy: [`${expiry}never frees, expires or drops unfinished recoverable work, 30 days past any TTL`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async putFresh({ record, now }: Write<'putFresh'>) {
          const { recoverAt: _left, ...rest } = record;
          return this.transact(
            record.key,
            (current) => isFree(current, now),
            () => rest,
            [],
          );
        }
      })(),
  },
  {
    name: 'takeOver checks the lease token, not the status',
    method: 'takeOver',
    dropped: 'only if the stored record still has previous’s lease token and status',
    killedBy: [
      `${takeover}refuses a takeover that a late commit beat: the completion and its one effect stay`,
      `${resume}refuses a resume that a late commit beat: the completion and its one effect stay`,
    ],
    make: () =>
      new (class extends MemoryDriver {
        override async takeOver({ previous, record }: Write<'takeOver'>) {
          const sameToken = (current: IdempotencyRecord | undefined) => current?.leaseToken === previous.leaseToken;
          return this.transact(previous.key, sameToken, () => record, []);
        }
      })(),
  },
  {
    name: 'takeOver checks the status, not the lease token',
    method: 'takeOver',
    dropped: 'of two owners taking one record over, exactly one wins',
    killedBy: [`${takeover}gives an expired lease to exactly one of two concurrent takers, keeping the downstream key`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async takeOver({ previous, record }: Write<'takeOver'>) {
          const sameStatus = (current: IdempotencyRecord | undefined) => current?.status === previous.status;
          return this.transact(previous.key, sameStatus, () => record, []);
        }
      })(),
  },
  {
    name: 'takeOver merges the new record into the old (an expiry the new one drops stays)',
    method: 'takeOver',
    dropped: 'the record is written whole: recoverAt present puts it in the recovery set; likewise expiresAt',
    killedBy: [`${resume}takes an abandoned operation back into the recovery set, with no expiry left`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async takeOver({ previous, record }: Write<'takeOver'>) {
          return this.transact(
            previous.key,
            (current) => isAsSeen(current, previous),
            (current) => ({ ...(current as IdempotencyRecord), ...record }),
            [],
          );
        }
      })(),
  },
  {
    name: 'commit not fenced by the lease token',
    method: 'commit',
    dropped: 'only if the record holds lease.leaseToken and is in progress',
    killedBy: [`${takeover}rejects the stale owner’s commit after a takeover and writes none of its effects`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async commit(write: Write<'commit'>) {
          const inProgress = (current: IdempotencyRecord | undefined) => current?.status === RecordStatus.InProgress;
          return this.transact(write.lease.key, inProgress, (c) => completed(c!, write), write.effects);
        }
      })(),
  },
  {
    name: 'commit not fenced by the status',
    method: 'commit',
    dropped: 'only if the record holds lease.leaseToken and is in progress',
    killedBy: [`${commit}refuses a commit after its owner released the record, writing nothing`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async commit(write: Write<'commit'>) {
          const sameToken = (current: IdempotencyRecord | undefined) => current?.leaseToken === write.lease.leaseToken;
          return this.transact(write.lease.key, sameToken, (c) => completed(c!, write), write.effects);
        }
      })(),
  },
  {
    name: 'commit writes its effects when its condition fails',
    method: 'commit',
    dropped: 'when the condition fails nothing is written, effects included',
    killedBy: [`${takeover}rejects the stale owner’s commit after a takeover and writes none of its effects`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async commit(write: Write<'commit'>) {
          const outcome = await super.commit(write);
          if (outcome.kind === 'met') this.apply(write.effects);
          return outcome;
        }
      })(),
  },
  {
    name: 'commit keeps the effects before the one whose condition failed',
    method: 'commit',
    dropped: 'when an effect fails its own condition nothing is written either',
    killedBy: [`${commit}writes neither the effect nor the completion when an effect condition fails`],
    make: () =>
      new (class extends MemoryDriver {
        override async commit(write: Write<'commit'>) {
          try {
            return await super.commit(write);
          } catch (error) {
            if (error instanceof EffectConditionFailedError) this.apply(write.effects.slice(0, error.index));
            throw error;
          }
        }
      })(),
  },
  {
    name: 'commit leaves the record in the recovery set',
    method: 'commit',
    dropped: 'completes the record (…, out of the recovery set)',
    killedBy: [
      `${completion}completes the record as a transaction would: out of the recovery set, kept a full TTL from the commit`,
    ],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async commit(write: Write<'commit'>) {
          const fenced = (current: IdempotencyRecord | undefined) => holds(current, write.lease);
          const kept = (c: IdempotencyRecord) => ({ ...completed(c, write), recoverAt: c.recoverAt });
          return this.transact(write.lease.key, fenced, (c) => kept(c!), write.effects);
        }
      })(),
  },
  {
    name: 'commit keeps the claim’s expiry',
    method: 'commit',
    dropped: 'completes the record (…, expiresAt)',
    killedBy: [
      `${completion}completes the record as a transaction would: out of the recovery set, kept a full TTL from the commit`,
    ],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async commit(write: Write<'commit'>) {
          const fenced = (current: IdempotencyRecord | undefined) => holds(current, write.lease);
          const kept = (c: IdempotencyRecord) => ({ ...completed(c, write), expiresAt: c.expiresAt });
          return this.transact(write.lease.key, fenced, (c) => kept(c!), write.effects);
        }
      })(),
  },
  {
    name: 'commit drops the response’s isBase64Encoded',
    method: 'commit',
    dropped: 'completes the record (…, response): the response kept as given',
    killedBy: [`${commit}keeps a binary (base64-encoded) response as it was stored`],
    make: () =>
      new (class extends MemoryDriver {
        override async commit(write: Write<'commit'>) {
          const { isBase64Encoded: _dropped, ...response } = write.response;
          return super.commit({ ...write, response });
        }
      })(),
  },
  {
    name: 'commit keeps a header’s lone surrogate as U+FFFD (its text sent as UTF-8)',
    method: 'commit',
    dropped: 'completes the record (…, response): the response kept as given',
    killedBy: [
      `${commit}replays a response holding a NUL and lone surrogates: headers exactly, the body as the same UTF-8`,
    ],
    make: () =>
      new (class extends MemoryDriver {
        override async commit(write: Write<'commit'>) {
          const headers = Object.fromEntries(Object.entries(write.response.headers).map(([n, v]) => [n, utf8(v)]));
          return super.commit({ ...write, response: { ...write.response, headers } });
        }
      })(),
  },
  {
    name: 'maxEffects promises more than one transaction carries',
    method: 'maxEffects',
    dropped: 'the most effects one commit can carry in the transaction with the key’s write',
    killedBy: [`${commit}writes every one of as many effects as one commit carries, and refuses one more`],
    make: () =>
      new (class extends MemoryDriver {
        override async commit(write: Write<'commit'>) {
          if (write.effects.length > 50) throw new Error('the database refused a transaction of over 51 items');
          return super.commit(write);
        }
      })(),
  },
  {
    name: 'maxResponseBytes promises more than a record keeps (the body cut at 32 KiB)',
    method: 'maxResponseBytes',
    dropped: 'the largest response (body plus header names and values, in bytes) a record can hold',
    killedBy: [`${commit}keeps a response of exactly the largest size, byte for byte`],
    make: () =>
      new (class extends MemoryDriver {
        override async commit(write: Write<'commit'>) {
          return super.commit({
            ...write,
            response: { ...write.response, body: write.response.body.slice(0, 32_768) },
          });
        }
      })(),
  },
  {
    name: 'checkpoint does not check the revision',
    method: 'checkpoint',
    dropped: 'only if … its stored progress revision is progress.revision - 1',
    killedBy: [`${steps}refuses a checkpoint that does not follow the stored revision`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async checkpoint(write: Write<'checkpoint'>) {
          const fenced = (current: IdempotencyRecord | undefined) => holds(current, write.lease);
          return this.transact(write.lease.key, fenced, (c) => ({ ...c!, progress: write.progress }), write.effects);
        }
      })(),
  },
  {
    name: 'checkpoint keeps a step result’s lone surrogate as U+FFFD (its text sent as UTF-8)',
    method: 'checkpoint',
    dropped: 'sets the record’s progress to `progress`: the step results kept as given',
    killedBy: [`${steps}gives results holding a NUL and lone surrogates back exactly to the owner that takes over`],
    make: () =>
      new (class extends MemoryDriver {
        override async checkpoint(write: Write<'checkpoint'>) {
          const progress = JSON.parse(JSON.stringify(write.progress), (_, v) => (typeof v === 'string' ? utf8(v) : v));
          return super.checkpoint({ ...write, progress });
        }
      })(),
  },
  {
    name: 'checkpoint not fenced by the lease token',
    method: 'checkpoint',
    dropped: 'only if the record holds lease.leaseToken',
    killedBy: [`${steps}fences an owner taken over mid-step: its step's checkpoint and effects are not written`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async checkpoint(write: Write<'checkpoint'>) {
          const follows = (current: IdempotencyRecord | undefined) =>
            current?.status === RecordStatus.InProgress &&
            (current.progress?.revision ?? 0) === write.progress.revision - 1;
          return this.transact(write.lease.key, follows, (c) => ({ ...c!, progress: write.progress }), write.effects);
        }
      })(),
  },
  {
    name: 'checkpoint not fenced by the status',
    method: 'checkpoint',
    dropped: 'only if the record … is in progress',
    killedBy: [`${steps}refuses a checkpoint once its owner released or committed the record, writing nothing`],
    make: () =>
      new (class extends MemoryDriver {
        override async checkpoint(write: Write<'checkpoint'>) {
          const follows = (current: IdempotencyRecord | undefined) =>
            current?.leaseToken === write.lease.leaseToken &&
            (current.progress?.revision ?? 0) === write.progress.revision - 1;
          return this.transact(write.lease.key, follows, (c) => ({ ...c!, progress: write.progress }), write.effects);
        }
      })(),
  },
  {
    name: 'checkpoint writes its effects when its condition fails',
    method: 'checkpoint',
    dropped: 'when the condition fails nothing is written, effects included',
    killedBy: [`${steps}refuses a checkpoint that does not follow the stored revision`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async checkpoint(write: Write<'checkpoint'>) {
          const outcome = await super.checkpoint(write);
          if (outcome.kind === 'met') this.apply(write.effects);
          return outcome;
        }
      })(),
  },
  {
    name: 'checkpoint takes the record out of the recovery set',
    method: 'checkpoint',
    dropped: 'nothing else of the record changes (its lease, expiry and recovery set stay)',
    killedBy: [`${steps}changes nothing of the record but its progress: its lease, expiry and recovery set stay`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async checkpoint(write: Write<'checkpoint'>) {
          const outcome = await super.checkpoint(write);
          const current = this.records.get(write.lease.key);
          if (outcome.kind === 'written' && current) {
            const { recoverAt: _dropped, ...rest } = current;
            this.records.set(write.lease.key, rest);
          }
          return outcome;
        }
      })(),
  },
  {
    name: 'endLease ignores the lease token',
    method: 'endLease',
    dropped: 'only if the record holds lease.leaseToken',
    killedBy: [`${release}never touches a claim it does not own`, `${abandon}never abandons a claim it does not own`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async endLease(write: Write<'endLease'>) {
          const inProgress = (current: IdempotencyRecord | undefined) => current?.status === RecordStatus.InProgress;
          return this.transact(write.lease.key, inProgress, (c) => leaseEnded(c!, write), []);
        }
      })(),
  },
  {
    name: 'endLease ignores the status',
    method: 'endLease',
    dropped: 'only if the record … is in progress',
    killedBy: [`${release}cannot release a completed record`],
    make: () =>
      new (class extends MemoryDriver {
        override async endLease(write: Write<'endLease'>) {
          const sameToken = (current: IdempotencyRecord | undefined) => current?.leaseToken === write.lease.leaseToken;
          return this.transact(write.lease.key, sameToken, (c) => leaseEnded(c!, write), []);
        }
      })(),
  },
  {
    name: 'endLease leaves the lease running',
    method: 'endLease',
    dropped: 'sets status and ends the lease (leaseExpiresAt = now)',
    killedBy: [`${release}ends the lease when it releases, keeping the fingerprint and the downstream key`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async endLease(write: Write<'endLease'>) {
          const fenced = (current: IdempotencyRecord | undefined) => holds(current, write.lease);
          const running = (c: IdempotencyRecord) => ({ ...leaseEnded(c, write), leaseExpiresAt: c.leaseExpiresAt });
          return this.transact(write.lease.key, fenced, (c) => running(c!), []);
        }
      })(),
  },
  {
    name: 'endLease keeps recoverAt when told to remove it (abandon)',
    method: 'endLease',
    dropped: 'null removes it (with recoverAt, the record leaves the recovery set)',
    killedBy: [
      `${abandon}gives up an operation: out of the recovery set, kept a full TTL, and a late retry keeps its downstream key`,
    ],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async endLease(write: Write<'endLease'>) {
          const { recoverAt, ...rest } = write;
          return super.endLease(recoverAt === null ? rest : write);
        }
      })(),
  },
  {
    name: 'endLease ignores the expiry it is given (abandon)',
    method: 'endLease',
    dropped: 'expiresAt: a number sets it',
    killedBy: [
      `${abandon}gives up an operation: out of the recovery set, kept a full TTL, and a late retry keeps its downstream key`,
    ],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async endLease(write: Write<'endLease'>) {
          const { expiresAt, ...rest } = write;
          return super.endLease(typeof expiresAt === 'number' ? rest : write);
        }
      })(),
  },
  {
    name: 'commitOneShot writes over any record',
    method: 'commitOneShot',
    dropped: 'only if the key is free as for putFresh, or the stored record still has previous’s token and status',
    killedBy: [`${oneShot}makes exactly one effect out of 50 concurrent attempts`],
    make: () =>
      new (class extends MemoryDriver {
        override async commitOneShot(write: Write<'commitOneShot'>) {
          return this.transact(
            write.record.key,
            () => true,
            () => write.record,
            write.effects,
          );
        }
      })(),
  },
  {
    name: 'commitOneShot checks previous’s lease token, not its status',
    method: 'commitOneShot',
    dropped: 'or the stored record still has previous’s lease token and status (a takeover)',
    killedBy: [`${oneShot}refuses a one-shot takeover that a late commit beat, writing nothing`],
    make: () =>
      new (class extends MemoryDriver {
        override async commitOneShot({ record, previous, now, effects }: Write<'commitOneShot'>) {
          const condition = (current: IdempotencyRecord | undefined) =>
            previous ? current?.leaseToken === previous.leaseToken : isFree(current, now);
          return this.transact(record.key, condition, () => record, effects);
        }
      })(),
  },
  {
    name: 'commitOneShot ignores previous (a takeover never applies)',
    method: 'commitOneShot',
    dropped: 'or the stored record still has previous’s lease token and status (a takeover)',
    killedBy: [`${oneShot}completes a released record, reusing its downstream key`],
    make: () =>
      new (class extends MemoryDriver {
        override async commitOneShot(write: Write<'commitOneShot'>) {
          return super.commitOneShot({ ...write, previous: undefined });
        }
      })(),
  },
  {
    name: 'commitOneShot writes its effects when its condition fails',
    method: 'commitOneShot',
    dropped: 'when the condition fails nothing is written',
    killedBy: [`${oneShot}answers a duplicate with a replay, or a mismatch for another fingerprint, writing nothing`],
    make: () =>
      new (class extends MemoryDriver {
        override async commitOneShot(write: Write<'commitOneShot'>) {
          const outcome = await super.commitOneShot(write);
          if (outcome.kind === 'met') this.apply(write.effects);
          return outcome;
        }
      })(),
  },
  {
    name: 'findDue lists operations not yet due',
    method: 'findDue',
    dropped: 'recoverable operations due at now (recoverAt <= now)',
    killedBy: [`${findDue}lists an in-progress operation once its lease has run out, and not before`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async findDue({ limit }: { now: number; limit: number }) {
          return super.findDue({ now: Number.MAX_SAFE_INTEGER, limit });
        }
      })(),
  },
  {
    name: 'findDue lists an operation only once it is past due (< for <=)',
    method: 'findDue',
    dropped: 'due at now (recoverAt <= now)',
    killedBy: [`${findDue}lists an in-progress operation once its lease has run out, and not before`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async findDue({ now, limit }: { now: number; limit: number }) {
          return super.findDue({ now: now - 1, limit });
        }
      })(),
  },
  {
    name: 'findDue reports firstDueAt a lease after recoverAt (not after the first claim)',
    method: 'findDue',
    dropped: 'firstDueAt (createdAt + leaseMs, never later than recoverAt)',
    killedBy: [
      `${findDue}tells when each is due, and when it was first due: a lease after its first claim, never later`,
    ],
    make: () =>
      new (class extends MemoryDriver {
        override async findDue(query: { now: number; limit: number; leaseMs: number }) {
          return (await super.findDue(query)).map((due) => ({ ...due, firstDueAt: due.recoverAt + query.leaseMs }));
        }
      })(),
  },
  {
    name: 'findDue answers newest first',
    method: 'findDue',
    dropped: 'oldest recoverAt first',
    killedBy: [`${findDue}answers oldest first, within its limit`],
    make: () =>
      new (class extends MemoryDriver {
        override async findDue(query: { now: number; limit: number }) {
          return (await super.findDue({ ...query, limit: Number.MAX_SAFE_INTEGER })).reverse().slice(0, query.limit);
        }
      })(),
  },
  {
    name: 'findDue answers one more than its limit',
    method: 'findDue',
    dropped: 'at most limit',
    killedBy: [`${findDue}answers oldest first, within its limit`],
    make: () =>
      new (class extends MemoryDriver {
        override async findDue(query: { now: number; limit: number }) {
          return super.findDue({ ...query, limit: query.limit + 1 });
        }
      })(),
  },
  {
    name: 'findDue keeps committed operations (an index nothing takes them out of)',
    method: 'findDue',
    dropped: 'recoverable operations due: from an index of the recovery set',
    killedBy: [
      `${findDue}drops an operation from the set when it commits, and never lists one claimed without recovery`,
    ],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        readonly index = new Map<string, number>();
        protected override transact(
          key: string,
          condition: (current: IdempotencyRecord | undefined) => boolean,
          next: (current: IdempotencyRecord | undefined) => IdempotencyRecord,
          effects: readonly MemoryEffect[],
        ): WriteOutcome {
          const outcome = super.transact(key, condition, next, effects);
          const recoverAt = this.records.get(key)?.recoverAt;
          if (outcome.kind === 'written' && recoverAt !== undefined) this.index.set(key, recoverAt);
          return outcome;
        }
        override async findDue({ now, limit }: { now: number; limit: number }): Promise<DueOperation[]> {
          return [...this.index]
            .filter(([, recoverAt]) => recoverAt <= now)
            .sort(([, a], [, b]) => a - b)
            .slice(0, limit)
            .map(([key, recoverAt]) => ({ key, recoverAt }));
        }
      })(),
  },
  {
    name: 'findDue drops operations a day old',
    method: 'findDue',
    dropped: 'recoverable operations due at now: every one, however old',
    killedBy: [`${expiry}never frees, expires or drops unfinished recoverable work, 30 days past any TTL`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        override async findDue(query: { now: number; limit: number }) {
          const due = await super.findDue({ ...query, limit: Number.MAX_SAFE_INTEGER });
          const young = due.filter((d) => (this.records.get(d.key)?.createdAt ?? 0) + DAY_MS > query.now);
          return young.slice(0, query.limit);
        }
      })(),
  },
  {
    name: 'a write that did not apply answers met with the record as it was before its last write',
    method: 'met (every write)',
    dropped: 'answer met, with the record its condition met … as stored',
    killedBy: [`${lostReply}commits once when the client sends again a commit whose reply was lost`],
    model: true,
    make: () =>
      new (class extends RemembersPreviousVersions {
        protected override transact(
          key: string,
          condition: (current: IdempotencyRecord | undefined) => boolean,
          next: (current: IdempotencyRecord | undefined) => IdempotencyRecord,
          effects: readonly MemoryEffect[],
        ): WriteOutcome {
          const outcome = super.transact(key, condition, next, effects);
          return outcome.kind === 'met' ? { kind: 'met', record: this.previousVersion(key) } : outcome;
        }
      })(),
  },
  {
    name: 'a write that did not apply answers met with no record',
    method: 'met (every write)',
    dropped: 'answer met, with the record its condition met',
    killedBy: [`${claim}reports a mismatch for the same key with another fingerprint, in flight or completed`],
    model: true,
    make: () =>
      new (class extends MemoryDriver {
        protected override transact(
          key: string,
          condition: (current: IdempotencyRecord | undefined) => boolean,
          next: (current: IdempotencyRecord | undefined) => IdempotencyRecord,
          effects: readonly MemoryEffect[],
        ): WriteOutcome {
          const outcome = super.transact(key, condition, next, effects);
          return outcome.kind === 'met' ? { kind: 'met', record: undefined } : outcome;
        }
      })(),
  },
];
