import type { Email } from '../../lib/sandbox/emails';
import { type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import { getJson, injectFault, newKey, postCharge, postJson } from './client';

const welcome = { to: 'ada@example.com', subject: 'Receipt', text: 'Thanks for your order.', metadata: { order: 7 } };

describe('sandbox mailer', () => {
  let sandbox: Sandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ clock: () => 1_700_000_000_000 });
  });
  afterEach(() => fetch(`${sandbox.url}/__faults`, { method: 'DELETE' }));
  afterAll(() => sandbox.close());

  const send = (key: string, body: unknown = welcome) =>
    postJson<Email>(`${sandbox.url}/v1/emails`, body, { 'Idempotency-Key': key });
  const emailsUnder = async (key: string) =>
    (await getJson<Email[]>(`${sandbox.url}/emails`)).filter((email) => email.idempotency_key === key);

  it('sends an email and lists it under its key', async () => {
    const key = newKey();
    const response = await send(key);

    expect(response).toEqual({
      status: 201,
      replayed: false,
      body: {
        id: expect.stringMatching(/^em_\w+$/),
        object: 'email',
        ...welcome,
        status: 'sent',
        idempotency_key: key,
        created: 1_700_000_000,
      },
    });
    expect(await emailsUnder(key)).toEqual([response.body]);
  });

  it('replays the same email for the same key and body', async () => {
    const key = newKey();
    const first = await send(key);
    const second = await send(key);

    expect(second).toEqual({ ...first, replayed: true });
    expect(await emailsUnder(key)).toHaveLength(1);
  });

  it('refuses the same key with a different body', async () => {
    const key = newKey();
    await send(key);
    const conflicting = await send(key, { ...welcome, subject: 'Receipt (again)' });

    expect(conflicting).toMatchObject({ status: 400, body: { error: { type: 'idempotency_error' } } });
    expect(await emailsUnder(key)).toHaveLength(1);
  });

  it('keeps its keys apart from the charge keys', async () => {
    const key = newKey();
    expect((await postCharge(sandbox, key)).status).toBe(201);
    expect(await send(key)).toMatchObject({ status: 201, replayed: false });
  });

  it.each([
    ['no Idempotency-Key', {}, welcome],
    ['no recipient', { 'Idempotency-Key': 'no-to' }, { ...welcome, to: undefined }],
    ['a recipient that is not an address', { 'Idempotency-Key': 'bad-to' }, { ...welcome, to: 'ada' }],
    ['an empty subject', { 'Idempotency-Key': 'bad-subject' }, { ...welcome, subject: '' }],
  ])('refuses a request with %s with a 400', async (_case, headers, body) => {
    const response = await postJson(`${sandbox.url}/v1/emails`, body, headers);
    expect(response).toMatchObject({ status: 400, body: { error: { type: 'invalid_request_error' } } });
  });

  it('takes faults aimed at emails: a 503 sends nothing and a retry sends once', async () => {
    const key = newKey();
    await injectFault(sandbox, { mode: 'error_503', target: 'emails' });

    expect((await send(key)).status).toBe(503);
    expect(await emailsUnder(key)).toEqual([]);
    expect(await send(key)).toMatchObject({ status: 201, replayed: false });
    expect(await emailsUnder(key)).toHaveLength(1);
  });

  it('is down for a while in an outage: every send 503 and nothing sent, then the same key sends once', async () => {
    const key = newKey();
    await injectFault(sandbox, { mode: 'outage', ms: 400, target: 'emails' });

    const during = [await send(key), await send(key), await send(newKey())];
    expect(during.map((response) => response.status)).toEqual([503, 503, 503]);
    expect(await emailsUnder(key)).toEqual([]);

    await new Promise((resolve) => setTimeout(resolve, 450));
    expect(await send(key)).toMatchObject({ status: 201, replayed: false });
    expect(await emailsUnder(key)).toHaveLength(1);
  });

  it('ignores faults aimed at charges', async () => {
    await injectFault(sandbox, { mode: 'error_503' });
    expect((await send(newKey())).status).toBe(201);
  });
});
