import { Signer } from '@aws-sdk/rds-signer';
import { ConfigurationError } from 'keystone-idempotency/engine';
import { Pool, type PoolConfig } from 'pg';
import { numberEnv, optionalEnv, requireEnv } from './env';
import { secretFromEnv } from './secrets';

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
 */
export function postgresPool(env: Env = process.env): Pool {
  let pool = pools.get(env);
  if (!pool) {
    pool = new Pool({ ...connectionConfig(env), pipeline: true, max: numberEnv('DATABASE_POOL_MAX', 4, env) });
    // A connection that dies while idle (the proxy closed it) is dropped by the pool; nothing to do but not crash.
    pool.on('error', () => undefined);
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

/**
 * A short-lived connection pool as the database's admin user, for the migration function (run once per deploy).
 *
 * - `DATABASE_URL` (locally): a plain connection string.
 * - Deployed: `DATABASE_HOST` (the cluster's writer endpoint: the proxy admits IAM users only, and the admin user has
 *   a password), `DATABASE_PORT`, `DATABASE_NAME`, and the credentials from the cluster's admin secret, which RDS
 *   manages and rotates in Secrets Manager (`DATABASE_ADMIN_SECRET_ARN`, a JSON `{ username, password }`). TLS is
 *   required and verified: the cluster's certificate chains to the RDS authorities, which Lambda's Node.js runtime
 *   ships in /var/runtime/ca-cert.pem and loads when `NODE_EXTRA_CA_CERTS` names it (the stack sets it).
 *
 * `connectionTimeoutMillis` bounds each connection attempt, so that a database that can't be reached fails the
 * migration in time for the function to tell CloudFormation so.
 */
export async function postgresAdminPool(env: Env, connectionTimeoutMillis: number): Promise<Pool> {
  const url = env.DATABASE_URL;
  if (url) return new Pool({ connectionString: url, max: 1, connectionTimeoutMillis });
  const secret = JSON.parse(await secretFromEnv('DATABASE_ADMIN_SECRET', env)()) as {
    username?: unknown;
    password?: unknown;
  };
  if (typeof secret.username !== 'string' || typeof secret.password !== 'string') {
    throw new ConfigurationError('the admin secret must be a JSON object with a username and a password');
  }
  return new Pool({
    host: requireEnv('DATABASE_HOST', env),
    port: numberEnv('DATABASE_PORT', 5432, env),
    database: optionalEnv('DATABASE_NAME', 'keystone', env),
    user: secret.username,
    password: secret.password,
    ssl: { rejectUnauthorized: true },
    max: 1,
    connectionTimeoutMillis,
  });
}
