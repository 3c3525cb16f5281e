import { ConfigurationError } from '../engine/errors.js';
import { RecordStatus } from '../engine/record.js';

/**
 * The keys table and everything the migration installs beside it, by name: the one place the store, the
 * migration and a team's own queries agree on them.
 */

/** Where the keys table lives. Without a schema, names resolve through the connection's `search_path`. */
export interface TableOptions {
  /** The schema holding the table and its functions. Default: none (the connection's `search_path`). */
  readonly schema?: string;
  /** Default `idempotency_keys`. */
  readonly table?: string;
}

export const DEFAULT_TABLE = 'idempotency_keys';

/**
 * SQLSTATE raised by the fence when a write finds the record other than it expected (another owner's lease, already
 * completed, gone). Its DETAIL is the record met, as JSON, so the writer learns it from the same round trip.
 */
export const FENCE_SQLSTATE = 'KI409';
/** SQLSTATE raised when an effect statement with `expectRows` returned another number of rows (a compare-and-set that found another state). */
export const EXPECT_ROWS_SQLSTATE = 'KI412';

/** A PostgreSQL identifier, quoted: any name is taken literally, never as SQL. */
export function quoteIdentifier(name: string): string {
  if (name.length === 0 || name.length > 63 || name.includes('\0')) {
    throw new ConfigurationError(`${JSON.stringify(name)} is not a usable PostgreSQL identifier (1 to 63 characters)`);
  }
  return `"${name.replaceAll('"', '""')}"`;
}

/** The quoted, schema-qualified names of the keys table and what the migration installs with it. */
export interface TableNames {
  /** The keys table. */
  readonly table: string;
  /** `<table>_fence(matched, scope, key)`: raises {@link FENCE_SQLSTATE} with the record met when nothing matched. */
  readonly fence: string;
  /** `<table>_expect_rows(actual, expected, effect)`: raises {@link EXPECT_ROWS_SQLSTATE} when they differ. */
  readonly expectRows: string;
  /** The partial index of unfinished recoverable operations (`recover_at`). Unqualified: CREATE INDEX wants it so. */
  readonly recoveryIndex: string;
  /** The index the batch purge of expired rows reads. */
  readonly expiryIndex: string;
  /** Which migrations have been applied to this table. */
  readonly migrations: string;
  /** The table's name, unquoted and unqualified (for constraint names and the migration lock). */
  readonly bare: string;
  /** The schema, quoted, when one was given. */
  readonly schema: string | undefined;
}

export function tableNames(options: TableOptions = {}): TableNames {
  const bare = options.table ?? DEFAULT_TABLE;
  const schema = options.schema === undefined ? undefined : quoteIdentifier(options.schema);
  const qualified = (name: string) => (schema ? `${schema}.${quoteIdentifier(name)}` : quoteIdentifier(name));
  return {
    table: qualified(bare),
    fence: qualified(`${bare}_fence`),
    expectRows: qualified(`${bare}_expect_rows`),
    recoveryIndex: quoteIdentifier(`${bare}_recovery`),
    expiryIndex: quoteIdentifier(`${bare}_expiry`),
    migrations: qualified(`${bare}_migrations`),
    bare,
    schema,
  };
}

/**
 * One record as JSON, built in SQL from the row aliased `alias`: times as epoch milliseconds (`expires_at` in
 * seconds, as the engine keeps it), the body in base64. Every read of a record goes through it (and so does the
 * fence's DETAIL), so one decoder reads them all, exactly, whatever the session's time zone or `bytea_output`.
 * `json`, not `jsonb`: the steps and headers are embedded as the text they were stored as, escapes and all (see
 * {@link schemaV3}).
 */
export function recordJson(alias: string): string {
  return `json_build_object(${recordMembersV1(alias)},
      'steps', ${alias}.steps, 'step_revision', ${alias}.step_revision)`;
}

/** Version 2's record, as its fence built it: kept as released. */
function recordJsonV2(alias: string): string {
  return `jsonb_build_object(${recordMembersV1(alias)},
      'steps', ${alias}.steps, 'step_revision', ${alias}.step_revision)`;
}

/** The members of a record's JSON that version 1 of the schema had. */
function recordMembersV1(alias: string): string {
  const ms = (column: string) => `floor(extract(epoch FROM ${alias}.${column}) * 1000)`;
  return `'scope', ${alias}.scope, 'key', ${alias}.key, 'status', ${alias}.status, 'fingerprint', ${alias}.fingerprint,
      'lease_token', ${alias}.lease_token, 'lease_expires_at', ${ms('lease_expires_at')},
      'downstream_key', ${alias}.downstream_key, 'attempt', ${alias}.attempt, 'created_at', ${ms('created_at')},
      'expires_at', floor(extract(epoch FROM ${alias}.expires_at)), 'recover_at', ${ms('recover_at')},
      'response_status', ${alias}.response_status, 'response_headers', ${alias}.response_headers,
      'response_body', encode(${alias}.response_body, 'base64'), 'response_is_base64', ${alias}.response_is_base64`;
}

/**
 * The record as version 1 of the schema built it in its fence, kept as released: version 1 is applied as it was, and
 * version 2 replaces the fence with one built from {@link recordJson}.
 */
function recordJsonV1(alias: string): string {
  return `jsonb_build_object(${recordMembersV1(alias)})`;
}

const STATUSES = Object.values(RecordStatus)
  .map((status) => `'${status}'`)
  .join(', ');

/**
 * Version 1 of the schema: the keys table, its two indexes and the two functions the store's writes call.
 *
 * - Primary key (scope, key): the account and operation, then the client's key (`splitScopedKey`), so a team can
 *   see and query the keys of one account; it is also the unique index a concurrent duplicate waits on.
 * - Times are `timestamptz`, readable and comparable in a team's own queries. The store never asks PostgreSQL for
 *   the time (`now()`): every time it writes or compares comes from its injected clock, as a parameter.
 * - The response is its status, its headers (`jsonb`) and its body as bytes (`bytea`: byte for byte, and a body
 *   may hold characters `text` refuses, NUL among them); for a base64-encoded (binary) response, the decoded bytes.
 * - `recover_at` is set only while a recoverable operation is unfinished: the partial index on it is the recovery
 *   set, holding only those few rows, which `findDue` reads instead of the table.
 * - `expires_at` is set exactly when `recover_at` is not (a check says so): an unfinished recoverable operation never
 *   expires, so no condition takes it for free and the purge, which deletes only rows whose expiry has passed, never
 *   deletes it, however far behind recovery falls. Forgotten, a late retry would claim it afresh, with a new
 *   downstream key, and charge again. It is indexed (where set) for the batch purge. Reads never rely on the purge:
 *   a row past its expiry is absent to every read, as on DynamoDB, whose TTL deletion lags too.
 */
export function schemaV1(names: TableNames): string {
  const t = names.table;
  return `
CREATE TABLE ${t} (
  scope              text        NOT NULL,
  key                text        NOT NULL,
  status             text        NOT NULL,
  fingerprint        text        NOT NULL,
  lease_token        text        NOT NULL,
  lease_expires_at   timestamptz NOT NULL,
  downstream_key     text        NOT NULL,
  attempt            integer     NOT NULL,
  created_at         timestamptz NOT NULL,
  completed_at       timestamptz,
  expires_at         timestamptz,
  recover_at         timestamptz,
  response_status    smallint,
  response_headers   jsonb,
  response_body      bytea,
  response_is_base64 boolean,
  CONSTRAINT ${quoteIdentifier(`${names.bare}_pkey`)} PRIMARY KEY (scope, key),
  CONSTRAINT ${quoteIdentifier(`${names.bare}_status`)} CHECK (status IN (${STATUSES})),
  CONSTRAINT ${quoteIdentifier(`${names.bare}_attempt`)} CHECK (attempt >= 1),
  CONSTRAINT ${quoteIdentifier(`${names.bare}_completed_with_response`)}
    CHECK ((status = '${RecordStatus.Completed}') = (response_status IS NOT NULL AND response_body IS NOT NULL)),
  CONSTRAINT ${quoteIdentifier(`${names.bare}_unfinished_recoverable_never_expires`)}
    CHECK ((recover_at IS NULL) <> (expires_at IS NULL))
);

CREATE INDEX ${names.recoveryIndex} ON ${t} (recover_at) WHERE recover_at IS NOT NULL;
CREATE INDEX ${names.expiryIndex} ON ${t} (expires_at) WHERE expires_at IS NOT NULL;

CREATE FUNCTION ${names.fence}(matched bigint, fenced_scope text, fenced_key text) RETURNS void
LANGUAGE plpgsql AS $fence$
DECLARE
  met jsonb;
BEGIN
  IF matched > 0 THEN
    RETURN;
  END IF;
  -- A fresh snapshot (this function is volatile): the record as it stands now, after any write we waited on.
  SELECT ${recordJsonV1('r')} INTO met FROM ${t} AS r WHERE r.scope = fenced_scope AND r.key = fenced_key;
  RAISE EXCEPTION 'idempotency record %|% is not as this write expected', fenced_scope, fenced_key
    USING ERRCODE = '${FENCE_SQLSTATE}', DETAIL = coalesce(met::text, 'null');
END
$fence$;

CREATE FUNCTION ${names.expectRows}(actual bigint, expected bigint, effect integer) RETURNS void
LANGUAGE plpgsql AS $expect$
BEGIN
  IF actual <> expected THEN
    RAISE EXCEPTION 'effect % returned % rows, not %', effect, actual, expected
      USING ERRCODE = '${EXPECT_ROWS_SQLSTATE}',
            DETAIL = jsonb_build_object('effect', effect, 'expected', expected, 'actual', actual)::text;
  END IF;
END
$expect$;
`;
}

/** The fence, built from a record's JSON: version 2's with the steps, and version 3's as `json`. */
function fenceFunction(
  names: TableNames,
  json: (alias: string) => string,
  type: 'json' | 'jsonb',
  create: string,
): string {
  return `
${create} FUNCTION ${names.fence}(matched bigint, fenced_scope text, fenced_key text) RETURNS void
LANGUAGE plpgsql AS $fence$
DECLARE
  met ${type};
BEGIN
  IF matched > 0 THEN
    RETURN;
  END IF;
  -- A fresh snapshot (this function is volatile): the record as it stands now, after any write we waited on.
  SELECT ${json('r')} INTO met FROM ${names.table} AS r WHERE r.scope = fenced_scope AND r.key = fenced_key;
  RAISE EXCEPTION 'idempotency record %|% is not as this write expected', fenced_scope, fenced_key
    USING ERRCODE = '${FENCE_SQLSTATE}', DETAIL = coalesce(met::text, 'null');
END
$fence$;`;
}

/**
 * Version 2 of the schema: recovery points. A multi-step operation's steps (`steps`, the JSON of each step's name,
 * state, result, attempt and time) and their revision (`step_revision`, one more with each checkpoint, the condition
 * a checkpoint follows), both null until the first checkpoint; and the fence again, its detail carrying them.
 * Adding nullable columns with no default rewrites no row: instant on a table of any size.
 */
export function schemaV2(names: TableNames): string {
  return `
ALTER TABLE ${names.table}
  ADD COLUMN steps         jsonb,
  ADD COLUMN step_revision integer,
  ADD CONSTRAINT ${quoteIdentifier(`${names.bare}_steps_with_revision`)}
    CHECK ((steps IS NULL) = (step_revision IS NULL));
${fenceFunction(names, recordJsonV2, 'jsonb', 'CREATE OR REPLACE')}
`;
}

/**
 * Version 3 of the schema: the steps and response headers as `json`, the text JSON.stringify sent. It writes a NUL as
 * `\u0000` and a lone surrogate as `\ud800`, escapes `jsonb` refuses (a step result holding one failed on every retry)
 * and `json` keeps as sent; the fence's record is `json` too. The type change rewrites the table under an ACCESS
 * EXCLUSIVE lock: see docs/postgresql.md for how long.
 */
export function schemaV3(names: TableNames): string {
  return `
ALTER TABLE ${names.table}
  ALTER COLUMN steps TYPE json USING steps::json,
  ALTER COLUMN response_headers TYPE json USING response_headers::json;
${fenceFunction(names, recordJson, 'json', 'CREATE OR REPLACE')}
`;
}
