import { Pool } from 'pg';
import { ConfigurationError } from '../../src/engine/errors';
import { PostgresStore, type PostgresStoreOptions } from '../../src/postgres/store';

/**
 * The PostgreSQL store's own options, checked when it is made: what the store contract suite can't reach (it makes
 * every store with the engine's options alone). A pool that is never connected: nothing here reaches the database.
 */
describe('PostgresStore options', () => {
  const pool = new Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
  afterAll(() => pool.end());
  const store = (options: Partial<PostgresStoreOptions>) => () => new PostgresStore({ pool, ...options });

  it.each(['lockTimeoutMs', 'idleInTransactionTimeoutMs'] as const)(
    'refuses a %s that is not a positive whole number of ms, and takes 1',
    (name) => {
      for (const wrong of [0, -1, 0.5, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
        expect(store({ [name]: wrong })).toThrow(ConfigurationError);
      }
      expect(store({ [name]: 1 })).not.toThrow();
      expect(store({})).not.toThrow();
    },
  );

  it('refuses a missing pool', () => {
    expect(store({ pool: undefined as unknown as Pool })).toThrow(new ConfigurationError('pool is required'));
  });
});
