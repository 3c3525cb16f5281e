import type { Route } from '@keystone-idempotency/local-aws/api-gateway';
import { type ApiKeyDirectory, generateApiKey } from '../../payments/api-keys';
import { buildPageAssets } from './page-assets';
import { ProcessorControls } from './processor-controls';
import { demoRoutes } from './routes';

/**
 * The double-tap demo page, served by the local stack at `/`: a Pay button that fires two POSTs at once, a switch
 * between one key per payment and a new key per request, a flaky-network switch, and a charge counter read from
 * the sandbox processor's ledger. The page uses the retry-safe client from packages/keystone-idempotency/src/client.
 *
 * Local only, by construction: the demo account and its key exist only in the local stack's table, and only
 * lib/local/stack.ts mounts these routes.
 */

/** The account the page pays as: its charges are the page's, and nobody else's. */
export const DEMO_ACCOUNT_ID = 'acct_demo_page';

export interface LocalDemo {
  readonly accountId: string;
  readonly routes: readonly Route[];
}

export async function prepareDemo(options: { apiKeys: ApiKeyDirectory; processorUrl: string }): Promise<LocalDemo> {
  const apiKey = generateApiKey();
  const [assets] = await Promise.all([buildPageAssets(), options.apiKeys.register(apiKey, DEMO_ACCOUNT_ID)]);
  return {
    accountId: DEMO_ACCOUNT_ID,
    routes: demoRoutes({
      assets,
      config: { accountId: DEMO_ACCOUNT_ID, apiKey },
      processor: new ProcessorControls(options.processorUrl),
    }),
  };
}
