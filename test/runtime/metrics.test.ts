import middy from '@middy/core';
import { answersEarly } from 'keystone-idempotency/http';
import { publishMetrics, serviceMetrics } from '../../lib/runtime/metrics';
import { lambdaContext } from '../support/api-event';

describe('publishMetrics', () => {
  function run(record: boolean, fail = false) {
    const metrics = serviceMetrics('test');
    const published = jest.spyOn(metrics, 'publishStoredMetrics').mockImplementation(() => metrics);
    const handler = middy(async () => {
      if (record) metrics.addMetric('IdempotencyReplayed', 'Count', 1);
      if (fail) throw new Error('boom');
      return 'ok';
    }).use(publishMetrics(metrics));
    return { published, result: handler({}, lambdaContext()).catch((error: Error) => error.message) };
  }

  it('publishes what an invocation recorded', async () => {
    const { published, result } = run(true);
    expect(await result).toBe('ok');
    expect(published).toHaveBeenCalledTimes(1);
  });

  it('publishes on error too, and lets the error through', async () => {
    const { published, result } = run(true, true);
    expect(await result).toBe('boom');
    expect(published).toHaveBeenCalledTimes(1);
  });

  it('publishes what an invocation counted when a later middleware answers early and skips every after', async () => {
    const metrics = serviceMetrics('test');
    const published = jest.spyOn(metrics, 'publishStoredMetrics').mockImplementation(() => metrics);
    const handler = middy(async () => 'from the handler')
      .use(publishMetrics(metrics))
      .use({
        before: answersEarly(async () => {
          metrics.addMetric('IdempotencyReplayed', 'Count', 1);
          return 'replayed';
        }),
      });
    expect(await handler({}, lambdaContext())).toBe('replayed');
    expect(published).toHaveBeenCalledTimes(1);
  });

  it('publishes nothing (and warns about nothing) when nothing was recorded', async () => {
    const { published, result } = run(false);
    expect(await result).toBe('ok');
    expect(published).not.toHaveBeenCalled();
  });
});
