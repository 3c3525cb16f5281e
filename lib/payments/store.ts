import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { compareAndSetEffect, type EffectItem } from 'keystone-idempotency/dynamodb';
import type { Payment } from './schema';

/** A payment as the API shows it: its schema is in `schema.ts`, the one source for handlers and the OpenAPI. */
export type { Payment } from './schema';

/**
 * Where payments live, in the terms of the idempotency store they commit with: each write is an effect of that store
 * (a DynamoDB transaction item, or SQL run in the commit's transaction on PostgreSQL), staged by the handler so that it
 * commits with the key's completion or not at all. Reads go straight to the database.
 */
export interface PaymentsRepository<TEffect> {
  /** The payment row as an effect; a second row for one payment id fails the commit. */
  putPayment(accountId: string, payment: Payment, downstreamKey: string): TEffect;
  /** An effect that only checks the payment row exists for this very charge, and fails the commit otherwise. */
  confirmPayment(accountId: string, paymentId: string, chargeId: string): TEffect;
  /** Settling as an effect: a compare-and-set from `succeeded` to `settled`, failing the commit on any repeat. */
  settlePayment(accountId: string, paymentId: string, settledAt: string): TEffect;
  /**
   * Records a payment on its own, outside any commit: only for a charge whose operation record is gone, so that money
   * that moved is still recorded. False when the row already exists.
   */
  recordPayment(accountId: string, payment: Payment, downstreamKey: string): Promise<boolean>;
  getPayment(accountId: string, paymentId: string): Promise<Payment | undefined>;
}

const paymentKey = (accountId: string, paymentId: string) => ({
  pk: `ACCOUNT#${accountId}`,
  sk: `PAYMENT#${paymentId}`,
});

/**
 * Payments and API keys in the payments table on DynamoDB. Writes are returned as transaction items, to be committed
 * with the idempotency record; reads go straight to the table.
 */
export class PaymentsStore implements PaymentsRepository<EffectItem> {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    readonly tableName: string,
  ) {}

  /** The payment row as a transaction item; the condition makes a second row for one id impossible. */
  putPayment(accountId: string, payment: Payment, downstreamKey: string): EffectItem {
    return {
      Put: {
        TableName: this.tableName,
        Item: {
          ...paymentKey(accountId, payment.id),
          ...payment,
          account_id: accountId,
          downstream_key: downstreamKey,
        },
        ConditionExpression: 'attribute_not_exists(pk)',
      },
    };
  }

  /**
   * A transaction item that only checks the payment row exists for this very charge: what recovery commits with an
   * operation whose row is already there (a row is never written twice, and never replaced).
   */
  confirmPayment(accountId: string, paymentId: string, chargeId: string): EffectItem {
    return {
      ConditionCheck: {
        TableName: this.tableName,
        Key: paymentKey(accountId, paymentId),
        ConditionExpression: 'charge_id = :chargeId',
        ExpressionAttributeValues: { ':chargeId': chargeId },
      },
    };
  }

  /**
   * Records a payment on its own, outside any idempotency commit: only for a charge whose operation record is gone
   * (expired), so that money that moved is still recorded. Returns false when the row already exists.
   */
  async recordPayment(accountId: string, payment: Payment, downstreamKey: string): Promise<boolean> {
    const { Put } = this.putPayment(accountId, payment, downstreamKey);
    try {
      await this.client.send(new PutCommand(Put as NonNullable<typeof Put>));
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  /**
   * Settling as a transaction item: a compare-and-set from `succeeded` to `settled`, so it changes the payment once
   * and fails its condition (rather than overwriting `settled_at`) on any repeat.
   */
  settlePayment(accountId: string, paymentId: string, settledAt: string): EffectItem {
    return compareAndSetEffect({
      TableName: this.tableName,
      Key: paymentKey(accountId, paymentId),
      attribute: 'status',
      expected: 'succeeded',
      next: 'settled',
      set: { settled_at: settledAt },
    });
  }

  async getPayment(accountId: string, paymentId: string): Promise<Payment | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: paymentKey(accountId, paymentId) }),
    );
    return Item ? toPayment(Item) : undefined;
  }
}

function toPayment(item: Record<string, unknown>): Payment {
  return {
    id: item.id as string,
    amount: item.amount as number,
    currency: item.currency as string,
    source: item.source as string,
    description: (item.description as string | null | undefined) ?? null,
    status: item.status as Payment['status'],
    charge_id: item.charge_id as string,
    created_at: item.created_at as string,
    settled_at: (item.settled_at as string | null | undefined) ?? null,
  };
}
