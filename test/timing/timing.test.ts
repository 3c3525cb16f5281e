import {
  COMPLETER_CONCURRENCY,
  callChainViolations,
  duration,
  recoveryThroughput,
  STORE_WRITES_MARGIN_MS,
  type Timings,
  timingViolations,
  worstOperationMs,
} from '../../lib/timing/timing';

/** A consistent set: the local stack's defaults. */
const sound: Timings = {
  leaseMs: 60_000,
  ttlMs: 86_400_000,
  apiIntegrationMs: 9_000,
  processorTimeoutMs: 8_000,
  warehouseTimeoutMs: 5_000,
  mailerTimeoutMs: 5_000,
  queueVisibilityMs: 60_000,
  queueMaxReceiveCount: 5,
  completerPeriodMs: 10_000,
  functions: [
    { name: 'payments-create', timeoutMs: 10_000, trigger: 'route', calls: ['processor'] },
    { name: 'settlement-consumer', timeoutMs: 10_000, trigger: 'queue' },
    { name: 'payments-completer', timeoutMs: 10_000, trigger: 'schedule', calls: ['processor'] },
  ],
};

describe('timingViolations', () => {
  it('finds none in a consistent set', () => {
    expect(timingViolations(sound)).toEqual([]);
  });

  it('refuses a lease that a function can outlive', () => {
    // The reproduction from an earlier issue: TTL 3 s, lease 2 s, a processor slower than both.
    const violations = timingViolations({ ...sound, leaseMs: 2_000, ttlMs: 3_000, completerPeriodMs: 1_000 });
    expect(violations).toEqual(
      expect.arrayContaining([
        "lease (2s) must be at least payments-create's timeout (10s) plus the engine's 1s margin for clock skew",
        "lease (2s) must be at least payments-completer's timeout (10s) plus the engine's 1s margin for clock skew",
      ]),
    );
  });

  it('takes any TTL from the lease up: an unfinished recoverable operation never expires, whatever the backlog', () => {
    // Issue 17's timings: lease 6 s, TTL 16 s (then "just above twice the lease plus the period").
    const issue: Timings = {
      ...sound,
      leaseMs: 6_000,
      ttlMs: 16_000,
      apiIntegrationMs: 4_500,
      processorTimeoutMs: 2_000,
      queueVisibilityMs: 6_000,
      completerPeriodMs: 1_000,
      functions: sound.functions.map((fn) => ({ ...fn, timeoutMs: 5_000 })),
    };
    expect(timingViolations(issue)).toEqual([]);
    expect(timingViolations({ ...issue, ttlMs: 6_000 })).toEqual([]);
    expect(timingViolations({ ...issue, ttlMs: 5_000 })).toEqual(['ttl (5s) must be at least the lease (6s)']);
  });

  it('refuses a completer whose timeout leaves it no time to take an operation', () => {
    const completer = (timeoutMs: number): Timings => ({
      ...sound,
      functions: sound.functions.map((fn) => (fn.trigger === 'schedule' ? { ...fn, timeoutMs } : fn)),
    });
    expect(timingViolations(completer(8_250))).toEqual([
      "payments-completer's timeout (8250ms) must be longer than the processor timeout (8s) plus 250ms: a run " +
        'would never take an operation',
    ]);
    expect(timingViolations(completer(8_251))).toEqual([]);
  });

  it('refuses a processor call that outlasts the function making it', () => {
    expect(timingViolations({ ...sound, processorTimeoutMs: 10_000 })).toEqual([
      "processor timeout (10s) must be shorter than payments-create's timeout (10s)",
      "processor timeout (10s) must be shorter than payments-completer's timeout (10s)",
      "payments-completer's timeout (10s) must be longer than the processor timeout (10s) plus 250ms: a run would " +
        'never take an operation',
    ]);
  });

  it('refuses a completer that comes around less often than the lease', () => {
    expect(timingViolations({ ...sound, completerPeriodMs: 60_000 })).toEqual([
      "the completer's period (60s) must be shorter than the lease (60s): an operation whose client never came " +
        'back would wait more than a lease for recovery to look',
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

describe('callChainViolations', () => {
  const orders = (timeoutMs: number, calls: Timings['functions'][number]['calls']): Timings => ({
    ...sound,
    functions: [{ name: 'orders-create', timeoutMs, trigger: 'route', calls }],
  });

  it("refuses a function whose outside calls, one after another, outlast it: the issue's 8 + 8 + 5 s in 12 s", () => {
    // The issue's settings: the warehouse at the processor's 8 s, the mailer at 5 s, the function at 12 s. Each call
    // alone fits (the rule before this one checked the processor only); one after another they don't.
    const issue = { ...orders(12_000, ['processor', 'warehouse', 'mailer']), warehouseTimeoutMs: 8_000 };
    expect(timingViolations(issue)).toEqual([]);
    expect(callChainViolations(issue)).toEqual([
      "orders-create's outside calls one after another (processor 8s + warehouse 8s + mailer 5s = 21s) plus 500ms " +
        "for its store's writes must fit in its timeout (12s)",
    ]);
  });

  it('counts a system as often as it is called, and leaves the store its margin to the millisecond', () => {
    const refund = ['processor', 'warehouse', 'mailer', 'processor'] as const;
    // 8 + 5 + 5 + 8 = 26 s, and 500 ms for the writes.
    expect(callChainViolations(orders(26_500, refund))).toEqual([]);
    expect(callChainViolations(orders(26_499, refund))).toEqual([
      "orders-create's outside calls one after another (processor 8s + warehouse 5s + mailer 5s + processor 8s = " +
        "26s) plus 500ms for its store's writes must fit in its timeout (26499ms)",
    ]);
    expect(STORE_WRITES_MARGIN_MS).toBe(500);
  });

  it('takes each system at its own timeout, and passes a function that calls none', () => {
    const shorter = { ...orders(12_000, ['processor', 'warehouse', 'mailer']), warehouseTimeoutMs: 2_000 };
    expect(callChainViolations({ ...shorter, mailerTimeoutMs: 1_500 })).toEqual([]);
    expect(callChainViolations({ ...shorter, mailerTimeoutMs: 1_501 })).toHaveLength(1);
    expect(callChainViolations(orders(1_000, []))).toEqual([]);
    expect(callChainViolations(orders(1_000, undefined))).toEqual([]);
  });

  it('refuses a warehouse or mailer timeout that is not a positive number', () => {
    expect(timingViolations({ ...sound, warehouseTimeoutMs: 0, mailerTimeoutMs: Number.NaN })).toEqual([
      'warehouseTimeoutMs must be positive, got 0',
      'mailerTimeoutMs must be positive, got NaN',
    ]);
  });
});

describe('recoveryThroughput', () => {
  it('counts a run as every worker taking one operation after another until its window closes', () => {
    // The local defaults: a 10 s completer, an 8 s processor timeout: 1.75 s to take operations, every 10 s.
    const at40ms = recoveryThroughput(sound, 40);
    expect(at40ms).toMatchObject({ windowMs: 1_750, cycleMs: 10_000, perRun: COMPLETER_CONCURRENCY * 44 });
    expect(at40ms.perMinute).toBe(6 * at40ms.perRun);
    // Two runs' worth: the first run may come a cycle late, then one cycle per run.
    expect(at40ms.drainMs(at40ms.perRun + 1)).toBe(30_000);
  });

  it('guarantees at least one operation per worker and run, however slowly the processor answers', () => {
    const worst = recoveryThroughput(sound, worstOperationMs(sound));
    expect(worstOperationMs(sound)).toBe(8_250);
    expect(worst).toMatchObject({ windowMs: 1_750, perRun: COMPLETER_CONCURRENCY, cycleMs: 10_000 });
  });

  it('is nothing at all when a run has no window', () => {
    const closed: Timings = { ...sound, processorTimeoutMs: 9_750 };
    expect(recoveryThroughput(closed, 40)).toMatchObject({ windowMs: 0, perRun: 0, perMinute: 0 });
    expect(recoveryThroughput(closed, 40).drainMs(1)).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('duration', () => {
  it('shows whole seconds as seconds and the rest in milliseconds', () => {
    expect([duration(90_000), duration(1_500)]).toEqual(['90s', '1500ms']);
  });
});
