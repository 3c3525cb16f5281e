import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { itemBytes } from './capacity';
import type { Variant } from './variants';

/**
 * The sizes of the items the benchmark wrote, by DynamoDB's counting rules: the basis of every modeled capacity
 * figure. Each is a sample read back from the tables after the run.
 */
export interface ItemSizes {
  readonly paymentRow?: number;
  readonly oursCompletedRecord?: number;
  readonly powertoolsCompletedRecord?: number;
}

export async function sampleItemSizes(variants: readonly Variant[]): Promise<ItemSizes> {
  const byName = new Map(variants.map((variant) => [variant.name, variant]));
  const baseline = byName.get('baseline');
  const ours = byName.get('ours-external');
  const powertools = byName.get('powertools');
  return {
    ...(baseline ? { paymentRow: await sample(baseline, baseline.paymentsTable) } : {}),
    ...(ours?.idempotencyTable ? { oursCompletedRecord: await sample(ours, ours.idempotencyTable, 'COMPLETED') } : {}),
    ...(powertools?.idempotencyTable
      ? { powertoolsCompletedRecord: await sample(powertools, powertools.idempotencyTable, 'COMPLETED') }
      : {}),
  };
}

async function sample(variant: Variant, table: string, status?: string): Promise<number | undefined> {
  const { Items } = await variant.documentClient.send(
    new ScanCommand({
      TableName: table,
      ...(status
        ? {
            FilterExpression: '#status = :status',
            ExpressionAttributeNames: { '#status': 'status' },
            ExpressionAttributeValues: { ':status': status },
          }
        : {}),
    }),
  );
  const item = Items?.[0];
  return item ? itemBytes(marshall(item, { removeUndefinedValues: true })) : undefined;
}
