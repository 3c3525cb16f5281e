import { isDeepStrictEqual } from 'node:util';
import type { Arbitrary, AsyncCommand } from 'fast-check';

/** fast-check's module, passed in: the package loads it only when a model runs (an optional peer). */
export type FastCheck = typeof import('fast-check');

import { LEASE_MARGIN_MS } from '../../engine/clock.js';
import type { ClaimOutcome, DueOperation } from '../../engine/contract.js';
import { LeaseLostError, StepOutcomeUnknownError } from '../../engine/errors.js';
import { ClaimedOperation } from '../../engine/operation.js';
import type { Lease } from '../../engine/record.js';
import { RecordStatus } from '../../engine/record.js';
import { type RecoveryResolver, recoverDue } from '../../engine/recovery.js';
import { MARK_TO_CALL_MS } from '../../engine/step-runner.js';
import type { StepContext, StepOptions } from '../../engine/steps.js';
import { checkConformance, checkSafety, expectCommittedResponse } from './invariants.js';
import {
  expectClaim,
  expectResume,
  holds,
  isLive,
  NextStep,
  type Operation,
  type Owner,
  type ProtocolModel,
  STEPS,
  type StepSpec,
  stepEntry,
  transitions,
} from './reference-model.js';
import { Delivery, effectRowKey, type ProtocolSystem, responseOf, stepRowKey } from './system.js';

/**
 * The steps of the protocol model, as fast-check commands. Each one makes one real call (or a few, for the
 * completer), then, in this order: checks the protocol's promises on the real tables (whatever the model says),
 * holds the call's answer against the model's prediction and moves the model on, and compares every record and
 * effect row with the model's.
 */
export abstract class ProtocolCommand implements AsyncCommand<ProtocolModel, ProtocolSystem> {
  abstract check(m: Readonly<ProtocolModel>): boolean;
  abstract toString(): string;

  /** Makes the real call; returns what holds its answer against the model and moves the model on. */
  abstract perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void>;

  async run(m: ProtocolModel, r: ProtocolSystem): Promise<void> {
    m.step += 1;
    m.trace.push(`${String(m.step).padStart(3)}. ${this}`);
    try {
      const conform = await this.perform(m, r);
      const snapshot = await r.snapshot();
      checkSafety(m, r, snapshot);
      conform();
      checkConformance(m, snapshot);
    } catch (error) {
      throw m.explain(error);
    }
  }
}

type Settled<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };

async function settle<T>(promise: Promise<T>): Promise<Settled<T>> {
  return promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

function succeeded<T>(settled: Settled<T>, what: string): T {
  if (!settled.ok) throw new Error(`${what} failed unexpectedly`, { cause: settled.error });
  return settled.value;
}

function expectReplyLost(settled: Settled<unknown>, what: string): void {
  if (settled.ok || (settled.error as Error).message !== 'reply lost') {
    throw new Error(`${what}: expected the caller to see its reply lost`, {
      cause: settled.ok ? settled.value : settled.error,
    });
  }
}

function expectEqual<T>(actual: T, expected: T, what: string): void {
  if (actual !== expected) throw new Error(`${what}: expected ${String(expected)}, got ${String(actual)}`);
}

function ownerAt(owners: readonly Owner[], pick: number): Owner {
  const owner = owners[pick % owners.length];
  if (!owner) throw new Error('no owner to step');
  return owner;
}

/**
 * Holds a claim's (or a resume's) acquired lease against the model's fresh generation or takeover, then records it.
 * A new generation must get a downstream key never used before; a takeover must keep the generation's.
 */
function acquire(m: ProtocolModel, op: Operation, lease: Lease, how: 'fresh' | 'takeover', what: string): void {
  if (how === 'fresh') {
    expectEqual(lease.takeover, false, `${what}: a fresh claim's lease.takeover`);
    expectEqual(lease.attempt, 1, `${what}: a fresh claim's attempt`);
    expectEqual(
      m.generationOf.has(lease.downstreamKey),
      false,
      `${what}: a new generation's downstream key was used before`,
    );
  } else {
    const previous = op.record!;
    expectEqual(lease.takeover, true, `${what}: a takeover's lease.takeover`);
    expectEqual(lease.downstreamKey, previous.downstreamKey, `${what}: a takeover's downstream key`);
    expectEqual(lease.attempt, previous.attempt + 1, `${what}: a takeover's attempt`);
  }
  expectEqual(lease.recoverable, true, `${what}: lease.recoverable`);
  m.acquired(op, lease, how);
}

function expectReplay(m: ProtocolModel, outcome: ClaimOutcome, what: string): void {
  if (outcome.kind !== 'replay') return;
  expectCommittedResponse(m, outcome.record.downstreamKey, outcome.response, what);
}

/** A client sends its request: claim, and (when it gets the lease) becomes an owner about to charge. */
export class ClientAttempt extends ProtocolCommand {
  constructor(
    readonly op: number,
    readonly delivery: Delivery,
  ) {
    super();
  }

  check(): boolean {
    return true;
  }

  async perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void> {
    const op = m.ops[this.op]!;
    const expected = expectClaim(op.record, m.now);
    const settled = await settle(r.via(this.delivery, (s) => s.claim(op.key, op.fingerprint, { recoverable: true })));
    m.note(settled.ok ? `-> ${settled.value.kind}` : `-> ${(settled.error as Error).message}`);
    if (settled.ok) expectReplay(m, settled.value, `${this}`);
    const stored = this.delivery === Delivery.replyLost ? (await r.records())[op.index] : undefined;
    return () => {
      if (this.delivery === Delivery.replyLost) {
        expectReplyLost(settled, `${this}`);
        // The put landed, but its owner never learned it holds the lease: a crash right after the claim.
        if (expected.kind === 'fresh') m.acquired(op, leaseIn(op, stored), 'fresh');
        return;
      }
      const outcome = succeeded(settled, `${this}`);
      if (expected.kind === 'fresh' || expected.kind === 'takeover') {
        if (outcome.kind !== 'acquired') throw new Error(`${this}: expected ${expected.kind}, got ${outcome.kind}`);
        acquire(m, op, outcome.lease, expected.kind, `${this}`);
        startOwner(m, r, op, outcome.lease, 'client', NextStep.charge);
        return;
      }
      expectEqual(outcome.kind, expected.kind, `${this}`);
    };
  }

  toString(): string {
    return `ClientAttempt(op ${this.op}, ${this.delivery})`;
  }
}

/** The lease a claim whose reply was lost wrote, as its record tells it: the model needs its token. */
function leaseIn(op: Operation, pending: Readonly<Record<string, unknown>> | undefined): Lease {
  if (!pending) throw new Error(`op ${op.index}: a claim landed but no record is there`);
  return {
    key: op.key,
    leaseToken: String(pending.leaseToken),
    leaseExpiresAt: Number(pending.leaseExpiresAt),
    downstreamKey: String(pending.downstreamKey),
    fingerprint: op.fingerprint,
    attempt: Number(pending.attempt),
    createdAt: Number(pending.createdAt),
    takeover: false,
    recoverable: pending.recoverAt !== undefined,
  };
}

/**
 * A new owner, for its next step: a multi-step operation's owner goes through {@link STEPS} first, on the engine's
 * own handle (a `ClaimedOperation` on its lease, dated by the run's clock), then on to `next`.
 */
function startOwner(
  m: ProtocolModel,
  r: ProtocolSystem,
  op: Operation,
  lease: Lease,
  role: Owner['role'],
  next: NextStep,
  charge?: Owner['charge'],
): Owner {
  const owner = m.addOwner(op, lease, role, op.multiStep ? NextStep.step : next, charge);
  if (op.multiStep) {
    const route = { delivery: Delivery.direct as string };
    const { handle } = new ClaimedOperation(r.routedStore(route), lease, { clock: r.clock });
    owner.steps = { handle, route, index: 0, known: op.record?.progress };
  }
  return owner;
}

/** A promise fired from outside: where a step's function stops, and what lets it go on. */
function signal(): { readonly fired: Promise<void>; readonly fire: () => void } {
  let fire: () => void = () => undefined;
  const fired = new Promise<void>((resolve) => {
    fire = resolve;
  });
  return { fired, fire };
}

/** A step's function threw after its outside call, before returning: the process died inside the step. */
class CrashInsideStep extends Error {
  constructor() {
    super('crashed inside the step, after its outside call');
    this.name = 'CrashInsideStep';
  }
}

/** How a step's function goes: returns, crashes after its outside call, or stops there until a later command. */
export const StepHow = { ok: 'ok', crash: 'crash', pause: 'pause' } as const;
export type StepHow = (typeof StepHow)[keyof typeof StepHow];

/** Who runs a step: an owner, or recovery's `continue`, under its lease. */
interface StepRunner {
  readonly op: number;
  readonly lease: Lease;
  /** Whether it holds the record in progress as the command starts (recovery's run takes it over first). */
  readonly holder: boolean;
}

/**
 * What `handle.step(spec.name, ...)` is given: a function that calls the step's outside system under the step's
 * downstream key and stages the step's local write (then returns, crashes, or waits at `pause`), and, for the step
 * whose outside system does not dedupe, a resolver that looks the outcome up by the same key and stages the write.
 */
function stepCall(
  m: ProtocolModel,
  r: ProtocolSystem,
  who: StepRunner,
  spec: StepSpec,
  how: StepHow = StepHow.ok,
  pause?: () => Promise<void>,
): [(context: StepContext<unknown>) => Promise<string>, StepOptions<string, unknown>] {
  const outside = r.stepOutside[spec.name]!;
  const run = async (context: StepContext<unknown>) => {
    const op = m.ops[who.op]!;
    const generation = m.generationOf.get(who.lease.downstreamKey)!.generation;
    const recorded = op.record?.generation === generation ? op.record : undefined;
    const id = outside.call(context.downstreamKey, {
      op: who.op,
      generation,
      step: spec.name,
      at: m.step,
      leaseToken: who.lease.leaseToken,
      holder: who.holder,
      alreadyDone: stepEntry(recorded?.progress, spec.name)?.state === 'done',
    });
    context.stage(r.stepEffectOf(who.op, who.lease, spec.name, id));
    if (how === StepHow.crash) throw new CrashInsideStep();
    if (pause) await pause();
    return id;
  };
  if (spec.outside === 'dedupes') return [run, { outside: 'dedupes' }];
  const resolve = async (context: StepContext<unknown>) => {
    const id = outside.lookup(context.downstreamKey);
    if (id === undefined) return { notFound: true } as const;
    context.stage(r.stepEffectOf(who.op, who.lease, spec.name, id));
    return { found: id };
  };
  return [run, { resolve, landsWithinMs: LANDS_WITHIN_MS }];
}

/** How long the model's outside system says a call can land after it began: it answers at once, or never. */
const LANDS_WITHIN_MS = 0;

/** How long after a started mark the resolver's "not found" is final: a call begun at the mark can no longer land. */
const NOT_FOUND_FINAL_AFTER_MS = MARK_TO_CALL_MS + LANDS_WITHIN_MS + LEASE_MARGIN_MS;

/** What the outside system of `step` made for this operation generation before the current command, if anything. */
function madeBefore(m: ProtocolModel, r: ProtocolSystem, op: number, lease: Lease, step: string): string | undefined {
  const generation = m.generationOf.get(lease.downstreamKey)!.generation;
  return r.stepOutside[step]!.calls.find(
    (call) => call.made && call.op === op && call.generation === generation && call.step === step && call.at < m.step,
  )?.id;
}

/** What the step's function got from its outside system in this command, under this lease. */
function answeredNow(m: ProtocolModel, r: ProtocolSystem, lease: Lease, step: string): string {
  const call = r.stepOutside[step]!.calls.findLast((c) => c.leaseToken === lease.leaseToken && c.at === m.step);
  if (!call) throw new Error(`step ${step} under ${lease.leaseToken}: its function never called out`);
  return call.id;
}

/**
 * A checkpoint as the protocol says it goes: it lands while the writer holds the record in progress (the writer's
 * own earlier checkpoints are the only ones that moved the revision on); a done one commits the step's local write.
 */
function checkpointed(
  m: ProtocolModel,
  op: Operation,
  lease: Lease,
  step: string,
  state: 'started' | 'done',
  result?: string,
): boolean {
  const record = op.record;
  if (!holds(record, lease.leaseToken)) return false;
  m.setRecord(
    op,
    transitions.checkpointed(record!, {
      name: step,
      state,
      attempt: lease.attempt,
      ...(result !== undefined ? { result } : {}),
      at: m.now,
    }),
  );
  if (state === 'done') m.rows.add(stepRowKey(op.index, lease.leaseToken, step));
  return true;
}

/** What an owner's step does, decided from the progress the owner knows (its lease's, and its own since). */
type StepPlan =
  | { readonly kind: 'replayed'; readonly result: string }
  | { readonly kind: 'found'; readonly result: string }
  /** Found started and not found, too soon after the mark for "not found" to be final: nothing runs. */
  | { readonly kind: 'unknown' }
  /** Runs; `started`: a started mark is checkpointed first (again, for a step found started and not found). */
  | { readonly kind: 'run'; readonly started: boolean };

function planStep(m: ProtocolModel, r: ProtocolSystem, owner: Owner, spec: StepSpec): StepPlan {
  const entry = stepEntry(owner.steps!.known, spec.name);
  if (entry?.state === 'done') return { kind: 'replayed', result: entry.result! };
  if (spec.outside === 'resolve' && entry?.state === 'started') {
    const found = madeBefore(m, r, owner.op, owner.lease, spec.name);
    if (found !== undefined) return { kind: 'found', result: found };
    return m.now < entry.at + NOT_FOUND_FINAL_AFTER_MS ? { kind: 'unknown' } : { kind: 'run', started: true };
  }
  return { kind: 'run', started: spec.outside === 'resolve' };
}

/** On to the owner's next step, or, past the last, to its charge (a client), its lookup or its commit (recovery). */
function pastStep(owner: Owner): void {
  const steps = owner.steps!;
  steps.index += 1;
  if (steps.index < STEPS.length) owner.next = NextStep.step;
  else if (owner.charge) owner.next = NextStep.commit;
  else owner.next = owner.role === 'client' ? NextStep.charge : NextStep.resolve;
}

/**
 * Holds the settling of one checkpoint against the model: a lost reply is seen as lost (and its owner, never knowing
 * whether it landed, gives up), a fenced one as `LeaseLostError`. True when the step goes on.
 */
function checkpointAnswered(
  landed: boolean,
  delivery: Delivery,
  settled: Settled<unknown> | undefined,
  owner: Owner,
  what: string,
): boolean {
  if (delivery === Delivery.replyLost) {
    expectReplyLost(settled ?? { ok: true, value: 'still running' }, what);
  } else if (!landed) {
    if (!settled || settled.ok || !(settled.error instanceof LeaseLostError)) {
      throw new Error(`${what}: expected LeaseLostError (the checkpoint is fenced)`, {
        cause: settled?.ok ? settled.value : settled?.error,
      });
    }
  } else {
    return true;
  }
  owner.next = NextStep.done;
  return false;
}

function expectStepResult(settled: Settled<unknown> | undefined, result: string, what: string): void {
  if (!settled) throw new Error(`${what}: the step is still running`);
  expectEqual(succeeded(settled, what), result, `${what}: the step's result`);
}

/**
 * A multi-step owner calls its next step (`handle.step`): a step done comes back from the record without running; a
 * step found started is looked up; any other runs (the one whose outside system does not dedupe checkpoints a
 * started mark first), makes its outside call, and then returns (checkpointed with its local write), crashes (no
 * checkpoint), or stops there for a later {@link StepEnd}, so that its lease can end and its operation be taken over
 * meanwhile.
 */
export class RunStep extends ProtocolCommand {
  constructor(
    readonly pick: number,
    readonly how: StepHow,
    readonly delivery: Delivery,
  ) {
    super();
  }

  check(m: Readonly<ProtocolModel>): boolean {
    return m.ownersAt(NextStep.step).length > 0;
  }

  async perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void> {
    const owner = ownerAt(m.ownersAt(NextStep.step), this.pick);
    const steps = owner.steps!;
    const spec = STEPS[steps.index]!;
    const op = m.ops[owner.op]!;
    const plan = planStep(m, r, owner, spec);
    const who = { op: owner.op, lease: owner.lease, holder: holds(op.record, owner.lease.leaseToken) };
    const atPause = signal();
    const gate = signal();
    const pause =
      this.how === StepHow.pause
        ? () => {
            atPause.fire();
            return gate.fired;
          }
        : undefined;
    const [run, options] = stepCall(m, r, who, spec, this.how, pause);
    steps.route.delivery = this.delivery;
    const settling = settle(steps.handle.step(spec.name, run, options));
    const settled = await Promise.race([settling, atPause.fired.then(() => undefined)]);
    m.note(
      `owner ${owner.id} ${spec.name} (${plan.kind}) -> ${!settled ? 'stopped inside the step' : settled.ok ? String(settled.value) : (settled.error as Error).message}`,
    );
    return () => {
      const what = `${this} (owner ${owner.id}, ${spec.name})`;
      if (plan.kind === 'replayed') {
        expectStepResult(settled, plan.result, what);
        pastStep(owner);
        return;
      }
      const lease = owner.lease;
      const write = (state: 'started' | 'done', result?: string) => {
        const landed = checkpointed(m, op, lease, spec.name, state, result);
        if (landed) steps.known = op.record!.progress;
        return checkpointAnswered(landed, this.delivery, settled, owner, what);
      };
      if (plan.kind === 'found') {
        if (!write('done', plan.result)) return;
        expectStepResult(settled, plan.result, what);
        pastStep(owner);
        return;
      }
      if (plan.kind === 'unknown') {
        // Nothing written, nothing called: the owner's attempt ends there (its adapter would release it).
        if (!settled || settled.ok || !(settled.error instanceof StepOutcomeUnknownError)) {
          throw new Error(`${what}: expected StepOutcomeUnknownError (not found too soon after the mark)`, {
            cause: settled?.ok ? settled.value : settled?.error,
          });
        }
        owner.next = NextStep.done;
        return;
      }
      if (plan.started && !write('started')) return;
      // The step's function ran: its outside call was made.
      const id = answeredNow(m, r, lease, spec.name);
      if (this.how === StepHow.crash) {
        if (!settled || settled.ok || !(settled.error instanceof CrashInsideStep)) {
          throw new Error(`${what}: expected the step's crash`, { cause: settled });
        }
        owner.next = NextStep.done;
        return;
      }
      if (this.how === StepHow.pause) {
        if (settled) throw new Error(`${what}: expected the step to stop inside`, { cause: settled });
        steps.paused = { resume: gate.fire, settled: settling };
        owner.next = NextStep.stepEnd;
        return;
      }
      if (!write('done', id)) return;
      expectStepResult(settled, id, what);
      pastStep(owner);
    };
  }

  toString(): string {
    return `Step(owner #${this.pick}, ${this.how}, ${this.delivery})`;
  }
}

/**
 * An owner stopped inside a step wakes up (perhaps long after its lease ended): the step's function returns, and the
 * handle checkpoints it with its local write, fenced: refused when the operation was taken over meanwhile.
 */
export class StepEnd extends ProtocolCommand {
  constructor(
    readonly pick: number,
    readonly delivery: Delivery,
  ) {
    super();
  }

  check(m: Readonly<ProtocolModel>): boolean {
    return m.ownersAt(NextStep.stepEnd).length > 0;
  }

  async perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void> {
    const owner = ownerAt(m.ownersAt(NextStep.stepEnd), this.pick);
    const steps = owner.steps!;
    const spec = STEPS[steps.index]!;
    const paused = steps.paused!;
    const id = r.stepOutside[spec.name]!.calls.findLast((c) => c.leaseToken === owner.lease.leaseToken)!.id;
    steps.route.delivery = this.delivery;
    paused.resume();
    const settled = (await paused.settled) as Settled<unknown>;
    m.note(
      `owner ${owner.id} ends ${spec.name} -> ${settled.ok ? String(settled.value) : (settled.error as Error).message}`,
    );
    return () => {
      const what = `${this} (owner ${owner.id}, ${spec.name})`;
      steps.paused = undefined;
      const op = m.ops[owner.op]!;
      const landed = checkpointed(m, op, owner.lease, spec.name, 'done', id);
      if (landed) steps.known = op.record!.progress;
      if (!checkpointAnswered(landed, this.delivery, settled, owner, what)) return;
      expectStepResult(settled, id, what);
      pastStep(owner);
    };
  }

  toString(): string {
    return `StepEnd(owner #${this.pick}, ${this.delivery})`;
  }
}

/** Two copies of one request at once (a double tap): exactly one may get the lease. */
export class DoubleTap extends ProtocolCommand {
  constructor(readonly op: number) {
    super();
  }

  check(): boolean {
    return true;
  }

  async perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void> {
    const op = m.ops[this.op]!;
    const expected = expectClaim(op.record, m.now);
    const claim = () => r.via(Delivery.direct, (s) => s.claim(op.key, op.fingerprint, { recoverable: true }));
    const outcomes = await Promise.all([claim(), claim()]);
    m.note(`-> ${outcomes.map((o) => o.kind).join(' and ')}`);
    for (const outcome of outcomes) expectReplay(m, outcome, `${this}`);
    return () => {
      const kinds = outcomes.map((o) => o.kind).sort();
      if (expected.kind === 'fresh' || expected.kind === 'takeover') {
        expectEqual(kinds.join(), 'acquired,in_flight', `${this}: one winner, one in flight`);
        const winner = outcomes.find((o) => o.kind === 'acquired')!;
        if (winner.kind !== 'acquired') return;
        acquire(m, op, winner.lease, expected.kind, `${this}`);
        startOwner(m, r, op, winner.lease, 'client', NextStep.charge);
        return;
      }
      expectEqual(kinds.join(), `${expected.kind},${expected.kind}`, `${this}`);
    };
  }

  toString(): string {
    return `DoubleTap(op ${this.op})`;
  }
}

export const ChargeResult = {
  /** Charged (or the processor replayed the charge it had made under the key). */
  ok: 'ok',
  /** The processor was down: nothing charged, the owner releases. */
  down: 'down',
  /** The processor charged but its answer never came: the owner sees a timeout and releases. */
  lost: 'lost',
} as const;
export type ChargeResult = (typeof ChargeResult)[keyof typeof ChargeResult];

/** A client owner calls the processor under its lease's downstream key. No fencing here: only the key protects. */
export class ChargeStep extends ProtocolCommand {
  constructor(
    readonly pick: number,
    readonly result: ChargeResult,
  ) {
    super();
  }

  check(m: Readonly<ProtocolModel>): boolean {
    return m.ownersAt(NextStep.charge).length > 0;
  }

  async perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void> {
    const owner = ownerAt(m.ownersAt(NextStep.charge), this.pick);
    const before = r.processor.made.length;
    const charge = this.result === ChargeResult.down ? undefined : r.processor.charge(owner.lease.downstreamKey);
    m.note(
      `owner ${owner.id} charges under ${owner.lease.downstreamKey} -> ${charge?.id ?? 'nothing'} (${this.result})`,
    );
    for (const made of r.processor.made.slice(before)) m.charges.push({ charge: made, op: owner.op });
    return () => {
      if (this.result === ChargeResult.ok && charge) {
        owner.charge = charge;
        owner.next = NextStep.commit;
      } else {
        owner.next = NextStep.release;
      }
    };
  }

  toString(): string {
    return `Charge(owner #${this.pick}, ${this.result})`;
  }
}

/** An owner commits its charge: the effect row and the completion in one transaction, fenced on its lease. */
export class CommitStep extends ProtocolCommand {
  constructor(
    readonly pick: number,
    readonly delivery: Delivery,
  ) {
    super();
  }

  check(m: Readonly<ProtocolModel>): boolean {
    return m.ownersAt(NextStep.commit).length > 0;
  }

  async perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void> {
    const owner = ownerAt(m.ownersAt(NextStep.commit), this.pick);
    const op = m.ops[owner.op]!;
    const charge = owner.charge!;
    const response = responseOf(owner.lease, charge);
    const effect = r.effectOf(op.index, owner.lease, charge);
    const settled = await settle(r.via(this.delivery, (s) => s.commit(owner.lease, response, [effect])));
    m.note(`owner ${owner.id} commits ${charge.id} -> ${settled.ok ? 'committed' : (settled.error as Error).name}`);
    return () => {
      const record = op.record;
      const landedBefore = owner.sentCommit?.landedAt;
      // A token whose transaction landed once is not applied again; one that never held can't land later.
      const landsNow = landedBefore === undefined && holds(record, owner.lease.leaseToken);
      const land = () => {
        m.setRecord(op, transitions.completed(m.times, record!, m.now, response));
        m.rows.add(effectRowKey(op.index, owner.lease.leaseToken));
      };
      if (this.delivery === Delivery.replyLost) {
        expectReplyLost(settled, `${this}`);
        if (landsNow) land();
        owner.sentCommit = { landedAt: landsNow ? m.now : landedBefore };
        return;
      }
      let succeeds = landsNow;
      if (landedBefore !== undefined) {
        // The caller's retry of a commit that landed: the same parameters (same time) are answered with the first
        // call's success; other parameters make the engine read the record: still completed under this lease?
        succeeds =
          landedBefore === m.now ||
          (isLive(record, m.now) &&
            record?.status === RecordStatus.Completed &&
            record.leaseToken === owner.lease.leaseToken);
      }
      if (succeeds) {
        succeeded(settled, `${this}`);
        if (landsNow) land();
      } else if (settled.ok || !(settled.error instanceof LeaseLostError)) {
        throw new Error(`${this}: expected LeaseLostError (this owner no longer holds the record)`, {
          cause: settled.ok ? 'it committed' : settled.error,
        });
      }
      owner.next = NextStep.done;
    };
  }

  toString(): string {
    return `Commit(owner #${this.pick}, ${this.delivery})`;
  }
}

/** An owner gives its lease back (the processor failed), or recovery gives up on an operation (no charge found). */
class EndLeaseStep extends ProtocolCommand {
  constructor(
    readonly pick: number,
    readonly delivery: Delivery,
    readonly ending: typeof RecordStatus.Released | typeof RecordStatus.Abandoned,
  ) {
    super();
  }

  private get step() {
    return this.ending === RecordStatus.Released ? NextStep.release : NextStep.abandon;
  }

  check(m: Readonly<ProtocolModel>): boolean {
    return m.ownersAt(this.step).length > 0;
  }

  async perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void> {
    const owner = ownerAt(m.ownersAt(this.step), this.pick);
    const op = m.ops[owner.op]!;
    const settled = await settle(
      r.via(this.delivery, (s) =>
        this.ending === RecordStatus.Released ? s.release(owner.lease) : s.abandon(owner.lease),
      ),
    );
    m.note(`owner ${owner.id} -> ${settled.ok ? settled.value : (settled.error as Error).message}`);
    return () => {
      const record = op.record;
      owner.next = NextStep.done; // an owner that never learns how its call went gives up: its lease runs out
      if (this.delivery === Delivery.replyLost) expectReplyLost(settled, `${this}`);
      const ended = this.delivery === Delivery.replyLost ? undefined : succeeded(settled, `${this}`);
      if (holds(record, owner.lease.leaseToken)) {
        if (ended !== undefined) expectEqual(ended, true, `${this}: the owner holds the record`);
        m.setRecord(
          op,
          this.ending === RecordStatus.Released
            ? transitions.released(m.times, record!, m.now)
            : transitions.abandoned(m.times, record!, m.now),
        );
      } else {
        // Only its own earlier call (a lost reply) counts as done; anything else is someone else's record.
        const own = record?.leaseToken === owner.lease.leaseToken && record.status === this.ending;
        if (ended !== undefined) expectEqual(ended, own, `${this}: the owner no longer holds the record`);
      }
    };
  }

  toString(): string {
    return `${this.ending === RecordStatus.Released ? 'Release' : 'Abandon'}(owner #${this.pick}, ${this.delivery})`;
  }
}

export class ReleaseStep extends EndLeaseStep {
  constructor(pick: number, delivery: Delivery) {
    super(pick, delivery, RecordStatus.Released);
  }
}

export class AbandonStep extends EndLeaseStep {
  constructor(pick: number, delivery: Delivery) {
    super(pick, delivery, RecordStatus.Abandoned);
  }
}

/**
 * Recovery takes an operation over by its key, one step at a time (so it can crash between any two): `resume`, or,
 * for a witness of a charge, `resume` of only the generation the charge was made under.
 */
export class ResumeStep extends ProtocolCommand {
  constructor(
    readonly op: number,
    readonly delivery: Delivery,
  ) {
    super();
  }

  check(): boolean {
    return true;
  }

  async perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void> {
    return resumeAs(m, r, this.op, this.delivery, `${this}`, undefined);
  }

  toString(): string {
    return `Resume(op ${this.op}, ${this.delivery})`;
  }
}

/** The processor's event about a charge (a webhook): recovery resumes that generation and commits the charge. */
export class WitnessStep extends ProtocolCommand {
  constructor(
    readonly pick: number,
    readonly delivery: Delivery,
  ) {
    super();
  }

  check(m: Readonly<ProtocolModel>): boolean {
    return m.charges.length > 0;
  }

  async perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void> {
    const { charge, op } = m.charges[this.pick % m.charges.length]!;
    return resumeAs(m, r, op, this.delivery, `${this}`, charge);
  }

  toString(): string {
    return `Witness(charge #${this.pick}, ${this.delivery})`;
  }
}

async function resumeAs(
  m: ProtocolModel,
  r: ProtocolSystem,
  opIndex: number,
  delivery: Delivery,
  what: string,
  charge: Owner['charge'],
): Promise<() => void> {
  const op = m.ops[opIndex]!;
  const expected = expectResume(op.record, m.now, charge?.downstreamKey);
  const outcome = await r.via(delivery, (s) => s.resume(op.key, charge ? { downstreamKey: charge.downstreamKey } : {}));
  if (outcome.kind === 'completed') {
    expectCommittedResponse(m, outcome.record.downstreamKey, outcome.record.response, what);
  }
  return () => {
    if (expected.kind !== 'takeover') {
      expectEqual(outcome.kind, expected.kind, what);
      if (outcome.kind === 'in_flight' && expected.kind === 'in_flight') {
        expectEqual(outcome.retryAfterMs, expected.record.leaseExpiresAt - m.now, `${what}: retryAfterMs`);
      }
      return;
    }
    if (outcome.kind !== 'acquired') throw new Error(`${what}: expected takeover, got ${outcome.kind}`);
    acquire(m, op, outcome.lease, 'takeover', what);
    if (charge) startOwner(m, r, op, outcome.lease, 'recoverer', NextStep.commit, charge);
    else startOwner(m, r, op, outcome.lease, 'recoverer', NextStep.resolve);
  };
}

/** A recovering owner asks the processor what it made under the downstream key. Only looks. */
export class ResolveStep extends ProtocolCommand {
  constructor(
    readonly pick: number,
    readonly processorUp: boolean,
  ) {
    super();
  }

  check(m: Readonly<ProtocolModel>): boolean {
    return m.ownersAt(NextStep.resolve).length > 0;
  }

  async perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void> {
    const owner = ownerAt(m.ownersAt(NextStep.resolve), this.pick);
    const charge = this.processorUp ? r.processor.lookup(owner.lease.downstreamKey) : undefined;
    m.note(
      `owner ${owner.id} looks up ${owner.lease.downstreamKey} -> ${this.processorUp ? (charge?.id ?? 'nothing') : 'no answer'}`,
    );
    return () => {
      if (!this.processorUp) owner.next = NextStep.release;
      else if (charge) {
        owner.charge = charge;
        owner.next = NextStep.commit;
      } else owner.next = NextStep.abandon;
    };
  }

  toString(): string {
    return `Resolve(owner #${this.pick}, processor ${this.processorUp ? 'up' : 'down'})`;
  }
}

/**
 * One run of the completer (`recoverDue`), asking the processor under each due operation's downstream key. It reads
 * the index a page at a time and works through every operation due, however small its pages.
 */
export class CompleterRun extends ProtocolCommand {
  constructor(
    readonly delivery: Delivery,
    readonly processorUp: boolean,
    /** Operations per page of the index: with a small one, the run must still get through every page. */
    readonly limit = 100,
  ) {
    super();
  }

  check(): boolean {
    return true;
  }

  async perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void> {
    const leases = new Map<string, Lease>();
    const resolve: RecoveryResolver<unknown> = async (lease) => {
      leases.set(lease.key, lease);
      if (!this.processorUp) return { kind: 'retry', reason: 'processor down' };
      const op = m.ops.find((o) => o.key === lease.key)!;
      if (op.multiStep) {
        // From its last recovery point: the steps (done ones come back from the record), then the charge, which
        // the processor dedupes under the operation's downstream key.
        return {
          kind: 'continue',
          work: async (handle, taken) => {
            for (const spec of STEPS)
              await handle.step(spec.name, ...stepCall(m, r, { op: op.index, lease: taken, holder: true }, spec));
            const before = r.processor.made.length;
            const charge = r.processor.charge(taken.downstreamKey);
            for (const made of r.processor.made.slice(before)) m.charges.push({ charge: made, op: op.index });
            handle.stage(r.effectOf(op.index, taken, charge));
            return responseOf(taken, charge);
          },
        };
      }
      const charge = r.processor.lookup(lease.downstreamKey);
      if (!charge) return { kind: 'abandon' };
      return { kind: 'complete', response: responseOf(lease, charge), effects: [r.effectOf(op.index, lease, charge)] };
    };
    const failures: unknown[] = [];
    const logger = { warn: () => undefined, error: (_: string, details: unknown) => void failures.push(details) };
    const report = await r.via(this.delivery, (s) => recoverDue(s, resolve, { logger, limit: this.limit }));
    m.note(`-> ${JSON.stringify(report)}`);
    return () => {
      const expected: Record<string, unknown> & Record<OutcomeCount, number> = {
        due: 0,
        completed: 0,
        abandoned: 0,
        retried: 0,
        skipped: 0,
        failed: 0,
        left: 0,
        // No step of the model's is ever refused: nothing compensated, nothing abandoned with progress.
        compensated: 0,
        abandonedWithProgress: 0,
        compensationFailed: 0,
        compensationStuck: 0,
        steps: {},
      };
      const steps: Record<string, number> = {};
      // What the run does not finish, as the report names it: when each was first due, not when it is due now.
      const unfinished: Required<DueOperation>[] = [];
      const asDue = (op: Operation): Required<DueOperation> => ({
        key: op.key,
        recoverAt: op.record!.recoverAt!,
        firstDueAt: Math.min(op.record!.recoverAt!, op.record!.createdAt + m.times.leaseMs),
      });
      for (const op of dueIn(m, r)) {
        const record = op.record!;
        const offered = asDue(op); // as the index offered it, before recovery's takeover moved it
        expected.due += 1;
        if (expectResume(record, m.now).kind !== 'takeover') {
          expected.skipped += 1;
          continue;
        }
        const lease = leases.get(op.key);
        if (!lease) throw new Error(`${this}: op ${op.index} was due, but recovery never asked about it`);
        acquire(m, op, lease, 'takeover', `${this} (op ${op.index})`);
        const continued = this.processorUp && op.multiStep ? continueSteps(m, r, op, lease, steps) : {};
        const charge = r.processor.lookup(lease.downstreamKey);
        if (continued.unknownFor !== undefined) {
          // A step's outcome can't be known yet: released, due again once it can.
          m.setRecord(op, transitions.released(m.times, op.record!, m.now, continued.unknownFor));
          expected.retried += 1;
          unfinished.push(offered);
        } else if (!this.processorUp) {
          m.setRecord(op, transitions.released(m.times, op.record!, m.now));
          expected.retried += 1;
          unfinished.push(offered);
        } else if (charge) {
          m.setRecord(op, transitions.completed(m.times, op.record!, m.now, responseOf(lease, charge)));
          m.rows.add(effectRowKey(op.index, lease.leaseToken));
          expected.completed += 1;
        } else {
          m.setRecord(op, transitions.abandoned(m.times, op.record!, m.now));
          expected.abandoned += 1;
        }
      }
      // What the run leaves due: nothing, unless it skipped something (an operation it took is due a lease later).
      expected.steps = steps;
      const [stillDue] = dueIn(m, r);
      if (stillDue) unfinished.push(asDue(stillDue));
      const [oldest] = unfinished.sort(
        (a, b) => a.firstDueAt - b.firstDueAt || a.recoverAt - b.recoverAt || (a.key < b.key ? -1 : 1),
      );
      if (oldest) expected.oldestDue = oldest;
      if (failures.length > 0) throw new Error(`${this}: recovery failed`, { cause: failures });
      if (!isDeepStrictEqual({ ...report }, expected)) {
        throw new Error(`${this}: report ${JSON.stringify(report)}, the model expects ${JSON.stringify(expected)}`);
      }
    };
  }

  toString(): string {
    return `Completer(${this.delivery}, processor ${this.processorUp ? 'up' : 'down'}, limit ${this.limit})`;
  }
}

/**
 * Recovery's `continue` of a multi-step operation, as the protocol says it goes under recovery's lease (which holds
 * the record throughout): each step done comes back (`replayed`); one found started is looked up (`found` when its
 * outside system made it, else `rerun`); any other runs (`ran`), the one whose outside system does not dedupe with its
 * started mark first. Each checkpoint with its local write; the commit follows, as for any completion.
 */
function continueSteps(
  m: ProtocolModel,
  r: ProtocolSystem,
  op: Operation,
  lease: Lease,
  counts: Record<string, number>,
): { readonly unknownFor?: number } {
  const count = (outcome: string) => {
    counts[outcome] = (counts[outcome] ?? 0) + 1;
  };
  for (const spec of STEPS) {
    const entry = stepEntry(op.record!.progress, spec.name);
    if (entry?.state === 'done') {
      count('replayed');
      continue;
    }
    if (spec.outside === 'resolve' && entry?.state === 'started') {
      const found = madeBefore(m, r, op.index, lease, spec.name);
      if (found !== undefined) {
        checkpointed(m, op, lease, spec.name, 'done', found);
        count('found');
        continue;
      }
      const final = entry.at + NOT_FOUND_FINAL_AFTER_MS;
      if (m.now < final) {
        count('unknown');
        return { unknownFor: final - m.now };
      }
      checkpointed(m, op, lease, spec.name, 'started');
      count('rerun');
    } else {
      if (spec.outside === 'resolve') checkpointed(m, op, lease, spec.name, 'started');
      count('ran');
    }
    checkpointed(m, op, lease, spec.name, 'done', answeredNow(m, r, lease, spec.name));
  }
  return {};
}

type OutcomeCount = 'due' | 'completed' | 'abandoned' | 'retried' | 'skipped' | 'failed' | 'left';

/**
 * The operations the recovery index offers now, in its order: every record carrying a `recoverAt` that has come,
 * oldest first, then in the order the store breaks ties in (DynamoDB: by shard, the run's keys each having a shard
 * of their own; PostgreSQL: by key), so the order is never a toss-up.
 */
function dueIn(m: ProtocolModel, r: ProtocolSystem): Operation[] {
  return m.ops
    .filter((op) => op.record?.recoverAt !== undefined && op.record.recoverAt <= m.now)
    .sort((a, b) => a.record!.recoverAt! - b.record!.recoverAt! || r.dueRank(a.index) - r.dueRank(b.index));
}

/** How an owner's next step goes, whichever step that turns out to be. */
export interface OwnerChoices {
  readonly charge: ChargeResult;
  readonly commit: Delivery;
  /** Release or abandon. */
  readonly end: Delivery;
  readonly processorUp: boolean;
  /** How a step goes (generated only on a store with checkpoints). */
  readonly step?: StepHow;
  /** How a step's checkpoints are delivered. */
  readonly checkpoint?: Delivery;
}

/**
 * One owner (client or recovery) takes its next step: charge, resolve, commit, release or abandon. Any owner may be
 * picked, however long ago it last moved: an owner that is never picked again crashed at that point; one picked
 * after a clock move woke up late.
 */
export class OwnerStep extends ProtocolCommand {
  constructor(
    readonly pick: number,
    readonly choices: OwnerChoices,
  ) {
    super();
  }

  check(m: Readonly<ProtocolModel>): boolean {
    return m.owners.some((owner) => owner.next !== NextStep.done);
  }

  async perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void> {
    return this.stepOf(m).perform(m, r);
  }

  private stepOf(m: ProtocolModel): ProtocolCommand {
    const owner = ownerAt(
      m.owners.filter((o) => o.next !== NextStep.done),
      this.pick,
    );
    const index = m.ownersAt(owner.next).indexOf(owner);
    switch (owner.next) {
      case NextStep.step:
        return new RunStep(index, this.choices.step ?? StepHow.ok, this.choices.checkpoint ?? Delivery.direct);
      case NextStep.stepEnd:
        return new StepEnd(index, this.choices.checkpoint ?? Delivery.direct);
      case NextStep.charge:
        return new ChargeStep(index, this.choices.charge);
      case NextStep.resolve:
        return new ResolveStep(index, this.choices.processorUp);
      case NextStep.commit:
        return new CommitStep(index, this.choices.commit);
      case NextStep.release:
        return new ReleaseStep(index, this.choices.end);
      case NextStep.abandon:
        return new AbandonStep(index, this.choices.end);
      case NextStep.done:
        throw new Error('a finished owner takes no step');
    }
  }

  toString(): string {
    const { charge, commit, end, processorUp, step, checkpoint } = this.choices;
    const steps = step ? `, step ${step}, checkpoint ${checkpoint}` : '';
    return `OwnerStep(#${this.pick}: charge ${charge}, commit ${commit}, end ${end}, processor ${processorUp ? 'up' : 'down'}${steps})`;
  }
}

/** Time passes: leases and records expire only because the test says so. */
export class Advance extends ProtocolCommand {
  constructor(readonly ms: number) {
    super();
  }

  check(): boolean {
    return true;
  }

  async perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void> {
    r.clock.advance(this.ms);
    m.now += this.ms;
    return () => undefined;
  }

  toString(): string {
    return `Advance(${this.ms} ms)`;
  }
}

/** The database's own deletion (DynamoDB's TTL, the PostgreSQL store's purge) gets round to what has expired. */
export class TtlSweep extends ProtocolCommand {
  check(): boolean {
    return true;
  }

  async perform(m: ProtocolModel, r: ProtocolSystem): Promise<() => void> {
    await r.sweepExpired();
    return () => {
      for (const op of m.ops) if (op.record && !isLive(op.record, m.now)) m.setRecord(op, undefined);
    };
  }

  toString(): string {
    return 'TtlSweep';
  }
}

export interface CommandSpace {
  readonly operations: number;
  readonly leaseMs: number;
  readonly ttlMs: number;
  /** The store has checkpoints: op 0 runs steps, and the step commands are generated. Without, none are. */
  readonly steps?: boolean;
}

/**
 * Every command, weighted towards the steps that make owners overlap: attempts, owners' steps, clock moves. Owner
 * picks index the owners still at work; values shrink towards the plain case (direct delivery, processor up, the
 * first owner).
 */
export function protocolCommands(
  fc: FastCheck,
  space: CommandSpace,
): Arbitrary<AsyncCommand<ProtocolModel, ProtocolSystem>>[] {
  const op = fc.nat({ max: space.operations - 1 });
  const pick = fc.nat({ max: 5 });
  const delivery = fc.constantFrom<Delivery>(Delivery.direct, Delivery.sdkRetry);
  const writeDelivery = fc.constantFrom<Delivery>(Delivery.direct, Delivery.sdkRetry, Delivery.replyLost);
  const claimDelivery = fc.constantFrom<Delivery>(
    Delivery.direct,
    Delivery.direct,
    Delivery.sdkRetry,
    Delivery.replyLost,
  );
  const chargeResult = fc.constantFrom<ChargeResult>(ChargeResult.ok, ChargeResult.lost, ChargeResult.down);
  const processorUp = fc.boolean().map((down) => !down);
  const { leaseMs, ttlMs } = space;
  // Mostly the edges that matter (just before, at and after a lease, a TTL), sometimes anything up to past both.
  const advance = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(leaseMs, 1_000, leaseMs - 1, leaseMs + 1, ttlMs) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: ttlMs + leaseMs }) },
  );
  const weighted = (weight: number, arbitrary: Arbitrary<ProtocolCommand>) => ({ weight, arbitrary });
  const base = { charge: chargeResult, commit: writeDelivery, end: writeDelivery, processorUp };
  const stepHow = fc.constantFrom<StepHow>(StepHow.ok, StepHow.ok, StepHow.pause, StepHow.crash, StepHow.pause);
  // Without checkpoints, the very same generators as before steps existed: a recorded seed replays as it did.
  const choices: Arbitrary<OwnerChoices> = space.steps
    ? fc.record({ ...base, step: stepHow, checkpoint: writeDelivery })
    : fc.record(base);
  const stepCommands = space.steps
    ? [
        weighted(
          4,
          fc.tuple(pick, stepHow, writeDelivery).map(([p, h, d]) => new RunStep(p, h, d)),
        ),
        weighted(
          3,
          fc.tuple(pick, writeDelivery).map(([p, d]) => new StepEnd(p, d)),
        ),
      ]
    : [];
  return [
    fc.oneof(
      weighted(
        5,
        fc.tuple(op, claimDelivery).map(([o, d]) => new ClientAttempt(o, d)),
      ),
      weighted(
        1,
        op.map((o) => new DoubleTap(o)),
      ),
      weighted(
        12,
        fc.tuple(pick, choices).map(([p, c]) => new OwnerStep(p, c)),
      ),
      weighted(
        2,
        fc.tuple(op, delivery).map(([o, d]) => new ResumeStep(o, d)),
      ),
      weighted(
        1,
        fc.tuple(pick, delivery).map(([p, d]) => new WitnessStep(p, d)),
      ),
      weighted(
        2,
        fc
          .tuple(delivery, processorUp, fc.constantFrom(100, 1))
          .map(([d, up, limit]) => new CompleterRun(d, up, limit)),
      ),
      weighted(
        4,
        advance.map((ms) => new Advance(ms)),
      ),
      weighted(1, fc.constant(new TtlSweep())),
      ...stepCommands,
    ),
  ];
}
