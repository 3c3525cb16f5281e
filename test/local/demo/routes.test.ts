import { type ApiGateway, startApiGateway } from '@keystone-idempotency/local-aws/api-gateway';
import { freePort } from '@keystone-idempotency/local-aws/free-port';
import { silentLog } from '@keystone-idempotency/local-aws/log';
import { buildPageAssets } from '../../../lib/local/demo/page-assets';
import { ProcessorControls } from '../../../lib/local/demo/processor-controls';
import { demoRoutes, HOLD_MS } from '../../../lib/local/demo/routes';
import type { DemoCharges } from '../../../lib/local/demo/wire';
import { type Sandbox, startSandbox } from '../../../lib/sandbox/processor';
import { getJson, newKey, postCharge, visaCharge } from '../../sandbox/client';

/** The demo's local-only routes over real HTTP, on the local gateway, against a real sandbox processor. */
const config = { accountId: 'acct_demo_test', apiKey: 'sk_test_demo' };
const assets = { html: '<!doctype html><title>t</title>', css: 'body{}', script: 'export {};' };
let sandbox: Sandbox;
let gateway: ApiGateway;

async function demoGateway(processorUrl: string): Promise<ApiGateway> {
  const routes = demoRoutes({ assets, config, processor: new ProcessorControls(processorUrl) });
  return startApiGateway({ routes, gatewayResponseFormat: 'problem', log: silentLog });
}

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
  gateway = await demoGateway(sandbox.url);
});
afterAll(async () => {
  await gateway?.close();
  await sandbox?.close();
});

describe('demo routes', () => {
  it("list the demo account's charges from the processor's ledger, and no one else's", async () => {
    const mine = await postCharge(sandbox, newKey(), {
      ...visaCharge,
      metadata: { account_id: config.accountId, payment_id: 'pay_mine' },
    });
    await postCharge(sandbox, newKey(), { ...visaCharge, metadata: { account_id: 'acct_other', payment_id: 'pay_x' } });
    const listed = await getJson<DemoCharges>(`${gateway.url}/demo/charges`);
    expect(listed).toEqual({
      accountId: config.accountId,
      charges: [
        {
          id: (mine.body as { id: string }).id,
          amount: visaCharge.amount,
          currency: visaCharge.currency,
          payment_id: 'pay_mine',
          created: expect.any(Number),
        },
      ],
    });
  });

  it('arm exactly one lost processor reply, and disarm it', async () => {
    expect((await fetch(`${gateway.url}/demo/flaky`, { method: 'POST' })).status).toBe(201);
    expect(await getJson(`${sandbox.url}/__faults`)).toEqual([
      { mode: 'drop_after_charge', count: 1, remaining: 1, target: 'charges' },
    ]);
    expect((await fetch(`${gateway.url}/demo/flaky`, { method: 'DELETE' })).status).toBe(200);
    expect(await getJson(`${sandbox.url}/__faults`)).toEqual([]);
  });

  it("hold exactly one charge for the page's double tap", async () => {
    const armed = await fetch(`${gateway.url}/demo/hold`, { method: 'POST' });
    expect(armed.status).toBe(201);
    expect(await armed.json()).toEqual({ holdMs: HOLD_MS });
    expect(await getJson(`${sandbox.url}/__faults`)).toEqual([
      { mode: 'delay', ms: HOLD_MS, count: 1, remaining: 1, target: 'charges' },
    ]);
    expect((await fetch(`${gateway.url}/demo/flaky`, { method: 'DELETE' })).status).toBe(200);
    expect(await getJson(`${sandbox.url}/__faults`)).toEqual([]);
  });

  it('hand the page its demo account and key', async () => {
    expect(await getJson(`${gateway.url}/demo/config`)).toEqual(config);
  });

  it('serve the page under a policy that lets it load nothing from another origin', async () => {
    const page = await fetch(`${gateway.url}/`);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toMatch(/^default-src 'self';/);
    expect(await page.text()).toBe(assets.html);
    expect((await fetch(`${gateway.url}/demo/app.js`)).headers.get('content-type')).toMatch(/^text\/javascript/);
  });

  it('answer 502 problem+json, without internals, when the processor does not answer', async () => {
    const orphan = await demoGateway(`http://127.0.0.1:${await freePort()}`);
    try {
      const response = await fetch(`${orphan.url}/demo/charges`);
      expect(response.status).toBe(502);
      expect(response.headers.get('content-type')).toBe('application/problem+json');
      const body = await response.text();
      expect(JSON.parse(body)).toMatchObject({ title: 'Sandbox processor unreachable', status: 502 });
      expect(body).not.toMatch(/ECONNREFUSED|fetch failed|at .*\.ts/);
    } finally {
      await orphan.close();
    }
  });
});

describe('buildPageAssets', () => {
  it('bundles the page with the payments client and the library client under it, as an ES module', async () => {
    const built = await buildPageAssets();
    expect(built.html).toContain('<script type="module" src="/demo/app.js">');
    // The inline source map names its sources.
    expect(built.script).toContain('lib/payments/client/payments-client.ts');
    expect(built.script).toContain('packages/keystone-idempotency/src/client/operation.ts');
    expect(built.script).toContain('Idempotency-Key');
    expect(built.script).not.toMatch(/\brequire\(/);
  });
});
