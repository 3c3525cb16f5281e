/**
 * Text an SQS message body can hold: nothing but XML 1.0 characters (#x9, #xA, #xD, #x20-#xD7FF, #xE000-#xFFFD,
 * #x10000-#x10FFFF). SQS refuses a message with any other character (`InvalidMessageContents`), and JSON alone does
 * not keep them out: U+FFFE and U+FFFF are valid in a JSON string, and `JSON.stringify` writes them as they are.
 *
 * Written to mean the same with and without the `u` flag, so that one pattern serves zod (no flag), JSON Schema
 * validators (Ajv adds `u`) and a JSON Schema `pattern`: without `u` an astral character is a surrogate pair, matched
 * by the second alternative; with `u` it is one code point, matched by the first, and the second can never match. A
 * lone surrogate matches neither way.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters XML 1.0 excludes are the point.
export const SQS_TEXT = /^(?:[^\x00-\x08\x0B\x0C\x0E-\x1F\uD800-\uDFFF\uFFFE\uFFFF]|[\uD800-\uDBFF][\uDC00-\uDFFF])*$/;

/**
 * One UTF-16 code unit outside #x9, #xA, #xD, #x20-#xD7FF, #xE000-#xFFFD. Every surrogate counts, paired or not:
 * astral characters are escaped as their pair, as the SQS emulator we test against (fauxqs 1.9) refuses them where
 * SQS itself accepts them. The escaped text is then accepted by both, for 8 bytes more per astral character.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: as above.
const ESCAPED_UNIT = /[^\x09\x0A\x0D\x20-\uD7FF\uE000-\uFFFD]/g;

/**
 * `value` as JSON text that SQS accepts as a message body, whatever characters its strings hold: each character SQS
 * refuses is written as a JSON `\uXXXX` escape, so `JSON.parse` of the body gives back exactly the value
 * `JSON.parse(JSON.stringify(value))` would. Only strings can hold such characters (JSON.stringify writes everything
 * else in ASCII), so every replacement falls inside a string literal, where an escape means the character itself.
 *
 * @example
 * await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: sqsMessageBody(event) }));
 * sqsMessageBody({ note: 'a\uFFFFb' }); // '{"note":"a\\uffffb"}'
 */
export function sqsMessageBody(value: unknown): string {
  const json = JSON.stringify(value);
  if (json === undefined) throw new TypeError(`a message body must be a JSON value, not ${typeof value}`);
  return json.replace(ESCAPED_UNIT, (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
