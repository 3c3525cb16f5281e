/**
 * One Lambda execution environment: what the Node.js runtime does inside the sandbox, for a bundle on disk.
 *
 * Run by plain Node (never through tsx or jest, whose loaders would resolve imports a Lambda runtime can't), in a
 * process of its own, with exactly the function's environment (src/bundled-function.ts starts it). Like
 * Lambda's runtime it reads `_HANDLER` (`index.handler`: the module, then the export) and `LAMBDA_TASK_ROOT`,
 * imports the module once (the init phase), then runs one invocation at a time.
 *
 * Protocol with the parent, over the IPC channel (JSON, as Lambda's events and results are):
 * - to the parent, once: `{ type: 'ready', initMs }`, or `{ type: 'init-error', error }` and exit;
 * - from the parent: `{ type: 'invoke', id, event, context }`, where `context.deadlineMs` is the epoch deadline;
 * - to the parent: `{ type: 'result', id, value }` or `{ type: 'error', id, error }`.
 * Errors travel as Lambda reports them: `{ errorType, errorMessage, stack }`. The process exits when the channel
 * closes, which happens however the parent ends (even SIGKILL), so no environment outlives its stack.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { errorReport, lambdaContext, runtimeError } from './lambda-protocol.mjs';

process.on('disconnect', () => process.exit(0));

const startedAt = performance.now();
const handlerSetting = process.env._HANDLER ?? '';
const taskRoot = process.env.LAMBDA_TASK_ROOT ?? process.cwd();

let handler;
try {
  handler = await loadHandler(handlerSetting, taskRoot);
} catch (error) {
  const report = errorReport(error);
  // What CloudWatch shows for a failed init, and what the parent reports.
  process.stderr.write(`ERROR\tUncaught Exception\t${JSON.stringify(report)}\n`);
  process.send({ type: 'init-error', error: report }, () => process.exit(1));
}

if (handler) {
  process.on('message', (message) => {
    if (message?.type === 'invoke') void invoke(message);
  });
  process.send({ type: 'ready', initMs: Math.round(performance.now() - startedAt) });
}

/**
 * `index.handler`: as Lambda's Node.js runtime reads it, the module is everything up to the first dot after the last
 * slash and the rest names the export (`index.handlers.create` would be a property of an export). The module file
 * is looked up the same way too: `.js`, then `.mjs`, then `.cjs`.
 */
async function loadHandler(setting, root) {
  const slash = setting.lastIndexOf('/') + 1;
  const dot = setting.indexOf('.', slash);
  if (dot <= slash || dot === setting.length - 1) {
    throw runtimeError('Runtime.MalformedHandlerName', `Bad handler ${setting}`);
  }
  const modulePath = setting.slice(0, dot);
  const file = ['.js', '.mjs', '.cjs'].map((ext) => join(root, `${modulePath}${ext}`)).find((f) => existsSync(f));
  if (!file) throw runtimeError('Runtime.ImportModuleError', `Error: Cannot find module '${modulePath}'`);
  let module;
  try {
    module = await import(pathToFileURL(file).href);
  } catch (error) {
    if (error?.code === 'ERR_MODULE_NOT_FOUND' || error?.code === 'MODULE_NOT_FOUND') {
      throw runtimeError('Runtime.ImportModuleError', `Error: ${error.message}`, error.stack);
    }
    if (error instanceof SyntaxError) {
      throw runtimeError('Runtime.UserCodeSyntaxError', `${error.name}: ${error.message}`, error.stack);
    }
    throw error;
  }
  const exported = setting
    .slice(dot + 1)
    .split('.')
    .reduce((value, key) => value?.[key], module);
  if (typeof exported !== 'function') {
    throw runtimeError('Runtime.HandlerNotFound', `${setting} is undefined or not exported`);
  }
  return exported;
}

async function invoke({ id, event, context }) {
  try {
    const value = await handler(event, lambdaContext(context));
    process.send({ type: 'result', id, value });
  } catch (error) {
    process.send({ type: 'error', id, error: errorReport(error) });
  }
}
