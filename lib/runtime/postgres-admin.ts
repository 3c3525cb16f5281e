import { ConfigurationError } from 'keystone-idempotency/engine';
import { Pool } from 'pg';
import { numberEnv, optionalEnv, requireEnv } from './env';
import { secretFromEnv } from './secrets';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * A module of its own, imported by the migration function only: the service's functions carry no Secrets Manager
 * client for it.
 *
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
