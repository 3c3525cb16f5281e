import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Page, Route } from 'playwright-core';
import { DEMO_ACCOUNT_ID } from '../../../lib/local/demo';
import type { Charge } from '../../../lib/sandbox/processor';
import { getJson } from '../../sandbox/client';
import { type HeadlessChromium, launchChromium } from '../../support/chromium';
import { e2eStack } from '../../support/e2e-stack';

/**
 * The double-tap page in a real browser (headless Chromium), served by the local stack process, paying through the
 * bundled client into the real handlers and the sandbox processor. Every count the page shows is checked against
 * the processor's own GET /charges. The tests run in order, as a person would use the page.
 */
jest.setTimeout(120_000);

/** Screenshots of each state, for a person to look at (and for the README); outside git. */
const SCREENSHOTS = process.env.DEMO_SCREENSHOT_DIR ?? join(__dirname, '..', '..', '..', '.local', 'screenshots');
const TAP_TIMEOUT_MS = 30_000;

const e2e = e2eStack({ name: 'demo', settings: { PROCESSOR_TIMEOUT_MS: '5000' } });
let browser: HeadlessChromium;
let page: Page;
const requested: string[] = [];

beforeAll(async () => {
  await mkdir(SCREENSHOTS, { recursive: true });
  browser = await launchChromium();
  page = await browser.context.newPage();
  page.on('request', (request) => requested.push(request.url()));
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.goto(`${e2e.url}/`);
  await page.locator('#pay:not([disabled])').waitFor({ timeout: TAP_TIMEOUT_MS });
});
afterAll(async () => {
  await browser?.close();
});

/** The processor's ledger for the page's account: the witness the counter must agree with. */
async function demoCharges(): Promise<Charge[]> {
  const charges = await getJson<Charge[]>(`${e2e.sandbox.url}/charges`);
  return charges.filter((charge) => charge.metadata.account_id === DEMO_ACCOUNT_ID);
}

const payButton = () => page.getByRole('button', { name: 'Pay $42.00' });
const oneKeySwitch = () => page.getByRole('checkbox', { name: 'One key per payment' });
const flakySwitch = () => page.getByRole('checkbox', { name: 'Flaky network' });
const counter = () => page.getByRole('status', { name: 'Charges for the last tap' });
const tapEntry = (tap: number) => page.locator(`#log li[data-tap="${tap}"]`);

/** Taps Pay (with the mouse, or the keyboard), waits for the tap to finish, and returns its ledger delta. */
async function tap(number: number, how: 'click' | 'keyboard' = 'click'): Promise<Charge[]> {
  const before = new Set((await demoCharges()).map((charge) => charge.id));
  if (how === 'click') {
    await payButton().click();
  } else {
    await payButton().focus();
    await page.keyboard.press('Enter');
  }
  await page.locator(`#log li[data-tap="${number}"][aria-busy="false"]`).waitFor({ timeout: TAP_TIMEOUT_MS });
  return (await demoCharges()).filter((charge) => !before.has(charge.id));
}

/** Longer than two requests fired together ever drift apart here, and well under the page's hold. */
const DUPLICATE_LAG_MS = 300;

/** Holds back the second `POST /payments` the page sends (a duplicate's first attempt) by `ms`, once. */
async function delaySecondPaymentPost(ms: number): Promise<{ delayed(): number; remove(): Promise<void> }> {
  let posts = 0;
  let delayed = 0;
  const url = `${e2e.url}/payments`;
  const handler = async (route: Route) => {
    posts += 1;
    if (route.request().method() === 'POST' && posts === 2) {
      delayed += 1;
      await new Promise((resolve) => setTimeout(resolve, ms));
    }
    await route.continue();
  };
  await page.route(url, handler);
  return { delayed: () => delayed, remove: () => page.unroute(url, handler) };
}

async function keysOf(tap: number): Promise<string[]> {
  return tapEntry(tap).locator('.request .key').allTextContents();
}

describe('the double-tap demo page', () => {
  it('offers a labelled Pay button and two switches: one key per payment (on), flaky network (off)', async () => {
    await payButton().waitFor();
    expect(await oneKeySwitch().isChecked()).toBe(true);
    expect(await flakySwitch().isChecked()).toBe(false);
    expect(await counter().textContent()).toBe('–');
    expect(await page.locator('#account').textContent()).toBe(DEMO_ACCOUNT_ID);
  });

  it('charges twice for one tap with a new key per request, and the counter says 2, as the ledger does', async () => {
    await oneKeySwitch().uncheck();
    const charges = await tap(1);
    expect(charges).toHaveLength(2);
    expect(await counter().textContent()).toBe(String(charges.length));
    const [keyA, keyB] = await keysOf(1);
    expect(keyA).not.toBe(keyB);
    expect(await tapEntry(1).textContent()).toContain('2 charges');
    await page.screenshot({ path: join(SCREENSHOTS, 'demo-1-key-per-request.png'), fullPage: true });
  });

  it('charges once with one key per payment (switched by keyboard): the duplicate sees 409, then the replay', async () => {
    await oneKeySwitch().focus();
    await page.keyboard.press('Space');
    expect(await oneKeySwitch().isChecked()).toBe(true);
    // The second request is held back on its way, as a loaded machine can: the held original is still running.
    const lateDuplicate = await delaySecondPaymentPost(DUPLICATE_LAG_MS);
    const charges = await tap(2, 'keyboard').finally(lateDuplicate.remove);
    expect(lateDuplicate.delayed()).toBe(1);
    expect(charges).toHaveLength(1);
    expect(await counter().textContent()).toBe(String(charges.length));
    const [keyA, keyB] = await keysOf(2);
    expect(keyA).toBe(keyB);
    const log = await tapEntry(2).textContent();
    // The page held the original's charge, so the duplicate always arrives while it runs: never a race.
    expect(log).toContain('charge held 1.5 s');
    expect(log).toContain('409 in flight · Retry-After 1 s');
    expect(log).toContain('201 replayed · Idempotent-Replayed: true');
    expect(log).toContain(charges[0]?.id);
    expect(await page.locator('#verdict').textContent()).toContain('The duplicate was told 409 (in flight)');
    expect(await getJson(`${e2e.sandbox.url}/__faults`)).toEqual([]); // the hold was used by this tap
    await page.screenshot({ path: join(SCREENSHOTS, 'demo-2-one-key.png'), fullPage: true });
  });

  it("heals a lost processor reply on a flaky network with the client's retry: one charge", async () => {
    await flakySwitch().check();
    const charges = await tap(3);
    expect(charges).toHaveLength(1);
    expect(await counter().textContent()).toBe(String(charges.length));
    const log = await tapEntry(3).textContent();
    expect(log).toContain('502 processor reply lost · Retry-After 1 s');
    expect(log).toMatch(/retried after \d+\.\d s/);
    expect(await page.locator('#verdict').textContent()).toContain("The processor's reply was lost (502)");
    expect(await getJson(`${e2e.sandbox.url}/__faults`)).toEqual([]); // the armed fault was used by this tap
    await page.screenshot({ path: join(SCREENSHOTS, 'demo-3-flaky-network.png'), fullPage: true });
  });

  it('reads on a phone-sized screen without sideways scrolling', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    // A string, evaluated in the page: this file is type-checked without the DOM's types.
    const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
    expect(overflow).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(SCREENSHOTS, 'demo-4-phone.png'), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('resets: log and counter cleared, a pending lost reply disarmed', async () => {
    await page.request.post(`${e2e.url}/demo/flaky`); // armed, but no tap will use it
    expect(await getJson(`${e2e.sandbox.url}/__faults`)).toHaveLength(1);
    await page.getByRole('button', { name: 'Reset' }).click();
    await page.locator('#log-empty:not([hidden])').waitFor();
    expect(await counter().textContent()).toBe('–');
    expect(await page.locator('#log li').count()).toBe(0);
    expect(await page.locator('#since-reset').textContent()).toBe('0 charges for 0 taps since reset.');
    expect(await getJson(`${e2e.sandbox.url}/__faults`)).toEqual([]);
  });

  it('loaded nothing from outside its own origin', () => {
    expect(requested.length).toBeGreaterThan(0);
    expect(requested.filter((url) => !url.startsWith(`${e2e.url}/`))).toEqual([]);
  });
});
