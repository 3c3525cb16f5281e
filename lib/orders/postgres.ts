import type { PostgresStatement } from 'keystone-idempotency/postgres';
import type { Pool } from 'pg';
import {
  completedSteps,
  type OrderOutcome,
  type OrderRefusal,
  type OrdersRepository,
  refusedSteps,
  type Shortage,
  type StepStates,
  toOrder,
} from './repository';
import type { Inventory, Order, OrderLine, OrderStepName, OrderWithSteps } from './schema';
import { type MarkedStepState, ORDER_STATUSES } from './steps';

type Db = Pick<Pool, 'query'>;

function qualified(schema: string | undefined, table: string): string {
  return schema === undefined ? `"${table}"` : `"${schema.replaceAll('"', '""')}"."${table}"`;
}

/**
 * The orders tables: the order's row (its steps' states as jsonb), its reservation, and the stock per SKU, with
 * CHECKs that make negative stock impossible whatever a statement forgets. Idempotent, like the payments tables'; a
 * table made before an order could be `refused` has its status CHECK replaced (once: only while it lacks a status).
 */
export function ordersTablesSql(schema: string | undefined): string {
  const orders = qualified(schema, 'orders');
  const statuses = ORDER_STATUSES.map((status) => `'${status}'`).join(', ');
  return `
CREATE TABLE IF NOT EXISTS ${qualified(schema, 'inventory')} (
  sku       text    PRIMARY KEY,
  available integer NOT NULL CHECK (available >= 0),
  reserved  integer NOT NULL CHECK (reserved >= 0)
);
CREATE TABLE IF NOT EXISTS ${orders} (
  account_id    text        NOT NULL,
  id            text        NOT NULL,
  status        text        NOT NULL CONSTRAINT orders_status_check CHECK (status IN (${statuses})),
  items         jsonb       NOT NULL,
  amount        integer     NOT NULL CHECK (amount > 0),
  currency      text        NOT NULL,
  email         text        NOT NULL,
  charge_id     text,
  shipment_id   text,
  email_id      text,
  steps         jsonb       NOT NULL,
  operation_key text        NOT NULL,
  created_at    timestamptz NOT NULL,
  PRIMARY KEY (account_id, id)
);
CREATE TABLE IF NOT EXISTS ${qualified(schema, 'reservations')} (
  order_id   text        PRIMARY KEY,
  account_id text        NOT NULL,
  items      jsonb       NOT NULL,
  state      text        NOT NULL CHECK (state IN ('held', 'released')),
  created_at timestamptz NOT NULL DEFAULT now()
);
DO $$
BEGIN
  IF NOT EXISTS (
    SELECT 1 FROM pg_constraint
     WHERE conrelid = ${sqlLiteral(orders)}::regclass AND conname = 'orders_status_check'
       ${ORDER_STATUSES.map((status) => `AND pg_get_constraintdef(oid) LIKE ${sqlLiteral(`%'${status}'%`)}`).join(' ')}
  ) THEN
    ALTER TABLE ${orders} DROP CONSTRAINT IF EXISTS orders_status_check;
    ALTER TABLE ${orders} ADD CONSTRAINT orders_status_check CHECK (status IN (${statuses}));
  END IF;
END $$;`;
}

function sqlLiteral(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/** Orders on PostgreSQL: writes as statements staged into a step's (or the completion's) transaction. */
export class PostgresOrders implements OrdersRepository<PostgresStatement> {
  private readonly orders: string;
  private readonly reservations: string;
  private readonly inventory: string;

  constructor(
    private readonly db: Db,
    options: { readonly schema?: string } = {},
  ) {
    this.orders = qualified(options.schema, 'orders');
    this.reservations = qualified(options.schema, 'reservations');
    this.inventory = qualified(options.schema, 'inventory');
  }

  reserve(accountId: string, order: Order, operationKey: string): PostgresStatement[] {
    const steps: StepStates = { reserve: { state: 'completed', ref: null } };
    return [
      {
        text: `INSERT INTO ${this.orders}
  (account_id, id, status, items, amount, currency, email, steps, operation_key, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
        values: [
          accountId,
          order.id,
          order.status,
          JSON.stringify(order.items),
          order.amount,
          order.currency,
          order.email,
          JSON.stringify(steps),
          operationKey,
          order.created_at,
        ],
      },
      {
        text: `INSERT INTO ${this.reservations} (order_id, account_id, items, state) VALUES ($1, $2, $3, 'held')`,
        values: [order.id, accountId, JSON.stringify(order.items)],
      },
      // The WHERE is the guarantee (and the CHECK behind it): stock never goes below zero.
      ...order.items.map(
        (line): PostgresStatement => ({
          text: `UPDATE ${this.inventory} SET available = available - $2, reserved = reserved + $2
 WHERE sku = $1 AND available >= $2 RETURNING 1`,
          values: [line.sku, line.quantity],
          expectRows: 1,
        }),
      ),
    ];
  }

  markStep(
    accountId: string,
    orderId: string,
    step: OrderStepName,
    ref: string | null,
    state: MarkedStepState = 'completed',
  ): PostgresStatement {
    return {
      text: `UPDATE ${this.orders} SET steps = jsonb_set(steps, ARRAY[$3::text], $4::jsonb)
 WHERE account_id = $1 AND id = $2 RETURNING 1`,
      values: [accountId, orderId, step, JSON.stringify({ state, ref })],
      expectRows: 1,
    };
  }

  complete(accountId: string, orderId: string, outcome: OrderOutcome): PostgresStatement {
    const steps = completedSteps(outcome);
    return {
      text: `UPDATE ${this.orders} SET status = $3, charge_id = $4, shipment_id = $5, email_id = $6, steps = $7
 WHERE account_id = $1 AND id = $2 AND status = 'pending' RETURNING 1`,
      values: [
        accountId,
        orderId,
        outcome.status,
        outcome.charge_id,
        outcome.shipment_id,
        outcome.email_id,
        JSON.stringify(steps),
      ],
      expectRows: 1,
    };
  }

  refuse(accountId: string, orderId: string, refusal: OrderRefusal): PostgresStatement {
    // `||` keeps the states the compensations wrote on the steps before the refused one.
    return {
      text: `UPDATE ${this.orders}
 SET status = 'refused', charge_id = $3, shipment_id = $4, email_id = NULL, steps = steps || $5::jsonb
 WHERE account_id = $1 AND id = $2 AND status = 'pending' RETURNING 1`,
      values: [accountId, orderId, refusal.charge_id, refusal.shipment_id, JSON.stringify(refusedSteps(refusal.step))],
      expectRows: 1,
    };
  }

  release(_accountId: string, orderId: string, items: readonly OrderLine[]): PostgresStatement[] {
    return [
      {
        text: `UPDATE ${this.reservations} SET state = 'released' WHERE order_id = $1 AND state = 'held' RETURNING 1`,
        values: [orderId],
        expectRows: 1,
      },
      ...items.map(
        (line): PostgresStatement => ({
          text: `UPDATE ${this.inventory} SET available = available + $2, reserved = reserved - $2
 WHERE sku = $1 AND reserved >= $2 RETURNING 1`,
          values: [line.sku, line.quantity],
          expectRows: 1,
        }),
      ),
    ];
  }

  async shortages(items: readonly OrderLine[]): Promise<Shortage[]> {
    const { rows } = await this.db.query<{ sku: string; available: number }>(
      `SELECT sku, available FROM ${this.inventory} WHERE sku = ANY($1::text[])`,
      [items.map((line) => line.sku)],
    );
    const available = new Map(rows.map((row) => [row.sku, row.available]));
    return items
      .filter((line) => (available.get(line.sku) ?? 0) < line.quantity)
      .map((line) => ({ sku: line.sku, requested: line.quantity, available: available.get(line.sku) ?? 0 }));
  }

  async getOrder(accountId: string, orderId: string): Promise<OrderWithSteps | undefined> {
    const { rows } = await this.db.query(`SELECT * FROM ${this.orders} WHERE account_id = $1 AND id = $2`, [
      accountId,
      orderId,
    ]);
    return rows[0] ? toOrder(rows[0]) : undefined;
  }

  async getInventory(sku: string): Promise<Inventory | undefined> {
    const { rows } = await this.db.query<Inventory>(
      `SELECT sku, available, reserved FROM ${this.inventory} WHERE sku = $1`,
      [sku],
    );
    return rows[0];
  }

  async seedStock(sku: string, units: number): Promise<void> {
    await this.db.query(
      `INSERT INTO ${this.inventory} (sku, available, reserved) VALUES ($1, $2, 0) ON CONFLICT (sku) DO NOTHING`,
      [sku, units],
    );
  }
}
