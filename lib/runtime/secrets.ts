import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { ConfigurationError } from 'keystone-idempotency/engine';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * A secret from `<NAME>` (local runs, tests) or from Secrets Manager via `<NAME>_ARN` (deployed), fetched on first
 * use and kept for the container's life. Fails with a message naming both variables when neither is set.
 */
export function secretFromEnv(name: string, env: Env = process.env): () => Promise<string> {
  const direct = env[name];
  if (direct) return async () => direct;
  const arn = env[`${name}_ARN`];
  if (!arn) throw new ConfigurationError(`environment variable ${name} or ${name}_ARN is required`);
  let cached: Promise<string> | undefined;
  return () => {
    cached ??= new SecretsManagerClient({})
      .send(new GetSecretValueCommand({ SecretId: arn }))
      .then((secret) => {
        if (!secret.SecretString) throw new ConfigurationError(`secret ${arn} has no string value`);
        return secret.SecretString;
      })
      .catch((error: unknown) => {
        cached = undefined; // a transient failure must not poison the container
        throw error;
      });
    return cached;
  };
}
