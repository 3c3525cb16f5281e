import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { selectEnvironments } from '../lib/infra/environments';
import { PaymentsStack } from '../lib/infra/payments-stack';

/**
 * The CDK app: one stack per environment. `cdk synth -c env=staging` (or deploy) builds only that environment's
 * stack; without `env`, all of them, so that a plain `cdk synth` checks every environment.
 *
 * cdk-nag's AWS Solutions rules run on every synth: a finding that is neither fixed nor acknowledged with a reason
 * fails the synth, and so the deploy.
 */
const app = new App();
for (const config of selectEnvironments(app.node.tryGetContext('env'))) {
  new PaymentsStack(app, config.stackName, { config });
}
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
