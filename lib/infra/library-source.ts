/**
 * The export condition under which the library's package.json (packages/keystone-idempotency) points each entry
 * point at its TypeScript source. The service imports the library by name, as a customer does; with this condition
 * every tool here (tsc's customConditions, jest, tsx's `--conditions`, esbuild's `conditions`) resolves that name to
 * the sources, so nothing in this repository ever runs a build of the library, stale or missing. A customer's tools
 * don't know the condition and get the package's dist/.
 */
export const LIBRARY_SOURCE_CONDITION = 'keystone-source';
