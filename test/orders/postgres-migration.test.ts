import { ordersTablesSql } from '../../lib/orders/postgres';
import { testPostgres } from '../support/postgres';

/**
 * The orders tables' migration on a database made before an order could be `refused`: its status CHECK is replaced,
 * once, and a second run changes nothing.
 */
const postgres = testPostgres();

/** The orders table as it was created before the `refused` status (its column CHECK named by PostgreSQL). */
const BEFORE = (schema: string) => `
CREATE TABLE "${schema}".orders (
  account_id text NOT NULL, id text NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'confirmed', 'declined')),
  items jsonb NOT NULL, amount integer NOT NULL CHECK (amount > 0), currency text NOT NULL, email text NOT NULL,
  charge_id text, shipment_id text, email_id text, steps jsonb NOT NULL, operation_key text NOT NULL,
  created_at timestamptz NOT NULL, PRIMARY KEY (account_id, id)
);
INSERT INTO "${schema}".orders VALUES
  ('acct', 'ord_1', 'pending', '[]', 1, 'usd', 'a@b', NULL, NULL, NULL, '{}', 'k', now());`;

const checks = async () =>
  (
    await postgres.pool.query<{ def: string }>(
      `SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
        WHERE conrelid = '"${postgres.schema}".orders'::regclass AND contype = 'c' AND conname LIKE '%status%'`,
    )
  ).rows.map((row) => row.def);

it('lets an order made before the refused status become refused, and refuses any other status', async () => {
  await postgres.pool.query(BEFORE(postgres.schema));
  const refuse = () =>
    postgres.pool.query(`UPDATE "${postgres.schema}".orders SET status = 'refused' WHERE id = 'ord_1'`);
  await expect(refuse()).rejects.toThrow(/orders_status_check/);

  await postgres.pool.query(ordersTablesSql(postgres.schema));
  const after = await checks();
  expect(after).toEqual([expect.stringContaining("'refused'")]);
  await postgres.pool.query(ordersTablesSql(postgres.schema)); // again: the same one CHECK
  expect(await checks()).toEqual(after);

  await refuse();
  await expect(
    postgres.pool.query(`UPDATE "${postgres.schema}".orders SET status = 'lost' WHERE id = 'ord_1'`),
  ).rejects.toThrow(/orders_status_check/);
});
