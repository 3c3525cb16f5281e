import { IdempotencyError } from '../engine/errors.js';
import { joinScopedKey } from '../engine/key.js';
import type { IdempotencyRecord, RecordStatus, StoredResponse } from '../engine/record.js';
import type { StepProgress } from '../engine/steps.js';

/** A record as `recordJson` builds it in SQL: times in epoch ms (`expires_at` in s), the body in base64. */
export interface RecordJson {
  readonly scope: string;
  readonly key: string;
  readonly status: RecordStatus;
  readonly fingerprint: string;
  readonly lease_token: string;
  readonly lease_expires_at: number;
  readonly downstream_key: string;
  readonly attempt: number;
  readonly created_at: number;
  /** Null while the operation is in the recovery set: it never expires. */
  readonly expires_at: number | null;
  readonly recover_at: number | null;
  readonly response_status: number | null;
  readonly response_headers: Record<string, string> | null;
  readonly response_body: string | null;
  readonly response_is_base64: boolean | null;
  /** Version 2 of the schema on: null until a multi-step operation's first checkpoint (absent from an older fence). */
  readonly steps?: StepProgress['steps'] | null;
  readonly step_revision?: number | null;
}

/** The record a row holds. The one place column names meet record fields, with {@link responseColumns}. */
export function fromJson(json: RecordJson): IdempotencyRecord {
  return {
    key: joinScopedKey(json.scope, json.key),
    status: json.status,
    fingerprint: json.fingerprint,
    leaseToken: json.lease_token,
    leaseExpiresAt: Number(json.lease_expires_at),
    ...(json.expires_at !== null ? { expiresAt: Number(json.expires_at) } : {}),
    downstreamKey: json.downstream_key,
    attempt: Number(json.attempt),
    createdAt: Number(json.created_at),
    ...(json.response_status !== null && json.response_body !== null
      ? {
          response: responseOf(
            json.response_status,
            json.response_headers,
            json.response_body,
            json.response_is_base64,
          ),
        }
      : {}),
    ...(json.recover_at !== null ? { recoverAt: Number(json.recover_at) } : {}),
    ...(json.steps !== undefined && json.steps !== null
      ? { progress: { revision: Number(json.step_revision ?? 0), steps: json.steps } }
      : {}),
  };
}

/** The record in a fence's DETAIL (`null` when there was none). */
export function fromDetail(detail: string | undefined): IdempotencyRecord | undefined {
  if (detail === undefined) throw new IdempotencyError('the fence raised without the record it met');
  const json = JSON.parse(detail) as RecordJson | null;
  return json === null ? undefined : fromJson(json);
}

function responseOf(
  statusCode: number,
  headers: Record<string, string> | null,
  base64Body: string,
  isBase64Encoded: boolean | null,
): StoredResponse {
  const bytes = Buffer.from(base64Body, 'base64');
  return {
    statusCode: Number(statusCode),
    body: isBase64Encoded ? bytes.toString('base64') : bytes.toString('utf8'),
    headers: headers ?? {},
    ...(isBase64Encoded !== null ? { isBase64Encoded } : {}),
  };
}

/**
 * A response as its four columns: status, headers (JSON), the body's bytes (a base64-encoded body decoded, so a
 * binary response is stored as the bytes it stands for), and whether the body was base64-encoded (null: unsaid).
 */
export function responseColumns(response: StoredResponse): [number, string, Buffer, boolean | null] {
  const body = response.isBase64Encoded ? Buffer.from(response.body, 'base64') : Buffer.from(response.body, 'utf8');
  return [response.statusCode, JSON.stringify(response.headers), body, response.isBase64Encoded ?? null];
}
