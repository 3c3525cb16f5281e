import fc from 'fast-check';
import { fingerprint } from '../../src/engine/fingerprint';

const json = 'application/json';

describe('fingerprint', () => {
  it('ignores member order and whitespace in a JSON body', () => {
    const a = fingerprint({ operation: 'POST /payments', body: '{"amount":4200,"currency":"usd"}', contentType: json });
    const b = fingerprint({
      operation: 'POST /payments',
      body: '{ "currency" : "usd",\n  "amount": 4200 }',
      contentType: json,
    });
    expect(a).toBe(b);
  });

  it('treats equal numbers spelled differently as the same body', () => {
    const a = fingerprint({ operation: 'POST /x', body: '{"n":1000}', contentType: json });
    expect(fingerprint({ operation: 'POST /x', body: '{"n":1e3}', contentType: json })).toBe(a);
    expect(fingerprint({ operation: 'POST /x', body: '{"n":1000.0}', contentType: json })).toBe(a);
  });

  it('tells different values apart', () => {
    const a = fingerprint({ operation: 'POST /x', body: '{"amount":4200}', contentType: json });
    expect(fingerprint({ operation: 'POST /x', body: '{"amount":4201}', contentType: json })).not.toBe(a);
    expect(fingerprint({ operation: 'POST /x', body: '{"amount":"4200"}', contentType: json })).not.toBe(a);
  });

  it('tells the same body sent to two operations apart', () => {
    const body = '{"a":1}';
    expect(fingerprint({ operation: 'POST /a', body, contentType: json })).not.toBe(
      fingerprint({ operation: 'POST /b', body, contentType: json }),
    );
  });

  it('hashes a non-JSON body byte for byte', () => {
    const a = fingerprint({ operation: 'POST /x', body: 'a=1&b=2', contentType: 'application/x-www-form-urlencoded' });
    expect(
      fingerprint({ operation: 'POST /x', body: 'b=2&a=1', contentType: 'application/x-www-form-urlencoded' }),
    ).not.toBe(a);
    expect(fingerprint({ operation: 'POST /x', body: '{not json', contentType: json })).not.toBe(
      fingerprint({ operation: 'POST /x', body: '{not  json', contentType: json }),
    );
  });

  it('never lets key order or whitespace change the fingerprint of any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer({ min: 0, max: 4 }), (value, indent) => {
        const compact = JSON.stringify(value);
        const shuffled = JSON.stringify(reverseKeys(value), null, indent);
        return (
          fingerprint({ operation: 'POST /x', body: compact, contentType: json }) ===
          fingerprint({ operation: 'POST /x', body: shuffled, contentType: json })
        );
      }),
    );
  });
});

function reverseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseKeys);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .reverse()
        .map(([k, v]) => [k, reverseKeys(v)]),
    );
  }
  return value;
}
