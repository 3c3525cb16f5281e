import { randomUUID } from 'node:crypto';
import {
  CreateTableCommand,
  DynamoDBClient,
  type DynamoDBClientConfig,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { Pool, type PoolConfig } from 'pg';

/**
 * The databases the jest global setup started (DynamoDB Local, PostgreSQL), as the fault proxies' tests meet them:
 * a table or a schema of the test file's own, holding plain `(pk, sk)` items, and clients closed with the file.
 */

/** The DynamoDB Local endpoint the jest global setup started. */
export function dynamoDbEndpoint(): string {
  const endpoint = process.env.DYNAMODB_ENDPOINT;
  if (!endpoint) throw new Error('DYNAMODB_ENDPOINT is not set: run tests through jest (global setup starts it)');
  return endpoint;
}

/** A client for DynamoDB Local (or, with `endpoint`, for whatever stands in front of it). */
export function localClient(overrides: Partial<DynamoDBClientConfig> = {}): DynamoDBClient {
  return new DynamoDBClient({
    endpoint: dynamoDbEndpoint(),
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    ...overrides,
  });
}

export function localDocumentClient(client = localClient()): DynamoDBDocumentClient {
  return DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
}

/** A table of `(pk, sk)` items of this file's own, created in `beforeAll`; its client is destroyed in `afterAll`. */
export function testTable() {
  const client = localClient();
  const table = { name: '' };
  beforeAll(async () => {
    table.name = `Items-${randomUUID().slice(0, 8)}`;
    await client.send(
      new CreateTableCommand({
        TableName: table.name,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [
          { AttributeName: 'pk', AttributeType: 'S' },
          { AttributeName: 'sk', AttributeType: 'S' },
        ],
        KeySchema: [
          { AttributeName: 'pk', KeyType: 'HASH' },
          { AttributeName: 'sk', KeyType: 'RANGE' },
        ],
      }),
    );
    await waitUntilTableExists({ client, maxWaitTime: 60 }, { TableName: table.name });
  });
  afterAll(() => client.destroy());
  return {
    client,
    doc: localDocumentClient(client),
    get name() {
      return table.name;
    },
  };
}

/** The PostgreSQL the jest global setup started. */
export function postgresUrl(): string {
  const url = process.env.POSTGRES_URL;
  if (!url) throw new Error('POSTGRES_URL is not set: run tests through jest (global setup starts PostgreSQL)');
  return url;
}

/**
 * A schema of this file's own, with an `effects (pk, sk)` table (created in `beforeAll`, dropped in `afterAll`), and
 * pools that are closed with it.
 */
export function testSchema() {
  const schema = `test_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const effectsTable = `"${schema}".effects`;
  const pools: Pool[] = [];
  const pool2 = (config: PoolConfig = {}) => {
    const pool = new Pool({ connectionString: postgresUrl(), max: 8, idleTimeoutMillis: 0, ...config });
    pool.on('error', () => undefined); // a connection a test broke on purpose, while idle
    pools.push(pool);
    return pool;
  };
  const pool = pool2();
  beforeAll(async () => {
    await pool.query(`CREATE SCHEMA "${schema}"`);
    await pool.query(`CREATE TABLE ${effectsTable} (pk text NOT NULL, sk text NOT NULL, PRIMARY KEY (pk, sk))`);
  });
  afterAll(async () => {
    await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
    await Promise.all(pools.map((p) => p.end()));
  });
  return {
    pool,
    schema,
    effectsTable,
    /** Another pool on the same database (closed with the file), e.g. with pipelining, or through a proxy. */
    pool2,
    /** How many effect rows hold this pk. */
    async rowsUnder(pk: string): Promise<number> {
      const { rows } = await pool.query<{ count: string }>(`SELECT count(*) FROM ${effectsTable} WHERE pk = $1`, [pk]);
      return Number(rows[0]?.count);
    },
  };
}
