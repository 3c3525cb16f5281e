/**
 * What the REST API answers when Lambda throttles a route's function (the function at its concurrency limit): API
 * Gateway's INTEGRATION_FAILURE gateway response, a 500 "Internal server error" unless mapped, mapped to a 429 that
 * says when to come back. Plain data (no CDK): the stack deploys it (lib/infra/api.ts) and the local stack answers
 * it (lib/local), from this one definition. An HTTP API has no gateway responses: docs/local-stack.md says what it
 * answers instead.
 */
export const THROTTLED_INTEGRATION = {
  statusCode: 429,
  headers: {
    'Content-Type': 'application/problem+json',
    // A throttle lasts as long as the function's invocations in flight: a second is the usual wait.
    'Retry-After': '1',
  },
  /** The body, an RFC 9457 problem; API Gateway fills in `$context.requestId`. */
  template: JSON.stringify({
    type: 'about:blank',
    title: 'Too Many Requests',
    status: 429,
    detail: 'The service is taking too many requests at once. Retry after Retry-After seconds, with the same key.',
    requestId: '$context.requestId',
  }),
} as const;
