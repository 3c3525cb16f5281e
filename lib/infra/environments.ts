import { RemovalPolicy } from 'aws-cdk-lib';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { DEFAULT_TTL_SECONDS } from 'keystone-idempotency/engine';
import {
  IdempotencyMetric,
  type IdempotencyMetricName,
  RecoveryMetric,
  type RecoveryMetricName,
} from '../metrics/definitions';
import { STORE_KINDS, type StoreKind } from '../payments/store-kind';
import { DEFAULT_CALL_TIMEOUTS_MS, DEFAULT_WAREHOUSE_PROCESSING_WINDOW_MS } from '../timing/timing';

/** The deployable environments. Each one is its own stack (`Keystone-<name>`), its own tables and its own API. */
export const ENVIRONMENT_NAMES = ['dev', 'staging', 'prod'] as const;
export type EnvironmentName = (typeof ENVIRONMENT_NAMES)[number];

export type FirewallAction = 'count' | 'block';

/**
 * The API Gateway in front of the functions (the functions serve either unchanged):
 * - `rest`, the default: a REST API with the TOKEN authorizer, request validation before a function runs, WAF (the
 *   per-key and per-IP rate rules), and API Gateway's own errors shaped as problem+json;
 * - `http`: an HTTP API (payload 2.0) with a Lambda REQUEST authorizer (simple responses, cached per key). Cheaper per
 *   request and faster, but with no WAF (`firewall` does not apply), no request validation (the functions validate
 *   every body themselves, as they do behind the REST API) and API Gateway's own errors in its own JSON.
 */
export const API_KINDS = ['rest', 'http'] as const;
export type ApiKind = (typeof API_KINDS)[number];

/** Where the service keeps its data: one definition, the runtime's and the stack's (lib/payments/store-kind.ts). */
export { STORE_KINDS, type StoreKind } from '../payments/store-kind';

/**
 * The Aurora PostgreSQL cluster, its proxy and its network, where the environment runs on `store: 'postgres'`. Ignored
 * on DynamoDB.
 */
export interface DatabaseConfig {
  /**
   * Aurora Serverless v2 capacity per instance, in ACUs (about 2 GiB of memory each, with CPU to match), in half
   * steps. The minimum is billed around the clock, idle or not; 0 (auto-pause) is not used: the proxy holds
   * connections to the cluster, and the completer connects every minute anyway.
   */
  readonly minCapacityAcu: number;
  readonly maxCapacityAcu: number;
  /**
   * Reader instances besides the writer, in other availability zones: a failover target that is already warm (about
   * 30 s of writes refused instead of the minutes a new writer takes). Each one bills the same capacity as the writer.
   */
  readonly readers: number;
  /** Automated backups (point-in-time restore) kept for this many days (1 to 35). */
  readonly backupRetentionDays: number;
  /**
   * NAT gateways for the functions' egress (the processor, the mailer and the AWS APIs are on the internet): one in
   * dev and staging, one per availability zone in prod, so losing a zone loses no other zone's egress.
   */
  readonly natGateways: number;
  readonly proxy: {
    /**
     * How long the proxy keeps a client connection that sends nothing. Lambda keeps an idle execution environment
     * frozen for minutes to hours and may end it without closing its sockets: the proxy holds such a connection (and,
     * while it is pinned, a database connection) until this runs out. `timing.ts` checks it exceeds every database
     * function's timeout, so no invocation loses its connection mid-way.
     */
    readonly idleClientTimeoutSeconds: number;
    /**
     * How long a request waits for a database connection when the pool is at its limit, before the proxy fails it.
     * `timing.ts` checks it is shorter than every database function's timeout: the function then answers (a 5xx the
     * client retries with the same key) instead of being killed while it waits.
     */
    readonly borrowTimeoutSeconds: number;
    /**
     * The share of the cluster's `max_connections` the proxy may open. The rest is kept for the migration function
     * and an operator's session, which connect to the cluster directly.
     */
    readonly maxConnectionsPercent: number;
  };
}

/** An idempotency or recovery outcome metric to alarm on, by its name in `lib/metrics/definitions.ts`. */
export interface OutcomeAlarm {
  readonly metric: IdempotencyMetricName | RecoveryMetricName;
  readonly threshold: number;
  /** What it means when it fires: the alarm's description, for whoever is paged. */
  readonly meaning: string;
}

export type AlarmSubscription =
  | { readonly protocol: 'email'; readonly address: string }
  /** A pager's or chat tool's HTTPS endpoint (SNS posts the alarm as JSON). */
  | { readonly protocol: 'https'; readonly url: string };

/**
 * Everything that differs between environments, in one place. Durations are plain seconds so that the timing
 * invariants (see `timing.ts`) can be checked, and tested, without synthesizing anything.
 */
export interface EnvironmentConfig {
  readonly name: EnvironmentName;
  /** CloudFormation stack name; it includes the environment so that all three can live in one account. */
  readonly stackName: string;
  /**
   * Where to deploy. Unset: the CLI's current account and region (environment-agnostic synth, which also keeps
   * `cdk synth` offline). Pin them once each environment has its own account.
   */
  readonly account?: string;
  readonly region?: string;
  /** Stateful resources (tables, queues, the webhook secret, log groups): RETAIN outside dev, so data outlives the stack. */
  readonly removalPolicy: RemovalPolicy;
  /** DynamoDB deletion protection: a table delete, from CloudFormation or the console, fails until it is turned off. */
  readonly deletionProtection: boolean;
  /** CloudFormation termination protection on the whole stack. */
  readonly terminationProtection: boolean;
  readonly logRetention: RetentionDays;
  /** Powertools `LOG_LEVEL`. */
  readonly logLevel: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
  /** X-Ray active tracing on every function and on the API stage (a REST API's: HTTP APIs have none). */
  readonly tracing: boolean;
  /** The API in front of the functions ({@link ApiKind}); `-c api=http` overrides it for one synth or deploy. */
  readonly api: ApiKind;
  /** Where the data lives ({@link StoreKind}); `-c store=postgres` overrides it for one synth or deploy. */
  readonly store: StoreKind;
  readonly database: DatabaseConfig;
  readonly idempotency: {
    /** How long a claim (IN_PROGRESS record) is owned before a retry may take it over. */
    readonly leaseSeconds: number;
    /** How long a record, and so a replay, lives after it was written (and after it completed). */
    readonly ttlSeconds: number;
    /**
     * How often the completer looks for payments whose client never came back (an EventBridge rate, so whole
     * minutes). Shorter than the lease, so recovery comes within twice the lease of an operation's last attempt.
     */
    readonly recoveryPeriodMinutes: number;
  };
  readonly timeouts: {
    /** Functions behind API Gateway routes. */
    readonly apiFunctionSeconds: number;
    /**
     * Route functions that need longer than `apiFunctionSeconds`, by construct id: their outside calls, one after
     * another, don't fit in it (the timing check adds them up, lib/timing).
     */
    readonly longerRouteFunctionSeconds: Readonly<Record<string, number>>;
    /** How long API Gateway waits for an API function before answering 504. */
    readonly apiIntegrationSeconds: number;
    readonly authorizerSeconds: number;
    readonly queueConsumerSeconds: number;
    /** The scheduled completer (each operation it recovers takes one processor lookup and one commit). */
    readonly completerSeconds: number;
    /** The HTTP timeout of each call to the processor (`PROCESSOR_TIMEOUT_MS`). */
    readonly processorMilliseconds: number;
    /** The HTTP timeout of each call to the warehouse (`WAREHOUSE_TIMEOUT_MS`). */
    readonly warehouseMilliseconds: number;
    /** The HTTP timeout of each call to the mailer (`MAILER_TIMEOUT_MS`). */
    readonly mailerMilliseconds: number;
    /**
     * How long after its client gave up a booking may still land at the warehouse (`WAREHOUSE_PROCESSING_WINDOW_MS`):
     * until its timeout plus this has passed, an order's lookup that finds no booking proves nothing.
     */
    readonly warehouseProcessingWindowMilliseconds: number;
  };
  /** Stage-wide API Gateway throttling (token bucket: steady requests per second, and burst). */
  readonly throttling: { readonly rateLimit: number; readonly burstLimit: number };
  /**
   * WAF rate-based rules, in WAF's unit: requests in any 5-minute window (200 requests per second = 60,000). A REST
   * API's only: WAF can't be attached to an HTTP API.
   * `count` only counts (the rule's CloudWatch metric shows who would have been blocked): how a new rule starts in an
   * environment with real traffic, before it is switched to `block`.
   */
  readonly firewall: {
    /**
     * Per API key (the Authorization header), on the token-authorized routes: one merchant's share of the stage, so
     * a runaway client is blocked before the stage throttle slows every merchant down. A merchant is one key however
     * many machines or egress IPs it sends from.
     */
    readonly perApiKey: { readonly limitPer5Minutes: number; readonly action: FirewallAction };
    /**
     * Per client IP, across keys (and requests with no key at all, which the per-key rule cannot count). It must
     * allow at least the stage's own rate: one egress IP may carry a merchant's whole traffic.
     */
    readonly perIp: { readonly limitPer5Minutes: number; readonly action: FirewallAction };
  };
  readonly authorizer: {
    /**
     * How long API Gateway caches the TOKEN authorizer's answer per Authorization header: a revoked key keeps working
     * for up to this long. 0 turns the cache off (every request invokes the authorizer). At most 3600.
     */
    readonly cacheSeconds: number;
  };
  readonly concurrency: {
    /**
     * The settlement event source's maximum concurrency (2 to 1000): a backlog drains at this many concurrent
     * consumers and can never take the concurrency the API's functions need.
     */
    readonly settlementMaxConcurrency: number;
    /**
     * Reserved concurrency per function id: guaranteed to it, and its ceiling. Reserving needs an account limit of at
     * least the sum plus 100 (new accounts may start at 10), so only environments in sized accounts reserve.
     */
    readonly reserved: Readonly<Record<string, number>>;
  };
  /**
   * API Gateway writes execution logs through one role per account and region, an account-wide setting: a choice per
   * account, not per stack. 'account-stack': the app builds `Keystone-apigateway-account` (one per account and region,
   * shared by every environment there) and this environment's stack depends on it. 'existing': the account's role is
   * managed elsewhere (another team's stack, the console); deploying fails while the account has none. Only a REST
   * API writes execution logs: an environment on an HTTP API needs no such role.
   */
  readonly apiGatewayLoggingRole: 'account-stack' | 'existing';
  readonly alarms: {
    /** Function errors, summed over one period, at or above which the alarm fires. */
    readonly functionErrors: number;
    readonly functionThrottles: number;
    /**
     * API 5xx responses as a percentage of requests over one period, counted once at least `minRequests` arrived (one
     * failed request out of two is no outage). The payments function's 502/503/504 for a processor outage count too.
     */
    readonly api5xx: { readonly percent: number; readonly minRequests: number };
    /**
     * The settlement queue's oldest message, in seconds. A settlement that keeps failing reaches the DLQ only after
     * every receive's visibility timeout (15 minutes); this fires while it is still being retried. `timing.ts` checks
     * that it lies between one visibility timeout (one retry is normal) and the DLQ.
     */
    readonly settlementAgeSeconds: number;
    /**
     * How long the oldest payment operation left due by a completer run may have waited, in seconds, before the alarm
     * fires: the completer is falling behind (a backlog larger than its runs get through) or not running at all (no
     * run published it). A run that ran out of time leaves the rest to the next one, a cycle later: `timing.ts`
     * checks that one such hand-over does not page.
     */
    readonly recoveryBacklogAgeSeconds: number;
    /**
     * Idempotency outcomes that mean trouble, each alarmed on for every function that emits it (per `service`
     * dimension): the sum over one period at or above which the alarm fires.
     */
    readonly idempotency: readonly OutcomeAlarm[];
    readonly periodMinutes: number;
    /**
     * Who hears about an alarm (and its recovery): subscriptions to the environment's alarm topic. The topic exists
     * in every environment; its ARN is a stack output, for subscriptions managed elsewhere (a pager's integration).
     */
    readonly subscriptions: readonly AlarmSubscription[];
    /** On `store: 'postgres'` only. */
    readonly database: {
      /**
       * The proxy's database connections as a percentage of the most it may open: past it, requests start waiting
       * for a connection (and fail after the borrow timeout). Raise the cluster's maximum capacity (more
       * `max_connections`), or look for pinned connections on the dashboard.
       */
      readonly proxyConnectionsPercent: number;
      /**
       * The cluster's connections as a percentage of its `max_connections` (estimated from what the proxy may open and
       * its `maxConnectionsPercent`): near 100, new connections are refused, the proxy's included.
       */
      readonly clusterConnectionsPercent: number;
      /**
       * Deadlocks per second (the cluster's `Deadlocks`, its maximum over one period) at or above which the alarm
       * fires; 0.01 is any deadlock at all (one in a minute reads about 0.017). The service's transactions lock one key row and then their own rows, always in that order, so they
       * should never deadlock; the store retries one that does, so a deadlock costs latency, not a payment.
       */
      readonly deadlocks: number;
    };
  };
  /**
   * Downstream services. The example.com values are placeholders: set the real URLs before the first deploy (the
   * functions fail their first request, not their deployment, while these are wrong).
   */
  readonly processorUrl: string;
  readonly mailerUrl: string;
  /** The warehouse's API (shipments for orders): it takes no idempotency key. */
  readonly warehouseUrl: string;
  readonly tags: Readonly<Record<string, string>>;
}

const shared = {
  logLevel: 'INFO',
  // A 90 s lease: longer than every function's timeout, and longer than the completer's 1-minute period (the
  // shortest EventBridge rate), so a payment whose client never came back is recovered within twice the lease.
  idempotency: { leaseSeconds: 90, ttlSeconds: DEFAULT_TTL_SECONDS, recoveryPeriodMinutes: 1 },
  timeouts: {
    apiFunctionSeconds: 12,
    // An order charges (8 s), books (5 s), confirms (5 s) and may refund (8 s), one after another: 26 s, and its writes.
    longerRouteFunctionSeconds: { OrdersCreate: 28 },
    apiIntegrationSeconds: 10,
    authorizerSeconds: 5,
    queueConsumerSeconds: 30,
    completerSeconds: 60,
    processorMilliseconds: DEFAULT_CALL_TIMEOUTS_MS.processor,
    warehouseMilliseconds: DEFAULT_CALL_TIMEOUTS_MS.warehouse,
    mailerMilliseconds: DEFAULT_CALL_TIMEOUTS_MS.mailer,
    warehouseProcessingWindowMilliseconds: DEFAULT_WAREHOUSE_PROCESSING_WINDOW_MS,
  },
  apiGatewayLoggingRole: 'account-stack',
  api: 'rest',
  store: 'dynamodb',
} as const satisfies Partial<EnvironmentConfig>;

/** The proxy's settings, the same everywhere (see DatabaseConfig.proxy). */
const proxy = {
  // 10 minutes: a dead environment's connection (and a pinned database connection) is released 3 times sooner than
  // the proxy's default 30 minutes; a warm environment idle for that long reconnects once (TLS and an IAM token).
  idleClientTimeoutSeconds: 600,
  // Under the authorizer's 5 s, the shortest timeout of a function that connects.
  borrowTimeoutSeconds: 3,
  maxConnectionsPercent: 90,
} as const;

/** The database alarms' thresholds, the same everywhere. */
const databaseAlarms = { proxyConnectionsPercent: 80, clusterConnectionsPercent: 90, deadlocks: 0.01 } as const;

/** The idempotency and recovery outcomes that page, with the thresholds that differ per environment. */
function outcomeAlarms(takeovers: number, completedWithoutClient = 3): OutcomeAlarm[] {
  return [
    {
      metric: IdempotencyMetric.leaseLost,
      threshold: 1,
      meaning:
        'An owner finished after its lease ran out and lost its commit to a retry that took the key over: a lease ' +
        'shorter than the work, or a stalled function. Check the function timeouts against the lease.',
    },
    {
      metric: IdempotencyMetric.takeover,
      threshold: takeovers,
      meaning:
        'Retries took over keys whose owner died mid-request (crash or timeout): look for the errors or timeouts ' +
        'of the function around the same time.',
    },
    {
      metric: RecoveryMetric.completedWithoutClient,
      threshold: completedWithoutClient,
      meaning:
        'Payments were charged but their client never got the answer (lost replies, timeouts, crashes): recovery ' +
        'recorded them from the charge. The money is safe; look at why clients are losing answers (processor ' +
        'latency against the timeouts, function errors) and whether customers were shown an error.',
    },
    {
      metric: RecoveryMetric.abandoned,
      threshold: 10,
      meaning:
        'Payment attempts were given up: no charge was made under their key and their client never came back ' +
        '(a processor outage, or clients that do not retry). Nothing was charged; check processor availability ' +
        "and the clients' retry behaviour.",
    },
    {
      metric: RecoveryMetric.abandonedWithProgress,
      threshold: 1,
      meaning:
        'An order (a multi-step operation) was given up with steps done and none undone: a step was refused for good ' +
        'after others had run (stock reserved, a card charged, a shipment booked) and no compensation was declared. ' +
        "Recovery's log names the key and its steps: finish or undo them by hand.",
    },
    {
      metric: RecoveryMetric.compensationStuck,
      threshold: 1,
      meaning:
        'An order refused after its charge could not be undone: its compensation (the refund, giving the stock back) ' +
        'has failed five times or more since the refusal, and recovery keeps trying, backed off up to an hour. ' +
        "Recovery's log names the key and the error: see why the processor refuses or fails the refund.",
    },
  ];
}

function tagsFor(name: EnvironmentName): Record<string, string> {
  return { Project: 'keystone', Service: 'payments', Environment: name };
}

/** dev, staging and prod, side by side: a difference between them should be visible in this one object. */
export const environments: Readonly<Record<EnvironmentName, EnvironmentConfig>> = {
  dev: {
    ...shared,
    name: 'dev',
    stackName: 'Keystone-dev',
    removalPolicy: RemovalPolicy.DESTROY,
    deletionProtection: false,
    terminationProtection: false,
    logRetention: RetentionDays.ONE_WEEK,
    logLevel: 'DEBUG',
    tracing: false,
    throttling: { rateLimit: 10, burstLimit: 20 },
    firewall: {
      perApiKey: { limitPer5Minutes: 1_500, action: 'block' },
      perIp: { limitPer5Minutes: 3_000, action: 'block' },
    },
    // No cache: a key revoked in dev stops working at once.
    authorizer: { cacheSeconds: 0 },
    concurrency: { settlementMaxConcurrency: 2, reserved: {} },
    database: {
      minCapacityAcu: 0.5,
      maxCapacityAcu: 2,
      readers: 0,
      backupRetentionDays: 1,
      natGateways: 1,
      proxy,
    },
    alarms: {
      functionErrors: 5,
      functionThrottles: 5,
      api5xx: { percent: 10, minRequests: 10 },
      settlementAgeSeconds: 600,
      recoveryBacklogAgeSeconds: 300,
      idempotency: outcomeAlarms(5),
      periodMinutes: 5,
      subscriptions: [],
      database: databaseAlarms,
    },
    processorUrl: 'https://processor.dev.example.com',
    mailerUrl: 'https://mailer.dev.example.com',
    warehouseUrl: 'https://warehouse.dev.example.com',
    tags: tagsFor('dev'),
  },
  staging: {
    ...shared,
    name: 'staging',
    stackName: 'Keystone-staging',
    removalPolicy: RemovalPolicy.RETAIN,
    deletionProtection: true,
    terminationProtection: false,
    logRetention: RetentionDays.ONE_MONTH,
    tracing: true,
    throttling: { rateLimit: 50, burstLimit: 100 },
    // Both rules block here, as they will in prod: staging is where blocking is tried first.
    firewall: {
      perApiKey: { limitPer5Minutes: 7_500, action: 'block' },
      perIp: { limitPer5Minutes: 15_000, action: 'block' },
    },
    authorizer: { cacheSeconds: 60 },
    concurrency: { settlementMaxConcurrency: 2, reserved: {} },
    database: {
      minCapacityAcu: 0.5,
      maxCapacityAcu: 4,
      readers: 0,
      backupRetentionDays: 7,
      natGateways: 1,
      proxy,
    },
    alarms: {
      functionErrors: 3,
      functionThrottles: 1,
      api5xx: { percent: 5, minRequests: 20 },
      settlementAgeSeconds: 360,
      recoveryBacklogAgeSeconds: 300,
      idempotency: outcomeAlarms(3),
      periodMinutes: 5,
      // Set before the first deploy: who hears about staging's alarms.
      subscriptions: [],
      database: databaseAlarms,
    },
    processorUrl: 'https://processor.staging.example.com',
    mailerUrl: 'https://mailer.staging.example.com',
    warehouseUrl: 'https://warehouse.staging.example.com',
    tags: tagsFor('staging'),
  },
  prod: {
    ...shared,
    name: 'prod',
    stackName: 'Keystone-prod',
    removalPolicy: RemovalPolicy.RETAIN,
    deletionProtection: true,
    terminationProtection: true,
    // Payment logs are evidence in disputes; a year covers the usual chargeback windows.
    logRetention: RetentionDays.ONE_YEAR,
    tracing: true,
    throttling: { rateLimit: 200, burstLimit: 400 },
    firewall: {
      // New: counted, not blocked, until its metric shows that no merchant's normal traffic reaches 100 rps.
      perApiKey: { limitPer5Minutes: 30_000, action: 'count' },
      // The stage's 200 rps: an IP is blocked only where API Gateway would throttle it anyway.
      perIp: { limitPer5Minutes: 60_000, action: 'block' },
    },
    authorizer: { cacheSeconds: 60 },
    concurrency: {
      settlementMaxConcurrency: 10,
      // Every request needs the authorizer; the payments function gets the stage's burst (400 rps for about a
      // second each), and no more: a slow processor then throttles it instead of starving everything else.
      reserved: { Authorizer: 50, PaymentsCreate: 400 },
    },
    database: {
      // One ACU (2 GiB) at rest keeps the buffer cache warm between bursts; 16 (32 GiB) is room for the stage's
      // 400-request burst, each a few short transactions.
      minCapacityAcu: 1,
      maxCapacityAcu: 16,
      // A warm reader in another zone to fail over to.
      readers: 1,
      backupRetentionDays: 35,
      natGateways: 2,
      proxy,
    },
    alarms: {
      functionErrors: 1,
      functionThrottles: 1,
      api5xx: { percent: 1, minRequests: 50 },
      settlementAgeSeconds: 360,
      recoveryBacklogAgeSeconds: 300,
      idempotency: outcomeAlarms(3),
      periodMinutes: 5,
      // Set before the first deploy: the on-call address or the pager's HTTPS endpoint (an e-mail subscription waits
      // for its confirmation). Left empty rather than a placeholder: example.com would confirm nothing and page no one.
      subscriptions: [],
      database: databaseAlarms,
    },
    processorUrl: 'https://processor.example.com',
    mailerUrl: 'https://mailer.example.com',
    warehouseUrl: 'https://warehouse.example.com',
    tags: tagsFor('prod'),
  },
};

/**
 * The environments to synthesize for the CDK context value `env` (`cdk synth -c env=staging`): that one, or all of
 * them when it is absent, so that `cdk synth` with no arguments checks every environment.
 *
 * @example
 * for (const config of selectEnvironments(app.node.tryGetContext('env'))) new PaymentsStack(app, config.stackName, { config });
 */
export function selectEnvironments(requested: unknown): EnvironmentConfig[] {
  if (requested === undefined || requested === null || requested === '') {
    return ENVIRONMENT_NAMES.map((name) => environments[name]);
  }
  if (typeof requested === 'string' && isEnvironmentName(requested)) return [environments[requested]];
  throw new Error(
    `Unknown environment ${JSON.stringify(requested)} in context 'env': expected one of ${ENVIRONMENT_NAMES.join(', ')}`,
  );
}

function isEnvironmentName(value: string): value is EnvironmentName {
  return (ENVIRONMENT_NAMES as readonly string[]).includes(value);
}

/**
 * The environments with the API kind the CDK context value `api` asks for (`cdk synth -c env=dev -c api=http`), or
 * as configured when it is absent.
 *
 * @example
 * const configs = withApiKind(selectEnvironments(app.node.tryGetContext('env')), app.node.tryGetContext('api'));
 */
export function withApiKind(configs: readonly EnvironmentConfig[], requested: unknown): EnvironmentConfig[] {
  if (requested === undefined || requested === null || requested === '') return [...configs];
  if (typeof requested === 'string' && (API_KINDS as readonly string[]).includes(requested)) {
    return configs.map((config) => ({ ...config, api: requested as ApiKind }));
  }
  throw new Error(`Unknown API ${JSON.stringify(requested)} in context 'api': expected one of ${API_KINDS.join(', ')}`);
}

/**
 * The environments with the store the CDK context value `store` asks for (`cdk synth -c env=dev -c store=postgres`), or
 * as configured when it is absent.
 *
 * @example
 * const configs = withStore(selectEnvironments(app.node.tryGetContext('env')), app.node.tryGetContext('store'));
 */
export function withStore(configs: readonly EnvironmentConfig[], requested: unknown): EnvironmentConfig[] {
  if (requested === undefined || requested === null || requested === '') return [...configs];
  if (typeof requested === 'string' && (STORE_KINDS as readonly string[]).includes(requested)) {
    return configs.map((config) => ({ ...config, store: requested as StoreKind }));
  }
  throw new Error(
    `Unknown store ${JSON.stringify(requested)} in context 'store': expected one of ${STORE_KINDS.join(', ')}`,
  );
}
