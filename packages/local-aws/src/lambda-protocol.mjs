/**
 * What the local Lambda runtime (lambda-runtime.mjs, one process per execution environment) builds and reports:
 * the handler's `context`, from the fields the emulator sends, and errors the way Lambda's Node.js runtime reports
 * them.
 *
 * Plain JavaScript, imported by plain Node (never through tsx or jest): the bundles' runtime must not resolve
 * anything a Lambda runtime can't.
 */

/** The handler's second argument, as Lambda builds it; the deadline was fixed by the caller when it invoked. */
export function lambdaContext({ deadlineMs, ...fields }) {
  const deprecated = (name) => () => {
    throw new Error(`context.${name}() is a deprecated Lambda callback and is not supported: return a promise instead`);
  };
  return {
    ...fields,
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadlineMs - Date.now()),
    done: deprecated('done'),
    fail: deprecated('fail'),
    succeed: deprecated('succeed'),
  };
}

/** An error Lambda's runtime raises itself (`Runtime.HandlerNotFound`...), with the stack of what caused it. */
export function runtimeError(errorType, errorMessage, stack) {
  return Object.assign(new Error(errorMessage), { errorType, runtimeStack: stack });
}

/**
 * `{ errorType, errorMessage, stack }`: what a failed init or invocation reports to Lambda's caller. A runtime error
 * reports its own type and the stack of what caused it; anything else its name, message and stack.
 */
export function errorReport(error) {
  if (error?.errorType) return { errorType: error.errorType, errorMessage: error.message, stack: error.runtimeStack };
  if (error instanceof Error) return { errorType: error.name, errorMessage: error.message, stack: error.stack };
  return { errorType: typeof error, errorMessage: String(error) };
}
