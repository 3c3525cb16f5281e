import fc from 'fast-check';
import { en } from 'zod/locales';
import { safeParse } from 'zod/v4/core';
import { PaymentRequest } from '../../lib/payments/schema';

const card = { amount: 4200, currency: 'usd', source: 'tok_visa' };

/** The problems a body has, as the body validation reports them: path and message. */
function problems(body: unknown): { path: string; message: string }[] {
  const result = safeParse(PaymentRequest, body, { error: en().localeError });
  return result.success ? [] : result.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
}

const TEXT_MESSAGE =
  'must not contain control characters other than tab and line breaks, U+FFFE, U+FFFF or unpaired surrogates';

describe('PaymentRequest', () => {
  describe('description and source', () => {
    it.each([
      ['U+FFFF', 'Order 42 \uFFFF'],
      ['U+FFFE', '\uFFFEOrder 42'],
      ['a lone high surrogate', 'Order \uD83D 42'],
      ['a lone low surrogate', 'Order \uDE00'],
      ['a C0 control character', 'Order\u0001 42'],
      ['NUL', '\u0000'],
      ['a vertical tab', 'Order\u000B42'],
    ])('refuses %s, naming the field', (_name, value) => {
      expect(problems({ ...card, description: value })).toEqual([
        { path: 'description', message: `description ${TEXT_MESSAGE}` },
      ]);
      expect(problems({ ...card, source: value })).toEqual([{ path: 'source', message: `source ${TEXT_MESSAGE}` }]);
    });

    it('accepts tabs and line breaks, accents, other scripts and emoji', () => {
      for (const description of [
        'Line 1\nLine 2\r\n\tindented',
        'Café crème',
        'Заказ 42 注文',
        'Order 🎉 \u{10FFFF}',
      ]) {
        expect(problems({ ...card, description })).toEqual([]);
      }
    });

    it('accepts a string exactly when every character in it is an XML 1.0 character', () => {
      const xmlChar = (c: number) =>
        c === 0x9 ||
        c === 0xa ||
        c === 0xd ||
        (c >= 0x20 && c <= 0xd7ff) ||
        (c >= 0xe000 && c <= 0xfffd) ||
        (c >= 0x10000 && c <= 0x10ffff);
      const unit = fc.oneof(
        fc.constantFrom('\u0000', '\u001F', '\t', '\uD800', '\uDFFF', '\uFFFE', '\uFFFF', '\u{1F600}', 'a'),
        fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
      );
      fc.assert(
        fc.property(fc.string({ unit, maxLength: 20 }), (description) => {
          const expected = [...description].every((char) => xmlChar(char.codePointAt(0) ?? -1));
          expect(problems({ ...card, description }).length === 0).toBe(expected);
        }),
        { numRuns: 3000 },
      );
    });
  });

  describe('currency', () => {
    it('accepts every ISO 4217 code the runtime knows, lower-case, and nothing else', () => {
      const codes = Intl.supportedValuesOf('currency');
      for (const code of codes) expect(problems({ ...card, currency: code.toLowerCase() })).toEqual([]);
      for (const currency of ['USD', 'xyz', 'us', 'usdd', '']) {
        expect(problems({ ...card, currency })).toEqual([
          { path: 'currency', message: 'currency must be a lower-case ISO 4217 code such as usd' },
        ]);
      }
      expect(problems({ ...card, currency: 840 })).toEqual([
        { path: 'currency', message: 'currency must be a string' },
      ]);
    });
  });
});
