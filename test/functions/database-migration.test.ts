import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { type AddressInfo, createServer as createTcpServer, type Socket } from 'node:net';
import type { CloudFormationCustomResourceEvent, Context } from 'aws-lambda';
import { Pool } from 'pg';
import { PHYSICAL_RESOURCE_ID } from '../../functions/database-migration';
import { postgresUrl } from '../support/postgres';

/**
 * The migration function as CloudFormation invokes it, from its source, against a real PostgreSQL: a custom resource
 * event in, its answer PUT to the event's response URL (a server of this test's own, standing in for S3's pre-signed
 * URL). The database is reached through `DATABASE_URL`, as the local stack does; deployed it is the cluster with the
 * admin secret.
 */
const suffix = randomUUID().replaceAll('-', '').slice(0, 8);
const schema = `migration_${suffix}`;
const role = `m${suffix}_payments_get`;
const properties = {
  ServiceToken: 'arn:aws:lambda:eu-west-1:123456789012:function:migration',
  Schema: schema,
  Roles: [{ Name: role, Grants: [{ Table: 'payments', Privileges: ['SELECT'] }] }],
  CodeVersion: 'abc.zip',
};

interface Answer {
  readonly headers: IncomingHttpHeaders;
  readonly body: {
    Status: string;
    Reason: string;
    PhysicalResourceId: string;
    RequestId: string;
    StackId: string;
    LogicalResourceId: string;
    Data: Record<string, string>;
  };
}

let server: Server;
let responseUrl: string;
const answers = new Map<string, Answer>();
let admin: Pool;
let handler: (event: CloudFormationCustomResourceEvent, context: Context) => Promise<void>;

beforeAll(async () => {
  server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    request.on('end', () => {
      answers.set(request.url!.slice(1), { headers: request.headers, body: JSON.parse(body) });
      response.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  responseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  admin = new Pool({ connectionString: postgresUrl(), max: 1 });
  await admin.query(
    "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rds_iam') THEN CREATE ROLE rds_iam; END IF; END $$",
  );
  handler = (await import('../../functions/database-migration')).handler;
});
afterAll(async () => {
  await admin.query(`DROP OWNED BY "${role}"`).catch(() => undefined);
  await admin.query(`DROP ROLE IF EXISTS "${role}"`);
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
  await new Promise((resolve) => server.close(resolve));
});

function event(
  requestType: 'Create' | 'Update' | 'Delete',
  resourceProperties: Record<string, unknown> = properties,
): CloudFormationCustomResourceEvent {
  const requestId = randomUUID();
  return {
    RequestType: requestType,
    ServiceToken: properties.ServiceToken,
    ResponseURL: `${responseUrl}/${requestId}`,
    StackId: 'arn:aws:cloudformation:eu-west-1:123456789012:stack/Keystone-dev/1',
    RequestId: requestId,
    LogicalResourceId: 'DatabaseSchema549D0DD2',
    ResourceType: 'Custom::DatabaseMigration',
    ResourceProperties: resourceProperties,
    ...(requestType === 'Create' ? {} : { PhysicalResourceId: PHYSICAL_RESOURCE_ID, OldResourceProperties: {} }),
  } as CloudFormationCustomResourceEvent;
}

function context(remainingMs = 300_000): Context {
  return { getRemainingTimeInMillis: () => remainingMs } as Context;
}

/** Invokes the handler with the database at `url`, and returns what it answered CloudFormation. */
async function invoke(request: CloudFormationCustomResourceEvent, url = postgresUrl(), remainingMs?: number) {
  const saved = process.env.DATABASE_URL;
  process.env.DATABASE_URL = url;
  try {
    await handler(request, context(remainingMs));
  } finally {
    if (saved === undefined) delete process.env.DATABASE_URL;
    else process.env.DATABASE_URL = saved;
  }
  const answer = answers.get(request.RequestId);
  if (!answer) throw new Error('the function did not answer CloudFormation');
  return answer;
}

async function tables(): Promise<string[]> {
  const { rows } = await admin.query<{ table_name: string }>(
    'SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name',
    [schema],
  );
  return rows.map((row) => row.table_name);
}

describe('the database migration function', () => {
  it("creates the schema, its tables and each function's role, and tells CloudFormation so", async () => {
    const request = event('Create');
    const { body, headers } = await invoke(request);
    expect(body).toEqual({
      Status: 'SUCCESS',
      Reason: 'done',
      PhysicalResourceId: PHYSICAL_RESOURCE_ID,
      RequestId: request.RequestId,
      StackId: request.StackId,
      LogicalResourceId: request.LogicalResourceId,
      Data: { Schema: schema, Roles: role },
    });
    // The pre-signed URL is signed without a content type: none may be sent.
    expect(headers['content-type']).toBeUndefined();
    expect(await tables()).toEqual([
      'api_keys',
      'idempotency_keys',
      'idempotency_keys_migrations',
      'inventory',
      'orders',
      'payments',
      'reservations',
    ]);
    const { rows } = await admin.query<{ select: boolean; insert: boolean; iam: boolean }>(
      `SELECT has_table_privilege($1, $2, 'SELECT') AS select, has_table_privilege($1, $2, 'INSERT') AS insert,
              pg_has_role($1, 'rds_iam', 'MEMBER') AS iam`,
      [role, `"${schema}".payments`],
    );
    expect(rows[0]).toEqual({ select: true, insert: false, iam: true });
  });

  it('changes nothing on an update that changes nothing, as every deploy runs it again', async () => {
    await admin.query(`INSERT INTO "${schema}".api_keys (key_hash, account_id) VALUES ('h', 'acct')`);
    const { body } = await invoke(event('Update'));
    expect(body.Status).toBe('SUCCESS');
    expect(body.PhysicalResourceId).toBe(PHYSICAL_RESOURCE_ID);
    const { rowCount } = await admin.query(`SELECT 1 FROM "${schema}".api_keys`);
    expect(rowCount).toBe(1);
  });

  it('keeps the schema, its data and the roles when the resource is deleted', async () => {
    const { body } = await invoke(event('Delete'));
    expect(body.Status).toBe('SUCCESS');
    expect(await tables()).toContain('payments');
    const { rowCount } = await admin.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [role]);
    expect(rowCount).toBe(1);
  });

  it('answers FAILED, naming the problem, for properties it cannot apply', async () => {
    const { body } = await invoke(
      event('Update', {
        ...properties,
        Roles: [{ Name: role, Grants: [{ Table: 'pg_authid', Privileges: ['SELECT'] }] }],
      }),
    );
    expect(body.Status).toBe('FAILED');
    expect(body.Reason).toMatch(/^invalid properties: /);
  });

  it('answers FAILED when the database cannot be reached, rather than leaving CloudFormation waiting', async () => {
    const { body } = await invoke(event('Update'), 'postgres://postgres@127.0.0.1:1/postgres');
    expect(body.Status).toBe('FAILED');
    expect(body.Reason).toMatch(/ECONNREFUSED/);
  });

  it('answers FAILED before its own timeout when the database never answers', async () => {
    // A server that accepts connections and never says a word: only the function's deadline ends the wait.
    const sockets: Socket[] = [];
    const silent = createTcpServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as AddressInfo;
    try {
      const startedAt = Date.now();
      // 6 s left: the work gets 1 s, and 5 s are kept to answer.
      const { body } = await invoke(event('Update'), `postgres://postgres@127.0.0.1:${port}/postgres`, 6_000);
      expect(body.Status).toBe('FAILED');
      expect(body.Reason).toBe('the migration did not finish within 1000 ms');
      expect(Date.now() - startedAt).toBeLessThan(5_000);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
