import fc from 'fast-check';
import { protocolBackends } from '../support/protocol/backends';
import { Advance, CommitStep, CompleterRun, protocolCommands, WitnessStep } from '../support/protocol/commands';
import { checkNoChargeLeftBehind, checkNothingUnfinished } from '../support/protocol/invariants';
import { NextStep, ProtocolModel } from '../support/protocol/reference-model';
import { Delivery, type ProtocolBackend, ProtocolSystem } from '../support/protocol/system';

/**
 * The protocol itself, model-based: fast-check generates sequences of steps by several owners of a few operations
 * (claims, double taps, charges, commits, releases, recovery's resume, resolve and abandon, the processor's
 * witness, whole completer runs), with crashes between any two steps (an owner is simply never stepped again, or
 * only much later), replies lost after the database applied the write (sent again by the client, or surfacing to
 * the caller), and lease and TTL expiry under a controlled clock. Each step runs against a real store, DynamoDB
 * Local and PostgreSQL in turn; after each one the protocol's promises are checked on the real tables and the
 * records are held against a reference model.
 */

const LEASE_SECONDS = 30;
const TTL_SECONDS = 120;
const OPERATIONS = 2;
const space = { operations: OPERATIONS, leaseMs: LEASE_SECONDS * 1000, ttlMs: TTL_SECONDS * 1000 };

/**
 * One run: fresh keys, and a clock that starts just after the real now (DynamoDB Local's TTL sweeper deletes what
 * is past in wall-clock time) at a generated millisecond within the second, since expiries round to seconds.
 */
async function runProtocol(
  backend: ProtocolBackend,
  phaseMs: number,
  commands: Iterable<fc.AsyncCommand<ProtocolModel, ProtocolSystem>>,
): Promise<void> {
  const real = new ProtocolSystem(backend, {
    leaseSeconds: LEASE_SECONDS,
    ttlSeconds: TTL_SECONDS,
    startAt: (Math.floor(Date.now() / 1000) + 1) * 1000 + phaseMs,
    operations: OPERATIONS,
  });
  const model = new ProtocolModel({ leaseMs: space.leaseMs, ttlSeconds: TTL_SECONDS }, real.clock.now(), real.keys);
  try {
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

/**
 * The property: any sequence of steps keeps every promise. `replayPath` (printed with a counterexample) replays a
 * shrunk failure exactly, together with its `seed` and `path`.
 */
function protocol(backend: ProtocolBackend, replayPath?: string) {
  return fc.asyncProperty(
    fc.integer({ min: 0, max: 999 }),
    fc.commands(protocolCommands(space), { maxCommands: 40, size: 'max', ...(replayPath ? { replayPath } : {}) }),
    (phaseMs, commands) => runProtocol(backend, phaseMs, commands),
  );
}

/** Override for a longer soak: `PROTOCOL_MODEL_RUNS=2000 npx jest test/engine/protocol.model.test.ts`. */
const RUNS = Number(process.env.PROTOCOL_MODEL_RUNS ?? 50);

describe.each(protocolBackends)('the idempotency protocol on %s', (_name, makeBackend) => {
  const backend = makeBackend();

  it(
    'keeps every promise under random interleavings of owners, crashes, lost replies, expiries and recovery',
    async () => {
      await fc.assert(protocol(backend), { numRuns: RUNS });
    },
    60_000 + RUNS * 2_000,
  );

  describe('regressions, as fast-check found and shrank them', () => {
    it('gets a completer with a small limit through every due operation, one past its TTL included', async () => {
      // Found with a limit of one: op 1 claimed and crashed, the clock went past its TTL, op 0 was claimed and
      // recovery took it over and crashed; every completer run then met op 1 (oldest in the index, expired, skipped)
      // and never reached op 0. First fixed by resume() taking expired records out of the index; now op 1 never
      // expires unfinished, and a run reads page after page: it finishes op 1, then op 0.
      await fc.assert(protocol(backend, 'AADz:K'), {
        seed: 1611885918,
        path: '25:0:3:5:4:6:7:7:7',
        endOnFailure: true,
      });
    }, 30_000);
  });
});
