import { readFileSync } from 'node:fs';
import { Annotations, Match } from 'aws-cdk-lib/assertions';
import { CDK_JSON_CONTEXT, type SynthesizedApp, synthesize, TESTED_ENVIRONMENTS } from './synth';

/** The flags `cdk init` writes for a new project on the installed aws-cdk-lib, with their recommended values. */
const RECOMMENDED_FLAGS: Record<string, unknown> = JSON.parse(
  readFileSync(require.resolve('aws-cdk-lib/recommended-feature-flags.json'), 'utf8'),
);

describe('cdk.json', () => {
  it('sets every feature flag aws-cdk-lib recommends for a new project, at its recommended value', () => {
    // An aws-cdk-lib upgrade that adds a flag fails here: decide it, then add it (cdk flags --unstable=flags).
    const unset = Object.keys(RECOMMENDED_FLAGS).filter((flag) => !(flag in CDK_JSON_CONTEXT));
    expect(unset).toEqual([]);
    const differing = Object.keys(RECOMMENDED_FLAGS).filter(
      (flag) => JSON.stringify(CDK_JSON_CONTEXT[flag]) !== JSON.stringify(RECOMMENDED_FLAGS[flag]),
    );
    expect(differing).toEqual([]);
  });
});

describe('synthesis', () => {
  let synthesized: SynthesizedApp;
  beforeAll(() => {
    synthesized = synthesize({ bundle: false });
  });
  afterAll(() => synthesized?.dispose());

  it.each(TESTED_ENVIRONMENTS)('leaves no warning on any construct of %s', (env) => {
    const warnings = Annotations.fromStack(synthesized.stacks[env]).findWarning('*', Match.anyValue());
    expect(warnings.map((warning) => `${warning.id}: ${JSON.stringify(warning.entry.data)}`)).toEqual([]);
  });
});
