import type { Fetch } from './attempt-log.js';
import { checkIdempotencyKey, newIdempotencyKey } from './key.js';
import { type IdempotentMethod, type Operation, PreparedOperation } from './operation.js';
import { idempotencyProblemOf } from './problem-types.js';
import type { Problem } from './result.js';
import { checkRetryPolicy, DEFAULT_RETRY_POLICY, type RetryPolicy } from './retry-policy.js';

export interface RetrySafeClientOptions {
  /**
   * What a relative `url` is joined to, path included: `https://api.example.com/prod` and `orders` (or `/orders`)
   * make `https://api.example.com/prod/orders`, as a deployed API Gateway stage needs.
   */
  readonly baseUrl?: string | URL;
  /** Sent with every operation, e.g. `Authorization`. An operation's own headers win over these. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Overrides of {@link DEFAULT_RETRY_POLICY}. */
  readonly retry?: Partial<RetryPolicy>;
  /**
   * Which 409 answers mean "the original request with this key is still running": those are retried (after their
   * `Retry-After`), every other 409 is final. Default: the problem type `request-in-flight` of this library's HTTP
   * adapter (`IdempotencyProblemType.requestInFlight`), under whatever base the server answers with (its slug, see
   * `idempotencyProblemOf`). For a server that answers every duplicate in flight with a bare 409, as the IETF
   * Idempotency-Key draft does, pass `() => true`.
   */
  readonly isInFlight?: (problem: Problem) => boolean;
  /** Default: the global `fetch`. */
  readonly fetch?: Fetch;
  /** Epoch milliseconds, for the attempt history and `Retry-After` dates. Default `Date.now`. */
  readonly now?: () => number;
  /** A value in [0, 1) for the backoff's jitter. Default `Math.random`. */
  readonly random?: () => number;
}

/** One operation, as `prepare` takes it. */
export interface OperationRequest<TResult, TBody> {
  /** Absolute, or relative to the client's `baseUrl`. */
  readonly url: string | URL;
  /** Default `POST`. */
  readonly method?: IdempotentMethod;
  /** Sent as JSON (`Content-Type: application/json` unless `headers` say otherwise); none when undefined. */
  readonly body?: TBody;
  /** This operation's own headers, over the client's. */
  readonly headers?: Readonly<Record<string, string>>;
  /** The caller's own key (an order id it already stored, say); default: a new random one. */
  readonly idempotencyKey?: string;
  /**
   * What a 2xx body must be: returns it (typed) or throws. It gets the parsed JSON, or `undefined` for a 204 or 205.
   * A schema's parse fits (`Order.parse`). Default: any JSON, as `unknown`. An empty body, a body that isn't JSON
   * and a body this refuses all end the operation as `invalid-response`, never as an exception.
   */
  readonly parse?: (body: unknown) => TResult;
}

interface ClientConfig {
  readonly baseUrl: URL | undefined;
  readonly headers: Readonly<Record<string, string>>;
  readonly isInFlight: (problem: Problem) => boolean;
  readonly policy: RetryPolicy;
  readonly fetch: Fetch;
  readonly now: () => number;
  readonly random: () => number;
}

const IDEMPOTENCY_KEY = 'Idempotency-Key';

/**
 * A client for any endpoint that takes an `Idempotency-Key`, keeping the client's half of the promise: one key per
 * logical operation, known before the first send, reused on every retry; retries only what is safe and useful to
 * retry (network errors, attempt timeouts, 409 in flight, 429, 502, 503, 504), waiting as long as the server asks
 * (`Retry-After`) or else backing off with full jitter; bounded by attempts and a deadline, and cancellable. Runs
 * unchanged in browsers and in Node >= 20 (fetch-based, no Node built-in).
 *
 * The retry loop itself is ky's (a small, widely used fetch wrapper); this client decides what is retried and how
 * long to wait (`Retry-After` included: see `retryLoop`), and turns what happened into a typed result.
 *
 * @example
 * const client = new RetrySafeClient({ baseUrl: 'https://api.example.com/prod', headers: { Authorization } });
 * const order = client.prepare({ url: 'orders', body: { sku: 'book-42' }, parse: Order.parse });
 * localStorage.setItem('order', JSON.stringify({ key: order.idempotencyKey, body: order.body })); // first
 * const result = await order.send();
 * if (result.kind === 'success') show(result.body);
 */
export class RetrySafeClient {
  readonly #config: ClientConfig;

  constructor(options: RetrySafeClientOptions = {}) {
    const headers = { ...options.headers };
    checkHeaders(headers);
    this.#config = {
      baseUrl: options.baseUrl === undefined ? undefined : parseUrl(options.baseUrl, 'baseUrl'),
      headers,
      isInFlight: options.isInFlight ?? ((problem) => idempotencyProblemOf(problem.type) === 'requestInFlight'),
      policy: checkRetryPolicy({ ...DEFAULT_RETRY_POLICY, ...options.retry }),
      fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
      now: options.now ?? Date.now,
      random: options.random ?? Math.random,
    };
  }

  /**
   * One operation, not yet sent, with its key fixed. Everything a send needs is checked and taken here (the key,
   * the URL, the headers, the body's JSON), so a mistake throws now, in the caller's code, rather than on every
   * attempt, and a body changed after this call cannot make a retry differ from the first send. Persist
   * `idempotencyKey` (and the body) before calling `send()`: after a reload or a crash, `prepare` with the stored key
   * continues the same operation.
   */
  prepare<TResult = unknown, TBody = undefined>(request: OperationRequest<TResult, TBody>): Operation<TResult, TBody> {
    const config = this.#config;
    const key =
      request.idempotencyKey === undefined ? newIdempotencyKey() : checkIdempotencyKey(request.idempotencyKey);
    const own = { ...request.headers };
    checkHeaders(own);
    const json = request.body === undefined ? undefined : JSON.stringify(request.body);
    const headers = new Headers({ Accept: 'application/json, application/problem+json' });
    if (json !== undefined) headers.set('Content-Type', 'application/json');
    for (const [name, value] of [...Object.entries(config.headers), ...Object.entries(own)]) headers.set(name, value);
    headers.set(IDEMPOTENCY_KEY, key);
    const settings = {
      method: request.method ?? 'POST',
      url: resolveUrl(request.url, config.baseUrl),
      headers,
      json,
      parse: request.parse ?? ((body: unknown) => body as TResult),
      isInFlight: config.isInFlight,
      policy: config.policy,
      fetch: config.fetch,
      now: config.now,
      random: config.random,
    };
    return new PreparedOperation(settings, key, request.body as TBody);
  }
}

/** Refuses headers `fetch` would refuse, and an `Idempotency-Key`: the key belongs to the operation. */
function checkHeaders(headers: Readonly<Record<string, string>>): void {
  try {
    new Headers(headers);
  } catch (error) {
    throw new TypeError(`not valid HTTP headers: ${JSON.stringify(headers)}`, { cause: error });
  }
  if (Object.keys(headers).some((name) => name.toLowerCase() === IDEMPOTENCY_KEY.toLowerCase())) {
    throw new TypeError(`the ${IDEMPOTENCY_KEY} header is the operation's: pass idempotencyKey to prepare() instead`);
  }
}

/** An absolute URL as it is; a relative one joined to the base URL's path, leading slash or not. */
function resolveUrl(url: string | URL, base: URL | undefined): string {
  if (url instanceof URL || /^[a-z][a-z\d+.-]*:/i.test(url)) return parseUrl(url, 'url').toString();
  if (base === undefined) throw new TypeError(`a relative url (${JSON.stringify(url)}) needs the client's baseUrl`);
  const directory = new URL(base);
  if (!directory.pathname.endsWith('/')) directory.pathname += '/';
  return parseUrl(url.replace(/^\/+/, ''), 'url', directory).toString();
}

/** `new URL`, with an error that says which option was wrong. */
function parseUrl(url: string | URL, name: string, base?: URL): URL {
  try {
    return new URL(url, base);
  } catch (error) {
    throw new TypeError(`${name} is not a URL: ${JSON.stringify(String(url))}`, { cause: error });
  }
}
