/**
 * The export condition under which the library's package.json (packages/keystone-idempotency) points each entry
 * point at its TypeScript source. The service imports the library by name, as a customer does; with this condition
 * every tool here (tsc's customConditions, jest, tsx's `--conditions`, esbuild's `conditions`) resolves that name to
 * the sources, so nothing in this repository ever runs a build of the library, stale or missing. A customer's tools
 * don't know the condition and get the package's dist/.
 */
export const LIBRARY_SOURCE_CONDITION = 'keystone-source';

/**
 * esbuild's export conditions for a bundle of this repository's code: the library's source condition, and `module`.
 * esbuild applies `module` by itself only when no custom condition is given; without it the AWS SDK's packages
 * resolve to their CommonJS builds, which esbuild cannot tree-shake: 136 KB more in every function (the DynamoDB
 * client alone, bench/sdk-floor.ts, bundles to 472 KB instead of 335 KB) and a slower cold start.
 */
export const BUNDLE_CONDITIONS: readonly string[] = [LIBRARY_SOURCE_CONDITION, 'module'];
