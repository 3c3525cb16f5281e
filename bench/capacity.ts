import type { AttributeValue } from '@aws-sdk/client-dynamodb';

/**
 * Capacity units, by DynamoDB's published rules for on-demand tables:
 * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html and
 * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling
 *
 * - a standard write: 1 WRU per 1 KB of the item (the larger of the item before and after), rounded up;
 * - a conditional write whose condition fails still consumes write units, sized by the existing item
 *   (or the one we tried to write, whichever is larger), minimum 1;
 * - a transactional write: 2 WRU per 1 KB per item (prepare and commit);
 * - a strongly consistent read: 1 RRU per 4 KB (an absent item still costs 1); transactional reads 2.
 *
 * DynamoDB (Local) reports `ConsumedCapacity` for a request that succeeds; for one that fails it reports nothing, and
 * these rules fill in. A cancelled TransactWriteItems has no published rule: it is charged here as if it had
 * committed (an upper bound), and flagged as such.
 */
export type UnitsSource = 'reported' | 'modeled' | 'upper-bound';

export interface Units {
  readonly read: number;
  readonly write: number;
  readonly source: UnitsSource;
}

const KB = 1024;
const READ_OPERATIONS = new Set(['GetItem', 'Query', 'Scan', 'BatchGetItem', 'TransactGetItems']);

/** The parts of a refused write that say what was already there. */
export interface RefusedWrite {
  readonly Item?: Record<string, AttributeValue>;
  readonly CancellationReasons?: readonly { Code?: string; Item?: Record<string, AttributeValue> }[];
}

/** What one request consumed: as reported when DynamoDB reported it, else by the rules above. */
export function unitsFor(
  operation: string,
  input: Record<string, unknown>,
  outcome: { readonly reported: number | undefined } | { readonly refused: RefusedWrite },
): Units {
  if ('reported' in outcome && outcome.reported !== undefined) {
    const reads = READ_OPERATIONS.has(operation);
    return { read: reads ? outcome.reported : 0, write: reads ? 0 : outcome.reported, source: 'reported' };
  }
  const refused = 'refused' in outcome ? outcome.refused : {};
  switch (operation) {
    case 'PutItem': {
      const attempted = itemBytes(input.Item as Record<string, AttributeValue>);
      const existing = refused.Item ? itemBytes(refused.Item) : 0;
      return { read: 0, write: writeUnits(Math.max(attempted, existing)), source: 'modeled' };
    }
    case 'UpdateItem':
    case 'DeleteItem':
      return { read: 0, write: writeUnits(refused.Item ? itemBytes(refused.Item) : 0), source: 'modeled' };
    case 'TransactWriteItems': {
      const actions = (input.TransactItems ?? []) as TransactAction[];
      const write = actions.reduce((sum, action, index) => {
        const attempted = action.Put?.Item ? itemBytes(action.Put.Item) : 0;
        const reason = refused.CancellationReasons?.[index]?.Item;
        return sum + 2 * writeUnits(Math.max(attempted, reason ? itemBytes(reason) : 0));
      }, 0);
      return { read: 0, write, source: 'upper-bound' };
    }
    case 'GetItem':
      return { read: input.ConsistentRead ? 1 : 0.5, write: 0, source: 'modeled' };
    default:
      return { read: 0, write: 0, source: 'modeled' };
  }
}

interface TransactAction {
  Put?: { Item?: Record<string, AttributeValue> };
}

function writeUnits(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / KB));
}

/**
 * An item's size as DynamoDB counts it (developerguide/CapacityUnitCalculations.html): per attribute, the UTF-8 length
 * of its name plus its value; strings and binaries by length, numbers about 1 byte per 2 significant digits plus 1,
 * booleans and nulls 1 byte, lists and maps 3 bytes plus their elements and 1 byte per element (map keys count as
 * names). Approximate, and ample here: every item the benchmark writes is well under 1 KB.
 */
export function itemBytes(item: Record<string, AttributeValue>): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) bytes += Buffer.byteLength(name) + valueBytes(value);
  return bytes;
}

function valueBytes(value: AttributeValue): number {
  if (value.S !== undefined) return Buffer.byteLength(value.S);
  if (value.N !== undefined) return numberBytes(value.N);
  if (value.B !== undefined) return value.B.byteLength;
  if (value.BOOL !== undefined || value.NULL !== undefined) return 1;
  if (value.SS !== undefined) return value.SS.reduce((sum, s) => sum + Buffer.byteLength(s), 0);
  if (value.NS !== undefined) return value.NS.reduce((sum, n) => sum + numberBytes(n), 0);
  if (value.BS !== undefined) return value.BS.reduce((sum, b) => sum + b.byteLength, 0);
  if (value.L !== undefined) return 3 + value.L.reduce((sum, element) => sum + 1 + valueBytes(element), 0);
  if (value.M !== undefined) return 3 + itemBytes(value.M) + Object.keys(value.M).length;
  return 0;
}

function numberBytes(text: string): number {
  const digits = text
    .replace(/^-/, '')
    .replace(/[eE].*$/, '')
    .replace('.', '')
    .replace(/^0+/, '')
    .replace(/0+$/, '');
  return Math.ceil(Math.max(digits.length, 1) / 2) + 1;
}
