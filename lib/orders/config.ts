import { numberEnv, requireEnv } from '../runtime/env';
import { OrderMailerClient } from './mailer-client';
import { WarehouseClient } from './warehouse-client';

type Env = Readonly<Record<string, string | undefined>>;

/** The warehouse, at `WAREHOUSE_URL`; its HTTP timeout is the processor's (`PROCESSOR_TIMEOUT_MS`). */
export function warehouseClient(env: Env = process.env): WarehouseClient {
  return new WarehouseClient({
    baseUrl: requireEnv('WAREHOUSE_URL', env),
    timeoutMs: numberEnv('PROCESSOR_TIMEOUT_MS', 8000, env),
  });
}

/** The mailer, at `MAILER_URL`, for order confirmations. */
export function orderMailerClient(env: Env = process.env): OrderMailerClient {
  return new OrderMailerClient({
    baseUrl: requireEnv('MAILER_URL', env),
    timeoutMs: numberEnv('MAILER_TIMEOUT_MS', 5000, env),
  });
}
