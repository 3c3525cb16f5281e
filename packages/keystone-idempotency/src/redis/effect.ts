import { EffectKindError } from '../engine/index.js';

/**
 * What a handler stages on Redis: a command run by the commit's script, in the same atomic step as the key's
 * completion, or not at all. Each names one key, which must carry the store's hash tag (`store.effectKey(name)` makes
 * one): a script may touch keys of one hash slot only on a Redis Cluster (ElastiCache Serverless is one), and every
 * key of the store (records and recovery set) lives in the slot of that tag.
 *
 * - `set`: `SET key value`; with `ifAbsent`, refused (nothing written) when the key exists.
 * - `hset`: `HSET key field value`; with `ifAbsent`, refused when the field exists; refused when the key holds no hash.
 * - `incrBy`: `INCRBY key by`; refused when the key holds anything but an integer as INCRBY reads one (`'007'`,
 *   `'-0'`, `'+1'` are not), or the count leaves the safe integers.
 * - `require`: writes nothing; refused when the key does not exist.
 *
 * Each condition is checked as Redis will run the effects, in order: against the data as the effects before it in the
 * same commit leave it (a `set` then an `incrBy` of one key counts from the value set). All of them are checked before
 * anything is written: a refused effect throws `EffectConditionFailedError` with its index, nothing is written, and
 * the key stays in progress.
 */
export type RedisEffect =
  | { readonly set: string; readonly value: string; readonly ifAbsent?: boolean }
  | { readonly hset: string; readonly field: string; readonly value: string; readonly ifAbsent?: boolean }
  | { readonly incrBy: string; readonly by: number }
  | { readonly require: string };

/** The hash tag of a key as Redis Cluster reads it: what is between the first `{` and the next `}`, when not empty. */
export function hashTagOf(key: string): string | undefined {
  const open = key.indexOf('{');
  if (open < 0) return undefined;
  const close = key.indexOf('}', open + 1);
  if (close <= open + 1) return undefined;
  return key.slice(open + 1, close);
}

/** An effect as the scripts take it: its key, and four arguments (kind, two operands, the ifAbsent flag). */
export interface EncodedEffect {
  readonly key: string;
  readonly args: readonly [string, string, string, string];
}

/** The store's keys an effect must never touch: its records, its recovery and expiry sets, the key WAIT follows. */
export interface ReservedKeys {
  readonly tag: string;
  readonly recordPrefix: string;
  readonly recoverySet: string;
  readonly expirySet: string;
  readonly sync: string;
}

/** Whether `key` is one of the store's own. */
export function isReserved(key: string, keys: ReservedKeys): boolean {
  return key.startsWith(keys.recordPrefix) || key === keys.recoverySet || key === keys.expirySet || key === keys.sync;
}

/**
 * The effect in the scripts' terms, or an `EffectKindError` for anything else: another store's effect, a key
 * outside the store's hash slot, one of the store's own keys, a count that is not a safe integer.
 */
export function encodeEffect(effect: unknown, index: number, keys: ReservedKeys): EncodedEffect {
  const refuse = (why: string) => new EffectKindError(index, `effect ${index} is not a Redis effect: ${why}`);
  if (typeof effect !== 'object' || effect === null) throw refuse('not an object');
  const e = effect as Record<string, unknown>;
  const flag = e.ifAbsent === true ? '1' : '0';
  let encoded: EncodedEffect;
  if (typeof e.set === 'string' && typeof e.value === 'string') {
    encoded = { key: e.set, args: ['set', e.value, '', flag] };
  } else if (typeof e.hset === 'string' && typeof e.field === 'string' && typeof e.value === 'string') {
    encoded = { key: e.hset, args: ['hset', e.field, e.value, flag] };
  } else if (typeof e.incrBy === 'string' && typeof e.by === 'number') {
    if (!Number.isSafeInteger(e.by)) throw refuse('incrBy needs a safe integer `by`');
    encoded = { key: e.incrBy, args: ['incrBy', String(e.by), '', '0'] };
  } else if (typeof e.require === 'string') {
    encoded = { key: e.require, args: ['require', '', '', '0'] };
  } else {
    throw refuse('expected { set, value }, { hset, field, value }, { incrBy, by } or { require }');
  }
  if (hashTagOf(encoded.key) !== keys.tag) {
    throw refuse(
      `its key ${JSON.stringify(encoded.key)} must carry the store's hash tag {${keys.tag}} (store.effectKey(name)): ` +
        'on a cluster a script writes one hash slot only',
    );
  }
  if (isReserved(encoded.key, keys)) {
    throw refuse(`its key ${JSON.stringify(encoded.key)} is one of the store's own`);
  }
  return encoded;
}
