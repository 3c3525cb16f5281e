import { en } from 'zod/locales';
import { safeParse } from 'zod/v4/core';
import { MAX_LINE_QUANTITY, OrderRequest } from '../../lib/orders/schema';
import { WAREHOUSE_MAX_LINE_QUANTITY } from '../../lib/sandbox/shipments';

const order = {
  items: [{ sku: 'sku_widget', quantity: 2 }],
  amount: 4200,
  currency: 'usd',
  source: 'tok_visa',
  email: 'buyer@example.com',
};

/** The problems a body has, as the body validation reports them: path and message. */
function problems(body: unknown): { path: string; message: string }[] {
  const result = safeParse(OrderRequest, body, { error: en().localeError });
  return result.success ? [] : result.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
}

describe('OrderRequest', () => {
  describe('items', () => {
    it('refuses lines of one SKU that add up to more than the warehouse takes on a line, naming the SKU', () => {
      const items = [
        { sku: 'sku_widget', quantity: 600_000 },
        { sku: 'sku_gadget', quantity: 1 },
        { sku: 'sku_widget', quantity: 600_000 },
      ];
      expect(problems({ ...order, items })).toEqual([
        { path: 'items', message: 'the lines of sku_widget add up to 1200000 units: at most 1000000 of one SKU' },
      ]);
    });

    it('accepts lines of one SKU that add up to the limit, and the limit on each of several SKUs', () => {
      const halves = [
        { sku: 'sku_widget', quantity: 500_000 },
        { sku: 'sku_widget', quantity: 500_000 },
      ];
      expect(problems({ ...order, items: halves })).toEqual([]);
      const full = ['sku_a', 'sku_b', 'sku_c'].map((sku) => ({ sku, quantity: MAX_LINE_QUANTITY }));
      expect(problems({ ...order, items: full })).toEqual([]);
    });

    it("holds an order's lines to the warehouse's own limit per line", () => {
      expect(MAX_LINE_QUANTITY).toBe(WAREHOUSE_MAX_LINE_QUANTITY);
    });
  });

  describe('email', () => {
    const MESSAGE = 'email must be an email address, without control characters or lone surrogates';

    it.each([
      ['NUL', 'buyer\u0000@example.com'],
      ['a C0 control character', 'buyer@exam\u0001ple.com'],
      ['DEL', 'buyer\u007F@example.com'],
      ['a C1 control character', 'buyer@example.com\u0085'],
      ['a lone high surrogate', 'buyer\uD83D@example.com'],
      ['a lone low surrogate', 'buyer@\uDE00example.com'],
      ['a lone surrogate at the end', 'buyer@example.com\uD800'],
      ['no @', 'buyer.example.com'],
      ['a space', 'buy er@example.com'],
    ])('refuses %s', (_name, email) => {
      expect(problems({ ...order, email })).toEqual([{ path: 'email', message: MESSAGE }]);
    });

    it('accepts accents, other scripts, emoji (a surrogate pair) and U+FFFD', () => {
      for (const email of ['café@example.com', 'заказ@пример.рф', 'buyer🎉@example.com', 'b\uFFFD@example.com']) {
        expect({ email, problems: problems({ ...order, email }) }).toEqual({ email, problems: [] });
      }
    });

    it('takes 254 characters and refuses 255', () => {
      const at = (length: number) => `${'a'.repeat(length - '@example.com'.length)}@example.com`;
      expect(problems({ ...order, email: at(254) })).toEqual([]);
      expect(problems({ ...order, email: at(255) })).toEqual([
        { path: 'email', message: 'email must be at most 254 characters' },
      ]);
    });
  });
});
