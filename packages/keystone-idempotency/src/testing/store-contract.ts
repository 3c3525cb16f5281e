import { describeAbandon } from './contract/abandon.js';
import { describeClaim } from './contract/claim.js';
import { describeCommit } from './contract/commit.js';
import { describeCompletion } from './contract/completion.js';
import { contractOf } from './contract/context.js';
import { describeExpiry } from './contract/expiry.js';
import { describeFindDue } from './contract/find-due.js';
import type { StoreContractHarness } from './contract/harness.js';
import { describeKeys } from './contract/keys.js';
import { describeLostReplies } from './contract/lost-replies.js';
import { describeOneShot } from './contract/one-shot.js';
import { describeRelease } from './contract/release.js';
import { describeResume } from './contract/resume.js';
import { describeSteps } from './contract/steps.js';
import { describeTakeover } from './contract/takeover.js';
import { frameworkOf, type TestFramework } from './framework.js';

export type { ContractStoreOptions, LostReplyStep, StoreContractHarness } from './contract/harness.js';

export interface StoreContractOptions<TEffect> {
  /** Names the suite: `the store contract on <name>`. */
  readonly name: string;
  /**
   * Makes the harness. Called once, inside the suite's `describe`, so the hooks it registers (a `beforeAll` that
   * creates the tables, an `afterAll` that closes the pool) run around the suite's tests.
   */
  readonly setup: () => StoreContractHarness<TEffect>;
  /** The framework's `describe` and `it`; by default the host's globals (jest, or vitest with globals). */
  readonly framework?: Partial<TestFramework>;
}

/**
 * The store contract (`IdempotencyStore`), as one suite of tests any store runs against its real database: exactly
 * one winner of a race, replays, mismatches, waits, takeovers that keep the downstream key (and never reopen a record
 * a late commit completed), stale owners fenced out (their effects with them), releases, commits that write all or
 * nothing up to the store's own limits, responses kept byte for byte, keys of any characters kept apart, the recovery
 * set (`findDue`: due a lease after the claim or the release, oldest first, out once committed; its cases keep to
 * their own keys among the table's), recovery points (steps checkpointed with their effects, resumed after a crash
 * or a takeover, fenced, limited, new after expiry), recovery's resume and abandon, expiry to the millisecond and by
 * the store's clock alone, unfinished recoverable work never freed or forgotten a month on, the one-shot commit, and
 * (with `faults`) every write whose reply was lost recognised as its own. The package's DynamoDB, PostgreSQL and
 * Redis stores are proven by this same suite, and the suite itself by drivers broken on purpose, each of which it
 * fails (the package's test/engine/broken-drivers.test.ts).
 *
 * Registers its tests with the host framework when called (at the top level of a test file, or in a `describe`),
 * and asserts with node:assert, so it needs nothing but the framework's `describe` and `it`.
 *
 * @example
 * describeStoreContract({
 *   name: 'MyDatabase',
 *   setup: () => {
 *     const db = myTestDatabase(); // registers beforeAll/afterAll
 *     return {
 *       store: (options) => new DriverStore(new MyDatabaseDriver(db.client), options),
 *       effect: (pk, id) => db.insertIfAbsent(pk, id),
 *       blockedEffect: () => db.requireRow(`missing-${randomUUID()}`),
 *       rowsUnder: (pk) => db.countRows(pk),
 *       maxResponseBytes: 1024 * 1024,
 *     };
 *   },
 * });
 */
export function describeStoreContract<TEffect>(options: StoreContractOptions<TEffect>): void {
  const framework = frameworkOf(options.framework);

  // One block per part of the contract, each in its own module (./contract/), registered in this order.
  framework.describe(`the store contract on ${options.name}`, () => {
    const contract = contractOf(options.setup(), framework);
    describeClaim(contract);
    describeLostReplies(contract);
    describeTakeover(contract);
    describeRelease(contract);
    describeCommit(contract);
    describeCompletion(contract);
    describeKeys(contract);
    describeFindDue(contract);
    describeResume(contract);
    describeAbandon(contract);
    describeExpiry(contract);
    describeSteps(contract);
    describeOneShot(contract);
  });
}
