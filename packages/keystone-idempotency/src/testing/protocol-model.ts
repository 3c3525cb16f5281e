import type { AsyncCommand } from 'fast-check';
import { frameworkOf, type TestFramework } from './framework.js';
import {
  Advance,
  ClientAttempt,
  CommitStep,
  CompleterRun,
  type FastCheck,
  protocolCommands,
  TtlSweep,
  WitnessStep,
} from './protocol/commands.js';
import { checkNoChargeLeftBehind, checkNothingUnfinished } from './protocol/invariants.js';
import { NextStep, ProtocolModel } from './protocol/reference-model.js';
import { Delivery, type ProtocolBackend, ProtocolSystem } from './protocol/system.js';

export {
  Delivery,
  type EffectRow,
  type ProtocolBackend,
  type StoredItem,
  type StoreSettings,
} from './protocol/system.js';

/** What {@link describeProtocolModel} runs. */
export interface ProtocolModelOptions {
  /** Names the suite: `the idempotency protocol on <name>`. */
  readonly name: string;
  /**
   * Makes the backend: the store under test, how its replies get lost, and how to read what it holds. Called once,
   * inside the suite's `describe`, so the hooks it registers (tables, fault proxies) run around the suite's tests.
   */
  readonly setup: () => ProtocolBackend;
  /** Generated runs of up to 40 steps each; 50 by default. A soak sets more. */
  readonly runs?: number;
  /** The framework's `describe` and `it`; by default the host's globals (jest, or vitest with globals). */
  readonly framework?: Partial<TestFramework>;
}

const LEASE_SECONDS = 30;
const TTL_SECONDS = 120;
const OPERATIONS = 2;
const DAY_MS = 24 * 3_600_000;
const space = { operations: OPERATIONS, leaseMs: LEASE_SECONDS * 1000, ttlMs: TTL_SECONDS * 1000 };

/**
 * The protocol itself, model-based, on a store of your own: fast-check generates sequences of steps by several
 * owners of a few operations (claims, double taps, charges, commits, releases, recovery's resume, resolve and
 * abandon, the processor's witness, whole completer runs), with crashes between any two steps (an owner is simply
 * never stepped again, or only much later), replies lost after the database applied the write (sent again by the
 * client, or surfacing to the caller), and lease and TTL expiry under a controlled clock; every run ends a month
 * later, with every client coming back. Each step runs against the real store; after each one the protocol's
 * promises are checked on the real tables and the records are held against a reference model. A failure prints the
 * shrunk sequence of steps, the model's trace and the seed to replay it.
 *
 * On a store with checkpoints, one operation is a multi-step one: its recovery points (`handle.step`, the engine's own)
 * run before its charge, with crashes inside a step, checkpoints whose replies are lost, owners stopped inside a step
 * while their lease ends and another takes over, and expiry into a new generation; the steps' outside systems (one
 * that dedupes by the step's downstream key, one that does not) and local writes are checked after each step too. A
 * store without checkpoints gets no step command.
 *
 * The package's DynamoDB, PostgreSQL and Redis stores run this same model. It needs `fast-check` (an optional peer of this
 * entry point), loaded only when the suite runs.
 *
 * @example
 * describeProtocolModel({
 *   name: 'MyDatabase',
 *   setup: () => myDatabaseProtocolBackend(), // registers beforeAll/afterAll
 * });
 */
export function describeProtocolModel(options: ProtocolModelOptions): void {
  const { describe, it } = frameworkOf(options.framework);
  const runs = options.runs ?? 50;

  describe(`the idempotency protocol on ${options.name}`, () => {
    const backend = options.setup();

    it(
      'keeps every promise under random interleavings of owners, crashes, lost replies, expiries and recovery',
      async () => {
        const fc = await loadFastCheck();
        await fc.assert(protocol(fc, backend, await hasCheckpoints(backend)), { numRuns: runs });
      },
      60_000 + runs * 2_000,
    );

    it('gets a completer with a small limit through every due operation, one past its TTL included', async () => {
      // Found with a limit of one: op 1 claimed and crashed, the clock went past its TTL, op 0 was claimed and
      // recovery took it over and crashed; every completer run then met op 1 (oldest in the index, expired, skipped)
      // and never reached op 0. First fixed by resume() taking expired records out of the index; now op 1 never
      // expires unfinished, and a run reads page after page: it finishes op 1, then op 0. A regression fast-check
      // found and shrank, replayed exactly.
      const fc = await loadFastCheck();
      // Recorded before steps were modelled: replayed without them, it generates the very same steps.
      await fc.assert(protocol(fc, backend, false, 'AADz:K'), {
        seed: 1611885918,
        path: '25:0:3:5:4:6:7:7:7',
        endOnFailure: true,
      });
    }, 30_000);

    it('gets recovery through two takeovers at once whose every first reply is lost', async () => {
      // Found on Redis: recovery took op 0 and op 1 over at once through one client that loses each command's first
      // reply (sdk-retry) by closing its connection, which lost the other's reply too, its second sending's or its
      // first's before the proxy read it; and a script sent whole (EVAL) the first time, by SHA-1 (EVALSHA) the
      // second, read as a new command. The store sends twice: losing two replies failed it ("Socket closed
      // unexpectedly"), and the run never asked about the operation. Fixed in the backend (a connection to each
      // command, a script call the same however sent); a failure of timing, so replayed it fails some of the time.
      const fc = await loadFastCheck();
      await fc.assert(protocol(fc, backend, await hasCheckpoints(backend), 'HAACBAIL1A2:VV'), {
        seed: 1272758776,
        path: '224:5:55:29:6:1:7:0:16:24:0:7:3:19:16',
        endOnFailure: true,
      });
    }, 30_000);
  });
}

async function loadFastCheck(): Promise<FastCheck> {
  try {
    return await import('fast-check');
  } catch (error) {
    throw new Error('describeProtocolModel needs fast-check: npm install --save-dev fast-check', { cause: error });
  }
}

/** Whether the store has checkpoints (recovery points), asked of it once: without, no step is generated. */
async function hasCheckpoints(backend: ProtocolBackend): Promise<boolean> {
  const probe = new ProtocolSystem(backend, {
    leaseSeconds: LEASE_SECONDS,
    ttlSeconds: TTL_SECONDS,
    startAt: Date.now(),
    operations: 1,
  });
  await probe.prepare();
  return probe.hasCheckpoints;
}

/**
 * The property: any sequence of steps keeps every promise. With `steps`, op 0 is a multi-step operation (recovery
 * points before its charge) and the step commands are generated. `replayPath` (printed with a counterexample)
 * replays a shrunk failure exactly, together with its `seed` and `path`.
 */
function protocol(fc: FastCheck, backend: ProtocolBackend, steps: boolean, replayPath?: string) {
  return fc.asyncProperty(
    fc.integer({ min: 0, max: 999 }),
    fc.commands(protocolCommands(fc, { ...space, steps }), {
      maxCommands: 40,
      size: 'max',
      ...(replayPath ? { replayPath } : {}),
    }),
    (phaseMs, commands) => runProtocol(fc, backend, phaseMs, steps, commands),
  );
}

/**
 * One run: fresh keys, and a clock that starts just after the real now (DynamoDB Local's TTL sweeper deletes what
 * is past in wall-clock time) at a generated millisecond within the second, since expiries round to seconds.
 */
async function runProtocol(
  fc: FastCheck,
  backend: ProtocolBackend,
  phaseMs: number,
  steps: boolean,
  commands: Iterable<AsyncCommand<ProtocolModel, ProtocolSystem>>,
): Promise<void> {
  const real = new ProtocolSystem(backend, {
    leaseSeconds: LEASE_SECONDS,
    ttlSeconds: TTL_SECONDS,
    startAt: (Math.floor(Date.now() / 1000) + 1) * 1000 + phaseMs,
    operations: OPERATIONS,
  });
  const model = new ProtocolModel(
    { leaseMs: space.leaseMs, ttlSeconds: TTL_SECONDS },
    real.clock.now(),
    real.keys,
    steps,
  );
  try {
    await real.prepare();
    await fc.asyncModelRun(() => ({ model, real }), commands);
    await finish(model, real);
  } finally {
    await real.cleanUp();
  }
}

/**
 * However a run ended: once the clock is past every lease and the completer has run, nothing live is in progress or
 * released; once the processor's witness has reported every charge, no charge of a live generation is left
 * without its completion.
 */
async function finish(m: ProtocolModel, r: ProtocolSystem): Promise<void> {
  // Far past any TTL: what is finished expires, and a client coming back to unfinished work takes it over under its
  // downstream key, never as a new generation (a driver that let it expire would charge again).
  m.trace.push('  -- a month later: the database sweeps what expired, and every client comes back --');
  await new Advance(30 * DAY_MS).run(m, r);
  await new TtlSweep().run(m, r);
  for (let op = 0; op < m.ops.length; op++) await new ClientAttempt(op, Delivery.direct).run(m, r);
  m.trace.push('  -- the end: past every lease, the completer, then the processor reports every charge --');
  await new Advance(m.times.leaseMs).run(m, r);
  // One run, reading one operation at a time: it must get through every page.
  await new CompleterRun(Delivery.direct, true, 1).run(m, r);
  await explained(m, async () => checkNothingUnfinished(m, await r.snapshot()));
  for (let i = 0; i < m.charges.length; i++) {
    const before = m.owners.length;
    await new WitnessStep(i, Delivery.direct).run(m, r);
    const witness = m.owners[before];
    if (witness) await new CommitStep(m.ownersAt(NextStep.commit).indexOf(witness), Delivery.direct).run(m, r);
  }
  await explained(m, async () => {
    const snapshot = await r.snapshot();
    checkNothingUnfinished(m, snapshot);
    checkNoChargeLeftBehind(m, r, snapshot);
  });
}

async function explained(m: ProtocolModel, check: () => Promise<void>): Promise<void> {
  await check().catch((error: unknown) => {
    throw m.explain(error);
  });
}
