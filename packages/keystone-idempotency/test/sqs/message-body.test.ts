import { CreateQueueCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { type LocalSqs, startLocalSqs } from '@keystone-idempotency/local-aws/sqs';
import fc from 'fast-check';
import { SQS_TEXT, sqsMessageBody } from '../../src/sqs';

/** XML 1.0's Char production, code point by code point: the definition the pattern and the encoder must meet. */
function isXmlChar(codePoint: number): boolean {
  return (
    codePoint === 0x9 ||
    codePoint === 0xa ||
    codePoint === 0xd ||
    (codePoint >= 0x20 && codePoint <= 0xd7ff) ||
    (codePoint >= 0xe000 && codePoint <= 0xfffd) ||
    (codePoint >= 0x10000 && codePoint <= 0x10ffff)
  );
}
/** Iterating a string yields code points, and a lone surrogate as itself. */
const isXmlText = (text: string) => [...text].every((char) => isXmlChar(char.codePointAt(0) ?? -1));

/**
 * Characters at every edge of the rule, the ones SQS refuses among them: C0 controls, lone surrogates of both
 * halves, U+FFFE and U+FFFF, astral characters; and any code point at all.
 */
const edgeChar = fc.oneof(
  fc.constantFrom(
    '\u0000',
    '\u0001',
    '\u0008',
    '\t',
    '\n',
    '\u000B',
    '\u000C',
    '\r',
    '\u001F',
    ' ',
    '"',
    '\\',
    '\u007F',
    '\uD7FF',
    '\uD800',
    '\uDBFF',
    '\uDC00',
    '\uDFFF',
    '\uE000',
    '\uFFFD',
    '\uFFFE',
    '\uFFFF',
    '\u{10000}',
    '\u{1F600}',
    '\u{10FFFF}',
  ),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
);
const edgeString = fc.string({ unit: edgeChar, maxLength: 12 });
/** JSON values whose strings, keys included, are made of those characters. */
const edgeJson = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    edgeString,
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(edgeString, tie('value'), { maxKeys: 4 }),
  ),
})).value;

describe('SQS_TEXT', () => {
  it('matches exactly the strings made of XML 1.0 characters, with and without the u flag', () => {
    const unicode = new RegExp(SQS_TEXT.source, 'u');
    fc.assert(
      fc.property(edgeString, (text) => {
        expect(SQS_TEXT.test(text)).toBe(isXmlText(text));
        expect(unicode.test(text)).toBe(isXmlText(text));
      }),
      { numRuns: 5000 },
    );
  });

  it('refuses a lone or reversed surrogate, and accepts a pair', () => {
    expect(SQS_TEXT.test('a\uD83D')).toBe(false);
    expect(SQS_TEXT.test('\uDE00a')).toBe(false);
    expect(SQS_TEXT.test('\uDE00\uD83D')).toBe(false);
    expect(SQS_TEXT.test('\uD83D\uDE00')).toBe(true);
    expect(SQS_TEXT.test('')).toBe(true);
  });
});

describe('sqsMessageBody', () => {
  it('is JSON that parses back to what JSON.stringify would give, and holds only XML 1.0 characters', () => {
    fc.assert(
      fc.property(edgeJson, (value) => {
        const body = sqsMessageBody(value);
        expect(JSON.parse(body)).toEqual(JSON.parse(JSON.stringify(value)));
        expect(isXmlText(body)).toBe(true);
        // Nothing outside the Basic Multilingual Plane either: the emulator refuses those (see message-body.ts).
        expect(body).toMatch(/^[\t\n\r\x20-\uD7FF\uE000-\uFFFD]*$/);
      }),
      { numRuns: 3000 },
    );
  });

  it('escapes only what it must: plain text, accents and quotes come out as JSON.stringify writes them', () => {
    const value = { note: 'Café "crème" \\ 42', n: 1 };
    expect(sqsMessageBody(value)).toBe(JSON.stringify(value));
    expect(sqsMessageBody({ d: 'a\uFFFFb\uFFFE' })).toBe('{"d":"a\\uffffb\\ufffe"}');
    expect(sqsMessageBody({ d: '\\\uFFFF' })).toBe('{"d":"\\\\\\uffff"}');
    expect(sqsMessageBody('\u{1F600}')).toBe('"\\ud83d\\ude00"');
  });

  it('refuses what is not a JSON value instead of sending "undefined"', () => {
    expect(() => sqsMessageBody(undefined)).toThrow(TypeError);
    expect(() => sqsMessageBody(() => 1)).toThrow(TypeError);
  });
});

describe('sqsMessageBody against the SQS emulator', () => {
  let sqs: LocalSqs;
  let queueUrl: string;
  beforeAll(async () => {
    sqs = await startLocalSqs();
    queueUrl = (await sqs.client.send(new CreateQueueCommand({ QueueName: 'message-body' }))).QueueUrl!;
  });
  afterAll(() => sqs?.close());

  const values = [
    { description: 'noncharacters \uFFFE\uFFFF' },
    { description: 'lone surrogates \uD800 \uDFFF' },
    { description: 'controls \u0000\u0001\u001F' },
    { description: 'astral \u{1F600}\u{10FFFF}' },
  ];

  it('is refused as plain JSON and accepted encoded, and is received as the same value', async () => {
    const refused = await sqs.client
      .send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify(values[0]) }))
      .then(
        () => undefined,
        (error: Error) => error.name,
      );
    expect(refused).toMatch(/InvalidMessageContents$/);

    for (const value of values) {
      await sqs.client.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: sqsMessageBody(value) }));
    }
    const received: unknown[] = [];
    while (received.length < values.length) {
      const { Messages = [] } = await sqs.client.send(
        new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
      );
      received.push(...Messages.map((message) => JSON.parse(message.Body ?? 'null')));
    }
    expect(received).toEqual(expect.arrayContaining(values));
    expect(received).toHaveLength(values.length);
  });
});
