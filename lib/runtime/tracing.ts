import type { Tracer } from '@aws-lambda-powertools/tracer';
import type middy from '@middy/core';

/** An AWS SDK v3 client (a DocumentClient shares its client's middleware stack, so it counts too). */
type SdkClient = Parameters<Tracer['captureAWSv3Client']>[0];

/**
 * X-Ray tracing through Powertools Tracer, where the function's environment turns it on: the handler as a segment
 * (with cold start and service annotations), each call of `clients` as a subsegment, and every outgoing HTTP
 * request (`fetch` included, so the processor and the mailer) as one too. Use it first in the middy chain.
 * Returns no middleware where tracing is off.
 *
 * The stack sets `POWERTOOLS_TRACE_ENABLED` in the function's environment and, with the same literal, replaces
 * `process.env.POWERTOOLS_TRACE_ENABLED` in the bundle (esbuild `define`). Where it is "false", the test below is
 * false at bundle time and esbuild drops the branch, and with it the tracer and aws-xray-sdk-core: the `require`s are
 * deliberate, since a static import would keep them in every bundle (the package is not marked side-effect free).
 * Locally, where nothing sets the variable, tracing is off.
 *
 * @example
 * export const handler = middy(lambdaHandler).use(tracing('payments', [documentClient()])).use(...);
 */
export function tracing(serviceName: string, clients: readonly SdkClient[]): middy.MiddlewareObj[] {
  // The test wraps the requires on purpose: esbuild skips a require inside a branch that is false at bundle time, but
  // not one that merely follows an early return.
  if (process.env.POWERTOOLS_TRACE_ENABLED === 'true') {
    const { Tracer } = require('@aws-lambda-powertools/tracer') as typeof import('@aws-lambda-powertools/tracer');
    const { captureLambdaHandler } =
      require('@aws-lambda-powertools/tracer/middleware') as typeof import('@aws-lambda-powertools/tracer/middleware');
    const tracer = new Tracer({ serviceName });
    for (const client of clients) tracer.captureAWSv3Client(client);
    return [captureLambdaHandler(tracer) as middy.MiddlewareObj];
  }
  return [];
}
