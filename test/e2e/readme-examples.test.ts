import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { TRY_IT_COMMANDS } from '../../lib/local/banner';
import { e2eStack } from '../support/e2e-stack';

/**
 * The README's shell examples and the start banner's, tried as a newcomer would: `npm start` (bin/local.ts, with
 * its own sandbox processor), the banner's `export` lines pasted into a shell, then each example run as printed,
 * with curl and bash. An example that stops working, or drifts from the banner, fails here.
 */
jest.setTimeout(90_000);

const run = promisify(execFile);
// The README's short example, then the payments API page's (which repeats it first).
const readme = ['README.md', 'docs/payments-api.md']
  .map((path) => readFileSync(join(__dirname, '..', '..', path), 'utf8'))
  .join('\n');

/** A page's `sh` blocks that talk to a running stack (they use the banner's variables), each once. */
function stackBlocks(markdown: string): string[] {
  return [
    ...new Set(
      [...markdown.matchAll(/```sh\n([\s\S]*?)```/g)]
        .map((match) => match[1] ?? '')
        .filter((block) => /\$(API|HTTP_API|PROCESSOR)\b/.test(block)),
    ),
  ];
}

const stackExamples = stackBlocks(readme);
/** The orders page's example (docs/orders.md): an order, the stock it holds, and the shipments booked. */
const orderExamples = stackBlocks(readFileSync(join(__dirname, '..', '..', 'docs', 'orders.md'), 'utf8'));

// With the sandbox processor `npm start` runs for itself, as a newcomer's would.
const e2e = e2eStack({ name: 'readme', processor: 'stack' });
let exports: string;

beforeAll(() => {
  exports = e2e.process
    .output()
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.startsWith('export '))
    .join('\n');
});

/** Runs one example in bash after the export lines, stopping at the first failing command. */
async function runExample(example: string): Promise<{ output: string; statuses: number[] }> {
  const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', `${exports}\n${example}`], {
    // A proxy from the environment must not intercept loopback.
    env: { ...process.env, NO_PROXY: '127.0.0.1', no_proxy: '127.0.0.1' },
    timeout: 30_000,
  });
  // A status line may follow the previous command's body on the same line (curl adds no newline after a body).
  const statuses = [...stdout.matchAll(/HTTP\/[\d.]+ (\d{3}) /g)].map((match) => Number(match[1]));
  return { output: stdout, statuses };
}

async function chargeCount(): Promise<number> {
  const processor = /^export PROCESSOR=(\S+)$/m.exec(exports)?.[1];
  return ((await (await fetch(`${processor}/charges`)).json()) as unknown[]).length;
}

describe('the start banner', () => {
  it('prints export lines for every variable the examples use', () => {
    expect(exports).toMatch(/^export API=http:\/\/127\.0\.0\.1:\d+$/m);
    expect(exports).toMatch(/^export HTTP_API=http:\/\/127\.0\.0\.1:\d+$/m);
    expect(exports).toMatch(/^export KEY=sk_test_\S+$/m);
    expect(exports).toMatch(/^export PROCESSOR=http:\/\/127\.0\.0\.1:\d+$/m);
  });

  it('shows the same example as the README, line for line', () => {
    expect(e2e.process.output()).toContain(TRY_IT_COMMANDS.map((line) => `  ${line}`).join('\n'));
    expect(stackExamples[0]?.trimEnd()).toBe(TRY_IT_COMMANDS.join('\n'));
  });
});

describe("the README's examples, run as printed", () => {
  it('are the four this test knows what to expect of', () => {
    expect(stackExamples).toHaveLength(4);
  });

  it('create a payment, and replay it when run again, with one charge', async () => {
    const first = await runExample(stackExamples[0] ?? '');
    expect(first.statuses).toEqual([201]);
    const again = await runExample(stackExamples[0] ?? '');
    expect(again.statuses).toEqual([201]);
    expect(again.output).toMatch(/^Idempotent-Replayed: true/im);
    expect(await chargeCount()).toBe(1);
  });

  it('read the payment back through its Location', async () => {
    const { statuses, output } = await runExample(stackExamples[1] ?? '');
    expect(statuses).toEqual([200]);
    expect(output).toMatch(/"id":"pay_[0-9a-f]{24}"/);
    expect(await chargeCount()).toBe(1);
  });

  it('replay the payment through the HTTP API, whose own answer to an unknown key is 403', async () => {
    const { statuses, output } = await runExample(stackExamples[2] ?? '');
    expect(statuses).toEqual([201, 403]);
    expect(output).toMatch(/^Idempotent-Replayed: true/im);
    expect(output).toContain('{"message":"Forbidden"}');
    expect(await chargeCount()).toBe(1);
  });

  it('inject a processor outage, and the retry with the same key charges once', async () => {
    const { statuses } = await runExample(stackExamples[3] ?? '');
    expect(statuses).toEqual([503, 201]);
    expect(await chargeCount()).toBe(2);
  });
});

describe("the orders page's example, run as printed", () => {
  it('is the one this test knows what to expect of', () => {
    expect(orderExamples).toHaveLength(1);
  });

  it('creates an order that holds its stock and books one shipment, and replays it when run again', async () => {
    const first = await runExample(orderExamples[0] ?? '');
    expect(first.statuses).toEqual([201]);
    const orderId = /"id":"(ord_[0-9a-f]+)"/.exec(first.output)?.[1];
    expect(orderId).toBeDefined();
    expect(first.output).toMatch(/"status":"confirmed"/);
    expect(first.output).toMatch(/\{"sku":"sku_widget","available":\d+,"reserved":[1-9]\d*\}/);
    const again = await runExample(orderExamples[0] ?? '');
    expect(again.statuses).toEqual([201]);
    expect(again.output).toMatch(/^Idempotent-Replayed: true/im);
    // The warehouse dedupes nothing: one shipment for the order's reference means the booking ran once.
    expect(again.output).toContain(`"reference":"${orderId}"`);
    const processor = /^export PROCESSOR=(\S+)$/m.exec(exports)?.[1];
    const shipments = (await (await fetch(`${processor}/shipments`)).json()) as { reference: string }[];
    expect(shipments.filter((shipment) => shipment.reference === orderId)).toHaveLength(1);
  });
});
