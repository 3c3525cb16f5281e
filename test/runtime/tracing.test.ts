import { execFile } from 'node:child_process';
import { createSocket, type Socket } from 'node:dgram';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { tracing } from '../../lib/runtime/tracing';
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

beforeAll(async () => {
  received = [];
  daemon = createSocket('udp4');
  // Each datagram: a JSON header line, then one (sub)segment document.
  daemon.on('message', (message) => received.push(JSON.parse(message.toString('utf8').split('\n')[1] ?? '{}')));
  await new Promise<void>((resolve) => daemon.bind(0, '127.0.0.1', resolve));
  downstream = createServer((_request, response) => response.end('{}'));
  await new Promise<void>((resolve) => downstream.listen(0, '127.0.0.1', resolve));
  downstreamUrl = `http://127.0.0.1:${(downstream.address() as AddressInfo).port}/v1/receipts`;
});

afterAll(async () => {
  daemon?.close();
  await new Promise((resolve) => downstream?.close(resolve));
});

/** Runs a TypeScript file with tsx in a fresh Node process with this environment added. */
function runNode(file: string, env: Record<string, string>): Promise<{ stdout: string; stderr: string }> {
  const tsx = join(__dirname, '..', '..', 'node_modules', 'tsx', 'dist', 'cli.mjs');
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      [tsx, '--conditions=keystone-source', file],
      { env: { ...process.env, ...env }, timeout: 30_000 },
      (error, stdout, stderr) =>
        error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve({ stdout, stderr }),
    ),
  );
}

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
      if (enabled === undefined) delete process.env.POWERTOOLS_TRACE_ENABLED;
      else process.env.POWERTOOLS_TRACE_ENABLED = enabled;
    }
  });

  it('traces the handler, its DynamoDB calls and its HTTP calls as subsegments', async () => {
    // In a process of its own (see the fixture): the X-Ray SDK's patches of http must not reach other test files.
    const { stdout } = await runNode(join(__dirname, 'fixtures', 'traced-invocation.ts'), {
      ...LAMBDA_ENV,
      AWS_XRAY_DAEMON_ADDRESS: `127.0.0.1:${daemon.address().port}`,
      DYNAMODB_ENDPOINT: process.env.DYNAMODB_ENDPOINT!,
      TABLE: db.paymentsTable,
      DOWNSTREAM_URL: downstreamUrl,
    });
    expect(stdout.trim()).toBe('settled');

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
