import { byBodyField, byMessageAttribute, byMessageId, InvalidRecordKeyError, recordIdentity } from '../../src/sqs';
import { sqsRecord } from './sqs-events';

describe('record keys', () => {
  const record = sqsRecord({
    messageId: 'm-1',
    body: { orderId: 'o-42', invoice: 7, nested: { id: 'x' } },
    messageAttributes: { idempotencyKey: 'k-9' },
  });

  it('takes the message id by default', () => {
    expect(byMessageId(record)).toBe('m-1');
  });

  it('takes a string message attribute', () => {
    expect(byMessageAttribute('idempotencyKey')(record)).toBe('k-9');
    expect(() => byMessageAttribute('missing')(record)).toThrow('no string attribute missing');
  });

  it('takes a string or number field of a JSON body', () => {
    expect(byBodyField('orderId')(record)).toBe('o-42');
    expect(byBodyField('invoice')(record)).toBe('7');
    expect(() => byBodyField('nested')(record)).toThrow('no string or number field nested');
    expect(() => byBodyField('orderId')(sqsRecord({ body: 'not json' }))).toThrow();
  });
});

describe('recordIdentity', () => {
  const order = (body: unknown, messageId?: string) => sqsRecord({ body, ...(messageId ? { messageId } : {}) });

  it('scopes the key to the consumer, and to a given scope', () => {
    expect(recordIdentity(order({}, 'm-1'), { name: 'billing' }).key).toBe('billing|billing|m-1');
    expect(recordIdentity(order({}, 'm-1'), { name: 'billing', scope: 'tenant a' }).key).toBe('tenant%20a|billing|m-1');
  });

  it('fingerprints the key alone by default, so a re-rendered body is the same message', () => {
    const options = { name: 'billing', key: byBodyField('orderId') };
    const one = recordIdentity(order({ orderId: 'o-1', at: 1 }), options);
    const two = recordIdentity(order({ orderId: 'o-1', at: 2 }), options);
    expect(two).toEqual(one);
  });

  it('fingerprints the body canonically when asked', () => {
    const options = { name: 'billing', key: byBodyField('orderId'), fingerprintBody: true };
    const one = recordIdentity(order('{"orderId":"o-1","qty":1}'), options);
    const reordered = recordIdentity(order('{ "qty": 1, "orderId": "o-1" }'), options);
    const changed = recordIdentity(order('{"orderId":"o-1","qty":2}'), options);
    expect(reordered.fingerprint).toBe(one.fingerprint);
    expect(changed.fingerprint).not.toBe(one.fingerprint);
  });

  it('refuses an empty, too long or unreadable key', () => {
    const record = order({});
    expect(() => recordIdentity(record, { name: 'n', key: () => '' })).toThrow(InvalidRecordKeyError);
    expect(() => recordIdentity(record, { name: 'n', key: () => 'k'.repeat(256) })).toThrow(InvalidRecordKeyError);
    expect(() => recordIdentity(record, { name: 'n', key: byBodyField('orderId') })).toThrow(InvalidRecordKeyError);
  });
});
