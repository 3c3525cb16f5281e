import { Signer } from '@aws-sdk/rds-signer';
import { Pool, type PoolConfig } from 'pg';
import { numberEnv, optionalEnv, requireEnv } from './env';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * The function's PostgreSQL pool, from its environment, one per container (per environment object) like the
 * DynamoDB client: every store and repository a function builds shares it.
 *
 * - `DATABASE_URL` (locally, and wherever a password is fine): a plain connection string.
 * - Deployed: `DATABASE_HOST` (the RDS Proxy endpoint), `DATABASE_PORT`, `DATABASE_NAME` and `DATABASE_USER`, with
 *   IAM authentication: the password is a short-lived token signed with the function's own role for each new
 *   connection, and TLS is required (RDS Proxy's certificate chains to the Amazon roots Node trusts).
 *
 * Pipelining is on, so a commit with its statements is one round trip. A Lambda container handles one invocation
 * at a time; `DATABASE_POOL_MAX` (default 4) bounds the connections one container opens, which the proxy multiplexes.
 *
 * Every client gets an `error` listener as it connects. pg emits `error` on a client whose session the server ended
 * (an administrator, a failover, RDS Proxy) or whose socket died, sometimes twice (the error, then the socket's end),
 * and sometimes after the client left the pool; `pool.query` listens only once and only while it runs, and an
 * `error` nobody listens to ends the process: in Lambda, the runtime. The queries in flight on that client fail
 * with the error all the same; the listener only keeps the process alive.
 */
export function postgresPool(env: Env = process.env): Pool {
  let pool = pools.get(env);
  if (!pool) {
    pool = new Pool({ ...connectionConfig(env), pipeline: true, max: numberEnv('DATABASE_POOL_MAX', 4, env) });
    // A connection that dies while idle (the proxy closed it) is dropped by the pool; nothing to do but not crash.
    pool.on('error', () => undefined);
    pool.on('connect', (client) => client.on('error', () => undefined));
    pools.set(env, pool);
  }
  return pool;
}

const pools = new WeakMap<Env, Pool>();

function connectionConfig(env: Env): PoolConfig {
  const url = env.DATABASE_URL;
  if (url) return { connectionString: url };
  const host = requireEnv('DATABASE_HOST', env);
  const port = numberEnv('DATABASE_PORT', 5432, env);
  const user = requireEnv('DATABASE_USER', env);
  const signer = new Signer({ hostname: host, port, username: user, region: requireEnv('AWS_REGION', env) });
  return {
    host,
    port,
    user,
    database: optionalEnv('DATABASE_NAME', 'keystone', env),
    password: () => signer.getAuthToken(),
    ssl: { rejectUnauthorized: true },
  };
}
