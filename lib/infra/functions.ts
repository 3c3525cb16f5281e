import {
  IdempotencyMetric,
  METRICS_NAMESPACE_ENV,
  MetricService,
  type MetricServiceName,
  RecoveryMetric,
  StepMetric,
} from '../metrics/definitions';
import { jsonObjectModel, type RequestModel } from '../openapi/request-models';
import { idempotencyTable, paymentsTable, type TableDefinition } from '../tables/definitions';
import type { SqlAccess } from '../tables/postgres-access';
import type { OutsideSystem } from '../timing/timing';

/**
 * The DynamoDB actions a function can be granted on one of the service's own tables. Scan, Query, BatchWriteItem
 * and DeleteItem are deliberately not here: nothing needs them on a table, and a grant that cannot be written
 * cannot be over-granted. (TransactWriteItems has no action of its own: IAM checks each PutItem, UpdateItem and
 * ConditionCheckItem inside the transaction.) Query is granted on an index only, through a table entry's `queries`.
 */
export type DynamoDbAction = 'GetItem' | 'PutItem' | 'UpdateItem' | 'ConditionCheckItem';

/**
 * One table a function touches. The idempotency table is granted by what the function does with the engine, through
 * the library's own construct (`IdempotencyTable.grantOperations`, `grantRecovery`), so the stack grants exactly
 * what the engine uses, as any team's stack would. Any other table: the actions on the table itself, and the
 * indexes it may Query (only those).
 */
export type TableAccess =
  | {
      readonly table: TableDefinition;
      readonly actions: readonly DynamoDbAction[];
      readonly queries?: readonly string[];
    }
  | { readonly table: typeof idempotencyTable; readonly engine: EngineAccess };

/**
 * What a function does with the engine's table: `operations` (claims, commits, releases: every adapter) or
 * `recovery` (finding due operations on the recovery index, taking them over, committing or abandoning them).
 */
export type EngineAccess = 'operations' | 'recovery';

/**
 * What the engine does to its keys table on PostgreSQL: read a record, claim a key (`INSERT ... ON CONFLICT DO UPDATE`,
 * which needs UPDATE as well), commit, release or take over (fenced `UPDATE`s). Never DELETE: only the completer's
 * purge of expired records deletes.
 */
export const KEYS_PRIVILEGES = ['SELECT', 'INSERT', 'UPDATE'] as const;

/** Route authorization: the API's TOKEN authorizer, or none, with the reason a reviewer (and cdk-nag) needs. */
export type RouteAuthorization = { readonly kind: 'token' } | { readonly kind: 'none'; readonly reason: string };

/** What invokes a function. The trigger also picks the function's timeout from the environment's `timeouts`. */
export type FunctionTrigger =
  | {
      readonly kind: 'route';
      readonly method: 'GET' | 'POST';
      /** A REST API resource path; `{name}` segments become required path parameters. */
      readonly path: string;
      readonly authorization: RouteAuthorization;
      /**
       * API Gateway rejects a body that breaks this model before the function runs. The model is converted from the
       * function's own zod schema (lib/openapi/request-models.ts), so the two cannot disagree on a field.
       */
      readonly bodyModel?: RequestModel;
      /** Why WAF's per-IP rate limit must leave this route alone (the stage throttle still applies). */
      readonly exemptFromIpRateLimit?: string;
    }
  | { readonly kind: 'authorizer' }
  | { readonly kind: 'settlement-queue'; readonly batchSize: number }
  /** An EventBridge schedule, every `recoveryPeriodMinutes` of the environment. */
  | { readonly kind: 'schedule' };

export type RouteTrigger = Extract<FunctionTrigger, { readonly kind: 'route' }>;

/** Environment variable names shared with the runtime code (which reads them; infra may not import it). */
export const FunctionEnv = {
  store: 'STORE',
  databaseHost: 'DATABASE_HOST',
  databasePort: 'DATABASE_PORT',
  databaseName: 'DATABASE_NAME',
  databaseUser: 'DATABASE_USER',
  databaseSchema: 'DATABASE_SCHEMA',
  /** 'false' behind RDS Proxy: a session that prepares a statement is pinned to its connection. */
  databasePreparedStatements: 'DATABASE_PREPARED_STATEMENTS',
  settlementQueueUrl: 'SETTLEMENT_QUEUE_URL',
  settlementDeadLetterUrl: 'SETTLEMENT_DLQ_URL',
  webhookSecretArn: 'PROCESSOR_WEBHOOK_SECRET_ARN',
  processorUrl: 'PROCESSOR_URL',
  processorTimeoutMs: 'PROCESSOR_TIMEOUT_MS',
  mailerUrl: 'MAILER_URL',
  mailerTimeoutMs: 'MAILER_TIMEOUT_MS',
  warehouseUrl: 'WAREHOUSE_URL',
  warehouseTimeoutMs: 'WAREHOUSE_TIMEOUT_MS',
  warehouseProcessingWindowMs: 'WAREHOUSE_PROCESSING_WINDOW_MS',
  leaseSeconds: 'IDEMPOTENCY_LEASE_SECONDS',
  ttlSeconds: 'IDEMPOTENCY_TTL_SECONDS',
  serviceName: 'POWERTOOLS_SERVICE_NAME',
  metricsNamespace: METRICS_NAMESPACE_ENV,
  logLevel: 'LOG_LEVEL',
} as const;

/** A downstream service whose URL and HTTP timeout (and, for the warehouse, its processing window) a function is given. */
export type Downstream = OutsideSystem;

/** One Lambda function: its code, how it is invoked, and exactly what it may touch. */
export interface FunctionSpec {
  /** Construct id; also names the function's log group and alarms. */
  readonly id: string;
  /** The handler file, relative to the repository root; it exports `handler`. */
  readonly entry: string;
  readonly description: string;
  readonly memoryMb: number;
  readonly trigger: FunctionTrigger;
  /** On DynamoDB: per table, the only actions allowed, on the table itself, and the only indexes it may Query. */
  readonly tables: readonly TableAccess[];
  /**
   * On PostgreSQL: per table, the only privileges the function's own database role has (lib/tables/postgres-access.ts).
   * The same data as `tables`, in SQL's terms: the payments table's API keys are a table of their own there.
   */
  readonly sql: readonly SqlAccess[];
  /** Sends to the settlement queue (SendMessage, and its URL in the environment). */
  readonly sendsSettlements?: boolean;
  /**
   * Consumes the settlement queue and acts on it beyond failing a record: sends records back sooner
   * (ChangeMessageVisibility, which the event source grants) and moves records that can never succeed to the DLQ
   * (SendMessage on the DLQ). Both URLs in the environment.
   */
  readonly movesSettlements?: boolean;
  /** Reads the processor's webhook signing secret (its ARN in the environment). */
  readonly readsWebhookSecret?: boolean;
  /**
   * The outside calls one invocation makes, one after another, at its longest (a system twice if it may call it
   * twice): the function is given each one's URL and timeout, and the timing check adds the timeouts up against the
   * function's own (lib/timing).
   */
  readonly calls?: readonly Downstream[];
  /**
   * The custom metrics the function publishes: its `service` dimension and the metric names. Alarms and the
   * dashboard are built from these, for every function that declares them.
   */
  readonly metrics?: FunctionMetrics;
}

export interface FunctionMetrics {
  readonly service: MetricServiceName;
  readonly names: readonly string[];
}

/** What a function behind the HTTP idempotency middleware publishes: every outcome counter. */
const httpIdempotencyMetrics = (service: MetricServiceName): FunctionMetrics => ({
  service,
  names: Object.values(IdempotencyMetric),
});

/**
 * What an order's run may call, one after another, at its longest: the processor (the charge), the warehouse (the
 * booking; a retry's lookup and booking take no longer while its timeout is under the processor's), the mailer (the
 * confirmation), and the processor again (a refund, when a step after the charge is refused).
 */
const ORDER_CALLS: readonly Downstream[] = ['processor', 'warehouse', 'mailer', 'processor'];

/**
 * The payments service's functions. Adding one is adding an entry here: the stack derives its role, log group,
 * alarms, environment and trigger (route, authorizer or queue) from it.
 */
export const serviceFunctions: readonly FunctionSpec[] = [
  {
    id: 'PaymentsCreate',
    entry: 'functions/payments-create.ts',
    description: 'POST /payments: claims the idempotency key, charges the processor, records the payment',
    memoryMb: 512,
    trigger: {
      kind: 'route',
      method: 'POST',
      path: '/payments',
      authorization: { kind: 'token' },
      bodyModel: jsonObjectModel,
    },
    tables: [
      { table: idempotencyTable, engine: 'operations' },
      // Write-only: the payment is written inside the commit transaction that the claim fences.
      { table: paymentsTable, actions: ['PutItem', 'UpdateItem', 'ConditionCheckItem'] },
    ],
    sql: [
      { table: 'idempotency_keys', privileges: KEYS_PRIVILEGES },
      // Write-only here too: the payment row is inserted inside the commit transaction.
      { table: 'payments', privileges: ['INSERT'] },
    ],
    calls: ['processor'],
    metrics: httpIdempotencyMetrics(MetricService.payments),
  },
  {
    id: 'PaymentsGet',
    entry: 'functions/payments-get.ts',
    description: "GET /payments/{id}: the caller's own payment",
    memoryMb: 256,
    trigger: { kind: 'route', method: 'GET', path: '/payments/{id}', authorization: { kind: 'token' } },
    tables: [{ table: paymentsTable, actions: ['GetItem'] }],
    sql: [{ table: 'payments', privileges: ['SELECT'] }],
  },
  {
    id: 'OrdersCreate',
    entry: 'functions/orders-create.ts',
    description: 'POST /orders: reserves stock, charges, books the shipment, sends the confirmation, step by step',
    memoryMb: 512,
    trigger: {
      kind: 'route',
      method: 'POST',
      path: '/orders',
      authorization: { kind: 'token' },
      bodyModel: jsonObjectModel,
    },
    tables: [
      { table: idempotencyTable, engine: 'operations' },
      // GetItem: the stock is read before it is reserved (the reservation's condition is the guarantee). The
      // order, its reservation and the stock are written inside the steps' checkpoint transactions.
      { table: paymentsTable, actions: ['GetItem', 'PutItem', 'UpdateItem', 'ConditionCheckItem'] },
    ],
    sql: [
      { table: 'idempotency_keys', privileges: KEYS_PRIVILEGES },
      { table: 'orders', privileges: ['INSERT', 'UPDATE'] },
      { table: 'reservations', privileges: ['INSERT', 'UPDATE'] },
      // SELECT: the stock is read before it is reserved, and UPDATE ... WHERE reads the row it changes.
      { table: 'inventory', privileges: ['SELECT', 'UPDATE'] },
    ],
    // The charge, the booking (or its lookup), the confirmation, and a refund when a step after the charge is refused.
    calls: ORDER_CALLS,
    metrics: httpIdempotencyMetrics(MetricService.orders),
  },
  {
    id: 'OrdersGet',
    entry: 'functions/orders-get.ts',
    description: "GET /orders/{id}: the caller's own order and each step's state",
    memoryMb: 256,
    trigger: { kind: 'route', method: 'GET', path: '/orders/{id}', authorization: { kind: 'token' } },
    tables: [{ table: paymentsTable, actions: ['GetItem'] }],
    sql: [{ table: 'orders', privileges: ['SELECT'] }],
  },
  {
    id: 'InventoryGet',
    entry: 'functions/inventory-get.ts',
    description: 'GET /inventory/{sku}: units available and reserved',
    memoryMb: 256,
    trigger: { kind: 'route', method: 'GET', path: '/inventory/{sku}', authorization: { kind: 'token' } },
    tables: [{ table: paymentsTable, actions: ['GetItem'] }],
    sql: [{ table: 'inventory', privileges: ['SELECT'] }],
  },
  {
    id: 'Authorizer',
    entry: 'functions/authorizer.ts',
    description: 'TOKEN authorizer: resolves a hashed API key to its account',
    memoryMb: 256,
    trigger: { kind: 'authorizer' },
    tables: [{ table: paymentsTable, actions: ['GetItem'] }],
    sql: [{ table: 'api_keys', privileges: ['SELECT'] }],
  },
  {
    id: 'WebhookReceiver',
    entry: 'functions/webhook-receiver.ts',
    description: 'POST /webhooks/processor: verifies the signature, dedupes the event, queues the settlement',
    memoryMb: 512,
    trigger: {
      kind: 'route',
      method: 'POST',
      path: '/webhooks/processor',
      authorization: {
        kind: 'none',
        reason:
          'The payment processor calls this route and cannot present our API keys; the function authenticates ' +
          'every request by its HMAC signature (key in Secrets Manager) before acting on it.',
      },
      exemptFromIpRateLimit:
        'The processor delivers webhooks in bursts from a few addresses (a backlog replays all at once); they are ' +
        'authenticated by signature and throttled by the stage.',
    },
    tables: [{ table: idempotencyTable, engine: 'operations' }],
    sql: [{ table: 'idempotency_keys', privileges: KEYS_PRIVILEGES }],
    sendsSettlements: true,
    readsWebhookSecret: true,
    metrics: httpIdempotencyMetrics(MetricService.webhooks),
  },
  {
    id: 'SettlementConsumer',
    entry: 'functions/settlement-consumer.ts',
    description: 'Settlement queue consumer: settles the payment once per event, sends its receipt, completes orphans',
    memoryMb: 512,
    trigger: { kind: 'settlement-queue', batchSize: 10 },
    tables: [
      { table: idempotencyTable, engine: 'operations' },
      // PutItem: a payment whose client never came back is recorded from its charge (in the operation's commit).
      { table: paymentsTable, actions: ['GetItem', 'PutItem', 'UpdateItem', 'ConditionCheckItem'] },
    ],
    sql: [
      { table: 'idempotency_keys', privileges: KEYS_PRIVILEGES },
      { table: 'payments', privileges: ['SELECT', 'INSERT', 'UPDATE'] },
    ],
    calls: ['mailer'],
    movesSettlements: true,
    // Settlement finishes single-effect payments only: no steps, nothing to compensate.
    metrics: {
      service: MetricService.recovery,
      names: [RecoveryMetric.completedWithoutClient, RecoveryMetric.abandoned],
    },
  },
  {
    id: 'PaymentsCompleter',
    entry: 'functions/payments-completer.ts',
    description: 'Every few minutes: finishes payments and orders whose client never came back, or abandons them',
    memoryMb: 512,
    trigger: { kind: 'schedule' },
    tables: [
      // Reads and takes over due operations (fenced updates), commits or abandons them; finds them by the sparse
      // recovery index only, never by scanning.
      { table: idempotencyTable, engine: 'recovery' },
      // UpdateItem: an order driven forward checkpoints its steps onto its row, and a declined one gives its stock back.
      { table: paymentsTable, actions: ['GetItem', 'PutItem', 'UpdateItem', 'ConditionCheckItem'] },
    ],
    sql: [
      // No INSERT: recovery takes over existing records only. DELETE for the batch purge of expired records, which
      // DynamoDB's TTL does by itself: this is the only function that may delete anything.
      { table: 'idempotency_keys', privileges: ['SELECT', 'UPDATE', 'DELETE'] },
      { table: 'payments', privileges: ['SELECT', 'INSERT'] },
      // Orders driven forward: steps checkpointed onto the row, a declined order's stock given back.
      { table: 'orders', privileges: ['UPDATE'] },
      { table: 'reservations', privileges: ['UPDATE'] },
      { table: 'inventory', privileges: ['SELECT', 'UPDATE'] },
    ],
    // A payment's lookup, or an order driven forward: the order's calls.
    calls: ORDER_CALLS,
    metrics: {
      service: MetricService.recovery,
      names: [...Object.values(RecoveryMetric), ...Object.values(StepMetric)],
    },
  },
];
