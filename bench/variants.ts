import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import {
  CreateTableCommand,
  DynamoDBClient,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, PutCommand, type PutCommandInput } from '@aws-sdk/lib-dynamodb';
import type { Context } from 'aws-lambda';
import { DynamoDbStore, KEY_ATTRIBUTE } from 'keystone-idempotency/dynamodb';
import { fingerprint, ReplayCache, scopedKey } from 'keystone-idempotency/engine';
import { PaymentsStore } from '../lib/payments/store';
import { idempotencyTable, paymentsTable, type TableDefinition } from '../lib/tables/definitions';
import { ensureTable } from '../lib/tables/ensure';
import { ExternalEffect, freshDownstreamKey, OPERATION, type PaymentEvent, settlePayment } from './payment-flow';
import { meterRequests, type RequestMeter } from './request-meter';

export const VARIANT_NAMES = [
  'baseline',
  'powertools',
  'ours-external',
  'ours-local',
  'powertools-indexed',
  'ours-recoverable',
] as const;
export type VariantName = (typeof VARIANT_NAMES)[number];

export const VARIANT_LABELS: Record<VariantName, string> = {
  baseline: 'baseline (no idempotency)',
  powertools: 'Powertools 2.35 makeIdempotent',
  'ours-external': 'ours: claim + effect + commit',
  'ours-local': 'ours: claimAndCommit',
  'powertools-indexed': 'Powertools, on the table with the recovery index',
  'ours-recoverable': 'ours: recoverable claim + effect + commit, same table',
};

/**
 * Like with like: each of our variants is compared with the Powertools variant that writes to the same kind of table.
 * DynamoDB Local maintains every global secondary index inside every write to its table, even for an item outside a
 * sparse index (DynamoDB writes an item to a sparse index only when it has the index's keys), so a table that carries
 * the recovery index makes every write dearer there, whoever writes it.
 *
 * - Not recoverable (the bench's first variants, and any team that doesn't use recovery): ours on a table without the
 *   recovery index (nothing they write would enter it), against Powertools on its own table, which has no index.
 * - Recoverable (what the payments service claims): ours on the table as deployed, index and all, against Powertools
 *   on that very table (its records keyed by `pk` beside ours, outside the sparse index).
 */
export const POWERTOOLS_PEER: Readonly<Partial<Record<VariantName, VariantName>>> = {
  'ours-external': 'powertools',
  'ours-local': 'powertools',
  'ours-recoverable': 'powertools-indexed',
};

/** The idempotency table the recoverable pair shares: as deployed, with the recovery index. */
const INDEXED_TABLE = 'bench-indexed-idempotency';

/**
 * What a call does besides idempotency: the charge and the payment row (the reference service's work), or the charge
 * alone (an idempotent call to an outside system whose response is stored: the common Powertools use).
 */
export type Work = 'charge-and-row' | 'charge-only';

/** How a call is made: with the variant's local cache of completed records (ours: ReplayCache; Powertools: useLocalCache). */
export interface CallOptions {
  readonly cached?: boolean;
}

/** How one call ended, in the engine's words; Powertools' exceptions are mapped onto the same kinds. */
export type CallOutcome = 'created' | 'replay' | 'in_flight' | 'mismatch' | 'error';

export interface Variant {
  readonly name: VariantName;
  readonly label: string;
  readonly idempotent: boolean;
  /** Whether a call reaches the outside processor (all but the purely local variant). */
  readonly externalEffect: boolean;
  readonly meter: RequestMeter;
  readonly effect: ExternalEffect;
  readonly documentClient: DynamoDBDocumentClient;
  readonly paymentsTable: string;
  /** The variant's idempotency table (none for the baseline). */
  readonly idempotencyTable: string | undefined;
  /** Whether that table carries the recovery index (as deployed). */
  readonly recoveryIndex: boolean;
  /** The first few errors behind `error` outcomes, for the report. */
  readonly errors: readonly string[];
  /**
   * One request, as the handler would serve it. The baseline always does the charge and writes the row (with no
   * idempotency there is nothing else to measure it by); the purely local variant has no charge-only work.
   * `cached`: through the variant's local cache of completed records (a separate one per variant, warm once a key
   * was completed or replayed through it); the baseline has none.
   */
  call(event: PaymentEvent, work?: Work, options?: CallOptions): Promise<CallOutcome>;
  /**
   * Puts the event's key in the "in flight" state: claimed by someone else, not yet complete. Returns a function that
   * lets that other owner finish.
   */
  holdInFlight(event: PaymentEvent): Promise<() => Promise<void>>;
  close(): void;
}

/**
 * Long enough that no claim held open by the benchmark (the in-flight path) runs out while it is measured, for any
 * BENCH_CALLS; the same 15 minutes (Lambda's longest timeout) for Powertools' in-progress expiry, which it takes from
 * the context's remaining time.
 */
const HOLD_SECONDS = 900;
const TTL_SECONDS = 24 * 60 * 60;

export interface VariantEnvironment {
  readonly endpoint: string;
}

/**
 * Creates the variants, each with its own metered client and payments table in the same DynamoDB Local, and its own
 * idempotency table, except the recoverable pair, which share one (see {@link POWERTOOLS_PEER}).
 */
export async function createVariants(
  environment: VariantEnvironment,
  names: readonly VariantName[] = VARIANT_NAMES,
): Promise<Variant[]> {
  if (names.includes('powertools-indexed') || names.includes('ours-recoverable')) {
    const client = dynamoDbClient(environment.endpoint);
    try {
      await ensureTable(client, idempotencyTable, INDEXED_TABLE);
    } finally {
      client.destroy();
    }
  }
  return Promise.all(names.map((name) => createVariant(name, environment)));
}

/** The engine's table without its recovery index: what a team that never claims as recoverable could deploy. */
const unindexedTable: TableDefinition = { ...idempotencyTable, indexes: [] };

function dynamoDbClient(endpoint: string): DynamoDBClient {
  return new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
}

async function createVariant(name: VariantName, { endpoint }: VariantEnvironment): Promise<Variant> {
  const client = dynamoDbClient(endpoint);
  const meter = meterRequests(client);
  meter.pause();
  const documentClient = DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
  const indexed = name === 'powertools-indexed' || name === 'ours-recoverable';
  const tables = {
    payments: `bench-${name}-payments`,
    idempotency: indexed ? INDEXED_TABLE : `bench-${name}-idempotency`,
  };
  await ensureTable(client, paymentsTable, tables.payments);
  const payments = new PaymentsStore(documentClient, tables.payments);
  const effect = new ExternalEffect();
  const errors: string[] = [];
  const noteError = (error: unknown) => {
    if (errors.length < 5) errors.push(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
  };
  const parts = { client, documentClient, payments, effect, tables, noteError };
  const behaviour = await behaviourOf(name, parts);
  return {
    name,
    label: VARIANT_LABELS[name],
    idempotent: name !== 'baseline',
    externalEffect: name !== 'ours-local',
    meter,
    effect,
    documentClient,
    paymentsTable: tables.payments,
    idempotencyTable: name === 'baseline' ? undefined : tables.idempotency,
    recoveryIndex: indexed,
    errors,
    ...behaviour,
    close: () => client.destroy(),
  };
}

interface Parts {
  readonly client: DynamoDBClient;
  readonly documentClient: DynamoDBDocumentClient;
  readonly payments: PaymentsStore;
  readonly effect: ExternalEffect;
  readonly tables: { readonly payments: string; readonly idempotency: string };
  readonly noteError: (error: unknown) => void;
}

type Behaviour = Pick<Variant, 'call' | 'holdInFlight'>;

async function behaviourOf(name: VariantName, parts: Parts): Promise<Behaviour> {
  switch (name) {
    case 'baseline':
      return baseline(parts);
    case 'powertools':
      return powertools(parts, { ownTable: true });
    case 'powertools-indexed':
      return powertools(parts, { ownTable: false });
    case 'ours-external':
      return ours(parts, { mode: 'external', recoverable: false });
    case 'ours-local':
      return ours(parts, { mode: 'local', recoverable: false });
    case 'ours-recoverable':
      return ours(parts, { mode: 'external', recoverable: true });
  }
}

const keyOf = (event: PaymentEvent) => event.headers['Idempotency-Key'] as string;
const accountOf = (event: PaymentEvent) => event.requestContext.authorizer.accountId;

/** The effect and one PutItem of the payment row; a duplicate is simply another payment. */
function baseline({ documentClient, payments, effect, noteError }: Parts): Behaviour {
  return {
    async call(event) {
      try {
        const downstreamKey = freshDownstreamKey();
        const chargeId = await effect.charge(keyOf(event));
        const { row } = settlePayment(payments, event, downstreamKey, chargeId);
        await documentClient.send(new PutCommand(row.Put as PutCommandInput));
        return 'created';
      } catch (error) {
        noteError(error);
        return 'error';
      }
    },
    async holdInFlight() {
      throw new Error('the baseline has no in-flight state');
    },
  };
}

/**
 * The same handler under Powertools' `makeIdempotent`, configured as its docs recommend for an API: key from the
 * account and the Idempotency-Key header, payload validation on the parsed body, 24 hours expiry, and our metered
 * client. On its own table (partition key `id`, its default), or on our table as deployed, keyed by our partition key
 * (`keyAttr: 'pk'`), for the comparison on the same table.
 */
async function powertools(
  { client, documentClient, payments, effect, tables, noteError }: Parts,
  { ownTable }: { ownTable: boolean },
): Promise<Behaviour> {
  if (ownTable) await createPowertoolsTable(client, tables.idempotency);
  const layerOptions = {
    tableName: tables.idempotency,
    awsSdkV3Client: client,
    ...(ownTable ? {} : { keyAttr: KEY_ATTRIBUTE }),
  };
  const persistenceStore = new DynamoDBPersistenceLayer(layerOptions);
  const config = new IdempotencyConfig({
    eventKeyJmesPath: '[requestContext.authorizer.accountId, headers."Idempotency-Key"]',
    payloadValidationJmesPath: 'powertools_json(body)',
    throwOnNoIdempotencyKey: true,
    expiresAfterSeconds: TTL_SECONDS,
  });
  // Which events actually ran the handler: a completed call whose event is not here was a replay.
  const ran = new WeakSet<PaymentEvent>();
  // The local cache lives in the persistence layer, which takes one configuration: a second layer for it.
  const cachedStore = new DynamoDBPersistenceLayer(layerOptions);
  const cachedConfig = new IdempotencyConfig({
    eventKeyJmesPath: '[requestContext.authorizer.accountId, headers."Idempotency-Key"]',
    payloadValidationJmesPath: 'powertools_json(body)',
    throwOnNoIdempotencyKey: true,
    expiresAfterSeconds: TTL_SECONDS,
    useLocalCache: true,
  });
  const handlerFor = (work: Work, cached = false) =>
    makeIdempotent(
      async (event: PaymentEvent, _context: Context) => {
        ran.add(event);
        const downstreamKey = freshDownstreamKey();
        const chargeId = await effect.charge(keyOf(event));
        const { row, response } = settlePayment(payments, event, downstreamKey, chargeId);
        if (work === 'charge-and-row') await documentClient.send(new PutCommand(row.Put as PutCommandInput));
        return response;
      },
      cached ? { persistenceStore: cachedStore, config: cachedConfig } : { persistenceStore, config },
    );
  const handlers: Record<Work, ReturnType<typeof handlerFor>> = {
    'charge-and-row': handlerFor('charge-and-row'),
    'charge-only': handlerFor('charge-only'),
  };
  const cachedHandler = handlerFor('charge-and-row', true);
  const call = async (
    event: PaymentEvent,
    work: Work = 'charge-and-row',
    options: CallOptions = {},
  ): Promise<CallOutcome> => {
    try {
      await (options.cached ? cachedHandler : handlers[work])(event, lambdaContext());
      return ran.has(event) ? 'created' : 'replay';
    } catch (error) {
      switch ((error as Error).name) {
        case 'IdempotencyAlreadyInProgressError':
          return 'in_flight';
        case 'IdempotencyValidationError':
          return 'mismatch';
        default:
          noteError(error);
          return 'error';
      }
    }
  };
  return { call, holdInFlight: (event) => holdThroughEffect(effect, event, call) };
}

/**
 * Ours, as the HTTP adapter drives it. External effect: claim (one conditional put), the effect under the lease's
 * downstream key, then commit the payment row with the record in one transaction (or, with the charge alone, commit
 * the record by itself: one conditional update). Local effect: `claimAndCommit`, claim, row and completion in one
 * transaction. Recoverable, as the payments service claims: the claim puts the record into the recovery index and
 * the commit takes it out, so it writes to a table that has the index; otherwise to one without it.
 */
async function ours(
  { client, documentClient, payments, effect, tables, noteError }: Parts,
  { mode, recoverable }: { mode: 'external' | 'local'; recoverable: boolean },
): Promise<Behaviour> {
  if (!recoverable) await ensureTable(client, unindexedTable, tables.idempotency);
  const dynamodb = new DynamoDbStore({
    client: documentClient,
    tableName: tables.idempotency,
    leaseSeconds: HOLD_SECONDS,
    ttlSeconds: TTL_SECONDS,
  });
  // Its own cache, in front of the same store: the cached path's calls go through it, every other path's do not.
  const cached = new ReplayCache(dynamodb);
  const identify = (event: PaymentEvent) => ({
    key: scopedKey({ accountId: accountOf(event), operation: OPERATION, key: keyOf(event) }),
    print: fingerprint({ operation: OPERATION, body: event.body, contentType: event.headers['Content-Type'] }),
  });

  const external = async (
    event: PaymentEvent,
    work: Work = 'charge-and-row',
    options: CallOptions = {},
  ): Promise<CallOutcome> => {
    const store = options.cached ? cached : dynamodb;
    const { key, print } = identify(event);
    const outcome = await store.claim(key, print, { recoverable }).catch((error: unknown) => {
      noteError(error);
      return { kind: 'error' } as const;
    });
    if (outcome.kind !== 'acquired') return outcome.kind;
    const { lease } = outcome;
    try {
      const chargeId = await effect.charge(keyOf(event));
      const { row, response } = settlePayment(payments, event, lease.downstreamKey, chargeId);
      await store.commit(lease, response, work === 'charge-and-row' ? [row] : []);
      return 'created';
    } catch (error) {
      // As the HTTP adapter does: give the key back so that a retry can take it over.
      noteError(error);
      await store.release(lease).catch(() => false);
      return 'error';
    }
  };

  const local = async (
    event: PaymentEvent,
    work: Work = 'charge-and-row',
    options: CallOptions = {},
  ): Promise<CallOutcome> => {
    if (work !== 'charge-and-row') throw new Error('the purely local variant has no outside effect to make');
    const store = options.cached ? cached : dynamodb;
    const { key, print } = identify(event);
    try {
      const outcome = await store.claimAndCommit(key, print, async ({ downstreamKey }) => {
        const { row, response } = settlePayment(payments, event, downstreamKey, `local_${downstreamKey}`);
        return { response, effects: [row] };
      });
      return outcome.kind === 'committed' ? 'created' : outcome.kind;
    } catch (error) {
      noteError(error);
      return 'error';
    }
  };

  if (mode === 'external') {
    return { call: external, holdInFlight: (event) => holdThroughEffect(effect, event, external) };
  }
  return {
    call: local,
    // A purely local operation is never in flight on its own (one transaction); the key is held by someone else's
    // claim, e.g. an external-effect operation under the same key.
    async holdInFlight(event) {
      const { key, print } = identify(event);
      const outcome = await dynamodb.claim(key, print);
      if (outcome.kind !== 'acquired') throw new Error(`could not hold ${key}: ${outcome.kind}`);
      return async () => {
        await dynamodb.release(outcome.lease);
      };
    },
  };
}

/** Starts a call whose effect waits: its claim is written, its completion is not. */
export async function holdThroughEffect(
  effect: ExternalEffect,
  event: PaymentEvent,
  call: (event: PaymentEvent) => Promise<CallOutcome>,
): Promise<() => Promise<void>> {
  const gate = effect.hold(keyOf(event));
  const running = call(event);
  await Promise.race([gate.entered, running.then((kind) => Promise.reject(new Error(`held call ended: ${kind}`)))]);
  return async () => {
    gate.open();
    const kind = await running;
    if (kind !== 'created') throw new Error(`held call ended as ${kind}`);
  };
}

/** Powertools' table: partition key `id`, TTL on `expiration` (its defaults). */
async function createPowertoolsTable(client: DynamoDBClient, tableName: string): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: tableName,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
    }),
  );
  await waitUntilTableExists({ client, maxWaitTime: 60 }, { TableName: tableName });
  await client.send(
    new UpdateTimeToLiveCommand({
      TableName: tableName,
      TimeToLiveSpecification: { AttributeName: 'expiration', Enabled: true },
    }),
  );
}

/** What Powertools reads from a Lambda context: the remaining time, which sets its in-progress expiry. */
function lambdaContext(): Context {
  const deadline = Date.now() + HOLD_SECONDS * 1000;
  return {
    awsRequestId: freshDownstreamKey(),
    functionName: 'bench-payments',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:local:000000000000:function:bench-payments',
    memoryLimitInMB: '512',
    logGroupName: '/aws/lambda/bench-payments',
    logStreamName: 'bench',
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => deadline - Date.now(),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}
