import { type DeployedFunction, referencedLogicalId, type TemplateValue } from './cloud-assembly';

/**
 * The variables whose deployed value exists only in AWS, and what the local stack puts in their place. Everything
 * else a function's template sets (lease, TTL, timeouts, service name, metrics namespace, log level, tracing flag,
 * NODE_OPTIONS) reaches the function as the template has it.
 *
 * - `references`: the template's value must be a `Ref`/`Fn::GetAtt` to a resource of this type. Checking it keeps
 *   the stand-in honest: a table variable that pointed at the wrong kind of resource would fail in AWS too.
 * - `placeholder`: a literal the template carries only until the real value is known at deploy time (the processor
 *   and mailer URLs are example.com placeholders per environment, lib/infra/environments.ts).
 * - `becomes`: the variable the function gets instead, when AWS delivers the value another way. The webhook secret
 *   is read from Secrets Manager through its ARN in AWS; locally there is no Secrets Manager, so the function gets
 *   the secret itself in the variable its code reads first (lib/runtime/secrets.ts). The one path this leaves
 *   untested is the GetSecretValue call.
 * - `connects`: the endpoint variable that points the function's SDK client at the local service, given only to a
 *   function that references such a resource (in AWS the SDK finds the regional endpoint itself).
 * - `asUser`: the local value is a connection URL, given to the function with the user its template names in this
 *   variable. Deployed, a function signs in to RDS Proxy as its own database user with an IAM token; locally it signs
 *   in to PostgreSQL as that same user (created with the same privileges) with a password, through `DATABASE_URL`,
 *   which the function reads first (lib/runtime/postgres.ts). The one path this leaves untested is the token.
 */
export const LOCAL_STAND_INS = {
  IDEMPOTENCY_TABLE: { references: 'AWS::DynamoDB::Table', connects: 'DYNAMODB_ENDPOINT' },
  PAYMENTS_TABLE: { references: 'AWS::DynamoDB::Table', connects: 'DYNAMODB_ENDPOINT' },
  SETTLEMENT_QUEUE_URL: { references: 'AWS::SQS::Queue', connects: 'SQS_ENDPOINT' },
  SETTLEMENT_DLQ_URL: { references: 'AWS::SQS::Queue', connects: 'SQS_ENDPOINT' },
  PROCESSOR_WEBHOOK_SECRET_ARN: { references: 'AWS::SecretsManager::Secret', becomes: 'PROCESSOR_WEBHOOK_SECRET' },
  PROCESSOR_URL: { placeholder: true },
  MAILER_URL: { placeholder: true },
  WAREHOUSE_URL: { placeholder: true },
  DATABASE_HOST: { references: 'AWS::RDS::DBProxy', becomes: 'DATABASE_URL', asUser: 'DATABASE_USER' },
} as const satisfies Record<string, StandIn>;

interface StandIn {
  readonly references?: string;
  readonly placeholder?: true;
  readonly becomes?: string;
  readonly connects?: string;
  readonly asUser?: string;
}

/** The local values, by the variable the function receives (`PROCESSOR_WEBHOOK_SECRET`, `DYNAMODB_ENDPOINT`...). */
export type LocalValues = Readonly<Record<string, string | undefined>>;

/** A function's local environment, and what in it differs from the template. */
export interface BundledEnvironment {
  readonly variables: Readonly<Record<string, string>>;
  /** Deployment-specific variables replaced by local stand-ins (the template's name). */
  readonly substituted: readonly string[];
  /** Template values replaced on purpose for this run (`IDEMPOTENCY_LEASE_SECONDS: 90 -> 4`). */
  readonly overridden: readonly string[];
}

/**
 * The environment a function runs with locally: its template's `Environment.Variables`, with each
 * deployment-specific value replaced by its local stand-in (LOCAL_STAND_INS) and the given overrides applied.
 *
 * A function gets only what its own template sets: a variable the template does not set for it is never added, not
 * by a stand-in (the local stack knows the payments table, but a function whose template lacks PAYMENTS_TABLE
 * fails at init as it would in AWS) and not by an override. A template value that refers to a resource with no
 * stand-in is refused, so a newly referenced resource is a decision to make here, not a silent gap.
 *
 * @example
 * bundledEnvironment(stack.function('PaymentsGet'), (id) => stack.resourceType(id), { PAYMENTS_TABLE: 'local-payments', DYNAMODB_ENDPOINT: db });
 */
export function bundledEnvironment(
  fn: DeployedFunction,
  resourceType: (logicalId: string) => string | undefined,
  local: LocalValues,
  overrides: Readonly<Record<string, string>> = {},
): BundledEnvironment {
  const variables: Record<string, string> = {};
  const substituted: string[] = [];
  const overridden: string[] = [];
  const localValue = (name: string) => {
    const value = local[name];
    if (value === undefined || value === '') throw new Error(`${fn.id}'s ${name}: the local stack has no value for it`);
    return value;
  };

  for (const [name, value] of Object.entries(fn.environment)) {
    const standIn: StandIn | undefined = (LOCAL_STAND_INS as Record<string, StandIn>)[name];
    if (standIn) {
      checkStandIn(fn, name, value, standIn, resourceType);
      const target = standIn.becomes ?? name;
      variables[target] = standIn.asUser ? asUser(localValue(target), fn, standIn.asUser) : localValue(target);
      if (standIn.connects) variables[standIn.connects] = localValue(standIn.connects);
      substituted.push(name);
      continue;
    }
    const literal = literalValue(value);
    if (literal === undefined) {
      const target = referencedLogicalId(value);
      const what = target ? `${resourceType(target) ?? 'a resource'} ${target}` : JSON.stringify(value);
      throw new Error(
        `${fn.id}'s ${name} refers to ${what}, which exists only once deployed and has no local stand-in ` +
          '(lib/local/bundled-environment.ts)',
      );
    }
    const override = overrides[name];
    if (override !== undefined && override !== literal) {
      variables[name] = override;
      overridden.push(`${name}: ${literal} -> ${override}`);
    } else {
      variables[name] = literal;
    }
  }
  return { variables, substituted, overridden };
}

function checkStandIn(
  fn: DeployedFunction,
  name: string,
  value: TemplateValue,
  standIn: StandIn,
  resourceType: (logicalId: string) => string | undefined,
): void {
  if (standIn.references) {
    const target = referencedLogicalId(value);
    const type = target === undefined ? undefined : resourceType(target);
    if (type !== standIn.references) {
      throw new Error(
        `${fn.id}'s ${name} should refer to an ${standIn.references}, but the template has ${JSON.stringify(value)}` +
          (type ? ` (an ${type})` : ''),
      );
    }
  } else if (literalValue(value) === undefined) {
    throw new Error(
      `${fn.id}'s ${name} should be a literal placeholder, but the template has ${JSON.stringify(value)}`,
    );
  }
}

function literalValue(value: TemplateValue): string | undefined {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? String(value)
    : undefined;
}

/** A connection URL with the user the function's template names (a literal) in `variable`. */
function asUser(url: string, fn: DeployedFunction, variable: string): string {
  const user = literalValue(fn.environment[variable] ?? '');
  if (!user) throw new Error(`${fn.id} has no literal ${variable} to connect as`);
  const withUser = new URL(url);
  withUser.username = user;
  return withUser.toString();
}
