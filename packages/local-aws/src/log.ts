/**
 * Where the local emulators write what AWS would write to CloudWatch: handler errors, timeouts, redrives.
 * Never the HTTP response: a 5xx body stays generic, as it is behind the real API Gateway.
 */
export interface LocalLog {
  info(message: string, details?: Record<string, unknown>): void;
  error(message: string, details?: Record<string, unknown>): void;
}

/** Writes to the console, one line per entry, so a developer sees handler errors in the terminal. */
export const consoleLog: LocalLog = {
  info: (message, details) => console.info(message, details ?? ''),
  error: (message, details) => console.error(message, details ?? ''),
};

/** Drops everything: for tests that assert on responses and don't want noise. */
export const silentLog: LocalLog = {
  info: () => undefined,
  error: () => undefined,
};
