import { duration, type Timings, timingViolations } from '../../lib/timing/timing';

/** A consistent set: the local stack's defaults. */
const sound: Timings = {
  leaseMs: 60_000,
  ttlMs: 86_400_000,
  apiIntegrationMs: 9_000,
  processorTimeoutMs: 8_000,
  queueVisibilityMs: 60_000,
  queueMaxReceiveCount: 5,
  completerPeriodMs: 10_000,
  functions: [
    { name: 'payments-create', timeoutMs: 10_000, trigger: 'route', callsProcessor: true },
    { name: 'settlement-consumer', timeoutMs: 10_000, trigger: 'queue' },
    { name: 'payments-completer', timeoutMs: 10_000, trigger: 'schedule', callsProcessor: true },
  ],
};

describe('timingViolations', () => {
  it('finds none in a consistent set', () => {
    expect(timingViolations(sound)).toEqual([]);
  });

  it('refuses a record that can expire while its first attempt is still running', () => {
    // The reproduction from the issue: TTL 3 s, lease 2 s, a processor slower than both.
    const violations = timingViolations({ ...sound, leaseMs: 2_000, ttlMs: 3_000, completerPeriodMs: 1_000 });
    expect(violations).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^ttl \(3s\) must be longer than twice the lease \(2s\)/),
        "lease (2s) must be at least payments-create's timeout (10s) plus the engine's 1s margin for clock skew",
      ]),
    );
  });

  it('refuses a processor call that outlasts the function making it', () => {
    expect(timingViolations({ ...sound, processorTimeoutMs: 10_000 })).toEqual([
      "processor timeout (10s) must be shorter than payments-create's timeout (10s)",
      "processor timeout (10s) must be shorter than payments-completer's timeout (10s)",
    ]);
  });

  it('refuses a completer that comes around less often than the lease', () => {
    expect(timingViolations({ ...sound, completerPeriodMs: 60_000 })).toEqual([
      "the completer's period (60s) must be shorter than the lease (60s): an operation whose client never came " +
        'back would wait more than twice the lease for recovery',
    ]);
  });

  it('refuses a lease that a function could outlive by less than the clock-skew margin', () => {
    // Equal to the timeout (accepted before): a duplicate whose clock runs half a second ahead takes over a live owner.
    expect(timingViolations({ ...sound, leaseMs: 10_000, completerPeriodMs: 5_000 })).toEqual([
      "lease (10s) must be at least payments-create's timeout (10s) plus the engine's 1s margin for clock skew",
      "lease (10s) must be at least settlement-consumer's timeout (10s) plus the engine's 1s margin for clock skew",
      "lease (10s) must be at least payments-completer's timeout (10s) plus the engine's 1s margin for clock skew",
    ]);
    expect(timingViolations({ ...sound, leaseMs: 11_000, completerPeriodMs: 5_000 })).toEqual([]);
  });

  it("refuses a receive count that sends a live owner's event to the DLQ before settlement's waits are over", () => {
    // The defect: 3 was accepted, and the event waiting out a live owner's lease was moved to the DLQ on its 4th
    // receive, with its receipt never sent.
    expect(timingViolations({ ...sound, queueMaxReceiveCount: 3 })).toEqual([
      "the settlement queue's receive count (3) must be at least 4: settlement waits for a live owner over that many " +
        "receives (1 s, 2 s, then the rest of the owner's lease), and an event moved to the DLQ sooner never sends its " +
        'receipt',
    ]);
    expect(timingViolations({ ...sound, queueMaxReceiveCount: 4 })).toEqual([]);
  });

  it('refuses a lease longer than the settlement visibility timeout', () => {
    expect(timingViolations({ ...sound, queueVisibilityMs: 30_000 })).toEqual([
      'lease (60s) must not exceed the settlement visibility timeout (30s)',
    ]);
  });
});

describe('duration', () => {
  it('shows whole seconds as seconds and the rest in milliseconds', () => {
    expect([duration(90_000), duration(1_500)]).toEqual(['90s', '1500ms']);
  });
});
