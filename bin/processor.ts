/**
 * Runs the sandbox payment processor and mailer on its own: `npm run processor`.
 *
 *   PROCESSOR_PORT            port on 127.0.0.1 (default 4010; 0 picks a free one)
 *   PROCESSOR_WEBHOOK_URL     where charge.succeeded events are POSTed (optional)
 *   PROCESSOR_WEBHOOK_SECRET  the signing secret (required with PROCESSOR_WEBHOOK_URL)
 *   PROCESSOR_WEBHOOK_RETRY_WINDOW_SECONDS
 *                             how long a failing webhook is retried, with backoff (default 600; 0: never)
 */
import { portFromEnv } from '../lib/local/ports';
import { type SandboxOptions, startSandbox, webhookRetryFromEnv } from '../lib/sandbox/processor';

const DEFAULT_PORT = 4010;

/** Reads the environment once, failing with a message that names the variable at fault. */
function readConfig(env: NodeJS.ProcessEnv): SandboxOptions {
  const { port } = portFromEnv('PROCESSOR_PORT', DEFAULT_PORT, env);
  const webhookUrl = env.PROCESSOR_WEBHOOK_URL || undefined;
  const webhookSecret = env.PROCESSOR_WEBHOOK_SECRET || undefined;
  if (webhookUrl && !webhookSecret) {
    throw new Error('PROCESSOR_WEBHOOK_SECRET is required when PROCESSOR_WEBHOOK_URL is set');
  }
  return { port, webhookUrl, webhookSecret, webhookRetry: webhookRetryFromEnv(env) };
}

async function main(): Promise<void> {
  const config = readConfig(process.env);
  const sandbox = await startSandbox(config);
  console.log(`sandbox processor listening on ${sandbox.url}`);
  if (config.webhookUrl) console.log(`webhooks go to ${config.webhookUrl}`);

  // `on`, not `once`: Ctrl-C under `npm run` reaches this process twice (from the terminal's process group and
  // relayed by tsx), and a second signal must not turn a clean stop into a default, abrupt exit.
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: stopping`);
    sandbox.close().then(
      () => {
        process.exitCode = 0;
      },
      (error: unknown) => {
        console.error('could not stop cleanly:', error);
        process.exitCode = 1;
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
