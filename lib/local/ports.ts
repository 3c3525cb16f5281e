import { createServer } from 'node:net';
import { ConfigurationError } from 'keystone-idempotency/engine';

type Env = Readonly<Record<string, string | undefined>>;

/** A port setting as the local stack reads it: where it came from, so an error can name the variable. */
export interface PortSetting {
  readonly variable: string;
  /** 0 means "any free port". */
  readonly port: number;
}

/** Reads a port from the environment: unset or empty is the fallback, 0 asks for a free port, else 1 to 65535. */
export function portFromEnv(variable: string, fallback: number, env: Env = process.env): PortSetting {
  const raw = env[variable];
  if (raw === undefined || raw === '') return { variable, port: fallback };
  const port = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || port > 65_535) {
    throw new ConfigurationError(`${variable} must be a port number (0 to 65535), got '${raw}'`);
  }
  return { variable, port };
}

/**
 * Fails at once, naming the variable, if a port the stack will listen on is taken. Checked before anything starts:
 * finding out only when the API binds costs the seconds it takes to start DynamoDB Local, queues and processor.
 * (Another process could still take the port in between; then the later bind fails as before.)
 */
export async function ensurePortsFree(settings: readonly PortSetting[]): Promise<void> {
  const claimed = new Map<number, string>();
  for (const setting of settings) {
    if (setting.port === 0) continue;
    const other = claimed.get(setting.port);
    if (other) {
      throw new ConfigurationError(`${other} and ${setting.variable} are both ${setting.port}: pick two ports`);
    }
    claimed.set(setting.port, setting.variable);
    const error = await tryListen(setting.port);
    if (!error) continue;
    const where = `port ${setting.port} on 127.0.0.1`;
    const fix = `set ${setting.variable} to another port (0 picks a free one)`;
    if (error.code === 'EADDRINUSE') {
      throw new ConfigurationError(`${setting.variable}: ${where} is already in use; stop what holds it or ${fix}`);
    }
    throw new ConfigurationError(`${setting.variable}: cannot listen on ${where} (${error.code}); ${fix}`);
  }
}

function tryListen(port: number): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', (error: NodeJS.ErrnoException) => resolve(error));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}
