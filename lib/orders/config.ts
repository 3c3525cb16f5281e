import { numberEnv, requireEnv } from '../runtime/env';
import { DEFAULT_CALL_TIMEOUTS_MS, DEFAULT_WAREHOUSE_PROCESSING_WINDOW_MS } from '../timing/timing';
import { OrderMailerClient } from './mailer-client';
import { WarehouseClient } from './warehouse-client';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * The warehouse, at `WAREHOUSE_URL`, with its own HTTP timeout (`WAREHOUSE_TIMEOUT_MS`) and the time a booking may
 * still land after its client gave up (`WAREHOUSE_PROCESSING_WINDOW_MS`): `landsWithinMs` is their sum.
 */
export function warehouseClient(env: Env = process.env): WarehouseClient {
  return new WarehouseClient({
    baseUrl: requireEnv('WAREHOUSE_URL', env),
    timeoutMs: numberEnv('WAREHOUSE_TIMEOUT_MS', DEFAULT_CALL_TIMEOUTS_MS.warehouse, env),
    processingWindowMs: numberEnv('WAREHOUSE_PROCESSING_WINDOW_MS', DEFAULT_WAREHOUSE_PROCESSING_WINDOW_MS, env),
  });
}

/** The mailer, at `MAILER_URL`, for order confirmations. */
export function orderMailerClient(env: Env = process.env): OrderMailerClient {
  return new OrderMailerClient({
    baseUrl: requireEnv('MAILER_URL', env),
    timeoutMs: numberEnv('MAILER_TIMEOUT_MS', DEFAULT_CALL_TIMEOUTS_MS.mailer, env),
  });
}
