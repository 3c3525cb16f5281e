import type { IdempotencyHandle } from '../../engine/operation.js';
import { type Lease, RecordStatus, type StoredResponse } from '../../engine/record.js';
import type { Charge } from './outside-processor.js';

/**
 * The protocol as the README states it, written again from scratch and kept deliberately naive, for a model-based
 * test to hold the engine against: what each record must hold after each step, and what each call must answer.
 * It shares no code with packages/keystone-idempotency/src/engine (a bug there must not be mirrored here); only the record's vocabulary.
 */

/** What a record must hold, field for field. Times as the engine stores them: ms, except `expiresAt` (s, TTL). */
export interface ModelRecord {
  readonly status: RecordStatus;
  readonly leaseToken: string;
  readonly leaseExpiresAt: number;
  /** When it expires; none while it is unfinished and recoverable (every record here is): it never expires then. */
  readonly expiresAt?: number;
  readonly downstreamKey: string;
  readonly attempt: number;
  /** Present while the operation is unfinished: it is in the recovery index, due from then on. */
  readonly recoverAt?: number;
  /** When this generation was first claimed: kept by every takeover and release. */
  readonly createdAt: number;
  readonly response?: StoredResponse;
  /** Which generation of the operation: 1 for its first claim, one more for each claim after the record expired. */
  readonly generation: number;
  /** A multi-step operation's checkpoints: absent until its first. Kept by every transition but a fresh claim. */
  readonly progress?: ModelProgress;
}

/** One step's entry in the record: started (its outside call may have been made) or done (its outcome recorded). */
export interface ModelStep {
  readonly name: string;
  readonly state: 'started' | 'done';
  /** The attempt (owner) that wrote the entry. */
  readonly attempt: number;
  /** What the step returned (done): the id its outside system answered. */
  readonly result?: string;
  /** When it was written, on the model's clock (the store's): a started mark's "not found" is final only later. */
  readonly at: number;
}

/** How far a multi-step operation got: one revision more with each checkpoint, the steps in the order reached. */
export interface ModelProgress {
  readonly revision: number;
  readonly steps: readonly ModelStep[];
}

/**
 * The steps of a multi-step operation, in order, before its charge: one whose outside system dedupes by the step's
 * downstream key (run again under the same key when not recorded done), and one whose outside system does not (a
 * started mark first; a resumed owner that finds it looks the outcome up by the key instead of calling again).
 */
export const STEPS = [
  { name: 'reserve', outside: 'dedupes' },
  { name: 'ship', outside: 'resolve' },
] as const;
export type StepSpec = (typeof STEPS)[number];

/** The entry a step has in this progress, if it was reached. */
export function stepEntry(progress: ModelProgress | undefined, name: string): ModelStep | undefined {
  return progress?.steps.find((step) => step.name === name);
}

export interface ProtocolTimes {
  readonly leaseMs: number;
  readonly ttlSeconds: number;
}

/**
 * A record past its expiry is absent to every reader, however long TTL deletion takes. An unfinished operation (in
 * the recovery index) has no expiry: it lives until recovery or its client finishes it.
 */
export function isLive(record: ModelRecord | undefined, now: number): boolean {
  if (record === undefined) return false;
  if (record.recoverAt !== undefined) return true;
  return record.expiresAt !== undefined && record.expiresAt * 1000 > now;
}

/** What a claim with the operation's own request must meet. */
export type ClaimExpectation =
  | { readonly kind: 'fresh' }
  | { readonly kind: 'takeover'; readonly record: ModelRecord }
  | { readonly kind: 'replay'; readonly record: ModelRecord }
  | { readonly kind: 'in_flight'; readonly record: ModelRecord };

export function expectClaim(record: ModelRecord | undefined, now: number): ClaimExpectation {
  if (record === undefined || !isLive(record, now)) return { kind: 'fresh' };
  switch (record.status) {
    case RecordStatus.Completed:
      return { kind: 'replay', record };
    case RecordStatus.Released:
    case RecordStatus.Abandoned:
      return { kind: 'takeover', record };
    case RecordStatus.InProgress:
      return record.leaseExpiresAt <= now ? { kind: 'takeover', record } : { kind: 'in_flight', record };
  }
}

/** What recovery's `resume` must meet: never a new record, never a live owner's, only the generation asked for. */
export type ResumeExpectation =
  | { readonly kind: 'absent' }
  | { readonly kind: 'completed'; readonly record: ModelRecord }
  | { readonly kind: 'in_flight'; readonly record: ModelRecord }
  | { readonly kind: 'takeover'; readonly record: ModelRecord };

export function expectResume(record: ModelRecord | undefined, now: number, downstreamKey?: string): ResumeExpectation {
  if (record === undefined || !isLive(record, now)) return { kind: 'absent' };
  if (downstreamKey !== undefined && record.downstreamKey !== downstreamKey) return { kind: 'absent' };
  const claim = expectClaim(record, now);
  if (claim.kind === 'replay') return { kind: 'completed', record };
  if (claim.kind === 'fresh') return { kind: 'absent' };
  return claim;
}

/** The owner named by `leaseToken` still holds the record in progress: its commit, release or abandon lands. */
export function holds(record: ModelRecord | undefined, leaseToken: string): boolean {
  return record?.leaseToken === leaseToken && record.status === RecordStatus.InProgress;
}

/** Every record, fresh or taken over, is recoverable here: the model's owners all claim with `recoverable`. */
export const transitions = {
  fresh(times: ProtocolTimes, now: number, lease: Lease, generation: number): ModelRecord {
    return {
      status: RecordStatus.InProgress,
      leaseToken: lease.leaseToken,
      leaseExpiresAt: now + times.leaseMs,
      downstreamKey: lease.downstreamKey,
      attempt: 1,
      recoverAt: now + times.leaseMs,
      createdAt: now,
      generation,
    };
  },
  /** Same fingerprint, same downstream key; back in the recovery index (an abandoned one too), so no expiry. */
  takenOver(times: ProtocolTimes, previous: ModelRecord, now: number, leaseToken: string): ModelRecord {
    const { expiresAt: _noneWhileUnfinished, ...rest } = previous;
    return {
      ...rest,
      status: RecordStatus.InProgress,
      leaseToken,
      leaseExpiresAt: now + times.leaseMs,
      attempt: previous.attempt + 1,
      recoverAt: now + times.leaseMs,
    };
  },
  /** Replays for a full TTL from its completion; leaves the recovery index. */
  completed(times: ProtocolTimes, record: ModelRecord, now: number, response: StoredResponse): ModelRecord {
    const { recoverAt: _leavesTheIndex, ...rest } = record;
    return { ...rest, status: RecordStatus.Completed, response, expiresAt: Math.ceil(now / 1000) + times.ttlSeconds };
  },
  /** A checkpoint: the step's entry set (added where first reached), one revision more; nothing else changes. */
  checkpointed(record: ModelRecord, entry: ModelStep): ModelRecord {
    const steps = record.progress?.steps ?? [];
    const next = steps.some((step) => step.name === entry.name)
      ? steps.map((step) => (step.name === entry.name ? entry : step))
      : [...steps, entry];
    return { ...record, progress: { revision: (record.progress?.revision ?? 0) + 1, steps: next } };
  },
  /**
   * The lease ends now; due for recovery a lease later (time for the client to come back first), or later still
   * when the release says so (a step whose outcome can't be known before then).
   */
  released(times: ProtocolTimes, record: ModelRecord, now: number, recoverAfterMs = 0): ModelRecord {
    const recoverAt = now + Math.max(times.leaseMs, recoverAfterMs);
    return { ...record, status: RecordStatus.Released, leaseExpiresAt: now, recoverAt };
  },
  /** Leaves the recovery index; kept (for a late retry of the same request) a full TTL from now. */
  abandoned(times: ProtocolTimes, record: ModelRecord, now: number): ModelRecord {
    const { recoverAt: _leavesTheIndex, ...rest } = record;
    return {
      ...rest,
      status: RecordStatus.Abandoned,
      leaseExpiresAt: now,
      expiresAt: Math.ceil(now / 1000) + times.ttlSeconds,
    };
  },
};

/** One operation (one client key): the record it must have in the table, if any is there at all. */
export interface Operation {
  readonly index: number;
  readonly key: string;
  readonly fingerprint: string;
  /** Runs {@link STEPS} (recovery points) before its charge: op 0, on a store with checkpoints. */
  readonly multiStep: boolean;
  /** Physically in the table, live or past its expiry (TTL deletion lags); undefined once absent. */
  record: ModelRecord | undefined;
  generations: number;
}

/** What an owner does next. A crashed owner is one that is never stepped again, or only much later. */
export const NextStep = {
  /** A multi-step owner calls its next step (`handle.step`): runs it, or gets its recorded result back. */
  step: 'step',
  /** A multi-step owner stopped inside a step, after the step's outside call: it finishes it and checkpoints. */
  stepEnd: 'step-end',
  /** A client calls the outside system under its lease's downstream key. */
  charge: 'charge',
  /** Recovery asks the outside system what it made under the downstream key. */
  resolve: 'resolve',
  commit: 'commit',
  release: 'release',
  abandon: 'abandon',
  done: 'done',
} as const;
export type NextStep = (typeof NextStep)[keyof typeof NextStep];

export interface Owner {
  readonly id: number;
  readonly op: number;
  readonly lease: Lease;
  readonly role: 'client' | 'recoverer';
  next: NextStep;
  /** The charge its commit records (the client's own, or the one recovery found). */
  charge?: Charge;
  /** Set by a commit whose reply was lost: whether it landed, and when (the commit's parameters include the time). */
  sentCommit?: { readonly landedAt: number | undefined };
  /** A multi-step owner's steps: run through the engine's own handle. */
  steps?: OwnerSteps;
}

/** A multi-step owner's way through {@link STEPS}. */
export interface OwnerSteps {
  /** The engine's handle of the operation this owner claimed: `step()` runs and checkpoints. */
  readonly handle: IdempotencyHandle<unknown>;
  /** How the handle's next store call is delivered (set by each command before it calls). */
  readonly route: { delivery: string };
  /** The next of {@link STEPS} it calls. */
  index: number;
  /** The progress as this owner knows it: as it was when its lease was taken, and its own checkpoints since. */
  known: ModelProgress | undefined;
  /** Stopped inside a step, after its outside call: lets the step's function return, and its settling. */
  paused?: { readonly resume: () => void; readonly settled: Promise<unknown> };
}

/**
 * The model's whole state: the operations' records, the owners alive in the run, and the bookkeeping the
 * invariants need (which generation each downstream key belongs to, when each lease token lost its hold).
 */
export class ProtocolModel {
  now: number;
  step = 0;
  readonly ops: Operation[];
  readonly owners: Owner[] = [];
  /** Every charge made, in order: what a witness (the processor's event) may later report. */
  readonly charges: { readonly charge: Charge; readonly op: number }[] = [];
  /** Every downstream key any lease carried, with the operation and generation it belongs to. */
  readonly generationOf = new Map<string, { readonly op: number; readonly generation: number }>();
  /** Lease token -> the step in which it stopped holding its record in progress (taken over, ended, deleted). */
  readonly heldUntil = new Map<string, number>();
  /** `op/generation` of every generation that was finished (completed or abandoned) at some point. */
  readonly finished = new Set<string>();
  /** `op/generation` -> the response first seen committed: every later replay must be byte-equal to it. */
  readonly committed = new Map<string, StoredResponse>();
  /** `op/generation` -> the progress last read from its record: it must never go backwards. */
  readonly progressSeen = new Map<string, { readonly revision: number; readonly done: readonly string[] }>();
  /** Effect row sort key -> the step in which it first appeared. */
  readonly rowSeenAt = new Map<string, number>();
  /** The effect rows the model expects: one per commit that landed. */
  readonly rows = new Set<string>();
  /** What happened in this run, step by step, for the report of a failing one. */
  readonly trace: string[] = [];
  #nextOwner = 1;

  constructor(
    readonly times: ProtocolTimes,
    start: number,
    keys: readonly string[],
    /** The store has checkpoints: op 0 is a multi-step operation. */
    steps = false,
  ) {
    this.now = start;
    this.ops = keys.map((key, index) => ({
      index,
      key,
      fingerprint: `fp-${index}`,
      multiStep: steps && index === 0,
      record: undefined,
      generations: 0,
    }));
  }

  /** Appends the story of the run to a failure, so that a shrunk counterexample explains itself owner by owner. */
  explain(error: unknown): unknown {
    if (error instanceof Error) error.message += `\n\nwhat happened:\n${this.trace.join('\n')}`;
    return error;
  }

  /** Adds to the story of the current step. */
  note(line: string): void {
    this.trace.push(`     ${line}`);
  }

  /** Replaces an operation's record, noting when the lease token it held in progress lost that hold. */
  setRecord(op: Operation, next: ModelRecord | undefined): void {
    const previous = op.record;
    if (
      previous?.status === RecordStatus.InProgress &&
      (next?.leaseToken !== previous.leaseToken || next.status !== RecordStatus.InProgress)
    ) {
      this.heldUntil.set(previous.leaseToken, this.step);
    }
    if (next?.status === RecordStatus.Completed || next?.status === RecordStatus.Abandoned) {
      this.finished.add(this.generationKey(op.index, next.generation));
    }
    op.record = next;
  }

  /** A lease was acquired: a fresh generation, or a takeover of the current one. */
  acquired(op: Operation, lease: Lease, how: 'fresh' | 'takeover'): void {
    if (how === 'fresh') {
      op.generations += 1;
      this.setRecord(op, transitions.fresh(this.times, this.now, lease, op.generations));
    } else {
      if (!op.record) throw new Error(`model: takeover of op ${op.index} without a record`);
      this.setRecord(op, transitions.takenOver(this.times, op.record, this.now, lease.leaseToken));
    }
    const record = op.record!;
    this.generationOf.set(lease.downstreamKey, { op: op.index, generation: record.generation });
  }

  addOwner(op: Operation, lease: Lease, role: Owner['role'], next: NextStep, charge?: Charge): Owner {
    const owner: Owner = { id: this.#nextOwner++, op: op.index, lease, role, next, ...(charge ? { charge } : {}) };
    this.owners.push(owner);
    this.note(`owner ${owner.id} (${role}) holds op ${op.index}: attempt ${lease.attempt}, ${lease.downstreamKey}`);
    return owner;
  }

  /** The owners that could take this step now, in a stable order a command can index into. */
  ownersAt(next: NextStep, role?: Owner['role']): Owner[] {
    return this.owners.filter((owner) => owner.next === next && (role === undefined || owner.role === role));
  }

  generationKey(op: number, generation: number): string {
    return `${op}/${generation}`;
  }
}
