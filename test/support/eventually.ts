/**
 * Polls `probe` until `done` holds for its value, and returns that value; fails after `timeoutMs` with the last
 * value seen. For end-to-end waits on state (a payment settled, a fault drawn), never on time: the timeout is only
 * a backstop, generous enough for a loaded machine.
 */
export async function eventually<T>(
  probe: () => Promise<T> | T,
  done: (value: T) => boolean = Boolean,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms; last: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
