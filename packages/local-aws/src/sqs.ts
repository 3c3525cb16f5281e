import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { join } from 'node:path';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { LOCAL_REGION } from './lambda-context';

/** A running fauxqs SQS emulator on loopback, and a client for it. */
export interface LocalSqs {
  /** `http://127.0.0.1:<port>`. */
  readonly endpoint: string;
  readonly port: number;
  /** Configured for `endpoint`, so requests go to 127.0.0.1 whatever host the queue URLs name. */
  readonly client: SQSClient;
  /** Stops the emulator process (its queues and messages are gone) and destroys the client. */
  close(): Promise<void>;
}

export interface LocalSqsOptions {
  /** 0 (the default) picks a free port. */
  port?: number;
  /** The client's region, which fauxqs puts in queue ARNs. Default `local`. */
  region?: string;
  /** How long to wait for the emulator to listen. Default 10 s. */
  readyTimeoutMs?: number;
}

/**
 * Starts fauxqs bound to 127.0.0.1, in a child Node process (see `fauxqs-process.mjs` for why).
 *
 * Queue URLs look like `http://sqs.local.localhost:<port>/000000000000/<name>`; the returned client has an explicit
 * endpoint, and with an explicit endpoint the SDK sends every request there rather than to the URL's host.
 *
 * @example
 * const sqs = await startLocalSqs();
 * const queue = await createQueueWithDlq(sqs.client, 'payments', { maxReceiveCount: 3, visibilityTimeoutSeconds: 30 });
 * await sqs.close();
 */
export async function startLocalSqs(options: LocalSqsOptions = {}): Promise<LocalSqs> {
  const child = spawn(process.execPath, [join(__dirname, 'fauxqs-process.mjs'), String(options.port ?? 0)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let port: number;
  try {
    port = await readyPort(child, options.readyTimeoutMs ?? 10_000);
  } catch (error) {
    await stopChild(child, exited);
    throw error;
  }
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new SQSClient({
    endpoint,
    region: options.region ?? LOCAL_REGION,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  return {
    endpoint,
    port,
    client,
    close: async () => {
      client.destroy();
      await stopChild(child, exited);
    },
  };
}

/** Waits for the `{"port":N}` line; fails with the child's stderr if it exits or stays silent. */
function readyPort(child: ChildProcessWithoutNullStreams, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    const fail = (reason: string) => {
      clearTimeout(timer);
      reject(new Error(`fauxqs did not start: ${reason}\n${stderr}`));
    };
    const timer = setTimeout(() => fail(`no answer within ${timeoutMs} ms`), timeoutMs);
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const line = stdout.split('\n')[0];
      if (line === undefined || !stdout.includes('\n')) return;
      clearTimeout(timer);
      const port = parseGreeting(line);
      if (port) resolve(port);
      else fail(`unexpected greeting ${line}`);
    });
    child.once('exit', (code) => fail(`exited with code ${code}`));
    child.once('error', (error) => fail(error.message));
  });
}

function parseGreeting(line: string): number | undefined {
  try {
    const port = Number((JSON.parse(line) as { port?: unknown }).port);
    return Number.isInteger(port) && port > 0 ? port : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Closing stdin is the shutdown signal (the same one a dying parent sends); SIGKILL if it takes over 3 s.
 */
async function stopChild(child: ChildProcessWithoutNullStreams, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.stdin.end();
  const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 3000).unref());
  if ((await Promise.race([exited, timeout])) === 'timeout') {
    child.kill('SIGKILL');
    await exited;
  }
}

/** A queue and its dead-letter queue, as the deployed stack wires them. */
export interface QueueWithDlq {
  readonly queueUrl: string;
  readonly queueArn: string;
  readonly dlqUrl: string;
  readonly dlqArn: string;
}

export interface QueueWithDlqOptions {
  /** Receives before SQS moves a message to the DLQ (the RedrivePolicy's `maxReceiveCount`). */
  maxReceiveCount: number;
  /** How long a received message stays invisible; should exceed the consumer function's timeout. */
  visibilityTimeoutSeconds: number;
}

/** 14 days, the longest SQS keeps a message: a dead letter should wait for a human as long as possible. */
const DLQ_RETENTION_SECONDS = 14 * 24 * 60 * 60;

/**
 * Creates `<name>` with a RedrivePolicy to `<name>-dlq` (a `.fifo` name gets a FIFO DLQ, `<base>-dlq.fifo`), the way
 * CDK's `deadLetterQueue: { queue, maxReceiveCount }` configures it.
 */
export async function createQueueWithDlq(
  client: SQSClient,
  name: string,
  options: QueueWithDlqOptions,
): Promise<QueueWithDlq> {
  const fifo = name.endsWith('.fifo');
  const dlqName = fifo ? `${name.slice(0, -'.fifo'.length)}-dlq.fifo` : `${name}-dlq`;
  const fifoAttributes: Record<string, string> = fifo ? { FifoQueue: 'true' } : {};
  const dlq = await createQueue(client, dlqName, {
    ...fifoAttributes,
    MessageRetentionPeriod: String(DLQ_RETENTION_SECONDS),
  });
  const queue = await createQueue(client, name, {
    ...fifoAttributes,
    VisibilityTimeout: String(options.visibilityTimeoutSeconds),
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlq.arn, maxReceiveCount: options.maxReceiveCount }),
  });
  return { queueUrl: queue.url, queueArn: queue.arn, dlqUrl: dlq.url, dlqArn: dlq.arn };
}

async function createQueue(
  client: SQSClient,
  name: string,
  attributes: Record<string, string>,
): Promise<{ url: string; arn: string }> {
  const created = await client.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
  const url = created.QueueUrl;
  if (!url) throw new Error(`CreateQueue returned no URL for ${name}`);
  const described = await client.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }));
  const arn = described.Attributes?.QueueArn;
  if (!arn) throw new Error(`GetQueueAttributes returned no ARN for ${name}`);
  return { url, arn };
}
