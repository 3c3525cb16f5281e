import type { Clock } from '../../src/engine/clock';

/** A clock that moves only when told to. */
export class FakeClock implements Clock {
  constructor(private ms = Date.UTC(2026, 10, 30, 12, 0, 0)) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}
