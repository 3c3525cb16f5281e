import type middy from '@middy/core';
import type { APIGatewayProxyResult, Context } from 'aws-lambda';
import { answersEarly } from './early-response.js';
import { type HttpEvent, type HttpResult, requestHeader } from './front-door.js';
import { BodyEncodingError, charsetOf, rawBody } from './headers.js';
import { type BodyError, type InvalidBodyProblem, ProblemType, problemResponse, problemTypeBaseOf } from './problem.js';

/** zod's parser, loaded with zod the first time a body is validated: see zod-parse.ts. */
let zod: Promise<typeof import('./zod-parse.js')> | undefined;

/** The context a handler sees after {@link validateJsonBody}: the parsed, typed body. */
export type WithBody<T> = { body: T };

/**
 * A zod 4 schema (classic or `zod/mini`), as far as the types need one: what it parses to. Declared here rather than
 * imported from zod, so the HTTP adapter's declarations compile in a project without zod installed; every zod 4
 * schema has it (`z.output<S>` reads the same field).
 */
export interface BodySchema {
  readonly _zod: { readonly output: unknown };
}

/**
 * Parses and validates a JSON body before anything else touches the request, so an invalid body is a 400 listing
 * every problem and never reaches the idempotency store (the key stays free for the corrected request).
 * The raw `event.body` is left as sent: the fingerprint is computed from it. Takes any zod 4 schema, classic or
 * `zod/mini`: it parses through zod's core, so a function bundles only the schema flavour it uses. zod itself is
 * loaded on the first validation, so the rest of the HTTP adapter works without it installed. Serves every front
 * door (a REST API, an HTTP API, a function URL, an ALB target), base64 bodies included, and answers each in its format.
 */
export function validateJsonBody<S extends BodySchema>(
  schema: S,
): middy.MiddlewareObj<HttpEvent, HttpResult, Error, Context & WithBody<S['_zod']['output']>> {
  return {
    before: answersEarly(async function validateJsonBodyBefore(request) {
      const contentType = requestHeader(request.event, 'content-type');
      const base = problemTypeBaseOf(request);
      const invalid = (detail: string, errors: BodyError[]) => invalidBody(detail, errors, base);
      if (contentType !== undefined && !/^application\/([a-z0-9.+-]+\+)?json\b/i.test(contentType)) {
        return invalid('The body must be JSON (Content-Type: application/json).', [
          { path: '', message: `unsupported content type ${JSON.stringify(contentType)}` },
        ]);
      }
      // JSON is UTF-8 (RFC 8259). A body declared in another charset would be read as UTF-8 anyway, turning its
      // characters into others (and two different bodies into one fingerprint): refuse it rather than guess.
      const charset = contentType === undefined ? undefined : charsetOf(contentType);
      if (charset !== undefined && !/^utf-?8$/i.test(charset)) {
        return problemResponse(
          {
            type: ProblemType.unsupportedMediaType,
            title: 'Unsupported charset',
            status: 415,
            detail: `The body must be UTF-8 (JSON is UTF-8, RFC 8259); it was declared ${JSON.stringify(charset)}.`,
          },
          {},
          base,
        );
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(rawBody(request.event) ?? '');
      } catch (error) {
        if (error instanceof BodyEncodingError) {
          return invalid('The body is not valid UTF-8.', [{ path: '', message: 'expected UTF-8 text' }]);
        }
        return invalid('The body is not valid JSON.', [{ path: '', message: 'expected a JSON document' }]);
      }
      zod ??= import('./zod-parse.js');
      const result = (await zod).parseWithZod(schema, parsed);
      if (!result.success) {
        return invalid(
          'The body does not match the schema.',
          result.error.issues.map((issue) => ({ path: issue.path.map(String).join('.'), message: issue.message })),
        );
      }
      request.context.body = result.data;
      return undefined;
    }),
  };
}

function invalidBody(detail: string, errors: BodyError[], base: string): APIGatewayProxyResult {
  const problem: InvalidBodyProblem = {
    type: ProblemType.invalidBody,
    title: 'Invalid request body',
    status: 400,
    detail,
    errors,
  };
  return problemResponse(problem, {}, base);
}
