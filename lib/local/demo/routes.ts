import type { Route } from '@keystone-idempotency/local-aws/api-gateway';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { problemResponse } from 'keystone-idempotency/http';
import type { PageAssets } from './page-assets';
import { ProcessorControlError, type ProcessorControls } from './processor-controls';
import type { DemoCharges, DemoConfig, DemoHold } from './wire';

/**
 * The demo's routes on the local API Gateway, beside the payments API: the page must share the API's origin (the
 * local gateway has no CORS, like the deployed API), and the sandbox's ledger and faults live on another port.
 *
 *   GET    /                  the page
 *   GET    /demo/app.js       its script: page/main.ts with packages/keystone-idempotency/src/client, bundled
 *   GET    /demo/styles.css
 *   GET    /demo/config       the demo account's id and API key
 *   GET    /demo/charges      the processor's charges for the demo account (its ledger, filtered)
 *   POST   /demo/hold         holds the next charge for HOLD_MS (a delay fault): a double tap's original is still
 *                             running when its duplicate arrives
 *   POST   /demo/flaky        arms one lost processor reply (drop_after_charge) for the next charge
 *   DELETE /demo/flaky        disarms pending faults
 *
 * Local only: lib/infra never imports lib/local, and test/local/demo/local-only.test.ts checks that no deployed
 * stack has any of these paths.
 */
export interface DemoRoutesOptions {
  readonly assets: PageAssets;
  readonly config: DemoConfig;
  readonly processor: ProcessorControls;
}

/**
 * How long the processor holds the original of a one-key double tap. Long enough that the duplicate, sent in the
 * same instant, arrives while it runs even on a loaded machine; short enough that the duplicate's first retry
 * (after the 1 s Retry-After) may still see it in flight, and its second gets the replay well within the client's
 * five attempts.
 */
export const HOLD_MS = 1500;

/** The page may load only what its own origin serves: no CDN, no font, nothing that needs the internet. */
const CONTENT_SECURITY_POLICY =
  "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export function demoRoutes({ assets, config, processor }: DemoRoutesOptions): Route[] {
  const { accountId } = config;
  return [
    {
      method: 'GET',
      resource: '/',
      functionName: 'demo-page',
      handler: async () =>
        file('text/html; charset=utf-8', assets.html, { 'Content-Security-Policy': CONTENT_SECURITY_POLICY }),
    },
    {
      method: 'GET',
      resource: '/demo/app.js',
      functionName: 'demo-script',
      handler: async () => file('text/javascript; charset=utf-8', assets.script),
    },
    {
      method: 'GET',
      resource: '/demo/styles.css',
      functionName: 'demo-styles',
      handler: async () => file('text/css; charset=utf-8', assets.css),
    },
    { method: 'GET', resource: '/demo/config', functionName: 'demo-config', handler: async () => json(200, config) },
    {
      method: 'GET',
      resource: '/demo/charges',
      functionName: 'demo-charges',
      handler: withProcessor(async () => {
        const body: DemoCharges = { accountId, charges: await processor.chargesOf(accountId) };
        return json(200, body);
      }),
    },
    {
      method: 'POST',
      resource: '/demo/hold',
      functionName: 'demo-hold',
      handler: withProcessor(async () => {
        await processor.holdNextCharge(HOLD_MS);
        const body: DemoHold = { holdMs: HOLD_MS };
        return json(201, body);
      }),
    },
    {
      method: 'POST',
      resource: '/demo/flaky',
      functionName: 'demo-flaky-arm',
      handler: withProcessor(async () => {
        await processor.loseNextReply();
        return json(201, { armed: { mode: 'drop_after_charge', count: 1 } });
      }),
    },
    {
      method: 'DELETE',
      resource: '/demo/flaky',
      functionName: 'demo-flaky-clear',
      handler: withProcessor(async () => {
        await processor.clearFaults();
        return json(200, { armed: null });
      }),
    },
  ];
}

function file(contentType: string, body: string, headers: Record<string, string> = {}): APIGatewayProxyResult {
  return { statusCode: 200, headers: { 'Content-Type': contentType, 'Cache-Control': 'no-store', ...headers }, body };
}

function json(statusCode: number, body: unknown): APIGatewayProxyResult {
  return {
    statusCode,
    headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' },
    body: JSON.stringify(body),
  };
}

/** A sandbox that can't be reached is a 502 the page can show, never a stack trace. */
function withProcessor(handler: () => Promise<APIGatewayProxyResult>): () => Promise<APIGatewayProxyResult> {
  return async () => {
    try {
      return await handler();
    } catch (error) {
      if (!(error instanceof ProcessorControlError)) throw error;
      return problemResponse({
        type: 'demo-processor-unreachable',
        title: 'Sandbox processor unreachable',
        status: 502,
        detail: 'The demo reads the sandbox processor, which did not answer. Is PROCESSOR_URL a sandbox?',
      });
    }
  };
}
