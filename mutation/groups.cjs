/**
 * What `npm run mutate` mutates, in groups that each run as one Stryker run: the files of one driver (or of the
 * engine's protocol) and the tests that may kill their mutants, in the order they run. A driver's mutants meet the
 * published suites on its real server first (`describeStoreContract`, `describeProtocolModel`: what a third-party
 * store is proven by), then the store's own tests of what no suite can reach (its own options, its effects' shape,
 * faults its server only shows through a proxy). The engine's meet the suites on every store, then the engine's own
 * tests (test/engine/). The report tells the kills of the suites from those of the own tests. Plain CommonJS:
 * Stryker's config, the jest config and the report all read it.
 */
const lib = 'packages/keystone-idempotency';
const suites = {
  contract: `${lib}/test/engine/store.test.ts`,
  memory: `${lib}/test/engine/driver-store.test.ts`,
  redis: `${lib}/test/redis/store-contract.test.ts`,
  model: `${lib}/test/engine/protocol.model.test.ts`,
};

/** @type {readonly { name: string, mutate: string[], tests: string[] }[]} */
const groups = [
  {
    name: 'dynamodb',
    mutate: ['driver.ts', 'expressions.ts', 'recovery-index.ts', 'write-errors.ts'].map(
      (f) => `${lib}/src/dynamodb/${f}`,
    ),
    tests: [suites.contract, suites.model, `${lib}/test/dynamodb/store.test.ts`],
  },
  {
    name: 'postgres',
    mutate: ['driver.ts', 'statements.ts'].map((f) => `${lib}/src/postgres/${f}`),
    tests: [
      suites.contract,
      suites.model,
      ...['options', 'store', 'bounded-waits'].map((f) => `${lib}/test/postgres/${f}.test.ts`),
    ],
  },
  {
    name: 'engine',
    mutate: ['driver-store.ts', 'ownership.ts', 'decide.ts', 'step-runner.ts', 'recovery.ts', 'operation.ts'].map(
      (f) => `${lib}/src/engine/${f}`,
    ),
    // The memory driver's suite first: in-process, it kills most of the engine's mutants in milliseconds.
    tests: [
      suites.memory,
      suites.contract,
      suites.redis,
      suites.model,
      ...['decide', 'operation', 'recovery', 'steps', 'make-idempotent', 'replay-cache', 'switch'].map(
        (f) => `${lib}/test/engine/${f}.test.ts`,
      ),
    ],
  },
  {
    name: 'redis',
    mutate: ['driver.ts', 'scripts.ts', 'effect.ts'].map((f) => `${lib}/src/redis/${f}`),
    // Then its own tests: the server checks (eviction, persistence, replicas), options, effects' shapes, deadlines
    // and faults through a proxy, which no suite reaches (the first run without them left 102 mutants uncovered).
    tests: [
      suites.redis,
      suites.model,
      ...['options', 'store', 'effects', 'eviction', 'durability', 'deadline', 'faults'].map(
        (f) => `${lib}/test/redis/${f}.test.ts`,
      ),
    ],
  },
];

function groupNamed(name) {
  const group = groups.find((g) => g.name === name);
  if (!group) throw new Error(`no mutation group "${name}": one of ${groups.map((g) => g.name).join(', ')}`);
  return group;
}

/** The published suites' test files: a mutant a case of theirs kills is killed by the suites. */
const suiteFiles = Object.values(suites);

module.exports = { groups, groupNamed, suiteFiles };
