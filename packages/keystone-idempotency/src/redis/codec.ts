import type { IdempotencyRecord, RecordStatus, StoredResponse } from '../engine/index.js';

/**
 * A record as a Redis hash: one field per attribute, each a string, so that the scripts read and change the few they
 * check (`leaseToken`, `status`, `expiresAt`, `recoverAt`) without decoding anything; the response is JSON, which no
 * script reads. Absent optional attributes are absent fields.
 */
export function toFields(record: IdempotencyRecord): string[] {
  const fields = [
    'key',
    record.key,
    'status',
    record.status,
    'fingerprint',
    record.fingerprint,
    'leaseToken',
    record.leaseToken,
    'leaseExpiresAt',
    String(record.leaseExpiresAt),
    'downstreamKey',
    record.downstreamKey,
    'attempt',
    String(record.attempt),
    'createdAt',
    String(record.createdAt),
  ];
  if (record.expiresAt !== undefined) fields.push('expiresAt', String(record.expiresAt));
  if (record.recoverAt !== undefined) fields.push('recoverAt', String(record.recoverAt));
  if (record.response !== undefined) fields.push('response', encodeResponse(record.response));
  return fields;
}

export function encodeResponse(response: StoredResponse): string {
  return JSON.stringify(response);
}

/** HGETALL's pairs (name, value, ...) as a record; undefined for none (an empty hash is no key in Redis). */
export function fromPairs(pairs: readonly unknown[]): IdempotencyRecord | undefined {
  if (pairs.length === 0) return undefined;
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < pairs.length; i += 2) f.set(String(pairs[i]), String(pairs[i + 1]));
  const text = (name: string) => {
    const value = f.get(name);
    if (value === undefined) throw new Error(`the record in Redis has no ${name} field`);
    return value;
  };
  const expiresAt = f.get('expiresAt');
  const recoverAt = f.get('recoverAt');
  const response = f.get('response');
  return {
    key: text('key'),
    status: text('status') as RecordStatus,
    fingerprint: text('fingerprint'),
    leaseToken: text('leaseToken'),
    leaseExpiresAt: Number(text('leaseExpiresAt')),
    downstreamKey: text('downstreamKey'),
    attempt: Number(text('attempt')),
    createdAt: Number(text('createdAt')),
    ...(expiresAt !== undefined ? { expiresAt: Number(expiresAt) } : {}),
    ...(recoverAt !== undefined ? { recoverAt: Number(recoverAt) } : {}),
    ...(response !== undefined ? { response: JSON.parse(response) as StoredResponse } : {}),
  };
}
