import { createHash } from 'node:crypto';
import { type DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import type { EffectItem } from '../engine/store';
import { compareAndSetItem } from '../natural/compare-and-set';
import type { Payment } from './schema';

/** A payment as the API shows it: its schema is in `schema.ts`, the one source for handlers and the OpenAPI. */
export type { Payment } from './schema';

const paymentKey = (accountId: string, paymentId: string) => ({
  pk: `ACCOUNT#${accountId}`,
  sk: `PAYMENT#${paymentId}`,
});

/**
 * The payment id is derived from the operation's downstream key, so every attempt and every owner of one operation
 * names the same payment (and sends the processor the same metadata, which it would otherwise reject as a
 * different request under the same key).
 */
export function paymentIdFor(downstreamKey: string): string {
  return `pay_${createHash('sha256').update(downstreamKey).digest('hex').slice(0, 24)}`;
}

/**
 * Payments and API keys in the payments table. Writes are returned as transaction items, to be committed with the
 * idempotency record; reads go straight to the table.
 */
export class PaymentsStore {
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
   * Settling as a transaction item: a compare-and-set from `succeeded` to `settled`, so it changes the payment once
   * and fails its condition (rather than overwriting `settled_at`) on any repeat.
   */
  settlePayment(accountId: string, paymentId: string, settledAt: string): EffectItem {
    return compareAndSetItem({
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
