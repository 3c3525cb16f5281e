import type { IdempotencyStore } from './contract.js';
import { LeaseLostError, StagingClosedError, TooManyEffectsError } from './errors.js';
import type { Lease, StoredResponse } from './record.js';

/**
 * What the work sees of the operation it runs under, whichever adapter runs it: the HTTP middleware
 * (`context.idempotency`), the SQS adapter (the record context) and {@link makeIdempotent} (its second argument).
 */
export interface IdempotencyHandle<TEffect> {
  /**
   * The operation's stored (scoped) key: a reference to hand an outside system along with the effect, so that a
   * witness of the effect (a webhook) can find the operation again without a scan.
   */
  readonly key: string;
  /**
   * The key to forward to outside systems (a payment processor's `Idempotency-Key`). It is the same for every retry
   * and takeover of this operation, so an outside call made by an attempt that then failed is recognised, not
   * repeated, when the next attempt makes it again.
   */
  readonly downstreamKey: string;
  /** 1 for the first owner of this operation; +1 for each attempt that took it over (after a release or a crash). */
  readonly attempt: number;
  /**
   * Adds writes to the commit, in the store's own terms (a DynamoDB transaction item; SQL run in the commit's
   * transaction on PostgreSQL): they are written in one transaction with the key's completion, so they happen exactly
   * once, and not at all if the work fails or this owner's lease was taken over. At most the store's `maxEffects`
   * per operation ({@link TooManyEffectsError}); staging after the work returned throws {@link StagingClosedError};
   * an effect that is not the store's kind throws `EffectKindError` (the types refuse it first: see below).
   *
   * A property, not a method, on purpose: TypeScript compares a method's parameters both ways (bivariantly), and a
   * handle for one store's effects would then pass for a handle of another's. As a property it is checked strictly:
   * a handle that takes anything (`IdempotencyHandle<unknown>`) serves where a narrower one is asked for, never the
   * other way round.
   */
  readonly stage: (...effects: TEffect[]) => void;
}

/**
 * How an attempt ended, as its adapter saw it: an outcome worth storing (the work's result, an HTTP response that is
 * deterministic), or a transient end (the work threw, or answered something a retry may change) with its error.
 */
export type AttemptEnd =
  | { readonly kind: 'outcome'; readonly response: StoredResponse }
  | { readonly kind: 'transient'; readonly error?: unknown };

/**
 * What {@link ClaimedOperation.settle} did: committed; fenced (the lease was taken over, nothing written); or
 * released for a retry (`released` false when the store no longer held it for us, or could not be reached), with
 * the error that ended the attempt or failed the commit, if any.
 */
export type Settlement =
  | { readonly kind: 'committed' }
  | { readonly kind: 'fenced'; readonly error: LeaseLostError }
  | { readonly kind: 'released'; readonly released: boolean; readonly error?: unknown };

/**
 * One claimed operation, from its claim to the end of its lease: the handle its work sees, the effects staged
 * through it, and the two ways the lease ends. Every adapter goes through it, so staging is capped and closed the
 * same way everywhere:
 *
 * ```
 *  claim ─► new ClaimedOperation(store, lease) ─► work(handle) ─┬─ commit(response): staged effects + completion,
 *                                                               │  one fenced transaction
 *                                                               └─ release(): the key back, same downstream key
 *           staging closes when either begins: a late stage() throws instead of being lost
 * ```
 */
export class ClaimedOperation<TEffect> {
  /** The handle to give the work. It holds no way to commit or release: that stays with the adapter. */
  readonly handle: IdempotencyHandle<TEffect>;
  private readonly staged: TEffect[] = [];
  private open = true;

  constructor(
    private readonly store: IdempotencyStore<TEffect>,
    readonly lease: Lease,
  ) {
    this.handle = Object.freeze({
      key: lease.key,
      downstreamKey: lease.downstreamKey,
      attempt: lease.attempt,
      stage: (...effects: TEffect[]) => this.stage(effects),
    });
  }

  /**
   * Ends staging (the work has returned or failed) and hands back what was staged. Idempotent: commit and release
   * call it too, so an adapter that closes first (to build its response) loses nothing.
   */
  close(): readonly TEffect[] {
    this.open = false;
    return this.staged;
  }

  /**
   * Commits the staged effects with the key's completion and this response ({@link IdempotencyStore.commit}).
   *
   * @throws {LeaseLostError} the lease was taken over; nothing was written.
   */
  async commit(response: StoredResponse): Promise<void> {
    await this.store.commit(this.lease, response, this.close());
  }

  /**
   * Gives the key back for a retry, writing none of the staged effects ({@link IdempotencyStore.release}). False
   * when this owner no longer held it.
   */
  async release(): Promise<boolean> {
    this.close();
    return this.store.release(this.lease);
  }

  /**
   * Ends the operation as the attempt ended, by the one policy every adapter shares: an outcome is committed with the
   * staged effects; a transient end releases the key (keeping its downstream key), as does a commit that failed for
   * any reason but a lost lease. A fenced commit (the lease was taken over) releases nothing: the key is the new
   * owner's. A release the store could not make (unreachable) is reported as not released: the lease then runs out
   * and the next attempt takes the key over.
   */
  async settle(end: AttemptEnd): Promise<Settlement> {
    if (end.kind === 'outcome') {
      try {
        await this.commit(end.response);
        return { kind: 'committed' };
      } catch (error) {
        if (error instanceof LeaseLostError) return { kind: 'fenced', error };
        return { kind: 'released', released: await this.releaseQuietly(), error };
      }
    }
    return { kind: 'released', released: await this.releaseQuietly(), error: end.error };
  }

  private async releaseQuietly(): Promise<boolean> {
    try {
      return await this.release();
    } catch {
      return false;
    }
  }

  private stage(effects: readonly TEffect[]): void {
    // A write staged after the commit was built would be silently lost: refuse it loudly instead.
    if (!this.open) throw new StagingClosedError(this.lease.key);
    const limit = this.store.maxEffects;
    if (this.staged.length + effects.length > limit) throw new TooManyEffectsError(limit);
    // The wrong store's effect is refused here, from the staging line, rather than at the commit (which checks too).
    for (const [i, effect] of effects.entries()) this.store.checkEffect?.(effect, this.staged.length + i);
    this.staged.push(...effects);
  }
}
