import { randomUUID } from 'node:crypto';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import {
  type ArmedRule,
  DynamoDbError,
  type DynamoDbFaultProxy,
  type Fault,
  type ProxiedRequest,
  type RequestMatcher,
  replyGate,
  startDynamoDbFaultProxy,
} from '@keystone-idempotency/local-aws/dynamodb-fault-proxy';
import { scopedKey } from 'keystone-idempotency/engine';
import { localDocumentClient } from '../support/dynamodb';
import { e2eStack } from '../support/e2e-stack';
import { engineRequests, LEASE_TOKEN_ATTRIBUTE } from '../support/engine-requests';
import { eventually } from '../support/eventually';

/**
 * Faults between the payments API and DynamoDB, end to end: the local stack process (the handler code Lambda runs,
 * with the real AWS SDK and its retries) talks to DynamoDB Local through a proxy that loses replies after the write
 * applied, holds them past the lease, answers 500 or throttles. Whatever happens, a client that retries as the README
 * says ends with exactly one charge in the processor's ledger, one payment row, byte-identical replays, and error
 * bodies that are problem+json and say nothing about our insides.
 *
 * Every case has its own account, so the ledger and the payments table can be read per operation, and its own key,
 * so its rules match only its own requests. Each case checks that its fault really fired.
 */
jest.setTimeout(60_000);

/**
 * Timings that satisfy the shared rules (lib/timing): processor call < function timeouts < lease < TTL, and the
 * completer comes around more often than the lease. The local gateway's integration timeout is the function's less
 * 500 ms. The lease is short so a lost one costs seconds. The completer runs here too: a lost claim or takeover may
 * be finished (or abandoned) by it rather than by the client's retry, and either way must end in one charge.
 */
const LEASE_MS = 5000;
const FUNCTION_TIMEOUT_MS = 4000;
const PROCESSOR_TIMEOUT_MS = 1000;
const TTL_SECONDS = 120;

/** The DynamoDB client's default attempts in this SDK: 4, DynamoDB's own default rather than the SDK-wide 3. */
const SDK_ATTEMPTS = 4;

const OPERATION = 'POST /payments';
const card = { amount: 4200, currency: 'usd', source: 'tok_visa' };
const accounts = Array.from({ length: 24 }, (_, i) => ({
  apiKey: `sk_test_ddb_faults_${i}`,
  accountId: `acct_ddb_faults_${i}`,
}));
let accountsUsed = 0;

let proxy: DynamoDbFaultProxy;
const db = localDocumentClient();
beforeAll(async () => {
  proxy = await startDynamoDbFaultProxy(process.env.DYNAMODB_ENDPOINT!);
});
afterAll(async () => {
  await proxy?.close();
  db.destroy();
});
// Rules are armed only by the cases: the stack's start creates its tables and seeds API keys through the proxy.
const e2e = e2eStack({
  name: 'e2e-ddbf',
  apiKeys: Object.fromEntries(accounts.map(({ apiKey, accountId }) => [apiKey, accountId])),
  settings: () => ({
    DYNAMODB_ENDPOINT: proxy.url,
    IDEMPOTENCY_LEASE_SECONDS: String(LEASE_MS / 1000),
    IDEMPOTENCY_TTL_SECONDS: String(TTL_SECONDS),
    API_FUNCTION_TIMEOUT_MS: String(FUNCTION_TIMEOUT_MS),
    CONSUMER_FUNCTION_TIMEOUT_MS: String(FUNCTION_TIMEOUT_MS),
    PROCESSOR_TIMEOUT_MS: String(PROCESSOR_TIMEOUT_MS),
    COMPLETER_INTERVAL_SECONDS: '2',
  }),
});
const { tables } = e2e;
const steps = engineRequests(tables.idempotency);

describe('DynamoDB faults in the claim and the commit (cases run side by side)', () => {
  it.concurrent('absorbs a claim whose reply was lost once: the SDK retry finds its own claim', async () => {
    const op = newOperation();
    const lost = arm(steps.claim(op.recordKey), { mode: 'drop-reply' }, 1);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('201');
    expect(lost.fired()).toBe(1);
    // The retry fails its condition against the claim the first attempt wrote, and recognises its own lease token.
    expect(outcomes(steps.claim(op.recordKey))).toEqual(['dropped', 400]);
    await expectExactlyOnce(op, answers);
  });

  it.concurrent('answers 500 when every claim reply is lost, then takes the orphaned claim over after its lease', async () => {
    const op = newOperation();
    const lost = arm(steps.claim(op.recordKey), { mode: 'drop-reply' }, SDK_ATTEMPTS);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toMatch(/^500( 409)+ 201$/);
    expect(lost.fired()).toBe(SDK_ATTEMPTS);
    // The client's takeover once the lease runs out, or the completer's first: it finds no charge and abandons the
    // operation, which the client then takes over. Either way someone took the orphaned claim over, and one charge.
    expect(outcomes(steps.takeover(op.recordKey))).toContain(200);
    await expectExactlyOnce(op, answers);
  });

  it.concurrent('absorbs three 500s on the claim: the fourth attempt claims', async () => {
    const op = newOperation();
    const errors = arm(steps.claim(op.recordKey), { mode: 'error', error: 'InternalServerError' }, SDK_ATTEMPTS - 1);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('201');
    expect(errors.fired()).toBe(SDK_ATTEMPTS - 1);
    expect(attempts(steps.claim(op.recordKey))).toEqual([1, 2, 3, 4]);
    await expectExactlyOnce(op, answers);
  });

  it.concurrent('answers 500 when every claim attempt gets a 500, and the retry claims afresh', async () => {
    const op = newOperation();
    const errors = arm(steps.claim(op.recordKey), { mode: 'error', error: 'InternalServerError' }, SDK_ATTEMPTS);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('500 201');
    expect(errors.fired()).toBe(SDK_ATTEMPTS);
    await expectExactlyOnce(op, answers);
  });

  it.concurrent('absorbs a throttled claim', async () => {
    const op = newOperation();
    const throttled = arm(steps.claim(op.recordKey), { mode: 'error', error: 'ThrottlingException' }, 1);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('201');
    expect(throttled.fired()).toBe(1);
    await expectExactlyOnce(op, answers);
  });

  it.concurrent('answers 5xx when the claim stays throttled, and the retry claims', async () => {
    const op = newOperation();
    const throttled = arm(
      steps.claim(op.recordKey),
      { mode: 'error', error: 'ProvisionedThroughputExceededException' },
      SDK_ATTEMPTS,
    );
    const answers = await payLikeAClient(op);
    // The SDK's throttling backoff (up to 1 + 2 + 4 s) may outlast the gateway's timeout: a 504 then, not a 500.
    expect(statusLine(answers)).toMatch(/^50[04]( 409)* 201$/);
    expect(throttled.fired()).toBe(SDK_ATTEMPTS);
    await expectExactlyOnce(op, answers);
  });

  it.concurrent('absorbs a commit whose reply was lost once: the retried transaction is answered as done', async () => {
    const op = newOperation();
    const lost = arm(steps.commit(op.recordKey), { mode: 'drop-reply' }, 1);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('201');
    expect(lost.fired()).toBe(1);
    // The SDK's retry carries the same ClientRequestToken (the engine's lease token; the SDK would fill in one of its
    // own and keep it across its retries): DynamoDB answers the repeat with success, not a failed condition.
    expect(outcomes(steps.commit(op.recordKey))).toEqual(['dropped', 200]);
    await expectExactlyOnce(op, answers);
  });

  it.concurrent('answers 500 when every commit reply is lost, and the retry replays the committed payment', async () => {
    const op = newOperation();
    const lost = arm(steps.commit(op.recordKey), { mode: 'drop-reply' }, SDK_ATTEMPTS);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('500 201');
    expect(answers.at(-1)?.headers.get('idempotent-replayed')).toBe('true');
    expect(lost.fired()).toBe(SDK_ATTEMPTS);
    // The release after the error finds the record completed and changes nothing.
    expect(outcomes(steps.release(op.recordKey))).toEqual([400]);
    await expectExactlyOnce(op, answers);
  });

  it.concurrent('absorbs two 500s on the commit', async () => {
    const op = newOperation();
    const errors = arm(steps.commit(op.recordKey), { mode: 'error', error: 'InternalServerError' }, 2);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('201');
    expect(errors.fired()).toBe(2);
    await expectExactlyOnce(op, answers);
  });

  it.concurrent('answers 500 when every commit gets a 500, and the retry finds the charge already made', async () => {
    const op = newOperation();
    const errors = arm(steps.commit(op.recordKey), { mode: 'error', error: 'InternalServerError' }, SDK_ATTEMPTS);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('500 201');
    expect(errors.fired()).toBe(SDK_ATTEMPTS);
    // The failed commit released the key; the retry took it over and the processor replayed the first charge.
    expect(outcomes(steps.release(op.recordKey))).toEqual([200]);
    expect(outcomes(steps.takeover(op.recordKey))).toEqual([200]);
    await expectExactlyOnce(op, answers);
  });

  it.concurrent('answers 5xx when the commit stays throttled, and the retry finds the charge already made', async () => {
    const op = newOperation();
    const throttled = arm(steps.commit(op.recordKey), { mode: 'error', error: 'ThrottlingException' }, SDK_ATTEMPTS);
    const answers = await payLikeAClient(op);
    // A 504 when the SDK's throttling backoff outlasts the gateway; the release then comes after the client's retry.
    expect(statusLine(answers)).toMatch(/^50[04]( 409)* 201$/);
    expect(throttled.fired()).toBe(SDK_ATTEMPTS);
    await expectExactlyOnce(op, answers);
  });

  it.concurrent('lets an owner whose claim reply came back after its lease was taken over change nothing', async () => {
    const op = newOperation();
    // The claim applies, and its reply is held until the client is done: the gateway gives up on the first attempt,
    // the client waits out the lease, takes the claim over and commits. However slow the machine, the late owner's
    // reply comes back after the takeover's commit, not after a guess at how long that takes.
    const gate = replyGate();
    const late = arm(steps.claim(op.recordKey), { mode: 'hold-reply', until: gate.until }, 1);
    const answers = await payLikeAClient(op).finally(gate.letGo);
    // 409s while the late owner's lease runs (none if the machine is so slow that the first retry comes after it).
    expect(statusLine(answers)).toMatch(/^504( 409)* 201$/);
    expect(late.fired()).toBe(1);
    // The late owner believes it holds the claim, long past its function's timeout. What it does then depends on
    // timers, as on Lambda, where an environment can live on past an invocation that middy answered early:
    // - its environment was ended at the timeout (the local runtime kills it, as Lambda does): it never hears back,
    //   and sends nothing;
    // - it lived on, and middy's early timeout (due at once: the deadline is past) fired before its handler returned:
    //   it sends its release;
    // - it lived on, and its handler returned first (the processor replays the charge made under the same
    //   downstream key): it sends its commit.
    // Whichever it did, nothing it sent landed: the takeover changed the lease token that its writes are fenced by.
    // (The store's own tests refuse a stale release and commit deterministically; this is the same rule through
    // the stack.)
    const { token, writes } = await lateOwnerWrites(op);
    expect(writes.map((write) => write.outcome).filter((outcome) => outcome !== 400)).toEqual([]);
    // The one commit that landed is the takeover's.
    const commits = proxy.requests(steps.commit(op.recordKey));
    expect(commits.filter((commit) => !carries(commit, token)).map((commit) => commit.outcome)).toEqual([200]);
    await expectExactlyOnce(op, answers);
  });

  it.concurrent('replays a payment whose commit reply arrived after the lease, to the client that gave up', async () => {
    const op = newOperation();
    const late = arm(steps.commit(op.recordKey), { mode: 'delay-reply', ms: LEASE_MS + 1000 }, 1);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('504 201');
    expect(answers.at(-1)?.headers.get('idempotent-replayed')).toBe('true');
    expect(late.fired()).toBe(1);
    // One commit, applied (the replay is its record). Its reply reached nobody who still listened: the owner's
    // environment, killed at its timeout, had closed the connection (`dropped`), or, living on, got it late (200).
    const commits = await settled(steps.commit(op.recordKey), 1);
    expect(commits).toHaveLength(1);
    expect([200, 'dropped']).toContain(commits[0]?.outcome);
    await expectExactlyOnce(op, answers);
  });
});

/**
 * A release needs a failed attempt and a takeover needs a released record: the processor's 503 provides both. The
 * processor's faults are drawn by whichever charge comes next, not by key, so these cases run one at a time.
 */
describe('DynamoDB faults in the release and the takeover (after a processor 503, one case at a time)', () => {
  it('absorbs a takeover whose reply was lost once: the SDK retry finds its own takeover', async () => {
    const op = newOperation();
    await processorFails();
    const lost = arm(steps.takeover(op.recordKey), { mode: 'drop-reply' }, 1);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('503 201');
    expect(lost.fired()).toBe(1);
    expect(outcomes(steps.takeover(op.recordKey))).toEqual(['dropped', 400]);
    await expectExactlyOnce(op, answers);
  });

  it('answers 500 when every takeover reply is lost, then takes over again after the lost lease', async () => {
    const op = newOperation();
    await processorFails();
    const lost = arm(steps.takeover(op.recordKey), { mode: 'drop-reply' }, SDK_ATTEMPTS);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toMatch(/^503 500( 409)+ 201$/);
    expect(lost.fired()).toBe(SDK_ATTEMPTS);
    await expectExactlyOnce(op, answers);
  });

  it('answers 500 when every takeover attempt gets a 500, and the retry takes over', async () => {
    const op = newOperation();
    await processorFails();
    const errors = arm(steps.takeover(op.recordKey), { mode: 'error', error: 'InternalServerError' }, SDK_ATTEMPTS);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('503 500 201');
    expect(errors.fired()).toBe(SDK_ATTEMPTS);
    await expectExactlyOnce(op, answers);
  });

  it('absorbs a throttled takeover', async () => {
    const op = newOperation();
    await processorFails();
    const throttled = arm(steps.takeover(op.recordKey), { mode: 'error', error: 'ThrottlingException' }, 1);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('503 201');
    expect(throttled.fired()).toBe(1);
    await expectExactlyOnce(op, answers);
  });

  it('hides a release whose reply was lost once: its retry fails its condition quietly', async () => {
    const op = newOperation();
    await processorFails();
    const lost = arm(steps.release(op.recordKey), { mode: 'drop-reply' }, 1);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('503 201');
    expect(lost.fired()).toBe(1);
    expect(outcomes(steps.release(op.recordKey))).toEqual(['dropped', 400]);
    await expectExactlyOnce(op, answers);
  });

  it('hides a release whose every reply was lost: it landed, so the retry takes over at once', async () => {
    const op = newOperation();
    await processorFails();
    const lost = arm(steps.release(op.recordKey), { mode: 'drop-reply' }, SDK_ATTEMPTS);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('503 201');
    expect(lost.fired()).toBe(SDK_ATTEMPTS);
    await expectExactlyOnce(op, answers);
  });

  it('waits out the lease when every release attempt gets a 500, then takes over', async () => {
    const op = newOperation();
    await processorFails();
    const errors = arm(steps.release(op.recordKey), { mode: 'error', error: 'InternalServerError' }, SDK_ATTEMPTS);
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toMatch(/^503( 409)+ 201$/);
    expect(errors.fired()).toBe(SDK_ATTEMPTS);
    await expectExactlyOnce(op, answers);
  });

  it('absorbs a throttled release', async () => {
    const op = newOperation();
    await processorFails();
    const throttled = arm(
      steps.release(op.recordKey),
      { mode: 'error', error: 'ProvisionedThroughputExceededException' },
      1,
    );
    const answers = await payLikeAClient(op);
    expect(statusLine(answers)).toBe('503 201');
    expect(throttled.fired()).toBe(1);
    await expectExactlyOnce(op, answers);
  });
});

/** One payment operation: its own account (so the ledger and the table can be read per operation) and key. */
interface Operation {
  readonly apiKey: string;
  readonly accountId: string;
  readonly key: string;
  /** The idempotency record's key, as the engine's requests carry it. */
  readonly recordKey: string;
}

function newOperation(): Operation {
  const account = accounts[accountsUsed++];
  if (!account) throw new Error('more cases than accounts: grow the pool');
  const key = randomUUID();
  return { ...account, key, recordKey: scopedKey({ accountId: account.accountId, operation: OPERATION, key }) };
}

function arm(match: RequestMatcher, fault: Fault, count: number): ArmedRule {
  return proxy.arm({ match, fault, count });
}

/** The processor answers the next charge with a 503: the attempt fails without charging and releases its key. */
async function processorFails(): Promise<void> {
  const response = await fetch(`${e2e.sandbox.url}/__faults`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ mode: 'error_503', count: 1 }),
  });
  expect(response.ok).toBe(true);
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

async function send(op: Operation): Promise<Answer> {
  const response = await fetch(`${e2e.url}/payments`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${op.apiKey}`,
      'Content-Type': 'application/json',
      'Idempotency-Key': op.key,
    },
    body: JSON.stringify(card),
  });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

/**
 * A client that does what the README asks: after a 5xx or a 409, the same request with the same key, after the
 * Retry-After when there is one (with a short backoff when there isn't), until an answer that is final, within a
 * bounded budget.
 */
async function payLikeAClient(op: Operation): Promise<Answer[]> {
  const answers: Answer[] = [];
  const giveUpAt = Date.now() + 40_000;
  for (;;) {
    const answer = await send(op);
    answers.push(answer);
    if (answer.status !== 409 && answer.status < 500) return answers;
    if (Date.now() > giveUpAt) throw new Error(`the client gave up after: ${statusLine(answers)}`);
    const retryAfter = Number(answer.headers.get('retry-after'));
    await sleep(retryAfter > 0 ? retryAfter * 1000 : Math.min(250 * 2 ** (answers.length - 1), 2000));
  }
}

/** The promise, checked for one operation after the client is done. */
async function expectExactlyOnce(op: Operation, answers: readonly Answer[]): Promise<void> {
  await quiet(op); // any owner the client no longer waits for has finished too

  const first = answers.find((answer) => answer.status === 201);
  if (!first) throw new Error(`no 201 in ${statusLine(answers)}`);
  const replays = [...answers.filter((answer) => answer.status === 201), await send(op), await send(op)];
  for (const replay of replays) {
    expect(replay.status).toBe(201);
    expect(replay.body).toBe(first.body);
    expect(replay.headers.get('location')).toBe(first.headers.get('location'));
  }
  for (const replay of replays.slice(-2)) expect(replay.headers.get('idempotent-replayed')).toBe('true');

  const payment = JSON.parse(first.body) as { id: string; charge_id: string };
  const charges = e2e.sandbox.charges().filter((charge) => charge.metadata.account_id === op.accountId);
  expect(charges.map((charge) => charge.id)).toEqual([payment.charge_id]);
  const rows = await paymentRows(op.accountId);
  expect(rows.map((row) => [row.id, row.charge_id])).toEqual([[payment.id, payment.charge_id]]);

  for (const answer of answers.filter((answer) => answer.status >= 400)) expectProblemWithoutInternals(answer);
}

/** What a response body must never carry: our stack, an SDK error's name or message, a table. */
const INTERNALS: readonly (RegExp | string)[] = [
  /\bat \S+ \(|\.ts:\d+|node_modules/, // a stack trace
  /[A-Za-z]+(Error|Exception)\b/, // an error's name: ThrottlingException, InternalServerError, LeaseLostError
  /ECONNRESET|socket hang up|com\.amazonaws|dynamodb/i,
  ...Object.values(DynamoDbError).map(({ message }) => message),
  tables.idempotency,
  tables.payments,
];
const PROBLEM_MEMBERS = new Set(['type', 'title', 'status', 'detail', 'requestId']);

function expectProblemWithoutInternals(answer: Answer): void {
  expect(answer.headers.get('content-type')).toBe('application/problem+json');
  const problem = JSON.parse(answer.body) as Record<string, unknown>;
  expect(Object.keys(problem).filter((member) => !PROBLEM_MEMBERS.has(member))).toEqual([]);
  expect(typeof problem.type).toBe('string');
  for (const internal of INTERNALS) {
    if (typeof internal === 'string') expect(answer.body).not.toContain(internal);
    else expect(answer.body).not.toMatch(internal);
  }
}

async function paymentRows(accountId: string): Promise<Record<string, unknown>[]> {
  const { Items } = await db.send(
    new QueryCommand({
      TableName: tables.payments,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': `ACCOUNT#${accountId}` },
      ConsistentRead: true,
    }),
  );
  return Items ?? [];
}

function statusLine(answers: readonly Answer[]): string {
  return answers.map((answer) => answer.status).join(' ');
}

function outcomes(match: RequestMatcher): ProxiedRequest['outcome'][] {
  return proxy.requests(match).map((request) => request.outcome);
}

function attempts(match: RequestMatcher): (number | undefined)[] {
  return proxy.requests(match).map((request) => request.attempt);
}

/** Waits until at least `count` requests matched and the proxy has answered (or dropped) every one of them. */
async function settled(match: RequestMatcher, count: number): Promise<ProxiedRequest[]> {
  const giveUpAt = Date.now() + 30_000;
  for (;;) {
    const seen = proxy.requests(match);
    if (seen.length >= count && seen.every((request) => request.outcome !== 'pending')) return seen;
    if (Date.now() > giveUpAt) {
      throw new Error(`${match.name}: expected ${count} settled, saw ${JSON.stringify(seen.map((r) => r.outcome))}`);
    }
    await sleep(100);
  }
}

/**
 * The owner whose claim reply was held (the claim that drew the fault): its lease token, and what it sent once the
 * reply was let go, when it has finished. Gone by then (its connection closed: its environment was killed), it sent
 * nothing and never will. Alive, it sends exactly one write under its lease: its release (middy's timeout fired
 * first) or its commit (its handler returned first); this waits until that one has been answered.
 */
async function lateOwnerWrites(op: Operation): Promise<{ token: string; writes: ProxiedRequest[] }> {
  const claim = (await settled(steps.claim(op.recordKey), 1)).find((request) => request.rule !== undefined);
  const token = stringAttribute(asMap(claim?.body.Item)[LEASE_TOKEN_ATTRIBUTE]);
  if (!claim || !token) throw new Error(`no held claim with a lease token for ${op.recordKey}`);
  const own = () =>
    [steps.release(op.recordKey), steps.commit(op.recordKey)]
      .flatMap((match) => proxy.requests(match))
      .filter((request) => carries(request, token));
  if (claim.outcome === 'dropped') return { token, writes: own() };
  const writes = await eventually(own, (seen) => seen.length > 0 && seen.every((w) => w.outcome !== 'pending'), 30_000);
  return { token, writes };
}

/** Whether a request names this lease token: a release is conditioned on it, a commit also carries it as its token. */
function carries(request: ProxiedRequest, token: string): boolean {
  return JSON.stringify(request.body).includes(JSON.stringify(token));
}

function asMap(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
}

/** The string inside an AttributeValue (`{"S": "..."}`). */
function stringAttribute(value: unknown): string | undefined {
  const s = asMap(value).S;
  return typeof s === 'string' ? s : undefined;
}

/** Waits until no request of this operation is held by the proxy: late owners have had their say. */
async function quiet(op: Operation): Promise<void> {
  for (const match of Object.values(steps).map((step) => step(op.recordKey))) await settled(match, 0);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
