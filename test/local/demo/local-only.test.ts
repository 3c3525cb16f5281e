import { synthesize, TESTED_ENVIRONMENTS } from '../../infra/synth';

/**
 * The demo page and its routes (the demo account's key, the processor's ledger and fault switch) exist only in the
 * local stack. No deployed stack may serve any of them: no resource under /demo, no method on the API's root.
 */
describe('the demo page, in the deployed stacks', () => {
  it('is absent: no /demo resource and no method on the root resource', () => {
    const synthesized = synthesize({ bundle: false });
    try {
      for (const env of TESTED_ENVIRONMENTS) {
        const template = synthesized.templates[env];
        const pathParts = Object.values(template.findResources('AWS::ApiGateway::Resource')).map(
          (resource) => (resource.Properties as { PathPart: string }).PathPart,
        );
        expect(pathParts).toEqual(expect.arrayContaining(['payments', 'webhooks']));
        expect(pathParts).not.toContain('demo');
        const methods = Object.values(template.findResources('AWS::ApiGateway::Method'));
        expect(methods.length).toBeGreaterThan(0);
        const onRoot = methods.filter((method) =>
          JSON.stringify((method.Properties as { ResourceId: unknown }).ResourceId).includes('RootResourceId'),
        );
        expect(onRoot).toEqual([]);
      }
    } finally {
      synthesized.dispose();
    }
  });
});
