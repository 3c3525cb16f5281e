import type { App } from 'aws-cdk-lib';
import { API_GATEWAY_ACCOUNT_STACK_NAME, ApiGatewayAccountStack } from './api-gateway-account';
import type { EnvironmentConfig } from './environments';
import { PaymentsStack } from './payments-stack';

export interface KeystoneStacks {
  readonly environments: readonly PaymentsStack[];
  /** One per account and region that an environment asked for (`apiGatewayLoggingRole: 'account-stack'`). */
  readonly accounts: readonly ApiGatewayAccountStack[];
}

/**
 * The environments' stacks, and the API Gateway account stack each one depends on, built once per account and region
 * however many environments share it. `cdk deploy -c env=prod --all` deploys the account stack first when prod
 * needs it.
 *
 * @example
 * addKeystoneStacks(app, selectEnvironments(app.node.tryGetContext('env')));
 */
export function addKeystoneStacks(app: App, configs: readonly EnvironmentConfig[]): KeystoneStacks {
  const accounts = new Map<string, ApiGatewayAccountStack>();
  const environments = configs.map((config) => {
    const stack = new PaymentsStack(app, config.stackName, { config });
    // Only a REST API writes execution logs through the account's role; an HTTP API's access logs need none.
    if (config.apiGatewayLoggingRole === 'account-stack' && config.api === 'rest') {
      const key = accountKey(config);
      let account = accounts.get(key);
      if (!account) {
        account = new ApiGatewayAccountStack(app, accountStackId(config), {
          env: config.account || config.region ? { account: config.account, region: config.region } : undefined,
          tags: { Project: config.tags.Project ?? 'keystone' },
        });
        accounts.set(key, account);
      }
      stack.addStackDependency(account, "execution logging needs the account's API Gateway logging role");
    }
    return stack;
  });
  return { environments, accounts: [...accounts.values()] };
}

/** Unset account or region: the CLI's, the same for every environment that leaves it unset. */
function accountKey(config: EnvironmentConfig): string {
  return `${config.account ?? ''}/${config.region ?? ''}`;
}

function accountStackId(config: EnvironmentConfig): string {
  const pinned = [config.account, config.region].filter(Boolean);
  return [API_GATEWAY_ACCOUNT_STACK_NAME, ...pinned].join('-');
}
