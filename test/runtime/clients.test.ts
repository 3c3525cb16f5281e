import { documentClient } from '../../lib/runtime/clients';

describe('documentClient', () => {
  it('shares one client among everything built from the same environment', () => {
    const env = { DYNAMODB_ENDPOINT: 'http://127.0.0.1:1' };
    expect(documentClient(env)).toBe(documentClient(env));
  });

  it('builds separate clients for separate environments', () => {
    expect(documentClient({ DYNAMODB_ENDPOINT: 'http://127.0.0.1:1' })).not.toBe(
      documentClient({ DYNAMODB_ENDPOINT: 'http://127.0.0.1:2' }),
    );
  });
});
