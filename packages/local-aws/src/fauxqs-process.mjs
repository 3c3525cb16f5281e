/**
 * Runs fauxqs in a Node process of its own, bound to 127.0.0.1.
 *
 * Why a separate process: fauxqs is ESM-only (its package `exports` has only an `import` condition), and this
 * project runs as CommonJS under jest, where neither `require` nor a real dynamic `import()` can load it.
 * Why `buildApp` and not `startFauxqs`: `startFauxqs` always listens on 0.0.0.0; `buildApp` returns the Fastify
 * app unbound, so we choose the address ourselves and nothing is exposed beyond loopback.
 *
 * Protocol with the parent (src/sqs.ts): argv[2] is the port (0 = any free one); once listening, one JSON
 * line `{"port":N}` is written to stdout. The process exits when its stdin closes, which happens when the parent
 * closes it on purpose or dies in any way (even SIGKILL), so no emulator outlives its owner.
 */
import { buildApp } from 'fauxqs';

const requestedPort = Number(process.argv[2] ?? '0');
const app = buildApp({ logger: false });
await app.listen({ port: requestedPort, host: '127.0.0.1' });
const address = app.server.address();
process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`);

let closing = false;
function shutdown() {
  if (closing) return;
  closing = true;
  app.close().finally(() => process.exit(0));
}
process.stdin.on('end', shutdown);
process.stdin.on('error', shutdown);
process.stdin.resume();
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
