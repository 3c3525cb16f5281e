import { createLambdaContext } from '../src/lambda-context';
import { invokeLambda } from '../src/lambda-invoke';

describe('createLambdaContext', () => {
  it('counts the remaining time down from the function timeout, and stops at zero', () => {
    let now = 1_000_000;
    const context = createLambdaContext({ functionName: 'f', timeoutMs: 3_000, now: () => now });

    expect(context.getRemainingTimeInMillis()).toBe(3_000);
    now += 2_500;
    expect(context.getRemainingTimeInMillis()).toBe(500);
    now += 1_000;
    expect(context.getRemainingTimeInMillis()).toBe(0);
  });

  it('describes the function as Lambda does', () => {
    const context = createLambdaContext({ functionName: 'payments-create', memoryLimitInMB: 512 });

    expect(context).toMatchObject({
      functionName: 'payments-create',
      functionVersion: '$LATEST',
      invokedFunctionArn: 'arn:aws:lambda:local:000000000000:function:payments-create',
      memoryLimitInMB: '512',
      logGroupName: '/aws/lambda/payments-create',
      callbackWaitsForEmptyEventLoop: true,
    });
    expect(context.logStreamName).toMatch(/^\d{4}\/\d{2}\/\d{2}\/\[\$LATEST\][0-9a-f]{32}$/);
    expect(context.awsRequestId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('throws from the deprecated callbacks instead of silently ignoring them', () => {
    const context = createLambdaContext({ functionName: 'f' });

    expect(() => context.done()).toThrow(/deprecated/);
    expect(() => context.fail('x')).toThrow(/deprecated/);
    expect(() => context.succeed({})).toThrow(/deprecated/);
  });
});

describe('invokeLambda', () => {
  it('reports a synchronous throw like a rejection', async () => {
    const handler = (() => {
      throw new Error('sync');
    }) as unknown as () => Promise<void>;

    const { outcome } = invokeLambda(handler, {}, { functionName: 'f' });

    expect(await outcome).toEqual({ kind: 'threw', error: new Error('sync') });
  });

  it('reports a timeout when the handler outlives the function timeout', async () => {
    const { outcome } = invokeLambda(
      () => new Promise<void>((resolve) => setTimeout(resolve, 200)),
      {},
      {
        functionName: 'f',
        timeoutMs: 20,
      },
    );

    expect(await outcome).toEqual({ kind: 'timed-out', timeoutMs: 20 });
  });
});
