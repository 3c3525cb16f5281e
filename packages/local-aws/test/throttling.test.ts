import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetQueueAttributesCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { startApiGateway } from '../src/api-gateway';
import { type BundledFunction, startBundledFunction } from '../src/bundled-function';
import { startHttpApi } from '../src/http-api';
import { invokeLambda } from '../src/lambda-invoke';
import { startSchedule } from '../src/schedule';
import { createQueueWithDlq, type LocalSqs, startLocalSqs } from '../src/sqs';
import { startSqsPoller } from '../src/sqs-poller';
import { eventually, rawRequest, recordingLog } from './support';

/**
 * A function at its concurrency limit, as each of its triggers meets it, with real execution environments: Lambda
 * refuses the invocation (`TooManyRequestsException`) and the function never runs. A REST API answers its
 * INTEGRATION_FAILURE gateway response (500, or what the API maps it to), an HTTP API its 500; the SQS event source
 * and the schedule send the event again, backing off, as Lambda's do, so nothing waits out a visibility timeout.
 */
jest.setTimeout(30_000);

/**
 * Writes a marker file when it starts (so a test knows its one environment is busy), sleeps when asked, and records
 * every invocation it ran in the file named by SEEN: the receive counts of an SQS batch, or the event's source.
 */
const HANDLER = `
import { appendFileSync, writeFileSync } from 'node:fs';
export const handler = async (event) => {
  const asked = event.body ? JSON.parse(event.body) : event;
  if (asked.marker) writeFileSync(asked.marker, '');
  if (asked.sleepMs) await new Promise((resolve) => setTimeout(resolve, asked.sleepMs));
  const seen = event.Records
    ? { receiveCounts: event.Records.map((record) => record.attributes.ApproximateReceiveCount) }
    : { source: event.source ?? 'api' };
  appendFileSync(process.env.SEEN, JSON.stringify(seen) + '\\n');
  return { statusCode: 200, body: 'ran' };
};
`;

let directory: string;
let fn: BundledFunction;
let sqs: LocalSqs;
const log = recordingLog();

beforeAll(async () => {
  directory = mkdtempSync(join(tmpdir(), 'keystone-throttling-'));
  const code = join(directory, 'code');
  writeFileSync(join(directory, 'seen'), '');
  mkdirSync(code);
  writeFileSync(join(code, 'index.mjs'), HANDLER);
  fn = startBundledFunction({
    functionName: 'worker',
    codeDirectory: code,
    handler: 'index.handler',
    runtime: 'nodejs22.x',
    memoryMb: 128,
    environment: { SEEN: join(directory, 'seen') },
    concurrency: 1,
    output: () => undefined,
  });
  await fn.warm();
  sqs = await startLocalSqs();
});

afterAll(async () => {
  await fn.stop();
  await sqs.close();
  rmSync(directory, { recursive: true, force: true });
});

/** What the function ran, in order. */
function seen(): Record<string, unknown>[] {
  return readFileSync(join(directory, 'seen'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** Occupies the function's one environment for `sleepMs`; resolves once the invocation runs, with its end. */
async function occupy(sleepMs: number): Promise<{ readonly ended: Promise<unknown> }> {
  const marker = join(directory, `busy-${Date.now()}-${Math.random()}`);
  const { outcome } = invokeLambda(fn.handler, { marker, sleepMs }, { functionName: 'worker', timeoutMs: 10_000 });
  await eventually(() => (existsSync(marker) ? true : undefined));
  return { ended: outcome };
}

describe('a throttled invocation', () => {
  it("is a REST API's INTEGRATION_FAILURE: 500 Internal server error, unless the API maps it", async () => {
    const route = { method: 'POST' as const, resource: '/work', handler: fn.handler, timeoutMs: 5_000 };
    const plain = await startApiGateway({ routes: [route], log });
    const mapped = await startApiGateway({
      routes: [route],
      log,
      integrationFailureResponse: {
        statusCode: 429,
        headers: { 'Content-Type': 'application/problem+json', 'Retry-After': '1' },
        template: '{"title":"Too Many Requests","requestId":"$context.requestId"}',
      },
    });
    try {
      const before = seen().length;
      const busy = await occupy(2_000);
      const answer = await rawRequest(`${plain.url}/work`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: '{}',
      });
      expect(answer.status).toBe(500);
      expect(JSON.parse(answer.body.toString())).toEqual({ message: 'Internal server error' });
      const throttled = await rawRequest(`${mapped.url}/work`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: '{}',
      });
      expect(throttled.status).toBe(429);
      expect(throttled.headers['retry-after']).toBe('1');
      expect(throttled.headers['content-type']).toBe('application/problem+json');
      expect(JSON.parse(throttled.body.toString())).toEqual({
        title: 'Too Many Requests',
        requestId: throttled.headers['x-amzn-requestid'],
      });
      await busy.ended;
      // Neither request ran the function; once it is free, the next one does.
      expect(seen().length - before).toBe(1);
      expect(
        (
          await rawRequest(`${mapped.url}/work`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: '{}',
          })
        ).status,
      ).toBe(200);
    } finally {
      await plain.close();
      await mapped.close();
    }
  });

  it("is an HTTP API's 500 Internal Server Error", async () => {
    const api = await startHttpApi({
      routes: [{ method: 'POST', path: '/work', handler: fn.handler, timeoutMs: 5_000 }],
      log,
    });
    try {
      const busy = await occupy(2_000);
      const answer = await rawRequest(`${api.url}/work`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: '{}',
      });
      expect(answer.status).toBe(500);
      expect(JSON.parse(answer.body.toString())).toEqual({ message: 'Internal Server Error' });
      await busy.ended;
      expect(
        (
          await rawRequest(`${api.url}/work`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: '{}',
          })
        ).status,
      ).toBe(200);
    } finally {
      await api.close();
    }
  });

  it('is sent again by the SQS event source, backing off, within the visibility timeout', async () => {
    const queue = await createQueueWithDlq(sqs.client, `throttled-${Date.now()}`, {
      visibilityTimeoutSeconds: 20,
      maxReceiveCount: 3,
    });
    const before = seen().length;
    const busy = await occupy(2_000);
    const poller = await startSqsPoller({
      client: sqs.client,
      queueUrl: queue.queueUrl,
      queueArn: queue.queueArn,
      handler: fn.handler,
      functionName: 'worker',
      functionTimeoutMs: 5_000,
      log,
    });
    try {
      const startedAt = Date.now();
      await sqs.client.send(new SendMessageCommand({ QueueUrl: queue.queueUrl, MessageBody: 'settle' }));
      await busy.ended;
      await eventually(async () => {
        const { Attributes } = await sqs.client.send(
          new GetQueueAttributesCommand({
            QueueUrl: queue.queueUrl,
            AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
          }),
        );
        const left =
          Number(Attributes?.ApproximateNumberOfMessages) + Number(Attributes?.ApproximateNumberOfMessagesNotVisible);
        return left === 0 ? true : undefined;
      });
      // Delivered once (its first receive), long before its visibility timeout would have sent it back.
      expect(seen().slice(before)).toEqual([{ source: 'api' }, { receiveCounts: ['1'] }]);
      expect(Date.now() - startedAt).toBeLessThan(10_000);
      expect(log.errors.some(({ message }) => message.startsWith('throttled'))).toBe(true);
    } finally {
      await poller.stop();
    }
  });

  it('is sent again by the schedule, backing off, as Lambda retries an asynchronous event', async () => {
    const schedule = startSchedule({
      handler: fn.handler,
      functionName: 'worker',
      periodMs: 60_000,
      timeoutMs: 5_000,
      log,
    });
    try {
      const before = seen().length;
      const busy = await occupy(1_500);
      await schedule.runNow();
      await busy.ended;
      expect(seen().slice(before)).toEqual([{ source: 'api' }, { source: 'aws.events' }]);
      expect(
        log.errors.some(
          ({ message }) =>
            message === 'worker throttled: Rate Exceeded. worker: 1 invocations in flight, its concurrency limit',
        ),
      ).toBe(true);
    } finally {
      await schedule.stop();
    }
  });
});
