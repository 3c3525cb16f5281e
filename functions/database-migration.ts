import { Logger } from '@aws-lambda-powertools/logger';
import type { CloudFormationCustomResourceEvent, Context } from 'aws-lambda';
import { z } from 'zod';
import { migrateService } from '../lib/payments/postgres';
import { provisionRoles } from '../lib/payments/postgres-roles';
import { answerCloudFormation, type CustomResourceOutcome } from '../lib/runtime/custom-resource';
import { postgresAdminPool } from '../lib/runtime/postgres-admin';
import { SQL_PRIVILEGES, SQL_TABLES } from '../lib/tables/postgres-access';

/**
 * The database's schema, applied at deploy: the CloudFormation custom resource `Custom::DatabaseMigration` invokes this
 * function on every create and update of the stack's database settings (the roles, the schema, or this function's
 * code, whose asset hash is one of the resource's properties). Connected to the cluster as its admin user, it
 * applies keystone-idempotency's migration and the service's tables (`migrateService`), then gives each function its
 * own role with exactly the privileges its spec declares (`provisionRoles`), logging in with IAM only. Both steps are
 * idempotent: a deploy that changes nothing runs them again and changes nothing.
 *
 * A delete changes nothing: dev's cluster goes with its stack, and staging's and prod's data, schema and roles are
 * kept with their cluster.
 *
 * CloudFormation waits up to an hour for an answer, holding the deploy: the work races the function's own deadline,
 * and the answer, success or failure, is always sent.
 */
const logger = new Logger({ serviceName: 'database-migration' });

/** The same value on every event: an update is the same resource, so CloudFormation never asks to delete the old one. */
export const PHYSICAL_RESOURCE_ID = 'keystone-database-schema';

/** Time kept back to answer CloudFormation after the work gave up. */
const ANSWER_MARGIN_MS = 5_000;

const propertiesSchema = z.object({
  Schema: z.string().min(1).max(63),
  Roles: z.array(
    z.object({
      Name: z.string().min(1),
      Grants: z.array(z.object({ Table: z.enum(SQL_TABLES), Privileges: z.array(z.enum(SQL_PRIVILEGES)).min(1) })),
    }),
  ),
});

export type MigrationProperties = z.infer<typeof propertiesSchema>;

async function migrateDatabase(event: CloudFormationCustomResourceEvent, context: Context): Promise<void> {
  logger.info('custom resource request', { requestType: event.RequestType, requestId: event.RequestId });
  const deadlineMs = Math.max(1_000, context.getRemainingTimeInMillis() - ANSWER_MARGIN_MS);
  const outcome =
    event.RequestType === 'Delete'
      ? ({ status: 'SUCCESS' } as const)
      : await withDeadline(migrate(event.ResourceProperties), deadlineMs).catch(
          (error: unknown): CustomResourceOutcome => {
            logger.error('migration failed', { error: error as Error });
            return { status: 'FAILED', reason: error instanceof Error ? error.message : String(error) };
          },
        );
  await answerCloudFormation(event, PHYSICAL_RESOURCE_ID, outcome);
}

async function migrate(raw: Record<string, unknown>): Promise<CustomResourceOutcome> {
  const parsed = propertiesSchema.safeParse(raw);
  if (!parsed.success) {
    return { status: 'FAILED', reason: `invalid properties: ${parsed.error.issues.map((i) => i.message).join('; ')}` };
  }
  const { Schema: schema, Roles } = parsed.data;
  const pool = await postgresAdminPool(process.env, 10_000);
  pool.on('error', () => undefined);
  try {
    await migrateService(pool, { schema });
    const roles = Roles.map((role) => ({
      name: role.Name,
      grants: role.Grants.map((grant) => ({ table: grant.Table, privileges: grant.Privileges })),
    }));
    const { created, dropped } = await provisionRoles(pool, { schema, roles, authentication: 'iam' });
    logger.info('database migrated', { schema, roles: roles.map((role) => role.name), created, dropped });
    return { status: 'SUCCESS', data: { Schema: schema, Roles: roles.map((role) => role.name).join(',') } };
  } finally {
    await pool.end().catch(() => undefined);
  }
}

async function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the migration did not finish within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

export const handler = migrateDatabase;
