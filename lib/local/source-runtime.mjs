/**
 * Lambda's Node.js runtime for functions run from their TypeScript sources: a worker thread that loads each
 * function's entry file once (its init, which reads the configuration at module scope) and then runs invocations.
 * lib/local/source-functions.ts starts it.
 *
 * A worker of its own because handlers read their configuration from `process.env` at import, and a worker has a
 * `process.env` of its own (the `env` it was started with): two local stacks in one process each give their
 * functions their own tables and lease, and neither writes to the process's environment. The TypeScript is compiled
 * by tsx, registered here (whatever started the process: tsx, jest or plain node), which also resolves the
 * tsconfig `paths` the functions import the library by.
 *
 * Unlike the bundles' runtime (one process per execution environment, one invocation at a time), the functions of a
 * worker share it and run invocations concurrently, as they did in the stack's own process: fast to start, and a
 * debugger attached to the process reaches them.
 *
 * Protocol with the parent (messages, structured-cloned; results as JSON text, as Lambda serialises them):
 * - to the parent, once: `{ type: 'ready', initMs }`, or `{ type: 'init-error', failures: [{ name, error }] }`;
 * - from the parent: `{ type: 'invoke', id, name, event, context }`, where `context.deadlineMs` is the deadline;
 * - to the parent: `{ type: 'result', id, json }` (`json` absent for `undefined`) or `{ type: 'error', id, error }`.
 */
import { createRequire } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';
import { errorReport, lambdaContext, runtimeError } from './lambda-protocol.mjs';

const startedAt = performance.now();
const { register } = await import('tsx/cjs/api');
const { register: registerImports } = await import('tsx/esm/api');
// The repository's modules are CommonJS TypeScript: tsx's require hook compiles them, as `tsx bin/local.ts` does,
// with the tsconfig named (its `paths`), whatever the working directory. tsx reads it from the environment once,
// here; the functions' environment is left as it was given. Its import hooks too: the library loads some modules on
// first use with `import()` (zod when a body is first validated), which the require hook never sees, and which Node
// alone can't resolve to a `.ts` source.
const given = process.env.TSX_TSCONFIG_PATH;
if (workerData.tsconfig) process.env.TSX_TSCONFIG_PATH = workerData.tsconfig;
register();
registerImports();
if (given === undefined) delete process.env.TSX_TSCONFIG_PATH;
else process.env.TSX_TSCONFIG_PATH = given;
const require = createRequire(import.meta.url);

/** @type {Map<string, Function>} */
const handlers = new Map();
const failures = [];
for (const { name, entry } of workerData.functions) {
  try {
    handlers.set(name, loadHandler(entry));
  } catch (error) {
    failures.push({ name, error: errorReport(error) });
  }
}

if (failures.length > 0) {
  parentPort.postMessage({ type: 'init-error', failures });
} else {
  parentPort.on('message', (message) => {
    if (message?.type === 'invoke') void invoke(message);
  });
  parentPort.postMessage({ type: 'ready', initMs: Math.round(performance.now() - startedAt) });
}

/** The entry's `handler` export, as Lambda reads `index.handler`. */
function loadHandler(entry) {
  let module;
  try {
    module = require(entry);
  } catch (error) {
    if (error?.code === 'MODULE_NOT_FOUND') {
      throw runtimeError('Runtime.ImportModuleError', `Error: ${error.message}`, error.stack);
    }
    throw error;
  }
  if (typeof module?.handler !== 'function') {
    throw runtimeError('Runtime.HandlerNotFound', `${entry}: handler is undefined or not exported`);
  }
  return module.handler;
}

async function invoke({ id, name, event, context }) {
  try {
    const handler = handlers.get(name);
    if (!handler) throw runtimeError('Runtime.HandlerNotFound', `no function ${name} in this runtime`);
    const value = await handler(event, lambdaContext(context));
    parentPort.postMessage({ type: 'result', id, json: JSON.stringify(value) });
  } catch (error) {
    parentPort.postMessage({ type: 'error', id, error: errorReport(error) });
  }
}
