import type { Clock } from '../engine/clock.js';

/**
 * A clock that moves only when told to: give it to a store under test (`clock` in the store's options) and step it
 * past a lease or a TTL without waiting.
 */
export class ManualClock implements Clock {
  constructor(private ms = Date.UTC(2026, 10, 30, 12, 0, 0)) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}
