/**
 * The service's CloudWatch metrics, described once. The functions publish them (Powertools Metrics, EMF) and the CDK
 * stack alarms on them and charts them, both from these names, so the two cannot drift. Plain data: no CDK imports
 * (like `lib/tables/definitions.ts`).
 */

/** The function environment variable Powertools Metrics reads its namespace from; the stack sets it per environment. */
export const METRICS_NAMESPACE_ENV = 'POWERTOOLS_METRICS_NAMESPACE';

/** Where metrics go when nothing set the namespace (local runs, tests). */
export const DEFAULT_METRICS_NAMESPACE = 'Keystone';

/**
 * One namespace per deployed environment: two environments in one account must not add up into one set of metrics
 * (prod's alarm firing on staging's load test).
 *
 * @example
 * metricsNamespace('prod'); // 'Keystone/prod'
 */
export function metricsNamespace(environmentName: string): string {
  return `${DEFAULT_METRICS_NAMESPACE}/${environmentName}`;
}

/** Powertools Metrics puts the function's service name in this dimension of every metric. */
export const SERVICE_DIMENSION = 'service';

/** The `service` dimension's values: which function's outcomes a metric counts. */
export const MetricService = {
  /** POST /payments */
  payments: 'payments',
  /** POST /orders */
  orders: 'orders',
  /** POST /webhooks/processor */
  webhooks: 'webhooks',
  /** Payments finished or given up without their client: published by settlement and by the completer alike. */
  recovery: 'payment-recovery',
} as const;
export type MetricServiceName = (typeof MetricService)[keyof typeof MetricService];

/** What each step of a multi-step operation did (ran, replayed, found by its resolver, refused, ...): the library's. */
export { StepMetric } from 'keystone-idempotency/engine';
/** The outcome counters the HTTP idempotency middleware emits: the library defines them, the stack charts them. */
export { IdempotencyMetric, type IdempotencyMetricName } from 'keystone-idempotency/http';

/** What recovery counts: operations whose client never came back, finished from their charge or given up. */
export const RecoveryMetric = {
  /** A charge was found and its payment recorded (and its 201 stored) without the client that made it. */
  completedWithoutClient: 'PaymentsCompletedWithoutClient',
  /** No charge was found under the operation's downstream key, and its client is gone: given up. */
  abandoned: 'PaymentsAbandoned',
  /**
   * A multi-step operation (an order) that could never finish, a step refused for good: the steps it had done were
   * compensated (undone), and it was completed with the refusal's answer or abandoned.
   */
  compensated: 'OperationsCompensated',
  /**
   * A multi-step operation abandoned with steps done and none compensated (none declared one): progress that nobody
   * will finish or undo. It needs a person: the stack alarms on one.
   */
  abandonedWithProgress: 'OperationsAbandonedWithProgress',
  /**
   * A multi-step operation refused for good whose compensation failed this run (a refund the processor could not
   * make now): tried again later, backed off. Expected now and then; a steady stream is an outside system down.
   */
  compensationFailed: 'OperationsCompensationFailed',
  /**
   * Of those, one whose compensation has failed five times or more since the refusal: money or stock a customer should
   * have back and has not. It needs a person: the stack alarms on one.
   */
  compensationStuck: 'OperationsCompensationStuck',
} as const;
export type RecoveryMetricName = (typeof RecoveryMetric)[keyof typeof RecoveryMetric];

/**
 * How far behind the completer is, published by every run (a gauge, not a count): how long ago, in seconds, the
 * oldest payment operation the run did not finish (retried because the processor could not say, failed, or still
 * due when the run ended) was first due; 0 when the run finished everything due. Measured from its first due time
 * (its first claim plus a lease), not from its `recoverAt`, which every retry moves a lease on: an operation retried
 * forever keeps growing older here. A run leaves some when its time ran out first (the next run, a period later,
 * continues) or when the processor cannot answer for them. The stack alarms when it grows.
 */
export const RecoveryBacklogMetric = {
  oldestDueAge: 'PaymentsRecoveryOldestDueAge',
} as const;
