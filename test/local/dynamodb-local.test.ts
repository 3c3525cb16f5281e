import { existsSync, readdirSync, readlinkSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { type DynamoDbLocal, startDynamoDbLocal } from '@keystone-idempotency/local-aws/dynamodb-local';
import { localClient } from '../support/dynamodb';

/** Its own JVM (not the run's shared one), so the test can look at the process it started. Linux: reads /proc. */
jest.setTimeout(60_000);

const checkout = join(__dirname, '..', '..');
let db: DynamoDbLocal;
let workDir: string;

beforeAll(async () => {
  db = await startDynamoDbLocal();
  workDir = readlinkSync(`/proc/${db.pid}/cwd`);
  const client = localClient({ endpoint: db.endpoint });
  await client.send(new ListTablesCommand({}));
  client.destroy();
});
afterAll(() => db?.stop());

describe('startDynamoDbLocal', () => {
  it('runs the JVM in a directory outside the checkout', () => {
    expect(relative(checkout, workDir).startsWith('..')).toBe(true);
  });

  it('runs with telemetry off, so the jar writes no metadata file anywhere', () => {
    expect(readdirSync(workDir)).not.toContain('dynamodb-local-metadata.json');
    expect(existsSync(join(checkout, 'dynamodb-local-metadata.json'))).toBe(false);
  });

  it('removes its working directory when stopped', async () => {
    const other = await startDynamoDbLocal();
    const otherDir = readlinkSync(`/proc/${other.pid}/cwd`);
    await other.stop();
    expect(existsSync(otherDir)).toBe(false);
  });
});
