import { RemovalPolicy } from 'aws-cdk-lib';
import {
  ENVIRONMENT_NAMES,
  environments,
  selectEnvironments,
  withApiKind,
  withStore,
} from '../../lib/infra/environments';

describe('selectEnvironments', () => {
  it('selects every environment when the context has no env', () => {
    for (const absent of [undefined, null, '']) {
      expect(selectEnvironments(absent).map((config) => config.name)).toEqual(['dev', 'staging', 'prod']);
    }
  });

  it('selects exactly the environment named by -c env=<name>', () => {
    expect(selectEnvironments('staging')).toEqual([environments.staging]);
  });

  it('refuses an unknown environment, listing the known ones', () => {
    expect(() => selectEnvironments('qa')).toThrow(
      `Unknown environment "qa" in context 'env': expected one of dev, staging, prod`,
    );
    expect(() => selectEnvironments(42)).toThrow(/Unknown environment 42/);
  });
});

describe('environments', () => {
  it.each(ENVIRONMENT_NAMES)('%s names its stack and tags after itself', (name) => {
    const config = environments[name];
    expect(config.name).toBe(name);
    expect(config.stackName).toBe(`Keystone-${name}`);
    expect(config.tags.Environment).toBe(name);
  });

  it('retains data behind deletion protection outside dev', () => {
    const protection = ENVIRONMENT_NAMES.map((name) => [
      name,
      environments[name].removalPolicy,
      environments[name].deletionProtection,
    ]);
    expect(protection).toEqual([
      ['dev', RemovalPolicy.DESTROY, false],
      ['staging', RemovalPolicy.RETAIN, true],
      ['prod', RemovalPolicy.RETAIN, true],
    ]);
  });

  it('calls downstream services over HTTPS', () => {
    for (const name of ENVIRONMENT_NAMES) {
      expect(environments[name].processorUrl).toMatch(/^https:\/\//);
      expect(environments[name].mailerUrl).toMatch(/^https:\/\//);
    }
  });
});

describe('the API in front', () => {
  it('is a REST API in every environment as configured (WAF, request validation)', () => {
    expect(ENVIRONMENT_NAMES.map((name) => environments[name].api)).toEqual(['rest', 'rest', 'rest']);
  });

  it('is what -c api=<kind> asks for, in every selected environment, and as configured without it', () => {
    const all = selectEnvironments(undefined);
    expect(withApiKind(all, 'http').map((config) => config.api)).toEqual(['http', 'http', 'http']);
    expect(withApiKind(all, 'http')[2]).toEqual({ ...environments.prod, api: 'http' });
    for (const absent of [undefined, null, '']) expect(withApiKind(all, absent)).toEqual(all);
  });

  it('refuses an unknown API, listing the known ones', () => {
    expect(() => withApiKind([environments.dev], 'graphql')).toThrow(
      `Unknown API "graphql" in context 'api': expected one of rest, http`,
    );
  });
});

describe('withStore', () => {
  it('keeps every environment on DynamoDB unless -c store= says otherwise', () => {
    for (const name of ENVIRONMENT_NAMES) expect(environments[name].store).toBe('dynamodb');
    const all = ENVIRONMENT_NAMES.map((name) => environments[name]);
    expect(withStore(all, 'postgres').map((config) => config.store)).toEqual(['postgres', 'postgres', 'postgres']);
    expect(withStore(all, 'postgres')[0]).toEqual({ ...environments.dev, store: 'postgres' });
    for (const absent of [undefined, null, '']) expect(withStore(all, absent)).toEqual(all);
  });

  it('refuses an unknown store, listing the known ones', () => {
    expect(() => withStore([environments.dev], 'mysql')).toThrow(
      `Unknown store "mysql" in context 'store': expected one of dynamodb, postgres`,
    );
  });
});

describe('database settings', () => {
  it('retain the data where the tables are retained, with capacity and a standby as each environment needs', () => {
    for (const name of ENVIRONMENT_NAMES) {
      const { database } = environments[name];
      expect(database.minCapacityAcu).toBeGreaterThanOrEqual(0.5);
      expect(database.maxCapacityAcu).toBeGreaterThan(database.minCapacityAcu);
      expect(database.backupRetentionDays).toBeGreaterThanOrEqual(1);
      expect(database.backupRetentionDays).toBeLessThanOrEqual(35);
    }
    // Only prod pays for a warm reader to fail over to, and a NAT gateway per zone.
    expect(ENVIRONMENT_NAMES.map((name) => environments[name].database.readers)).toEqual([0, 0, 1]);
    expect(ENVIRONMENT_NAMES.map((name) => environments[name].database.natGateways)).toEqual([1, 1, 2]);
  });
});
