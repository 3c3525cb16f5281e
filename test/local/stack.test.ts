import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { silentLog } from '@keystone-idempotency/local-aws/log';
import { scopedKey } from 'keystone-idempotency/engine';
import { type LocalStack, startLocalStack } from '../../lib/local/stack';
import { localDocumentClient } from '../support/dynamodb';
import { eventually } from '../support/eventually';

/**
 * Two local stacks in one process, with different settings: each one's functions, run from their sources, see that
 * stack's tables and lease, and neither writes to the process's environment. (The functions read their
 * configuration at import; had the stacks put it in `process.env`, the second would have served the first's.)
 */
jest.setTimeout(120_000);

const db = localDocumentClient();
const environmentBefore = { ...process.env };
const stacks: LocalStack[] = [];
afterAll(async () => {
  await Promise.all(stacks.map((stack) => stack.stop()));
  db.destroy();
});

function settings(name: string, leaseSeconds: number) {
  const suffix = randomUUID().slice(0, 8);
  return {
    PORT: '0',
    DYNAMODB_ENDPOINT: process.env.DYNAMODB_ENDPOINT!,
    IDEMPOTENCY_TABLE: `two-${name}-idem-${suffix}`,
    PAYMENTS_TABLE: `two-${name}-pay-${suffix}`,
    SETTLEMENT_QUEUE_NAME: `two-${name}-${suffix}`,
    LOCAL_API_KEYS: `sk_test_two_${name}:acct_${name}`,
    IDEMPOTENCY_LEASE_SECONDS: String(leaseSeconds),
  };
}

/**
 * Starts a payment whose processor call is held for 3 s, and reads its claim from the stack's own table while it
 * is in progress (the commit ends the lease).
 */
async function claimOf(stack: LocalStack, name: string) {
  const key = randomUUID();
  const faulted = await fetch(`${stack.processorUrl}/__faults`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ mode: 'delay', ms: 3000, count: 1 }),
  });
  expect(faulted.status).toBe(201);
  const payment = fetch(`${stack.apiUrl}/payments`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer sk_test_two_${name}`,
      'Content-Type': 'application/json',
      'Idempotency-Key': key,
    },
    body: JSON.stringify({ amount: 1000, currency: 'eur', source: 'tok_visa' }),
  });
  const pk = scopedKey({ accountId: `acct_${name}`, operation: 'POST /payments', key });
  const claim = await eventually(async () => {
    const { Item } = await db.send(
      new GetCommand({ TableName: stack.tables.idempotency, Key: { pk }, ConsistentRead: true }),
    );
    return Item?.status === 'IN_PROGRESS' ? Item : undefined;
  }).then((item) => item!); // eventually() returns only once the probe found one
  const created = (await (await payment).json()) as { id: string };
  return { claim, paymentId: created.id };
}

describe('two local stacks in one process', () => {
  it('give their functions their own tables and lease, and leave process.env alone', async () => {
    const [a, b] = await Promise.all([
      startLocalStack({ env: settings('a', 30), log: silentLog }),
      startLocalStack({ env: settings('b', 45), log: silentLog }),
    ]);
    stacks.push(a, b);
    expect(process.env).toEqual(environmentBefore);

    const [fromA, fromB] = await Promise.all([claimOf(a, 'a'), claimOf(b, 'b')]);
    // Each claim holds its stack's own lease.
    expect(fromA.claim.leaseExpiresAt - fromA.claim.createdAt).toBe(30_000);
    expect(fromB.claim.leaseExpiresAt - fromB.claim.createdAt).toBe(45_000);

    // Each payment is in its own stack's payments table, and not in the other's.
    const paymentIn = async (table: string, account: string, id: string) =>
      (await db.send(new GetCommand({ TableName: table, Key: { pk: `ACCOUNT#${account}`, sk: `PAYMENT#${id}` } })))
        .Item;
    expect(await paymentIn(a.tables.payments, 'acct_a', fromA.paymentId)).toBeDefined();
    expect(await paymentIn(b.tables.payments, 'acct_b', fromB.paymentId)).toBeDefined();
    expect(await paymentIn(b.tables.payments, 'acct_a', fromA.paymentId)).toBeUndefined();
    expect(await paymentIn(a.tables.payments, 'acct_b', fromB.paymentId)).toBeUndefined();
  });
});

describe('the local stack, run from source', () => {
  it('reads the CDK definitions without loading the CDK', () => {
    // In a fresh Node process (jest's module registry is not Node's), as `npm start` loads it: through tsx.
    const root = join(__dirname, '..', '..');
    const tsx = join(root, 'node_modules', 'tsx', 'dist');
    const loaded = execFileSync(
      process.execPath,
      [
        '--conditions=keystone-source',
        '--require',
        join(tsx, 'preflight.cjs'),
        '--import',
        `file://${join(tsx, 'loader.mjs')}`,
        '-e',
        `require(${JSON.stringify(join(root, 'lib', 'local', 'stack.ts'))});
         console.log(JSON.stringify(Object.keys(require.cache)));`,
      ],
      { cwd: root, encoding: 'utf8' },
    );
    const modules = (JSON.parse(loaded) as string[]).map((file) => file.slice(root.length + 1));
    expect(modules).toContain('lib/infra/functions.ts');
    expect(modules.filter((file) => /node_modules\/(aws-cdk-lib|constructs)\//.test(file))).toEqual([]);
    expect(modules.filter((file) => file.startsWith('lib/infra/')).sort()).toEqual([
      'lib/infra/functions.ts',
      'lib/infra/library-source.ts', // a constant, for the demo page's bundle
      'lib/infra/throttling.ts', // plain data: the REST API's answer to a throttled function
    ]);
  });
});
