import type { Charge } from '../../lib/sandbox/charges';
import type { ProcessorEvent } from '../../lib/sandbox/events';
import { type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import {
  DEFAULT_WEBHOOK_RETRY,
  type Delivery,
  retryDelayMs,
  WEBHOOK_RETRY_WINDOW_ENV,
  type WebhookRetry,
  webhookRetryFromEnv,
} from '../../lib/sandbox/webhook-sender';
import { verifySignature } from '../../lib/webhooks/signature';
import { eventually, getJson, newKey, postCharge, postJson } from './client';
import { type ReceivedWebhook, type Receiver, startReceiver } from './receiver';

const secret = 'whsec_sandbox_test';
const nowMs = 1_700_000_123_456;
const nowSeconds = 1_700_000_123;

function verify(webhook: ReceivedWebhook) {
  const header = webhook.headers['processor-signature'];
  return verifySignature({
    header: typeof header === 'string' ? header : undefined,
    rawBody: webhook.rawBody,
    secret,
    nowSeconds,
  });
}

describe('sandbox webhooks', () => {
  const servers: { close(): Promise<void> }[] = [];
  afterAll(() => Promise.all(servers.map((server) => server.close())));

  async function sandboxFor(
    receiver: Receiver,
    retry: WebhookRetry = { attempts: 3, baseDelayMs: 10 },
  ): Promise<Sandbox> {
    const sandbox = await startSandbox({
      webhookUrl: receiver.url,
      webhookSecret: secret,
      clock: () => nowMs,
      webhookRetry: retry,
    });
    servers.push(sandbox);
    return sandbox;
  }
  async function receiver(respond?: Parameters<typeof startReceiver>[0]): Promise<Receiver> {
    const started = await startReceiver(respond);
    servers.push(started);
    return started;
  }

  it('posts a signed charge.succeeded event for a new charge, and nothing for its replay', async () => {
    const endpoint = await receiver();
    const sandbox = await sandboxFor(endpoint);
    const key = newKey();
    const charge = (await postCharge<Charge>(sandbox, key)).body;
    await eventually(() => expect(endpoint.received).toHaveLength(1));
    await postCharge(sandbox, key);

    const [webhook] = endpoint.received;
    expect(webhook?.headers['content-type']).toBe('application/json');
    expect(webhook?.headers['processor-signature']).toMatch(/^t=1700000123,v1=[0-9a-f]{64}$/);
    expect(verify(webhook!)).toEqual({ ok: true, timestamp: nowSeconds });
    const event = JSON.parse(webhook!.rawBody) as ProcessorEvent;
    expect(event).toEqual({
      id: expect.stringMatching(/^evt_\w+$/),
      object: 'event',
      type: 'charge.succeeded',
      created: nowSeconds,
      data: { object: charge },
    });
    expect(await getJson<ProcessorEvent[]>(`${sandbox.url}/events`)).toEqual([event]);
  });

  it('records events but delivers none while delivery is switched off, and delivers again once on', async () => {
    const endpoint = await receiver();
    const sandbox = await sandboxFor(endpoint);
    const off = await fetch(`${sandbox.url}/__webhooks`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ enabled: false }),
    });
    expect(await off.json()).toEqual({ enabled: false, url: endpoint.url });
    await postCharge(sandbox, newKey());
    expect(sandbox.events()).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(endpoint.received).toHaveLength(0);

    await fetch(`${sandbox.url}/__webhooks`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ enabled: true }),
    });
    await postCharge(sandbox, newKey());
    await eventually(() => expect(endpoint.received).toHaveLength(1));
  });

  it('can start with delivery switched off', async () => {
    const endpoint = await receiver();
    const sandbox = await startSandbox({ webhookUrl: endpoint.url, webhookSecret: secret, webhooksEnabled: false });
    servers.push(sandbox);
    await postCharge(sandbox, newKey());
    expect(await getJson(`${sandbox.url}/__webhooks`)).toEqual({ enabled: false, url: endpoint.url });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(endpoint.received).toHaveLength(0);
  });

  it('emits no event for a decline', async () => {
    const endpoint = await receiver();
    const sandbox = await sandboxFor(endpoint);
    expect(
      (await postCharge(sandbox, newKey(), { amount: 5, currency: 'usd', source: 'tok_chargeDeclined' })).status,
    ).toBe(402);
    expect(sandbox.events()).toEqual([]);
  });

  it('answers the charge without waiting for the webhook endpoint', async () => {
    let release!: () => void;
    const held = new Promise<number>((resolve) => {
      release = () => resolve(200);
    });
    const endpoint = await receiver(() => held);
    const sandbox = await sandboxFor(endpoint);

    expect((await postCharge(sandbox, newKey())).status).toBe(201);
    await eventually(() => expect(endpoint.received).toHaveLength(1));
    expect(sandbox.deliveries()).toEqual([]); // still in flight while the charge was answered
    release();
    await eventually(() => expect(sandbox.deliveries()).toMatchObject([{ ok: true, status: 200 }]));
  });

  it('retries a failed delivery with backoff until the endpoint accepts it', async () => {
    const endpoint = await receiver((_webhook, index) => (index < 2 ? 500 : 200));
    const sandbox = await sandboxFor(endpoint);
    await postCharge(sandbox, newKey());

    await eventually(() => expect(sandbox.deliveries()).toHaveLength(3));
    expect(sandbox.deliveries().map(({ attempt, status }) => [attempt, status])).toEqual([
      [1, 500],
      [2, 500],
      [3, 200],
    ]);
    expect(endpoint.received.every((webhook) => verify(webhook).ok)).toBe(true);
  });

  it('gives up after the configured number of attempts', async () => {
    const endpoint = await receiver(() => 503);
    const sandbox = await sandboxFor(endpoint, { attempts: 2, baseDelayMs: 10 });
    await postCharge(sandbox, newKey());

    await eventually(() => expect(sandbox.deliveries()).toHaveLength(2));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(endpoint.received).toHaveLength(2);
  });

  it('stops retrying at the end of its window, however many attempts it still had', async () => {
    const endpoint = await receiver(() => 503);
    const sandbox = await sandboxFor(endpoint, { attempts: 1000, baseDelayMs: 20, maxDelayMs: 20, windowMs: 300 });
    await postCharge(sandbox, newKey());

    // Waits of 10 to 20 ms (capped, jittered) within 300 ms: at least a few retries, never a thousand.
    await eventually(() => expect(sandbox.deliveries().length).toBeGreaterThanOrEqual(5));
    await new Promise((resolve) => setTimeout(resolve, 400)); // past the window
    const sent = sandbox.deliveries().length;
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(sandbox.deliveries()).toHaveLength(sent);
    expect(sent).toBeLessThanOrEqual(32); // 300 ms / 10 ms, and the first
  });

  it('cancels a pending retry when it closes: close does not wait out the backoff', async () => {
    const endpoint = await startReceiver(() => 503);
    servers.push(endpoint);
    const sandbox = await startSandbox({
      webhookUrl: endpoint.url,
      webhookSecret: secret,
      webhookRetry: { attempts: 5, baseDelayMs: 60_000 }, // the next try a minute away
    });
    await postCharge(sandbox, newKey());
    await eventually(() => expect(sandbox.deliveries()).toHaveLength(1));
    const closing = Date.now();
    await sandbox.close();
    expect(Date.now() - closing).toBeLessThan(5_000);
    expect(endpoint.received).toHaveLength(1);
  });

  it('retries when the endpoint cannot be reached', async () => {
    const gone = await startReceiver();
    await gone.close(); // a URL where nothing listens any more
    const sandbox = await sandboxFor(gone, { attempts: 2, baseDelayMs: 10 });
    await postCharge(sandbox, newKey());

    await eventually(() => expect(sandbox.deliveries()).toHaveLength(2));
    expect(sandbox.deliveries()).toEqual([
      expect.objectContaining({ attempt: 1, ok: false, status: null, error: expect.stringMatching(/fetch failed/) }),
      expect.objectContaining({ attempt: 2, ok: false, status: null }),
    ]);
  });

  describe('POST /__webhooks/resend', () => {
    it('delivers an event again five times at once, each with a valid signature', async () => {
      // The endpoint holds every resend until five are in flight together: sequential resends would never finish.
      let inFlight = 0;
      let openGate!: () => void;
      const allFiveArrived = new Promise<void>((resolve) => {
        openGate = resolve;
      });
      const endpoint = await receiver(async (_webhook, index) => {
        if (index === 0) return 200; // the original delivery
        inFlight += 1;
        if (inFlight === 5) openGate();
        await allFiveArrived;
        return 200;
      });
      const sandbox = await sandboxFor(endpoint);
      await postCharge(sandbox, newKey());
      await eventually(() => expect(sandbox.deliveries()).toHaveLength(1));
      const [event] = sandbox.events();

      const resend = await postJson<{ event_id: string; deliveries: Delivery[] }>(`${sandbox.url}/__webhooks/resend`, {
        event_id: event?.id,
        times: 5,
      });

      expect(resend.status).toBe(200);
      expect(resend.body.event_id).toBe(event?.id);
      expect(resend.body.deliveries.map((delivery) => delivery.status)).toEqual([200, 200, 200, 200, 200]);
      expect(endpoint.received).toHaveLength(6);
      expect(endpoint.received.map(verify)).toEqual(Array(6).fill({ ok: true, timestamp: nowSeconds }));
      expect(new Set(endpoint.received.map((webhook) => webhook.rawBody)).size).toBe(1);
    });

    it('reports what the endpoint answered to each resend, without retrying', async () => {
      const endpoint = await receiver((_webhook, index) => (index === 0 ? 200 : 500));
      const sandbox = await sandboxFor(endpoint);
      await postCharge(sandbox, newKey());
      const [event] = sandbox.events();

      const resend = await postJson<{ deliveries: Delivery[] }>(`${sandbox.url}/__webhooks/resend`, {
        event_id: event?.id,
        times: 2,
      });
      expect(resend.body.deliveries).toEqual([
        { event_id: event?.id, attempt: 1, ok: false, status: 500 },
        { event_id: event?.id, attempt: 1, ok: false, status: 500 },
      ]);
    });

    it('answers 404 for an unknown event', async () => {
      const sandbox = await sandboxFor(await receiver());
      const response = await postJson(`${sandbox.url}/__webhooks/resend`, { event_id: 'evt_missing', times: 1 });
      expect(response).toMatchObject({ status: 404, body: { error: { code: 'resource_missing' } } });
    });

    it.each([
      ['no event id', { times: 2 }],
      ['zero times', { event_id: 'evt_1', times: 0 }],
      ['too many times', { event_id: 'evt_1', times: 1000 }],
    ])('refuses %s with a 400', async (_case, body) => {
      const sandbox = await sandboxFor(await receiver());
      expect((await postJson(`${sandbox.url}/__webhooks/resend`, body)).status).toBe(400);
    });

    it('answers 400 when no webhook URL is configured', async () => {
      const sandbox = await startSandbox();
      servers.push(sandbox);
      await postCharge(sandbox, newKey());
      const [event] = sandbox.events();
      const response = await postJson(`${sandbox.url}/__webhooks/resend`, { event_id: event?.id });
      expect(response).toMatchObject({ status: 400, body: { error: { type: 'invalid_request_error' } } });
    });
  });

  it('refuses to start with a webhook URL but no secret', async () => {
    await expect(startSandbox({ webhookUrl: 'http://127.0.0.1:1/webhooks' })).rejects.toThrow(/webhookSecret/);
  });
});

describe('the webhook retry schedule', () => {
  const retry: WebhookRetry = { attempts: 10, baseDelayMs: 100, maxDelayMs: 1_000 };

  it('doubles each wait up to its cap, jittered between half the wait and all of it', () => {
    const least = [1, 2, 3, 4, 5, 6].map((n) => retryDelayMs(retry, n, () => 0));
    const most = [1, 2, 3, 4, 5, 6].map((n) => retryDelayMs(retry, n, () => 0.999_999));
    expect(least).toEqual([50, 100, 200, 400, 500, 500]);
    expect(most.map(Math.round)).toEqual([100, 200, 400, 800, 1000, 1000]);
  });

  it('retries for minutes by default, as real processors do for days: not for under a second', () => {
    const { attempts, baseDelayMs, maxDelayMs, windowMs } = DEFAULT_WEBHOOK_RETRY;
    const leastSpan = Array.from({ length: attempts - 1 }, (_, i) =>
      retryDelayMs({ attempts, baseDelayMs, maxDelayMs }, i + 1, () => 0),
    ).reduce((sum, wait) => sum + wait, 0);
    expect(leastSpan).toBeGreaterThan(2 * 60_000);
    expect(windowMs).toBeGreaterThanOrEqual(leastSpan);
    expect(windowMs).toBeLessThanOrEqual(15 * 60_000);
  });

  it('takes its window from the environment, and refuses what is not a number of seconds', () => {
    expect(webhookRetryFromEnv({})).toEqual(DEFAULT_WEBHOOK_RETRY);
    expect(webhookRetryFromEnv({ [WEBHOOK_RETRY_WINDOW_ENV]: '30' })).toEqual({
      ...DEFAULT_WEBHOOK_RETRY,
      windowMs: 30_000,
    });
    expect(webhookRetryFromEnv({ [WEBHOOK_RETRY_WINDOW_ENV]: '0' }).windowMs).toBe(0);
    expect(() => webhookRetryFromEnv({ [WEBHOOK_RETRY_WINDOW_ENV]: 'ten minutes' })).toThrow(WEBHOOK_RETRY_WINDOW_ENV);
    expect(() => webhookRetryFromEnv({ [WEBHOOK_RETRY_WINDOW_ENV]: '-5' })).toThrow(WEBHOOK_RETRY_WINDOW_ENV);
  });
});
