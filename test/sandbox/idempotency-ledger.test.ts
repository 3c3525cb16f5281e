import { type Execution, IdempotencyLedger } from '../../lib/sandbox/idempotency-ledger';

/** Work whose completion the test controls, counting how often it ran. */
function controlledWork(response: string, remember = true) {
  let runs = 0;
  let finish!: () => void;
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const work = async (): Promise<Execution<string>> => {
    runs += 1;
    await done;
    return { response, remember };
  };
  return { work, finish, runs: () => runs };
}

describe('IdempotencyLedger', () => {
  it('runs the work for the first request with a key', async () => {
    const ledger = new IdempotencyLedger<string>();
    const outcome = await ledger.run('k', 'fp', async () => ({ response: 'charged', remember: true }));
    expect(outcome).toEqual({ kind: 'executed', execution: { response: 'charged', remember: true } });
  });

  it('replays a remembered response without running the work again', async () => {
    const ledger = new IdempotencyLedger<string>();
    await ledger.run('k', 'fp', async () => ({ response: 'charged', remember: true }));
    const again = jest.fn(async () => ({ response: 'charged twice', remember: true }));

    expect(await ledger.run('k', 'fp', again)).toEqual({ kind: 'replayed', response: 'charged' });
    expect(again).not.toHaveBeenCalled();
  });

  it('makes a request that arrives mid-flight wait for the first one, then replays its response', async () => {
    const ledger = new IdempotencyLedger<string>();
    const first = controlledWork('charged');
    const second = controlledWork('charged twice');
    const firstOutcome = ledger.run('k', 'fp', first.work);
    const secondOutcome = ledger.run('k', 'fp', second.work);
    let secondSettled = false;
    void secondOutcome.then(() => {
      secondSettled = true;
    });

    await new Promise((resolve) => setImmediate(resolve));
    expect(secondSettled).toBe(false);
    first.finish();

    expect(await firstOutcome).toMatchObject({ kind: 'executed' });
    expect(await secondOutcome).toEqual({ kind: 'replayed', response: 'charged' });
    expect(second.runs()).toBe(0);
  });

  it('refuses a different fingerprint at once, even while the first request is in flight', async () => {
    const ledger = new IdempotencyLedger<string>();
    const first = controlledWork('charged');
    const firstOutcome = ledger.run('k', 'fp-a', first.work);

    expect(await ledger.run('k', 'fp-b', first.work)).toEqual({ kind: 'mismatch' });
    first.finish();
    await firstOutcome;
    expect(first.runs()).toBe(1);
  });

  it('keeps keys apart', async () => {
    const ledger = new IdempotencyLedger<string>();
    await ledger.run('a', 'fp', async () => ({ response: 'A', remember: true }));
    expect(await ledger.run('b', 'fp', async () => ({ response: 'B', remember: true }))).toMatchObject({
      kind: 'executed',
    });
  });

  it('hands the key to a waiting request when the work declines to be remembered', async () => {
    const ledger = new IdempotencyLedger<string>();
    const unavailable = controlledWork('503', false);
    const retry = controlledWork('charged');
    const firstOutcome = ledger.run('k', 'fp', unavailable.work);
    const waitingOutcome = ledger.run('k', 'fp', retry.work);

    unavailable.finish();
    retry.finish();
    expect(await firstOutcome).toMatchObject({ kind: 'executed', execution: { response: '503' } });
    expect(await waitingOutcome).toMatchObject({ kind: 'executed', execution: { response: 'charged' } });
    expect(await ledger.run('k', 'fp', retry.work)).toEqual({ kind: 'replayed', response: 'charged' });
  });

  it('releases the key when the work throws, so a retry can run it', async () => {
    const ledger = new IdempotencyLedger<string>();
    await expect(
      ledger.run('k', 'fp', async () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await ledger.run('k', 'fp', async () => ({ response: 'charged', remember: true }))).toMatchObject({
      kind: 'executed',
    });
  });
});
