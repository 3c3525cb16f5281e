import type { PolicyDocument } from 'aws-lambda';
import { isAllowed, wildcardMatches } from '../src/api-gateway-authorizer';

const ARN = 'arn:aws:execute-api:local:000000000000:local/local/POST/payments';

function document(...Statement: PolicyDocument['Statement']): PolicyDocument {
  return { Version: '2012-10-17', Statement };
}

describe('isAllowed', () => {
  it('requires a matching Allow', () => {
    expect(isAllowed(document({ Effect: 'Allow', Action: 'execute-api:Invoke', Resource: ARN }), ARN)).toBe(true);
    expect(isAllowed(document({ Effect: 'Allow', Action: 'execute-api:Invoke', Resource: `${ARN}/x` }), ARN)).toBe(
      false,
    );
    expect(isAllowed(document(), ARN)).toBe(false);
  });

  it('lets a matching Deny win over any Allow', () => {
    const policy = document(
      { Effect: 'Allow', Action: 'execute-api:*', Resource: '*' },
      { Effect: 'Deny', Action: 'execute-api:Invoke', Resource: ['arn:aws:execute-api:*:*:*/*/POST/*'] },
    );

    expect(isAllowed(policy, ARN)).toBe(false);
  });

  it('ignores statements about other actions, and honours NotResource', () => {
    expect(isAllowed(document({ Effect: 'Allow', Action: 'execute-api:ManageConnections', Resource: '*' }), ARN)).toBe(
      false,
    );
    expect(
      isAllowed(document({ Effect: 'Allow', Action: 'execute-api:invoke', NotResource: '*/GET/*' } as never), ARN),
    ).toBe(true);
  });

  it('accepts a single statement object, as IAM does', () => {
    const single = { Version: '2012-10-17', Statement: { Effect: 'Allow', Action: '*', Resource: '*' } };

    expect(isAllowed(single as unknown as PolicyDocument, ARN)).toBe(true);
  });
});

describe('wildcardMatches', () => {
  it('matches * across slashes, ? as one character, and the rest literally', () => {
    expect(wildcardMatches('arn:*/local/*', ARN)).toBe(true);
    expect(wildcardMatches('*/P?ST/payments', ARN)).toBe(true);
    expect(wildcardMatches('arn:aws:execute-api:local:000000000000:local/local/POST/pay.ents', ARN)).toBe(false);
  });
});
