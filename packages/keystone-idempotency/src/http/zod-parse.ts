import { en } from 'zod/locales';
import { type $ZodType, safeParse } from 'zod/v4/core';
import type { BodySchema } from './validate-body.js';

/**
 * zod's parser, in a module of its own so that `validateJsonBody` loads it (with zod) on first use: the HTTP adapter
 * then loads without zod installed, for handlers that never validate a body with it. Imported by name, so a bundler
 * keeps only what it uses, as it would from a static import.
 *
 * English messages for whatever a schema leaves to zod (an unknown key, a body that is not an object) are passed to
 * each parse rather than configured globally: `zod/mini` loads no locale (that is part of why it is small), and the
 * messages a client reads should not depend on whether something else happened to load classic zod first.
 *
 * @internal
 */
const MESSAGES = en().localeError;

/** @internal */
export function parseWithZod<S extends BodySchema>(schema: S, value: unknown) {
  // validateJsonBody's schema is typed by the one field its declarations need; it is a zod schema all the same.
  return safeParse(schema as unknown as $ZodType, value, { error: MESSAGES }) as
    | { success: true; data: S['_zod']['output'] }
    | { success: false; error: { issues: readonly { path: readonly PropertyKey[]; message: string }[] } };
}
