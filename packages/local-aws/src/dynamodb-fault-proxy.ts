import { randomUUID } from 'node:crypto';
import {
  Agent,
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  request,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** The `X-Amz-Target` of each DynamoDB operation a rule can match. */
export const DynamoDbTarget = {
  GetItem: 'DynamoDB_20120810.GetItem',
  PutItem: 'DynamoDB_20120810.PutItem',
  UpdateItem: 'DynamoDB_20120810.UpdateItem',
  TransactWriteItems: 'DynamoDB_20120810.TransactWriteItems',
} as const;
export type DynamoDbTarget = (typeof DynamoDbTarget)[keyof typeof DynamoDbTarget];

/**
 * Errors DynamoDB answers with, as it answers them: the status and the message a real table sends. The AWS SDK
 * retries the first three (a 500 as transient, the other two as throttling, with a longer backoff). It does not
 * retry a TransactionConflictException: real DynamoDB refuses a single-item write to an item that a transaction is
 * writing (DynamoDB Local serializes transactions and never does), and the caller decides what to do about it.
 */
export const DynamoDbError = {
  InternalServerError: { status: 500, message: 'Internal server error' },
  ThrottlingException: { status: 400, message: 'Rate of requests exceeds the allowed throughput.' },
  ProvisionedThroughputExceededException: {
    status: 400,
    message:
      'The level of configured provisioned throughput for the table was exceeded. ' +
      'Consider increasing your provisioning level with the UpdateTable API.',
  },
  TransactionConflictException: { status: 400, message: 'Transaction is ongoing for the item' },
} as const;
export type DynamoDbErrorName = keyof typeof DynamoDbError;

/**
 * What a rule does to a request it matches.
 * - `drop-reply`: forward it, let DynamoDB apply it, then destroy the client's socket without answering: the
 *   caller cannot tell whether the write happened.
 * - `delay-reply`: forward it, and hold DynamoDB's reply for `ms` before passing it on.
 * - `hold-reply`: forward it, and hold DynamoDB's reply until `until` settles (resolved or rejected): for a reply
 *   that must come back after something the test can observe (a takeover's commit), however slow the machine is.
 *   A caller that goes away meanwhile (its connection closed: a killed process) gets nothing, and its request's
 *   outcome turns `dropped` as soon as the proxy sees it go.
 * - `error`: answer with a DynamoDB error without forwarding: nothing is applied.
 */
export type Fault =
  | { readonly mode: 'drop-reply' }
  | { readonly mode: 'delay-reply'; readonly ms: number }
  | { readonly mode: 'hold-reply'; readonly until: Promise<unknown> }
  | { readonly mode: 'error'; readonly error: DynamoDbErrorName };

/** A DynamoDB request body as sent on the wire: JSON with AttributeValue maps (`{"S": "..."}`). */
export type DynamoDbRequestBody = Readonly<Record<string, unknown>>;

/** Which requests a rule applies to: an operation, narrowed by a predicate on the request body. */
export interface RequestMatcher {
  /** How records and failure messages name the requests it matches: `claim of acct|op|key`. */
  readonly name: string;
  readonly target: DynamoDbTarget;
  readonly when?: (body: DynamoDbRequestBody) => boolean;
}

export interface FaultRule {
  readonly match: RequestMatcher;
  readonly fault: Fault;
  /** How many matching requests draw the fault; later ones pass through untouched. */
  readonly count: number;
}

/** An armed rule, to check afterwards that its fault really fired (a fault that never fired proves nothing). */
export interface ArmedRule {
  readonly rule: FaultRule;
  /** Matching requests that drew the fault so far. */
  fired(): number;
}

/** One request the proxy saw, and what became of it. */
export interface ProxiedRequest {
  readonly target: string;
  readonly body: DynamoDbRequestBody;
  /** The SDK's attempt number (its `amz-sdk-request: attempt=N; max=M` header): retries show as 2, 3, ... */
  readonly attempt: number | undefined;
  /** The armed rule whose fault this request drew, by its matcher's name. */
  readonly rule: string | undefined;
  readonly fault: Fault['mode'] | undefined;
  /** The status the client was answered with, `dropped`, or `pending` while the proxy still holds it. */
  readonly outcome: number | 'dropped' | 'pending';
}

export interface DynamoDbFaultProxy {
  /** `http://127.0.0.1:<port>`: give it to the code under test as its DynamoDB endpoint. */
  readonly url: string;
  arm(rule: FaultRule): ArmedRule;
  /** Every request seen so far, in arrival order; with a matcher, only those it matches. */
  requests(match?: RequestMatcher): ProxiedRequest[];
  /** Stops listening, drops open connections and held replies. */
  close(): Promise<void>;
}

interface PendingRule {
  readonly rule: FaultRule;
  fired: number;
}

/** Hop-by-hop headers belong to one connection and are not passed on. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'proxy-connection', 'upgrade']);

/**
 * An HTTP proxy on 127.0.0.1 in front of a DynamoDB (Local) endpoint, forwarding every request, except those an armed
 * rule matches: those lose their reply, get it late, or get an error instead. This is how an end-to-end test makes
 * the faults real DynamoDB produces at random (a reply lost after the write applied, a throttle, a 500) happen on
 * demand, under the real SDK with its real retries, against the real database.
 *
 * @example
 * const proxy = await startDynamoDbFaultProxy(process.env.DYNAMODB_ENDPOINT!);
 * const anyPut = { name: 'any put', target: DynamoDbTarget.PutItem };
 * const lost = proxy.arm({ match: anyPut, fault: { mode: 'drop-reply' }, count: 1 });
 * // ... run the code under test with DYNAMODB_ENDPOINT = proxy.url ...
 * expect(lost.fired()).toBe(1);
 */
export async function startDynamoDbFaultProxy(upstream: string): Promise<DynamoDbFaultProxy> {
  const upstreamUrl = new URL(upstream);
  const agent = new Agent({ keepAlive: true });
  const lifetime = new AbortController();
  const rules: PendingRule[] = [];
  const seen: { -readonly [K in keyof ProxiedRequest]: ProxiedRequest[K] }[] = [];
  const sockets = new Set<Socket>();

  const server = createServer((req, res) => {
    void handle(req, res).catch(() => req.socket.destroy());
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readAll(req);
    const target = String(req.headers['x-amz-target'] ?? '');
    const body = parseBody(raw);
    const drawn = draw(target, body);
    const record: (typeof seen)[number] = {
      target,
      body,
      attempt: sdkAttempt(req.headers),
      rule: drawn?.rule.match.name,
      fault: drawn?.rule.fault.mode,
      outcome: 'pending',
    };
    seen.push(record);
    const fault = drawn?.rule.fault;

    if (fault?.mode === 'error') {
      record.outcome = answerWithError(res, fault.error);
      return;
    }
    let reply: Awaited<ReturnType<typeof forward>>;
    try {
      reply = await forward(req, raw);
    } catch {
      // DynamoDB unreachable, or the proxy closing: the caller sees its connection drop, as it would without us.
      record.outcome = 'dropped';
      req.socket.destroy();
      return;
    }
    if (fault?.mode === 'drop-reply') {
      // DynamoDB has applied it; the caller never hears so.
      record.outcome = 'dropped';
      req.socket.destroy();
      return;
    }
    if (fault?.mode === 'delay-reply') await sleep(fault.ms, lifetime.signal);
    if (fault?.mode === 'hold-reply') await heldUntil(fault.until, res, lifetime.signal);
    if (res.destroyed || lifetime.signal.aborted) {
      record.outcome = 'dropped';
      return;
    }
    res.writeHead(reply.status, reply.headers);
    res.end(reply.body);
    record.outcome = reply.status;
  }

  /** The first armed rule with faults left that matches this request uses one up. */
  function draw(target: string, body: DynamoDbRequestBody): PendingRule | undefined {
    const pending = rules.find(
      (candidate) => candidate.fired < candidate.rule.count && matches(candidate.rule.match, { target, body }),
    );
    if (pending) pending.fired += 1;
    return pending;
  }

  function forward(req: IncomingMessage, raw: Buffer) {
    return new Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const outgoing = request(
        {
          protocol: upstreamUrl.protocol,
          hostname: upstreamUrl.hostname,
          port: upstreamUrl.port,
          method: req.method,
          path: req.url,
          headers: passOn(req.headers),
          agent,
          signal: lifetime.signal,
        },
        (reply) => {
          readAll(reply).then(
            (body) => resolve({ status: reply.statusCode ?? 502, headers: passOn(reply.headers), body }),
            reject,
          );
        },
      );
      outgoing.on('error', reject);
      outgoing.end(raw);
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    arm(rule) {
      if (!(rule.count >= 1)) throw new Error(`a fault rule needs a count of at least 1, got ${rule.count}`);
      const pending: PendingRule = { rule, fired: 0 };
      rules.push(pending);
      return { rule, fired: () => pending.fired };
    },
    requests(match) {
      const all = seen.map((entry) => ({ ...entry }));
      return match ? all.filter((entry) => matches(match, entry)) : all;
    },
    async close() {
      lifetime.abort();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      agent.destroy();
      await closed;
    },
  };
}

/** A gate for a `hold-reply` fault: arm the fault with `until`, and call `letGo` to pass the held reply on. */
export function replyGate(): { readonly until: Promise<void>; readonly letGo: () => void } {
  let letGo = () => {};
  const until = new Promise<void>((resolve) => {
    letGo = resolve;
  });
  return { until, letGo };
}

/** Whether a request (as the proxy saw it) is one the matcher names. */
export function matches(match: RequestMatcher, request: Pick<ProxiedRequest, 'target' | 'body'>): boolean {
  return match.target === request.target && (match.when?.(request.body) ?? true);
}

/** Answers as DynamoDB does: its JSON error shape, which the SDK turns into the named exception. */
function answerWithError(res: ServerResponse, name: DynamoDbErrorName): number {
  const { status, message } = DynamoDbError[name];
  const body = JSON.stringify({ __type: `com.amazonaws.dynamodb.v20120810#${name}`, message });
  res.writeHead(status, {
    'Content-Type': 'application/x-amz-json-1.0',
    'Content-Length': Buffer.byteLength(body),
    'x-amzn-RequestId': randomUUID(),
  });
  res.end(body);
  return status;
}

function passOn(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !HOP_BY_HOP.has(name)));
}

function sdkAttempt(headers: IncomingHttpHeaders): number | undefined {
  const match = /attempt=(\d+)/.exec(String(headers['amz-sdk-request'] ?? ''));
  return match ? Number(match[1]) : undefined;
}

function parseBody(raw: Buffer): DynamoDbRequestBody {
  try {
    const parsed: unknown = JSON.parse(raw.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null ? (parsed as DynamoDbRequestBody) : {};
  } catch {
    return {};
  }
}

function readAll(stream: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

/**
 * Resolves once `until` settles either way, once the caller's connection closes (its reply can't be delivered any
 * more: the request is `dropped` now, not when `until` settles), or once the proxy closes.
 */
function heldUntil(until: Promise<unknown>, res: ServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted || res.destroyed) return resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
    res.once('close', () => resolve());
    until.then(
      () => resolve(),
      () => resolve(),
    );
  });
}
