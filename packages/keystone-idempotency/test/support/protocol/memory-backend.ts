import { DriverStore } from 'keystone-idempotency/engine';
import { Delivery, type EffectRow, type ProtocolBackend } from 'keystone-idempotency/testing';
import type { MemoryDriver, MemoryEffect } from '../memory-driver';
import { type LosesReply, LossyDriver } from '../memory-harness';

/**
 * The published protocol model's backend over a memory driver: what broken-drivers.test.ts runs the model with, the
 * correct driver and each broken one alike. Replies are lost after the write applied, as the real backends lose them:
 * each write's first reply, sent again (`sdk-retry`), or every reply, surfacing to the caller (`reply-lost`).
 */
export function memoryProtocol(db: MemoryDriver): ProtocolBackend {
  const lossy: Record<Exclude<Delivery, 'direct'>, { losesReply: LosesReply; attempts: number }> = {
    [Delivery.sdkRetry]: { losesReply: (_step, _key, sending) => sending === 1, attempts: 2 },
    [Delivery.replyLost]: { losesReply: () => true, attempts: 1 },
  };
  return {
    keys: (run, count) => Array.from({ length: count }, (_, i) => `model|${run}|op${i}`),
    // The memory driver offers operations due at the same moment in key order.
    dueRank: (key) => Number(/op(\d+)$/.exec(key)?.[1]),

    async via(delivery, settings, use) {
      if (delivery === Delivery.direct) return use(new DriverStore(db, settings));
      const { losesReply, attempts } = lossy[delivery];
      return use(new DriverStore(new LossyDriver(db, losesReply, attempts), settings));
    },

    async records(keys) {
      return keys.map((key) => {
        const record = db.records.get(key);
        return record && { ...record, inRecoveryIndex: record.recoverAt !== undefined };
      });
    },

    async effectRows(effectsPk) {
      return [...(db.items.get(effectsPk) ?? [])].map(
        ([sk, { values, writes }]) => ({ ...values, sk, writes }) as unknown as EffectRow,
      );
    },

    effect: (effectsPk, row): MemoryEffect => ({
      upsert: {
        pk: effectsPk,
        sk: row.sk,
        values: { downstreamKey: row.downstreamKey, leaseToken: row.leaseToken, chargeId: row.chargeId },
      },
    }),

    /** As a database's TTL would: every record whose expiry has passed goes, whatever else it holds. */
    async sweepExpired(keys, settings) {
      for (const key of keys) {
        const expiresAt = db.records.get(key)?.expiresAt;
        if (expiresAt !== undefined && expiresAt * 1000 <= settings.clock.now()) db.records.delete(key);
      }
    },

    async cleanUp(keys, effectsPk) {
      for (const key of keys) db.records.delete(key);
      db.items.delete(effectsPk);
    },
  };
}
