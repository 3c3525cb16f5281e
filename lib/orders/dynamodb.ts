import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { EffectItem } from 'keystone-idempotency/dynamodb';
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
import type { MarkedStepState } from './steps';

/**
 * Orders, reservations and stock in the service's data table on DynamoDB, beside payments and API keys:
 *
 *   ACCOUNT#<account> / ORDER#<order>   the order's row (one per order, only its account reads it)
 *   ORDER#<order>     / RESERVATION     the order's reservation: its lines, held or released
 *   SKU#<sku>         / STOCK           available and reserved units
 *
 * Every write is a transaction item: the reservation's items commit with the reservation step's checkpoint.
 */
export class DynamoDbOrders implements OrdersRepository<EffectItem> {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    readonly tableName: string,
  ) {}

  reserve(accountId: string, order: Order, operationKey: string): EffectItem[] {
    const steps: StepStates = { reserve: { state: 'completed', ref: null } };
    return [
      {
        Put: {
          TableName: this.tableName,
          Item: {
            ...orderKey(accountId, order.id),
            ...order,
            account_id: accountId,
            operation_key: operationKey,
            steps,
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      },
      {
        Put: {
          TableName: this.tableName,
          Item: { ...reservationKey(order.id), account_id: accountId, items: order.items, state: 'held' },
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      },
      // The condition is the guarantee: stock never goes below zero, whatever raced the check before.
      ...order.items.map(
        (line): EffectItem => ({
          Update: {
            TableName: this.tableName,
            Key: stockKey(line.sku),
            UpdateExpression: 'SET available = available - :q, reserved = reserved + :q',
            ConditionExpression: 'available >= :q',
            ExpressionAttributeValues: { ':q': line.quantity },
          },
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
  ): EffectItem {
    return {
      Update: {
        TableName: this.tableName,
        Key: orderKey(accountId, orderId),
        UpdateExpression: 'SET steps.#step = :state',
        ConditionExpression: 'attribute_exists(pk)',
        ExpressionAttributeNames: { '#step': step },
        ExpressionAttributeValues: { ':state': { state, ref } },
      },
    };
  }

  complete(accountId: string, orderId: string, outcome: OrderOutcome): EffectItem {
    const steps = completedSteps(outcome);
    return {
      Update: {
        TableName: this.tableName,
        Key: orderKey(accountId, orderId),
        UpdateExpression:
          'SET #status = :status, charge_id = :charge, shipment_id = :shipment, email_id = :email, steps = :steps',
        // Only a pending order completes: a second completion of one order cancels its commit.
        ConditionExpression: '#status = :pending',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: {
          ':status': outcome.status,
          ':charge': outcome.charge_id,
          ':shipment': outcome.shipment_id,
          ':email': outcome.email_id,
          ':steps': steps,
          ':pending': 'pending',
        },
      },
    };
  }

  refuse(accountId: string, orderId: string, refusal: OrderRefusal): EffectItem {
    // Each step set by its own path, so the states the compensations wrote on the steps before it stay.
    const steps = Object.entries(refusedSteps(refusal.step));
    return {
      Update: {
        TableName: this.tableName,
        Key: orderKey(accountId, orderId),
        UpdateExpression: `SET #status = :refused, charge_id = :charge, shipment_id = :shipment, email_id = :email, ${steps
          .map((_, i) => `steps.#s${i} = :s${i}`)
          .join(', ')}`,
        ConditionExpression: '#status = :pending',
        ExpressionAttributeNames: {
          '#status': 'status',
          ...Object.fromEntries(steps.map(([name], i) => [`#s${i}`, name])),
        },
        ExpressionAttributeValues: {
          ':refused': 'refused',
          ':pending': 'pending',
          ':charge': refusal.charge_id,
          ':shipment': refusal.shipment_id,
          ':email': null,
          ...Object.fromEntries(steps.map(([, state], i) => [`:s${i}`, state])),
        },
      },
    };
  }

  release(_accountId: string, orderId: string, items: readonly OrderLine[]): EffectItem[] {
    return [
      {
        Update: {
          TableName: this.tableName,
          Key: reservationKey(orderId),
          UpdateExpression: 'SET #state = :released',
          ConditionExpression: '#state = :held',
          ExpressionAttributeNames: { '#state': 'state' },
          ExpressionAttributeValues: { ':released': 'released', ':held': 'held' },
        },
      },
      ...items.map(
        (line): EffectItem => ({
          Update: {
            TableName: this.tableName,
            Key: stockKey(line.sku),
            UpdateExpression: 'SET available = available + :q, reserved = reserved - :q',
            ConditionExpression: 'reserved >= :q',
            ExpressionAttributeValues: { ':q': line.quantity },
          },
        }),
      ),
    ];
  }

  async shortages(items: readonly OrderLine[]): Promise<Shortage[]> {
    const stock = await Promise.all(
      items.map(async (line) => ({ line, inventory: await this.getInventory(line.sku) })),
    );
    return stock
      .filter(({ line, inventory }) => (inventory?.available ?? 0) < line.quantity)
      .map(({ line, inventory }) => ({
        sku: line.sku,
        requested: line.quantity,
        available: inventory?.available ?? 0,
      }));
  }

  async getOrder(accountId: string, orderId: string): Promise<OrderWithSteps | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: orderKey(accountId, orderId), ConsistentRead: true }),
    );
    return Item ? toOrder(Item) : undefined;
  }

  async getInventory(sku: string): Promise<Inventory | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: stockKey(sku), ConsistentRead: true }),
    );
    return Item ? { sku, available: Item.available as number, reserved: Item.reserved as number } : undefined;
  }

  async seedStock(sku: string, units: number): Promise<void> {
    try {
      await this.client.send(
        new PutCommand({
          TableName: this.tableName,
          Item: { ...stockKey(sku), available: units, reserved: 0 },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
  }
}

const orderKey = (accountId: string, orderId: string) => ({ pk: `ACCOUNT#${accountId}`, sk: `ORDER#${orderId}` });
const reservationKey = (orderId: string) => ({ pk: `ORDER#${orderId}`, sk: 'RESERVATION' });
const stockKey = (sku: string) => ({ pk: `SKU#${sku}`, sk: 'STOCK' });
