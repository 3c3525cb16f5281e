import { migrate, type PostgresEffect, type PostgresStatement } from 'keystone-idempotency/postgres';
import type { Pool } from 'pg';
import { ordersTablesSql } from '../orders/postgres';
import { type ApiKeyDirectory, hashApiKey } from './api-keys';
import type { Payment } from './schema';
import type { PaymentsRepository } from './store';

/**
 * The payments service's own tables on PostgreSQL, beside the idempotency keys in the same database: a payment row
 * and its key's completion commit in one SQL transaction, as the design documents describe. Every write here is a
 * statement the handler stages into that commit; reads go straight to the pool.
 */

type Db = Pick<Pool, 'query'>;

/** Where the service's tables are: a schema (the connection's search_path when absent). */
export interface ServiceSchema {
  readonly schema?: string;
}

function qualified(schema: string | undefined, table: string): string {
  return schema === undefined ? `"${table}"` : `"${schema.replaceAll('"', '""')}"."${table}"`;
}

/**
 * The service's tables: payments (one row per payment, keyed by account and payment id, so one account never reads
 * another's) and API keys (by the SHA-256 of the key, never the key itself). Idempotent: every statement creates
 * only what is missing.
 */
function serviceTablesSql(schema: string | undefined): string {
  const payments = qualified(schema, 'payments');
  const apiKeys = qualified(schema, 'api_keys');
  return `
CREATE TABLE IF NOT EXISTS ${payments} (
  account_id     text        NOT NULL,
  id             text        NOT NULL,
  amount         integer     NOT NULL CHECK (amount > 0),
  currency       text        NOT NULL,
  source         text        NOT NULL,
  description    text,
  status         text        NOT NULL CHECK (status IN ('succeeded', 'settled')),
  charge_id      text        NOT NULL,
  downstream_key text        NOT NULL,
  created_at     timestamptz NOT NULL,
  settled_at     timestamptz,
  PRIMARY KEY (account_id, id)
);
CREATE TABLE IF NOT EXISTS ${apiKeys} (
  key_hash   text        PRIMARY KEY,
  account_id text        NOT NULL,
  revoked    boolean     NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);`;
}

/**
 * Everything the service needs in its database: the engine's keys table (keystone-idempotency's own migration) and the
 * service's tables, each created once. Run at deploy by the migration function, and by the local stack at start.
 */
export async function migrateService(
  pool: Pick<Pool, 'connect' | 'query'>,
  options: ServiceSchema = {},
): Promise<void> {
  await migrate(pool, options.schema === undefined ? {} : { schema: options.schema });
  await pool.query(serviceTablesSql(options.schema));
  await pool.query(ordersTablesSql(options.schema));
}

/** Payments on PostgreSQL: writes as statements staged into the idempotency commit, reads from the pool. */
export class PostgresPayments implements PaymentsRepository<PostgresEffect> {
  private readonly table: string;

  constructor(
    private readonly db: Db,
    options: ServiceSchema = {},
  ) {
    this.table = qualified(options.schema, 'payments');
  }

  /** A plain INSERT: a second row for one payment is a unique violation, which cancels the commit. */
  putPayment(accountId: string, payment: Payment, downstreamKey: string): PostgresStatement {
    return {
      text: `INSERT INTO ${this.table}
  (account_id, id, amount, currency, source, description, status, charge_id, downstream_key, created_at, settled_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      values: [
        accountId,
        payment.id,
        payment.amount,
        payment.currency,
        payment.source,
        payment.description,
        payment.status,
        payment.charge_id,
        downstreamKey,
        payment.created_at,
        payment.settled_at,
      ],
    };
  }

  /** Only checks the row is there for this very charge: the commit is cancelled otherwise. */
  confirmPayment(accountId: string, paymentId: string, chargeId: string): PostgresStatement {
    return {
      text: `SELECT 1 FROM ${this.table} WHERE account_id = $1 AND id = $2 AND charge_id = $3`,
      values: [accountId, paymentId, chargeId],
      expectRows: 1,
    };
  }

  /** A compare-and-set from `succeeded` to `settled`: a repeat changes no row, and cancels its commit. */
  settlePayment(accountId: string, paymentId: string, settledAt: string): PostgresStatement {
    return {
      text: `UPDATE ${this.table} SET status = 'settled', settled_at = $3
 WHERE account_id = $1 AND id = $2 AND status = 'succeeded'
 RETURNING 1`,
      values: [accountId, paymentId, settledAt],
      expectRows: 1,
    };
  }

  async recordPayment(accountId: string, payment: Payment, downstreamKey: string): Promise<boolean> {
    const { text, values } = this.putPayment(accountId, payment, downstreamKey);
    const { rowCount } = await this.db.query(`${text} ON CONFLICT (account_id, id) DO NOTHING`, [...(values ?? [])]);
    return rowCount === 1;
  }

  async getPayment(accountId: string, paymentId: string): Promise<Payment | undefined> {
    const { rows } = await this.db.query<PaymentRow>(
      `SELECT id, amount, currency, source, description, status, charge_id, created_at, settled_at
  FROM ${this.table} WHERE account_id = $1 AND id = $2`,
      [accountId, paymentId],
    );
    const row = rows[0];
    return row ? toPayment(row) : undefined;
  }
}

interface PaymentRow {
  id: string;
  amount: number;
  currency: string;
  source: string;
  description: string | null;
  status: Payment['status'];
  charge_id: string;
  created_at: Date;
  settled_at: Date | null;
}

/** Times come back as Dates; the API shows them as the ISO strings they were written from (millisecond precision). */
function toPayment(row: PaymentRow): Payment {
  return {
    id: row.id,
    amount: row.amount,
    currency: row.currency,
    source: row.source,
    description: row.description,
    status: row.status,
    charge_id: row.charge_id,
    created_at: row.created_at.toISOString(),
    settled_at: row.settled_at?.toISOString() ?? null,
  };
}

/** API keys on PostgreSQL, by their SHA-256. */
export class PostgresApiKeys implements ApiKeyDirectory {
  private readonly table: string;

  constructor(
    private readonly db: Db,
    options: ServiceSchema = {},
  ) {
    this.table = qualified(options.schema, 'api_keys');
  }

  async accountFor(apiKey: string): Promise<string | undefined> {
    const { rows } = await this.db.query<{ account_id: string; revoked: boolean }>(
      `SELECT account_id, revoked FROM ${this.table} WHERE key_hash = $1`,
      [hashApiKey(apiKey)],
    );
    const row = rows[0];
    return row && !row.revoked ? row.account_id : undefined;
  }

  async register(apiKey: string, accountId: string): Promise<void> {
    await this.db.query(
      `INSERT INTO ${this.table} (key_hash, account_id) VALUES ($1, $2)
ON CONFLICT (key_hash) DO UPDATE SET account_id = EXCLUDED.account_id, revoked = false`,
      [hashApiKey(apiKey), accountId],
    );
  }
}
