import { RemovalPolicy } from 'aws-cdk-lib';
import { ENVIRONMENT_NAMES, environments, selectEnvironments } from '../../lib/infra/environments';

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
