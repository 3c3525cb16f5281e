import { randomUUID } from 'node:crypto';
import { Client, Pool } from 'pg';
import { migrateService } from '../../lib/payments/postgres';
import { managedRoleComment, provisionRoles } from '../../lib/payments/postgres-roles';
import { SQL_PRIVILEGES, SQL_TABLES, type SqlAccess } from '../../lib/tables/postgres-access';
import { postgresUrl } from '../support/postgres';

/**
 * Each function's own database role, against a real PostgreSQL: the privileges the spec declares and nothing more,
 * whatever the roles had before. A schema and role names of this file's own: roles belong to the server, which every
 * test file shares.
 */
const suffix = randomUUID().replaceAll('-', '').slice(0, 8);
const schema = `roles_${suffix}`;
const name = (role: string) => `t${suffix}_${role}`;
const PASSWORD = 'local-only';

const keys: SqlAccess = { table: 'idempotency_keys', privileges: ['SELECT', 'INSERT', 'UPDATE'] };
const roles = [
  { name: name('writer'), grants: [keys, { table: 'payments', privileges: ['INSERT'] } as SqlAccess] },
  { name: name('reader'), grants: [{ table: 'payments', privileges: ['SELECT'] } as SqlAccess] },
  {
    name: name('purger'),
    grants: [{ table: 'idempotency_keys', privileges: ['SELECT', 'UPDATE', 'DELETE'] } as SqlAccess],
  },
];

let admin: Pool;
beforeAll(async () => {
  admin = new Pool({ connectionString: postgresUrl(), max: 2 });
  await migrateService(admin, { schema });
});
afterAll(async () => {
  const { rows } = await admin.query<{ rolname: string }>('SELECT rolname FROM pg_roles WHERE rolname LIKE $1', [
    `t${suffix}_%`,
  ]);
  for (const { rolname } of rows) {
    await admin.query(`DROP OWNED BY "${rolname}"`);
    await admin.query(`DROP ROLE "${rolname}"`);
  }
  await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
  await admin.end();
});

/** What the role may do, per table, as PostgreSQL itself answers it. */
async function privilegesOf(role: string): Promise<Record<string, string[]>> {
  const granted: Record<string, string[]> = {};
  for (const table of SQL_TABLES) {
    for (const privilege of SQL_PRIVILEGES) {
      const { rows } = await admin.query<{ has: boolean }>('SELECT has_table_privilege($1, $2, $3) AS has', [
        role,
        `"${schema}"."${table}"`,
        privilege,
      ]);
      if (rows[0]!.has) granted[table] = [...(granted[table] ?? []), privilege];
    }
  }
  return granted;
}

function declared(grants: readonly SqlAccess[]): Record<string, string[]> {
  return Object.fromEntries(grants.map((grant) => [grant.table, [...grant.privileges]]));
}

/** A connection as the role, as a function makes it (locally, with a password). */
async function connectAs(role: string): Promise<Client> {
  const url = new URL(postgresUrl());
  url.username = role;
  url.password = PASSWORD;
  const client = new Client({ connectionString: url.toString() });
  await client.connect();
  return client;
}

describe('provisionRoles', () => {
  it('creates each role with exactly the privileges its spec declares', async () => {
    const outcome = await provisionRoles(admin, { schema, roles, authentication: { password: PASSWORD } });
    expect([...outcome.created].sort()).toEqual(roles.map((role) => role.name).sort());
    for (const role of roles) expect(await privilegesOf(role.name)).toEqual(declared(role.grants));
  });

  it('is what a function meets when it connects: its own statements work, and nothing else does', async () => {
    const reader = await connectAs(name('reader'));
    try {
      await expect(reader.query(`SELECT count(*) FROM "${schema}".payments`)).resolves.toBeDefined();
      await expect(reader.query(`DELETE FROM "${schema}".payments`)).rejects.toThrow(/permission denied/);
      await expect(reader.query(`SELECT * FROM "${schema}".idempotency_keys`)).rejects.toThrow(/permission denied/);
      await expect(reader.query(`SELECT * FROM "${schema}".api_keys`)).rejects.toThrow(/permission denied/);
      // The keys table's fence is not PUBLIC's to call any more: only the roles granted the keys table may.
      await expect(reader.query(`SELECT "${schema}".idempotency_keys_fence(1, 'a', 'b')`)).rejects.toThrow(
        /permission denied/,
      );
      await expect(reader.query(`CREATE TABLE "${schema}".mine (id int)`)).rejects.toThrow(/permission denied/);
    } finally {
      await reader.end();
    }
    const writer = await connectAs(name('writer'));
    try {
      await expect(writer.query(`SELECT "${schema}".idempotency_keys_fence(1, 'a', 'b')`)).resolves.toBeDefined();
      await expect(writer.query(`DELETE FROM "${schema}".idempotency_keys`)).rejects.toThrow(/permission denied/);
    } finally {
      await writer.end();
    }
  });

  it('changes nothing when run again, and takes back a privilege a spec no longer declares', async () => {
    const again = await provisionRoles(admin, { schema, roles, authentication: { password: PASSWORD } });
    expect(again).toEqual({ created: [], dropped: [] });
    for (const role of roles) expect(await privilegesOf(role.name)).toEqual(declared(role.grants));

    const narrowed = roles.map((role) =>
      role.name === name('writer')
        ? { ...role, grants: [{ table: 'idempotency_keys', privileges: ['SELECT'] } as SqlAccess] }
        : role,
    );
    await provisionRoles(admin, { schema, roles: narrowed, authentication: { password: PASSWORD } });
    expect(await privilegesOf(name('writer'))).toEqual({ idempotency_keys: ['SELECT'] });
    await provisionRoles(admin, { schema, roles, authentication: { password: PASSWORD } });
  });

  it('drops the role of a function that is gone, with its privileges', async () => {
    const extra = { name: name('gone'), grants: [{ table: 'api_keys', privileges: ['SELECT'] } as SqlAccess] };
    await provisionRoles(admin, { schema, roles: [...roles, extra], authentication: { password: PASSWORD } });
    const outcome = await provisionRoles(admin, { schema, roles, authentication: { password: PASSWORD } });
    expect(outcome.dropped).toEqual([extra.name]);
    const { rowCount } = await admin.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [extra.name]);
    expect(rowCount).toBe(0);
  });

  it('never takes over a role it did not create, and leaves it as it was', async () => {
    const foreign = name('foreign');
    await admin.query(`CREATE ROLE "${foreign}" LOGIN`);
    await expect(
      provisionRoles(admin, {
        schema,
        roles: [...roles, { name: foreign, grants: [keys] }],
        authentication: { password: PASSWORD },
      }),
    ).rejects.toThrow(`role ${foreign} exists and was not created by this service's migration`);
    expect(await privilegesOf(foreign)).toEqual({});
    // Nor is a role managed for another schema this schema's to drop.
    const { rows } = await admin.query<{ comment: string | null }>(
      "SELECT shobj_description(oid, 'pg_authid') AS comment FROM pg_roles WHERE rolname = $1",
      [foreign],
    );
    expect(rows[0]!.comment).toBeNull();
  });

  it('refuses a table or a privilege the service does not know, before touching anything', async () => {
    await expect(
      provisionRoles(admin, {
        schema,
        roles: [{ name: name('odd'), grants: [{ table: 'pg_authid', privileges: ['SELECT'] } as never] }],
        authentication: { password: PASSWORD },
      }),
    ).rejects.toThrow('unknown table "pg_authid"');
    await expect(
      provisionRoles(admin, {
        schema,
        roles: [{ name: name('odd'), grants: [{ table: 'payments', privileges: ['TRUNCATE'] } as never] }],
        authentication: { password: PASSWORD },
      }),
    ).rejects.toThrow('privileges must be some of SELECT, INSERT, UPDATE, DELETE, got ["TRUNCATE"]');
    const { rowCount } = await admin.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [name('odd')]);
    expect(rowCount).toBe(0);
  });

  it('with IAM, makes each role a member of rds_iam and gives it no password', async () => {
    // Aurora's rds_iam role, as a local server can have it: a plain role that IAM authentication looks for.
    await admin.query(
      "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rds_iam') THEN CREATE ROLE rds_iam; END IF; END $$",
    );
    await provisionRoles(admin, { schema, roles, authentication: 'iam' });
    for (const role of roles) {
      const { rows } = await admin.query<{ member: boolean; password: string | null; comment: string }>(
        `SELECT pg_has_role(rolname, 'rds_iam', 'MEMBER') AS member, rolpassword AS password,
                shobj_description(oid, 'pg_authid') AS comment
           FROM pg_authid WHERE rolname = $1`,
        [role.name],
      );
      expect(rows[0]).toEqual({ member: true, password: null, comment: managedRoleComment(schema) });
      expect(await privilegesOf(role.name)).toEqual(declared(role.grants));
    }
  });
});
