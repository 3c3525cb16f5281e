import type { Context, SQSRecord } from 'aws-lambda';
import type { Lease } from '../engine/record.js';
import type { EffectItem } from '../engine/store.js';
import { SqsIdempotencyError, TooManyEffectsError } from './errors.js';

/** What the record function sees besides the record: who it is, under which keys, and where to put its writes. */
export interface SqsRecordContext {
  readonly record: SQSRecord;
  /** The stored idempotency key (scoped). */
  readonly key: string;
  /**
   * The key to send to outside systems (a payment provider's `Idempotency-Key`). It stays the same across every
   * retry and takeover of this record, so an outside call made by an attempt that then failed is recognized by
   * the outside system when the retry makes it again.
   */
  readonly downstreamKey: string;
  /** 1 for the first owner of this key, +1 for each retry that took it over. */
  readonly attempt: number;
  /** SQS's ApproximateReceiveCount for this delivery. */
  readonly receiveCount: number;
  readonly lease: Lease;
  /** The Lambda context of the invocation, when there is one. */
  readonly lambdaContext: Context | undefined;
  /**
   * Adds DynamoDB writes to the commit: they are written in one transaction with the key's completion, so they
   * happen exactly once, and not at all if the function throws or this owner's lease was taken over.
   */
  stage(...items: EffectItem[]): void;
}

/** TransactWriteItems takes 100 actions; the key's completion is one of them. */
export const MAX_STAGED_EFFECTS = 99;

/** The effects staged by one run of a record function, closed once the function has returned. */
export class EffectStage {
  readonly items: EffectItem[] = [];
  private sealed = false;

  stage(items: readonly EffectItem[]): void {
    if (this.sealed) {
      // A write staged after the commit was built would be silently lost: refuse it loudly instead.
      throw new SqsIdempotencyError('stage() was called after the record function returned');
    }
    if (this.items.length + items.length > MAX_STAGED_EFFECTS) throw new TooManyEffectsError(MAX_STAGED_EFFECTS);
    this.items.push(...items);
  }

  seal(): readonly EffectItem[] {
    this.sealed = true;
    return this.items;
  }
}
