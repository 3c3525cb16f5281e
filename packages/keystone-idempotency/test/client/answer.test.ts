import { readBody, readProblem } from '../../src/client/answer';

const anything = (body: unknown) => body;
const anObject = (body: unknown) => {
  if (typeof body !== 'object' || body === null) throw new TypeError('not an object');
  return body;
};

describe('readBody', () => {
  it('hands the parsed JSON to the parser, and returns what it returns', () => {
    expect(readBody(201, '{"id":"a"}', anObject)).toEqual({ ok: true, body: { id: 'a' } });
  });

  it('gives a 204 or 205 no body at all, rather than refusing it as empty', () => {
    expect(readBody(204, '', anything)).toEqual({ ok: true, body: undefined });
    expect(readBody(205, '', anything)).toEqual({ ok: true, body: undefined });
  });

  it.each([
    ['an empty body', 201, '', 'empty-body'],
    ['a body of whitespace', 200, ' \n', 'empty-body'],
    ['HTML', 201, '<h1>Created</h1>', 'not-json'],
    ['truncated JSON', 201, '{"id":', 'not-json'],
    ['what the parser refuses', 200, 'null', 'rejected'],
  ])('refuses %s, without throwing', (_name, status, text, reason) => {
    const read = readBody(status, text, anObject);
    expect(read).toMatchObject({ ok: false, reason });
    if (!read.ok) expect(read.detail).toContain(String(status));
  });

  it('says in its detail why the parser refused the body', () => {
    expect(readBody(200, 'null', anObject)).toMatchObject({
      detail: "the 200 answer's body was refused: not an object",
    });
  });
});

describe('readProblem', () => {
  it('keeps a problem+json body whole, extensions included', async () => {
    const body = { type: 'https://example.com/problems/x', title: 'X', status: 409, detail: 'd', extra: 1 };
    expect(await readProblem(Response.json(body, { status: 409 }))).toEqual(body);
  });

  it.each([
    ['HTML', '<h1>Bad Gateway</h1>'],
    ['a JSON array', '[1]'],
    ['JSON null', 'null'],
  ])('makes a minimal problem of %s', async (_name, text) => {
    const response = new Response(text, { status: 502, statusText: 'Bad Gateway' });
    expect(await readProblem(response)).toEqual({ type: 'about:blank', title: 'Bad Gateway', status: 502 });
  });
});
