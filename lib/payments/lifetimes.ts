import { DEFAULT_LEASE_SECONDS, DEFAULT_TTL_SECONDS } from 'keystone-idempotency/engine';
import { numberEnv } from '../runtime/env';

type Env = Readonly<Record<string, string | undefined>>;

/** How long a claim is held and a record lives: the same variables on every store. */
export function lifetimes(env: Env) {
  return {
    leaseSeconds: numberEnv('IDEMPOTENCY_LEASE_SECONDS', DEFAULT_LEASE_SECONDS, env),
    ttlSeconds: numberEnv('IDEMPOTENCY_TTL_SECONDS', DEFAULT_TTL_SECONDS, env),
  };
}
