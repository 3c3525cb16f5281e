import { createSocket, type Socket } from 'node:dgram';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import middy from '@middy/core';
import { tracing } from '../../lib/runtime/tracing';
import { lambdaContext } from '../support/api-event';
import { testDatabase } from '../support/dynamodb';

/**
 * Tracing runs for real here: the tracer's subsegments go over UDP to a socket standing in for the X-Ray daemon, and
 * the calls they record go to DynamoDB Local and to a local HTTP server.
 */
const db = testDatabase();

interface Subsegment {
  readonly id: string;
  readonly parent_id?: string;
  readonly trace_id?: string;
  readonly name: string;
  readonly namespace?: string;
  readonly aws?: { readonly operation?: string; readonly table_name?: string };
  readonly http?: { readonly request?: { readonly url?: string; readonly method?: string } };
  readonly subsegments?: Subsegment[];
  readonly annotations?: Record<string, unknown>;
}

const LAMBDA_ENV = {
  AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
  LAMBDA_TASK_ROOT: '/var/task',
  _HANDLER: 'index.handler',
  _X_AMZN_TRACE_ID: 'Root=1-6650a1b2-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1',
  POWERTOOLS_TRACE_ENABLED: 'true',
};

let daemon: Socket;
let received: Subsegment[];
let downstream: Server;
let downstreamUrl: string;
const saved = new Map<string, string | undefined>();

beforeAll(async () => {
  received = [];
  daemon = createSocket('udp4');
  // Each datagram: a JSON header line, then one (sub)segment document.
  daemon.on('message', (message) => received.push(JSON.parse(message.toString('utf8').split('\n')[1] ?? '{}')));
  await new Promise<void>((resolve) => daemon.bind(0, '127.0.0.1', resolve));
  downstream = createServer((_request, response) => response.end('{}'));
  await new Promise<void>((resolve) => downstream.listen(0, '127.0.0.1', resolve));
  downstreamUrl = `http://127.0.0.1:${(downstream.address() as AddressInfo).port}/v1/receipts`;
  const env = { ...LAMBDA_ENV, AWS_XRAY_DAEMON_ADDRESS: `127.0.0.1:${daemon.address().port}` };
  for (const [name, value] of Object.entries(env)) {
    saved.set(name, process.env[name]);
    process.env[name] = value;
  }
});

afterAll(async () => {
  for (const [name, value] of saved) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  daemon?.close();
  await new Promise((resolve) => downstream?.close(resolve));
});

async function until<T>(find: () => T | undefined, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = find();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`not received in ${timeoutMs} ms: ${JSON.stringify(received)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Every subsegment received, nested ones included. */
function allSubsegments(): Subsegment[] {
  const flatten = (segment: Subsegment): Subsegment[] => [segment, ...(segment.subsegments ?? []).flatMap(flatten)];
  return received.flatMap(flatten);
}

describe('tracing', () => {
  it('adds nothing where the environment leaves tracing off', () => {
    const enabled = process.env.POWERTOOLS_TRACE_ENABLED;
    process.env.POWERTOOLS_TRACE_ENABLED = 'false';
    try {
      expect(tracing('payments', [db.client])).toEqual([]);
    } finally {
      process.env.POWERTOOLS_TRACE_ENABLED = enabled;
    }
  });

  it('traces the handler, its DynamoDB calls and its HTTP calls as subsegments', async () => {
    const handler = middy(async () => {
      await db.client.send(
        new GetItemCommand({ TableName: db.paymentsTable, Key: { pk: { S: 'ACCOUNT#a' }, sk: { S: 'PAYMENT#p' } } }),
      );
      await (await fetch(downstreamUrl, { method: 'POST', body: '{}' })).text();
      return 'settled';
    }).use(tracing('settlement', [db.client]));

    expect(await handler({}, lambdaContext())).toBe('settled');

    const invocation = await until(() => allSubsegments().find((segment) => segment.name === '## index.handler'));
    expect(invocation.annotations).toMatchObject({ Service: 'settlement' });
    const dynamodb = await until(() => allSubsegments().find((segment) => segment.name === 'DynamoDB'));
    expect(dynamodb).toMatchObject({
      namespace: 'aws',
      aws: { operation: 'GetItem', table_name: db.paymentsTable },
    });
    // The fetch to the mailer or the processor (X-Ray records the URL without its port).
    const http = await until(() => allSubsegments().find((segment) => segment.namespace === 'remote'));
    expect(http).toMatchObject({
      name: '127.0.0.1',
      http: { request: { method: 'POST', url: 'http://127.0.0.1/v1/receipts' }, response: { status: 200 } },
    });
    // Both inside the invocation's subsegment, under the trace Lambda started.
    expect([dynamodb.parent_id, http.parent_id]).toEqual([invocation.id, invocation.id]);
    expect(invocation.trace_id).toBe('1-6650a1b2-0123456789abcdef01234567');
  });
});
