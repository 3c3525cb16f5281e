import type { Route } from '@keystone-idempotency/local-aws/api-gateway-routes';
import { openApiDocument } from '../openapi/document';

/**
 * GET /openapi.json on the local API: the contract, generated at start from the schemas the handlers use, with this
 * stack's URL as its first server. Local only: the deployed API has no such route (`npm run openapi` prints the
 * document without a running stack).
 */
export function openApiRoute(apiUrl: string): Route {
  const body = JSON.stringify(openApiDocument({ serverUrl: apiUrl }), null, 2);
  return {
    method: 'GET',
    resource: '/openapi.json',
    functionName: 'openapi-document',
    handler: async () => ({ statusCode: 200, headers: { 'Content-Type': 'application/json' }, body }),
  };
}
