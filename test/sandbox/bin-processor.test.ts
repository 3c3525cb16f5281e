import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

const root = join(__dirname, '..', '..');

/** Starts `bin/processor.ts` and resolves with the URL it prints. */
function startBin(env: Record<string, string>): { child: ChildProcess; url: Promise<string> } {
  // `node --import tsx` rather than the tsx CLI: one process, so a signal reaches the entry point directly
  // instead of through tsx's relay.
  const child = spawn(
    process.execPath,
    ['--conditions=keystone-source', '--import', 'tsx', join(root, 'bin', 'processor.ts')],
    {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const url = new Promise<string>((resolve, reject) => {
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /http:\/\/127\.0\.0\.1:\d+/.exec(output);
      if (match) resolve(match[0]);
    });
    child.once('exit', (code) => reject(new Error(`exited with ${code} before printing its URL: ${output}`)));
  });
  return { child, url };
}

function exitCode(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

describe('bin/processor', () => {
  const children: ChildProcess[] = [];
  afterAll(() => {
    for (const child of children) if (child.exitCode === null && child.pid) process.kill(child.pid, 'SIGKILL');
  });

  it.each(['SIGTERM', 'SIGINT'] as const)(
    'serves charges and shipments on the port it prints and stops cleanly on %s',
    async (signal) => {
      const { child, url } = startBin({ PROCESSOR_PORT: '0' });
      children.push(child);
      const base = await url;

      const response = await fetch(`${base}/v1/charges`, {
        method: 'POST',
        headers: { 'Idempotency-Key': `bin-${signal}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ amount: 100, currency: 'usd', source: 'tok_visa' }),
      });
      expect(response.status).toBe(201);
      // The warehouse is on the same port.
      const booking = await fetch(`${base}/v1/shipments`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ reference: `bin-${signal}`, items: [{ sku: 'sku_widget', quantity: 1 }] }),
      });
      expect(booking.status).toBe(201);

      child.kill(signal);
      expect(await exitCode(child)).toBe(0);
    },
  );

  it('refuses a webhook URL without a secret, naming the variable', async () => {
    const { child, url } = startBin({ PROCESSOR_PORT: '0', PROCESSOR_WEBHOOK_URL: 'http://127.0.0.1:9/hooks' });
    children.push(child);
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    await expect(url).rejects.toThrow(/exited with 1/);
    expect(stderr).toContain('PROCESSOR_WEBHOOK_SECRET');
  });
});
