import assert from 'node:assert/strict';
import { describeProtocolModel, describeStoreContract, type TestFramework } from 'keystone-idempotency/testing';
import { type BrokenDriver, brokenDrivers } from '../support/broken-drivers';
import { MemoryDriver } from '../support/memory-driver';
import { memoryHarness } from '../support/memory-harness';
import { memoryProtocol } from '../support/protocol/memory-backend';

/**
 * The published suites, proven against drivers that each drop one guarantee of the driver contract
 * (test/support/broken-drivers.ts): every one must fail the contract suite's cases its row names, and the protocol
 * model where its row says so; the memory driver they are built from must pass both suites through the same means.
 * The suites' cases are collected through their `framework` option (a `describe` and an `it` of this file's own)
 * rather than registered with jest, so that this file can run them against each driver and expect failures.
 */

/** One case of the suite: its name as `block > case`, and its body. */
interface SuiteCase {
  readonly name: string;
  readonly run: () => Promise<void>;
}

/** The cases a suite registers, named without the suite's own outer block: `block > case`. */
function collect(register: (framework: TestFramework) => void): SuiteCase[] {
  const cases: SuiteCase[] = [];
  const path: string[] = [];
  register({
    describe(name, body) {
      path.push(name);
      body();
      path.pop();
    },
    it(name, run) {
      cases.push({ name: [...path.slice(1), name].join(' > '), run });
    },
  });
  return cases;
}

/** The contract suite's cases, against a store over `driver` (with every optional part of the harness). */
const contractCases = (driver: MemoryDriver) =>
  collect((framework) => describeStoreContract({ name: 'memory', setup: () => memoryHarness(driver), framework }));

/** The protocol model's cases, against a store over `driver`, with `runs` generated runs. */
const modelCases = (driver: MemoryDriver, runs: number) =>
  collect((framework) =>
    describeProtocolModel({ name: 'memory', setup: () => memoryProtocol(driver), runs, framework }),
  );

/** The model's property: random runs of every command (its other cases replay recorded regressions). */
const PROPERTY =
  'keeps every promise under random interleavings of owners, crashes, lost replies, expiries and recovery';
/**
 * Runs of the model against a broken driver: enough that a fault the model reaches is met (the rarest of the rows
 * marked `model` took up to 130 runs to meet), cheap since a run on memory takes milliseconds and stops at the failure.
 */
const BROKEN_MODEL_RUNS = 1000;

/** Runs a case to its end, within a bound (a broken driver may make a case wait): its failure, or undefined. */
async function failureOf(suiteCase: SuiteCase, boundMs = 15_000): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not finish within ${boundMs} ms`)), boundMs);
  });
  try {
    await Promise.race([suiteCase.run(), bound]);
    return undefined;
  } catch (error) {
    return error ?? new Error('failed with nothing');
  } finally {
    clearTimeout(timer);
  }
}

function named(cases: readonly SuiteCase[], name: string): SuiteCase {
  const found = cases.find((candidate) => candidate.name === name);
  if (!found)
    assert.fail(`the contract suite has no case "${name}": its cases are\n${cases.map((c) => c.name).join('\n')}`);
  return found;
}

describe('the published suites against broken drivers', () => {
  it('pass the memory driver the broken ones are built from: every case of the contract suite', async () => {
    const cases = contractCases(new MemoryDriver());
    assert.ok(cases.length > 80, `only ${cases.length} cases collected`);
    const failed: string[] = [];
    for (const suiteCase of cases) {
      const failure = await failureOf(suiteCase);
      if (failure !== undefined) failed.push(`${suiteCase.name}: ${String(failure)}`);
    }
    assert.deepEqual(failed, []);
  }, 60_000);

  it('pass the memory driver the broken ones are built from: every case of the protocol model', async () => {
    const cases = modelCases(new MemoryDriver(), 200);
    assert.ok(
      cases.some((suiteCase) => suiteCase.name === PROPERTY),
      'the model has its property',
    );
    for (const suiteCase of cases) assert.equal(await failureOf(suiteCase, 60_000), undefined, suiteCase.name);
  }, 90_000);

  it('name each driver once', () => {
    const names = brokenDrivers.map((driver) => driver.name);
    assert.deepEqual(names, [...new Set(names)]);
  });

  describe.each(brokenDrivers.map((driver): [string, BrokenDriver] => [`${driver.method}: ${driver.name}`, driver]))(
    '%s',
    (_, driver) => {
      it.each(driver.killedBy)(
        'fails "%s"',
        async (name) => {
          const failure = await failureOf(named(contractCases(driver.make()), name));
          assert.notEqual(failure, undefined, `the case passed on a driver that drops: ${driver.dropped}`);
        },
        20_000,
      );
      if (driver.model) {
        it('fails the protocol model', async () => {
          const failure = await failureOf(named(modelCases(driver.make(), BROKEN_MODEL_RUNS), PROPERTY), 60_000);
          assert.notEqual(failure, undefined, `the model passed a driver that drops: ${driver.dropped}`);
        }, 90_000);
      }
    },
  );
});
