import { Metrics } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import { answersEarly } from '../../src/http/early-response';
import { lambdaContext } from '../support/api-event';

/** Powertools' own metrics middleware, composed before one that may answer early, as a function would use them. */
function composed(answer: unknown) {
  const metrics = new Metrics({ namespace: 'Keystone/test', serviceName: 'early-response' });
  const published = jest.spyOn(metrics, 'publishStoredMetrics').mockImplementation(() => metrics);
  const ran: string[] = [];
  const handler = middy(async () => {
    ran.push('handler');
    return 'from the handler';
  })
    .use(logMetrics(metrics))
    .use({
      before: answersEarly(async function replayBefore() {
        metrics.addMetric('IdempotencyReplayed', 'Count', 1);
        return answer;
      }),
    });
  return { call: () => handler({}, lambdaContext()), published, ran };
}

describe('answersEarly', () => {
  it('runs the cleanups Powertools middlewares registered before answering, so their work is not skipped', async () => {
    const { call, published, ran } = composed('from the middleware');
    expect(await call()).toBe('from the middleware');
    expect(ran).toEqual([]);
    expect(published).toHaveBeenCalledTimes(1);
  });

  it('changes nothing when the middleware lets the request through: the usual after publishes, once', async () => {
    const { call, published, ran } = composed(undefined);
    expect(await call()).toBe('from the handler');
    expect(ran).toEqual(['handler']);
    expect(published).toHaveBeenCalledTimes(1);
  });

  it('keeps the name of the before it wraps, which middy reports middlewares by', () => {
    const wrapped = answersEarly(async function httpIdempotencyBefore() {
      return undefined;
    });
    expect(wrapped.name).toBe('httpIdempotencyBefore');
  });
});
