import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { App, type CfnElement, type IResolvable, type Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { type ApiKind, environments, type StoreKind, withApiKind, withStore } from '../../lib/infra/environments';
import { PaymentsStack } from '../../lib/infra/payments-stack';

/**
 * A deprecated aws-cdk-lib API throws instead of printing a [WARNING] line: synth output stays warning-free because a
 * test fails first. (`npm run synth` sets the same.)
 */
process.env.JSII_DEPRECATED = 'fail';

/** cdk.json's context (the feature flags): the tests synthesize what `cdk synth` and `cdk deploy` synthesize. */
export const CDK_JSON_CONTEXT: Record<string, unknown> = JSON.parse(
  readFileSync(path.join(__dirname, '..', '..', 'cdk.json'), 'utf8'),
).context;

/** The environments the tests synthesize: the two ends (staging sits between them in `environments.ts`). */
export const TESTED_ENVIRONMENTS = ['dev', 'prod'] as const;
export type TestedEnvironment = (typeof TESTED_ENVIRONMENTS)[number];

export interface SynthesizedApp {
  readonly outdir: string;
  readonly stacks: Record<TestedEnvironment, PaymentsStack>;
  readonly templates: Record<TestedEnvironment, Template>;
  /** Removes the cloud assembly (bundles included). */
  dispose(): void;
}

/**
 * Synthesizes dev and prod into a throwaway directory, once per test file.
 *
 * `bundle: false` skips esbuild (CDK's `aws:cdk:bundling-stacks` context) for tests that only read the template's
 * shape. CDK's built-in CloudFormation schema validation is off here: it costs about 15 s and `npm run synth` runs it.
 * `api` puts that API in front, as `-c api=...` does, and `store` keeps the data there, as `-c store=...` does; by
 * default each environment's own (a REST API, DynamoDB).
 */
export function synthesize({
  bundle,
  api,
  store,
}: {
  bundle: boolean;
  api?: ApiKind;
  store?: StoreKind;
}): SynthesizedApp {
  const outdir = mkdtempSync(path.join(tmpdir(), 'keystone-cdk-'));
  const app = new App({
    outdir,
    builtinCloudFormationValidation: false,
    context: { ...CDK_JSON_CONTEXT, ...(bundle ? {} : { 'aws:cdk:bundling-stacks': [] }) },
  });
  const [dev, prod] = withStore(withApiKind([environments.dev, environments.prod], api), store);
  const stacks = {
    dev: new PaymentsStack(app, environments.dev.stackName, { config: dev! }),
    prod: new PaymentsStack(app, environments.prod.stackName, { config: prod! }),
  };
  const templates = { dev: Template.fromStack(stacks.dev), prod: Template.fromStack(stacks.prod) };
  return { outdir, stacks, templates, dispose: () => rmSync(outdir, { recursive: true, force: true }) };
}

/** The template resource a construct's L1 resource became. */
export function resourceOf(template: Template, stack: Stack, element: CfnElement): CfnResourceJson {
  const logicalId = stack.getLogicalId(element);
  const resource = template.toJSON().Resources[logicalId] as CfnResourceJson | undefined;
  if (!resource) throw new Error(`No resource ${logicalId} in ${stack.stackName}`);
  return resource;
}

/** Resolves a token (an ARN, a name) to the CloudFormation JSON the template holds for it. */
export function cfn(stack: Stack, value: string | IResolvable): unknown {
  return stack.resolve(value);
}

export interface CfnResourceJson {
  readonly Type: string;
  readonly Properties: Record<string, unknown>;
  readonly DeletionPolicy?: string;
  readonly UpdateReplacePolicy?: string;
  readonly DependsOn?: string[];
}
