import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProcessorClient } from '../../lib/payments/processor-client';
import { type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import { injectFault, newKey, postCharge } from '../sandbox/client';

/** The processor client against the sandbox over real HTTP; answers the sandbox never gives from a bare server. */
let sandbox: Sandbox;
let client: ProcessorClient;
beforeAll(async () => {
  sandbox = await startSandbox();
  client = new ProcessorClient({ baseUrl: sandbox.url, timeoutMs: 500 });
});
afterEach(() => fetch(`${sandbox.url}/__faults`, { method: 'DELETE' }));
afterAll(() => sandbox.close());

const charged = async () => (await postCharge<{ id: string }>(sandbox, newKey())).body.id;

describe('ProcessorClient.refund', () => {
  it('refunds a charge under our key, and a retry with the key finds that refund instead of making another', async () => {
    const chargeId = await charged();
    const key = newKey('refund');
    const first = await client.refund(chargeId, key);
    expect(first).toEqual({
      kind: 'refunded',
      refund: expect.objectContaining({ id: expect.stringMatching(/^re_/), charge: chargeId, amount: 1999 }),
    });
    expect(await client.refund(chargeId, key)).toEqual(first);
    expect(sandbox.refunds().filter((refund) => refund.charge === chargeId)).toHaveLength(1);
  });

  it('is rejected, with the processor code, for a charge refunded already under another key and for an unknown one', async () => {
    const chargeId = await charged();
    await client.refund(chargeId, newKey());
    expect(await client.refund(chargeId, newKey())).toEqual({
      kind: 'rejected',
      status: 400,
      type: 'invalid_request_error',
      code: 'charge_already_refunded',
      message: `Charge ${chargeId} has already been refunded.`,
    });
    expect(await client.refund('ch_000000000000000000000000', newKey())).toMatchObject({
      kind: 'rejected',
      status: 400,
      code: 'resource_missing',
      param: 'charge',
    });
  });

  it('is unavailable, never rejected, when the processor is down, slow or hangs up; the retry refunds once', async () => {
    const chargeId = await charged();
    const key = newKey();
    await injectFault(sandbox, { mode: 'error_503', target: 'refunds' });
    expect(await client.refund(chargeId, key)).toEqual({ kind: 'unavailable', reason: 'overloaded', status: 503 });
    await injectFault(sandbox, { mode: 'delay', ms: 1500, target: 'refunds' });
    expect(await client.refund(chargeId, key)).toEqual({ kind: 'unavailable', reason: 'timeout' });
    // The delayed attempt refunds after the client gave up: the retry under the key is answered with that refund.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    await injectFault(sandbox, { mode: 'drop_after_charge', target: 'refunds' });
    const again = await client.refund(chargeId, key);
    expect(again).toMatchObject({ kind: 'refunded', refund: { charge: chargeId } });
    expect(sandbox.refunds().filter((refund) => refund.charge === chargeId)).toHaveLength(1);
  });
});

describe('ProcessorClient answers the sandbox never gives', () => {
  let server: Server;
  let answer: { status: number; body: string; headers?: Record<string, string> };
  let bare: ProcessorClient;
  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.writeHead(answer.status, { 'Content-Type': 'application/json', ...answer.headers });
      res.end(answer.body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    bare = new ProcessorClient({
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      timeoutMs: 500,
    });
  });
  afterAll(async () => {
    const closed = new Promise((resolve) => server.close(resolve));
    server.closeAllConnections();
    await closed;
  });

  const error = (code: string) => JSON.stringify({ error: { type: 'invalid_request_error', code, message: code } });

  it.each([
    [408, { kind: 'unavailable', reason: 'timeout', status: 408, retryAfterSeconds: 2 }],
    [409, { kind: 'unavailable', reason: 'overloaded', status: 409, retryAfterSeconds: 2 }],
    [429, { kind: 'unavailable', reason: 'overloaded', status: 429, retryAfterSeconds: 2 }],
    [500, { kind: 'unavailable', reason: 'server_error', status: 500 }],
    [404, { kind: 'rejected', status: 404, type: 'invalid_request_error', code: 'x', message: 'x' }],
    [422, { kind: 'rejected', status: 422, type: 'invalid_request_error', code: 'x', message: 'x' }],
  ])('maps a %i to a refund outcome as it maps a charge: 408, 409, 429 and 5xx say later', async (status, outcome) => {
    answer = { status, body: error('x'), headers: { 'Retry-After': '2' } };
    expect(await bare.refund('ch_1', newKey())).toEqual(outcome);
    expect(await bare.charge({ amount: 1, currency: 'usd', source: 'tok_visa', metadata: {} }, newKey())).toEqual(
      await bare.refund('ch_1', newKey()),
    );
  });

  it('takes an answer cut short for unavailable: the refund may or may not have happened', async () => {
    answer = { status: 200, body: '{"id": "re_' };
    expect(await bare.refund('ch_1', newKey())).toEqual({ kind: 'unavailable', reason: 'network', status: 200 });
  });
});
