import { SandboxApiError } from '../../lib/sandbox/errors';
import { FaultQueue, parseFault } from '../../lib/sandbox/faults';

describe('parseFault', () => {
  it('applies the defaults: one request, aimed at charges', () => {
    expect(parseFault({ mode: 'drop_after_charge' })).toEqual({
      mode: 'drop_after_charge',
      count: 1,
      target: 'charges',
    });
  });

  it('refuses junk with a 400 that names the problem', () => {
    const refusal = (() => {
      try {
        parseFault({ mode: 'delay', ms: 'soon' });
      } catch (error) {
        return error;
      }
    })();
    expect(refusal).toBeInstanceOf(SandboxApiError);
    expect(refusal).toMatchObject({ statusCode: 400, message: expect.stringContaining('ms') });
  });
});

describe('FaultQueue', () => {
  it('draws faults in order of arrival, each for its count', () => {
    const queue = new FaultQueue();
    queue.add(parseFault({ mode: 'delay', ms: 10, count: 2 }));
    queue.add(parseFault({ mode: 'error_503' }));

    const drawn = [1, 2, 3, 4].map(() => queue.take('charges'));
    expect(drawn).toEqual([{ mode: 'delay', ms: 10 }, { mode: 'delay', ms: 10 }, { mode: 'error_503' }, undefined]);
  });

  it('draws only faults aimed at the target, leaving the others queued', () => {
    const queue = new FaultQueue();
    queue.add(parseFault({ mode: 'error_503', target: 'emails' }));
    queue.add(parseFault({ mode: 'drop_after_charge' }));

    expect(queue.take('charges')).toEqual({ mode: 'drop_after_charge' });
    expect(queue.list()).toEqual([{ mode: 'error_503', count: 1, target: 'emails', remaining: 1 }]);
    expect(queue.take('emails')).toEqual({ mode: 'error_503' });
  });

  it('answers every request of an outage with a 503 until its time is up, and lists the time left', () => {
    let now = 1_000;
    const queue = new FaultQueue(() => now);
    queue.add(parseFault({ mode: 'outage', ms: 500, target: 'emails' }));

    expect([queue.take('emails'), queue.take('emails'), queue.take('charges')]).toEqual([
      { mode: 'error_503' },
      { mode: 'error_503' },
      undefined,
    ]);
    now += 200;
    expect(queue.list()).toEqual([{ mode: 'outage', ms: 500, target: 'emails', remaining_ms: 300 }]);
    now += 300;
    expect(queue.take('emails')).toBeUndefined();
    expect(queue.list()).toEqual([]);
  });

  it('refuses an outage without a duration, or with a count', () => {
    expect(() => parseFault({ mode: 'outage', target: 'emails' })).toThrow(SandboxApiError);
    expect(() => parseFault({ mode: 'outage', ms: 100, count: 2 })).toThrow(SandboxApiError);
  });

  it('counts down what remains and forgets everything on clear', () => {
    const queue = new FaultQueue();
    queue.add(parseFault({ mode: 'error_503', count: 3 }));
    queue.take('charges');
    expect(queue.list()).toEqual([expect.objectContaining({ remaining: 2 })]);
    queue.clear();
    expect(queue.take('charges')).toBeUndefined();
  });
});
