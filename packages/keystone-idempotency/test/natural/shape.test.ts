import {
  InvalidNaturalRequestError as DynamoDbInvalidRequest,
  NaturalIdempotencyError as DynamoDbNaturalError,
  compareAndSet as dynamodbCompareAndSet,
  compareAndSetEffect as dynamodbCompareAndSetEffect,
  putIfAbsent as dynamodbPutIfAbsent,
  upsert as dynamodbUpsert,
  upsertEffect as dynamodbUpsertEffect,
} from '../../src/dynamodb';
import { InvalidNaturalRequestError, NaturalIdempotencyError } from '../../src/engine/errors';
import {
  InvalidNaturalRequestError as PostgresInvalidRequest,
  compareAndSet as postgresCompareAndSet,
  compareAndSetEffect as postgresCompareAndSetEffect,
  putIfAbsent as postgresPutIfAbsent,
  upsert as postgresUpsert,
  upsertEffect as postgresUpsertEffect,
} from '../../src/postgres';

/**
 * Natural idempotency is each store's, in one shape: the same names for the same operations, each taking the store's
 * client first and its input second (the staged forms the input alone), and the same errors.
 */
describe('natural idempotency on each store', () => {
  it.each([
    ['putIfAbsent', dynamodbPutIfAbsent, postgresPutIfAbsent, 2],
    ['compareAndSet', dynamodbCompareAndSet, postgresCompareAndSet, 2],
    ['compareAndSetEffect', dynamodbCompareAndSetEffect, postgresCompareAndSetEffect, 1],
    ['upsert', dynamodbUpsert, postgresUpsert, 2],
    ['upsertEffect', dynamodbUpsertEffect, postgresUpsertEffect, 1],
  ] as const)('%s takes as many arguments on both', (_name, onDynamoDb, onPostgres, arity) => {
    expect(onDynamoDb.length).toBe(arity);
    expect(onPostgres.length).toBe(arity);
  });

  it('throws the same errors on both, from the engine', () => {
    expect(DynamoDbInvalidRequest).toBe(InvalidNaturalRequestError);
    expect(PostgresInvalidRequest).toBe(InvalidNaturalRequestError);
    expect(DynamoDbNaturalError).toBe(NaturalIdempotencyError);
    expect(() => dynamodbUpsertEffect({ TableName: 't', Key: { pk: 'a' }, values: {} })).toThrow(
      InvalidNaturalRequestError,
    );
    expect(() => postgresUpsertEffect({ table: 't', key: { id: 'a' }, values: {} })).toThrow(
      InvalidNaturalRequestError,
    );
  });
});
