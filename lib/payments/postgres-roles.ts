import { tableNames } from 'keystone-idempotency/postgres';
import type { Pool } from 'pg';
import {
  type DatabaseRole,
  SQL_PRIVILEGES,
  SQL_TABLES,
  type SqlPrivilege,
  type SqlTable,
} from '../tables/postgres-access';

/**
 * How the service's roles log in:
 * - `iam` (deployed): the role is granted `rds_iam`, so it logs in with an IAM token only (the RDS Proxy signs in as it
 *   with its own IAM role, end to end) and has no password;
 * - `{ password }` (the local stack): a password, since a local PostgreSQL has no IAM.
 */
export type RoleAuthentication = 'iam' | { readonly password: string };

export interface ProvisionOptions {
  /** The schema holding the keys table and the service's tables (migrated before this runs). */
  readonly schema: string;
  /** Every function's role: created when missing, and given exactly these privileges. */
  readonly roles: readonly DatabaseRole[];
  readonly authentication: RoleAuthentication;
}

export interface ProvisionOutcome {
  readonly created: readonly string[];
  /** Roles this provisioning made earlier whose function is gone: dropped, with their privileges. */
  readonly dropped: readonly string[];
}

/**
 * The session timeouts of every function's role (ALTER ROLE ... SET: each new session starts with them), so that no
 * wait of the service's own on PostgreSQL is unbounded, whatever the code forgets:
 * - `statement_timeout` 10 s: the service's statements take milliseconds, and the longest a function waits is an API
 *   request's (the integration gives up well under 30 s); a statement still running after 10 s serves no caller, and
 *   stopping it frees what it holds. The store narrows it further, to the invocation's time left, in its transactions.
 * - `idle_in_transaction_session_timeout` 5 s: no function keeps a transaction open across anything but its own
 *   statements, so a session idle in one for 5 s has lost its function (a partition, a proxy that stopped
 *   forwarding, a runtime that was frozen or killed) and is holding row locks for nobody: the server ends it. The
 *   store sets the same on each of its transactions, for databases whose roles don't.
 * - `lock_timeout` is left to the store, which sets it on the statements that wait on a key's row.
 */
export const ROLE_TIMEOUTS = {
  statement_timeout: '10s',
  idle_in_transaction_session_timeout: '5s',
} as const;

/**
 * Marks the roles this provisioning owns for a schema (and may drop when their function goes): a comment on the role.
 * Roles are the server's, not the database's: the schema in the mark keeps two services' (or two tests') apart.
 */
export function managedRoleComment(schema: string): string {
  return `keystone payments service: a function's role on schema ${JSON.stringify(schema)}, managed by its migration`;
}

/**
 * Each function's database role with exactly the privileges its spec declares (lib/infra/functions.ts), no more: the
 * database-side half of least privilege, as each function's IAM role is the AWS side. Runs at deploy (the migration
 * function, after the schema's migration) and when the local stack starts. Idempotent and convergent: a role that
 * exists is brought to the declared privileges (a privilege dropped from a spec is revoked), and a role this
 * provisioning created for a function that no longer exists is dropped. One transaction, under an advisory lock, so
 * two deploys never interleave.
 *
 * Only the roles' own privileges are touched; the tables, the schema and the admin user are not.
 */
export async function provisionRoles(
  pool: Pick<Pool, 'connect'>,
  options: ProvisionOptions,
): Promise<ProvisionOutcome> {
  const roles = options.roles.map(checkedRole);
  const schema = identifier(options.schema);
  const mark = managedRoleComment(options.schema);
  const keys = tableNames({ schema: options.schema });
  // The keys table's functions, as its writes call them (packages/keystone-idempotency/src/postgres/schema.ts).
  const engineFunctions = [`${keys.fence}(bigint, text, text)`, `${keys.expectRows}(bigint, bigint, integer)`];
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', ['keystone service roles']);
      const { rows: existing } = await client.query<{ rolname: string; managed: boolean }>(
        `SELECT r.rolname, coalesce(shobj_description(r.oid, 'pg_authid') = $1, false) AS managed FROM pg_roles r`,
        [mark],
      );
      const present = new Map(existing.map((row) => [row.rolname, row.managed]));
      const created: string[] = [];
      // Only the roles granted the keys table may call its functions; PUBLIC's default EXECUTE is taken back.
      for (const fn of engineFunctions) await client.query(`REVOKE EXECUTE ON FUNCTION ${fn} FROM PUBLIC`);
      for (const role of roles) {
        const name = identifier(role.name);
        if (!present.has(role.name)) {
          await client.query(`CREATE ROLE ${name} LOGIN`);
          created.push(role.name);
        } else if (present.get(role.name) === false) {
          // Never take over a role someone else made: granting it the service's privileges would widen its access.
          throw new Error(
            `role ${role.name} exists and was not created by this service's migration for schema ${options.schema}: ` +
              'rename the function or drop the role',
          );
        }
        await client.query(`COMMENT ON ROLE ${name} IS ${literal(mark)}`);
        await client.query(`ALTER ROLE ${name} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS`);
        if (options.authentication === 'iam') {
          await client.query(`GRANT rds_iam TO ${name}`);
          await client.query(`ALTER ROLE ${name} PASSWORD NULL`);
        } else {
          await client.query(`ALTER ROLE ${name} PASSWORD ${literal(options.authentication.password)}`);
        }
        for (const [setting, value] of Object.entries(ROLE_TIMEOUTS)) {
          await client.query(`ALTER ROLE ${name} SET ${setting} = ${literal(value)}`);
        }
        await client.query(`GRANT USAGE ON SCHEMA ${schema} TO ${name}`);
        // From nothing to exactly the declared privileges, every time: a privilege removed from a spec goes too.
        await client.query(`REVOKE ALL ON ALL TABLES IN SCHEMA ${schema} FROM ${name}`);
        for (const { table, privileges } of role.grants) {
          await client.query(`GRANT ${privileges.join(', ')} ON ${schema}.${identifier(table)} TO ${name}`);
        }
        const usesKeys = role.grants.some((grant) => grant.table === 'idempotency_keys');
        for (const fn of engineFunctions) {
          await client.query(
            `${usesKeys ? 'GRANT' : 'REVOKE'} EXECUTE ON FUNCTION ${fn} ${usesKeys ? 'TO' : 'FROM'} ${name}`,
          );
        }
      }
      const wanted = new Set(roles.map((role) => role.name));
      const dropped = existing.filter((row) => row.managed && !wanted.has(row.rolname)).map((row) => row.rolname);
      for (const stale of dropped) {
        // DROP OWNED revokes what the role was granted in this database; it owns nothing else.
        await client.query(`DROP OWNED BY ${identifier(stale)}`);
        await client.query(`DROP ROLE ${identifier(stale)}`);
      }
      await client.query('COMMIT');
      return { created, dropped };
    } catch (error) {
      await client.query('ROLLBACK').catch((rollbackError: Error) => {
        broken = rollbackError;
      });
      throw error;
    }
  } finally {
    client.release(broken);
  }
}

/** A role as declared, refused unless every table and privilege is one this service knows. */
function checkedRole(role: DatabaseRole): DatabaseRole {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(role.name)) {
    throw new Error(`role name ${JSON.stringify(role.name)} must be a lowercase PostgreSQL identifier`);
  }
  for (const grant of role.grants) {
    if (!(SQL_TABLES as readonly string[]).includes(grant.table)) {
      throw new Error(`role ${role.name}: unknown table ${JSON.stringify(grant.table satisfies SqlTable)}`);
    }
    const unknown = grant.privileges.filter((p) => !(SQL_PRIVILEGES as readonly string[]).includes(p));
    if (unknown.length > 0 || grant.privileges.length === 0) {
      throw new Error(
        `role ${role.name} on ${grant.table}: privileges must be some of ${SQL_PRIVILEGES.join(', ')}, got ` +
          JSON.stringify(grant.privileges satisfies readonly SqlPrivilege[]),
      );
    }
  }
  return role;
}

function identifier(name: string): string {
  if (name.length === 0 || name.length > 63 || name.includes('\0')) {
    throw new Error(`${JSON.stringify(name)} is not a usable PostgreSQL identifier`);
  }
  return `"${name.replaceAll('"', '""')}"`;
}

/** A string literal; DDL takes no parameters, so the password and the comment are quoted here. */
function literal(value: string): string {
  if (value.includes('\0')) throw new Error('a PostgreSQL literal cannot hold NUL');
  return `'${value.replaceAll("'", "''")}'`;
}
