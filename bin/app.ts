import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { selectEnvironments, withApiKind, withStore } from '../lib/infra/environments';
import { addKeystoneStacks } from '../lib/infra/keystone-app';

/**
 * The CDK app: one stack per environment, and the API Gateway account stack they depend on. `cdk synth -c
 * env=staging` (or deploy) builds only that environment's stacks; without `env`, all of them, so that a plain
 * `cdk synth` checks every environment. `-c api=http` puts an HTTP API in front instead of the environment's API (a
 * REST API in every environment as configured), and `-c store=postgres` keeps the data in Aurora PostgreSQL behind
 * RDS Proxy instead of the environment's store (DynamoDB in every environment as configured).
 *
 * cdk-nag's AWS Solutions rules run on every synth: a finding that is neither fixed nor acknowledged with a reason
 * fails the synth, and so the deploy.
 */
const app = new App();
const configs = withApiKind(selectEnvironments(app.node.tryGetContext('env')), app.node.tryGetContext('api'));
addKeystoneStacks(app, withStore(configs, app.node.tryGetContext('store')));
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
