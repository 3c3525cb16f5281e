import type { RequestMatcher, WireRequest } from '@keystone-idempotency/local-aws/postgres-fault-proxy';
import { splitScopedKey } from '../../src/engine/key';
import { RecordStatus } from '../../src/engine/record';

/**
 * The PostgreSQL store's requests as the wire shows them, by step: the one place that knows what a claim, a
 * takeover, a commit and a release look like there (packages/keystone-idempotency/src/postgres/statements.ts writes them), as
 * test/support/engine-requests.ts does for DynamoDB. Told apart by the statement's kind and the record's key among
 * its parameters; if a step changes shape, its matcher stops matching, the fault never fires, and the test that
 * armed it fails on `fired()`.
 */
export function postgresEngineRequests() {
  const about = (key: string) => {
    const { clientKey } = splitScopedKey(key);
    return (request: WireRequest) => request.params.includes(clientKey);
  };
  const matcher = (name: string, key: string, when: (request: WireRequest) => boolean): RequestMatcher => ({
    name: `${name} of ${key}`,
    when: (request) => about(key)(request) && when(request),
  });
  return {
    /** A fresh claim: the committed record read first, then INSERT ... ON CONFLICT; answers with either. */
    claim: (key: string) =>
      matcher('claim', key, (request) => /\bseen AS MATERIALIZED\b[\s\S]*\bINSERT INTO\b/.test(request.text)),
    /** A takeover: an UPDATE conditioned on the lease token and status seen, answering the same way. */
    takeover: (key: string) => matcher('takeover', key, (request) => /\bwritten AS \(UPDATE\b/.test(request.text)),
    /** A release: the owner's own UPDATE to RELEASED. */
    release: (key: string) =>
      matcher('release', key, (r) => /\bended AS \(/.test(r.text) && r.params.includes(RecordStatus.Released)),
    /** A commit with nothing staged: the fenced completion, a statement of its own. */
    completion: (key: string) =>
      matcher(
        'completion',
        key,
        (r) => r.transaction.length === 0 && r.text.includes(`SET status = '${RecordStatus.Completed}'`),
      ),
    /** The COMMIT of a transaction that wrote this record: a commit with effects, or a one-shot commit. */
    commit: (key: string): RequestMatcher => ({
      name: `COMMIT of ${key}`,
      when: (request) => request.text === 'COMMIT' && request.transaction.some(about(key)),
    }),
  };
}
