import { ConfigurationError } from 'keystone-idempotency/engine';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Reads a required environment variable, failing with a message that names it. Functions call these at cold start
 * (module scope), so a misconfigured deployment fails on its first invocation with a clear log line, not mid-request.
 */
export function requireEnv(name: string, env: Env = process.env): string {
  const value = env[name];
  if (value === undefined || value === '') throw new ConfigurationError(`environment variable ${name} is required`);
  return value;
}

export function optionalEnv(name: string, fallback: string, env: Env = process.env): string {
  const value = env[name];
  return value === undefined || value === '' ? fallback : value;
}

/** A positive number from the environment, or the fallback when unset. */
export function numberEnv(name: string, fallback: number, env: Env = process.env): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) {
    throw new ConfigurationError(`environment variable ${name} must be a positive number, got ${JSON.stringify(raw)}`);
  }
  return value;
}
