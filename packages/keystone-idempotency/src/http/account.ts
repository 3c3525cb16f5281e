import { HttpProblem } from './errors.js';
import { frontDoorOf, type HttpEvent, isRecord } from './front-door.js';
import { ProblemType } from './problem-types.js';

/**
 * Who the authorizer in front of the function says the caller is, in whichever shape its front door passes it on:
 *
 * | kind     | where it is in the event                                                                                        |
 * | -------- | --------------------------------------------------------------------------------------------------------------- |
 * | `lambda` | a Lambda authorizer's context: `requestContext.authorizer` (payload 1.0, values as strings), `.authorizer.lambda` (2.0) |
 * | `jwt`    | a JWT's claims: `requestContext.authorizer.jwt` (HTTP API, 2.0), `.authorizer.claims` (Cognito user pools, 1.0)  |
 * | `iam`    | a SigV4-signed caller: `requestContext.authorizer.iam` (2.0, function URLs), `requestContext.identity` (1.0)      |
 * | `none`   | no authorizer, or an ALB (which passes none on: a function behind one names its caller itself)                  |
 */
export type Authorizer =
  | { readonly kind: 'lambda'; readonly context: Readonly<Record<string, unknown>> }
  | { readonly kind: 'jwt'; readonly claims: Readonly<Record<string, unknown>>; readonly scopes: readonly string[] }
  | {
      readonly kind: 'iam';
      /** The caller's AWS account. */
      readonly accountId: string | undefined;
      readonly userArn: string | undefined;
      /** Set when the caller signed with a Cognito identity pool's credentials: that identity, not the account. */
      readonly cognitoIdentityId: string | undefined;
    }
  | { readonly kind: 'none' };

/** The authorizer's word on the caller, from any front door ({@link Authorizer}). */
export function authorizerOf(event: HttpEvent): Authorizer {
  const context = (event as { requestContext?: unknown }).requestContext;
  if (frontDoorOf(event) === 'alb' || !isRecord(context)) return { kind: 'none' };
  const authorizer = context.authorizer;
  if (isRecord(authorizer)) {
    if (isRecord(authorizer.lambda)) return { kind: 'lambda', context: authorizer.lambda };
    if (isRecord(authorizer.jwt)) return jwt(authorizer.jwt.claims, authorizer.jwt.scopes);
    if (isRecord(authorizer.iam)) {
      const iam = authorizer.iam;
      const cognito = isRecord(iam.cognitoIdentity) ? iam.cognitoIdentity.identityId : undefined;
      return {
        kind: 'iam',
        accountId: text(iam.accountId),
        userArn: text(iam.userArn),
        cognitoIdentityId: text(cognito),
      };
    }
    if (isRecord(authorizer.claims)) return jwt(authorizer.claims, authorizer.scopes);
    // A REST API puts a Lambda authorizer's context right here, beside `principalId`. An HTTP API on payload 1.0
    // without an authorizer sends `{ claims: null, scopes: null }`: that is nobody's context.
    const { claims: _claims, scopes: _scopes, ...rest } = authorizer;
    if (Object.values(rest).some((value) => value !== null && value !== undefined)) {
      return { kind: 'lambda', context: authorizer };
    }
  }
  const identity = context.identity;
  if (isRecord(identity) && (text(identity.accountId) || text(identity.userArn) || text(identity.cognitoIdentityId))) {
    return {
      kind: 'iam',
      accountId: text(identity.accountId),
      userArn: text(identity.userArn),
      cognitoIdentityId: text(identity.cognitoIdentityId),
    };
  }
  return { kind: 'none' };
}

/**
 * The caller's account (tenant), as the authorizer established it. The one place it is read: the idempotency
 * middleware scopes keys with it, and handlers act for it. Never taken from the request itself.
 *
 * - a Lambda authorizer: its context's `accountId` (payload 1.0 and 2.0);
 * - a JWT (an HTTP API's JWT authorizer, a REST API's Cognito user pool authorizer): its `sub` claim;
 * - IAM (SigV4): the caller's AWS account, or its Cognito identity when it signed with an identity pool's credentials
 *   (every user of a pool signs as the pool's account: scoping by the account would let them replay each other's
 *   responses);
 * - an ALB, or no authorizer: none.
 *
 * To scope by something else (a tenant claim), pass `httpIdempotency` an `accountId` that reads it from
 * {@link authorizerOf}.
 */
export function accountIdOf(event: HttpEvent): string | undefined {
  const authorizer = authorizerOf(event);
  switch (authorizer.kind) {
    case 'lambda':
      return text(authorizer.context.accountId);
    case 'jwt':
      return text(authorizer.claims.sub);
    case 'iam':
      return authorizer.cognitoIdentityId ?? authorizer.accountId;
    case 'none':
      return undefined;
  }
}

/**
 * {@link accountIdOf} (or `resolve`) for a handler that cannot act without one: a 401 problem when the request
 * carries no authenticated account (a route deployed without its authorizer).
 */
export function requireAccountId<TEvent extends HttpEvent>(
  event: TEvent,
  resolve: (event: TEvent) => string | undefined = accountIdOf,
): string {
  const accountId = resolve(event);
  if (accountId === undefined) {
    throw new HttpProblem(401, ProblemType.unauthenticated, 'Unauthenticated', {
      detail: 'The request carries no authenticated account.',
    });
  }
  return accountId;
}

function jwt(claims: unknown, scopes: unknown): Authorizer {
  return {
    kind: 'jwt',
    claims: isRecord(claims) ? claims : {},
    scopes: Array.isArray(scopes) ? scopes.filter((scope) => typeof scope === 'string') : [],
  };
}

/** A non-empty string, or undefined. */
function text(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}
