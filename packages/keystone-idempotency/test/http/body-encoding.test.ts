import { randomUUID } from 'node:crypto';
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { z } from 'zod';
import { DynamoDbStore } from '../../src/dynamodb/store';
import { problemErrorHandler } from '../../src/http/error-handler';
import { httpIdempotency, type WithIdempotency } from '../../src/http/idempotency';
import { validateJsonBody, type WithBody } from '../../src/http/validate-body';
import { apiEvent, lambdaContext } from '../support/api-event';
import { testDatabase } from '../support/dynamodb';

/**
 * Bodies are text in one encoding, UTF-8 (JSON's, RFC 8259). Anything else is refused before the key is claimed, or,
 * where nothing validates the body, fingerprinted as the bytes it is: two different requests never share a
 * fingerprint because a decoder turned their differences into U+FFFD.
 */
const db = testDatabase();
const store = () => new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable });

type WithNote = Context & WithBody<{ note: string }>;
const validatedHandler = middy<APIGatewayProxyEvent, APIGatewayProxyResult, Error, WithNote>(async () => ({
  statusCode: 200,
  body: '{}',
}))
  .use(problemErrorHandler())
  .use(validateJsonBody(z.strictObject({ note: z.string() })));
/** Lambda passes a plain context; the middleware adds the parsed body to it. */
const validated = (event: APIGatewayProxyEvent, context: Context) => validatedHandler(event, context as WithNote);

function binaryEvent(bytes: number[], key: string): APIGatewayProxyEvent {
  return {
    ...apiEvent({ headers: { 'Idempotency-Key': key, 'Content-Type': 'application/octet-stream' } }),
    body: Buffer.from(bytes).toString('base64'),
    isBase64Encoded: true,
  };
}

describe('validateJsonBody', () => {
  it.each([
    'application/json; charset=latin1',
    'application/json; charset=ISO-8859-1',
    'application/json;charset="windows-1252"',
  ])('refuses %s with 415, before anything else', async (contentType) => {
    const response = await validated(
      apiEvent({ body: { note: 'café' }, headers: { 'Content-Type': contentType } }),
      lambdaContext(),
    );
    expect(response.statusCode).toBe(415);
    expect(response.headers).toMatchObject({ 'Content-Type': 'application/problem+json' });
    expect(JSON.parse(response.body)).toMatchObject({ type: expect.stringMatching(/unsupported-media-type$/) });
  });

  it.each(['application/json; charset=utf-8', 'application/json; charset=UTF8', 'application/json'])(
    'takes %s',
    async (contentType) => {
      const response = await validated(
        apiEvent({ body: { note: 'café' }, headers: { 'Content-Type': contentType } }),
        lambdaContext(),
      );
      expect(response.statusCode).toBe(200);
    },
  );

  it('answers a base64 body that is not UTF-8 with 400, not with its bytes turned into U+FFFD', async () => {
    const event: APIGatewayProxyEvent = {
      ...apiEvent({}),
      body: Buffer.from([0x7b, 0x22, 0x6e, 0x6f, 0x74, 0x65, 0x22, 0x3a, 0x22, 0xe9, 0x22, 0x7d]).toString('base64'), // {"note":"é"} in latin1
      isBase64Encoded: true,
    };
    const response = await validated(event, lambdaContext());
    expect(response.statusCode).toBe(400);
    expect(JSON.parse(response.body)).toMatchObject({ errors: [{ path: '', message: 'expected UTF-8 text' }] });
  });
});

describe('httpIdempotency without body validation', () => {
  it('tells two different non-UTF-8 bodies apart under one key (422), and replays the same bytes', async () => {
    const claimed = middy<APIGatewayProxyEvent, APIGatewayProxyResult, Error, Context & WithIdempotency<DynamoDbStore>>(
      async () => ({
        statusCode: 201,
        body: 'ok',
      }),
    )
      .use(problemErrorHandler())
      .use(httpIdempotency({ store: store() }));
    const handler = (event: APIGatewayProxyEvent, context: Context) =>
      claimed(event, context as Context & WithIdempotency<DynamoDbStore>);
    const key = randomUUID();
    // 0xE9 and 0xE8 are not UTF-8 on their own: decoded leniently, both became U+FFFD, one fingerprint.
    expect((await handler(binaryEvent([0x61, 0xe9], key), lambdaContext())).statusCode).toBe(201);
    const other = await handler(binaryEvent([0x61, 0xe8], key), lambdaContext());
    expect(other.statusCode).toBe(422);
    const same = await handler(binaryEvent([0x61, 0xe9], key), lambdaContext());
    expect(same.statusCode).toBe(201);
    expect(same.headers).toMatchObject({ 'Idempotent-Replayed': 'true' });
  });
});

describe('problemErrorHandler', () => {
  const failing = middy<APIGatewayProxyEvent, APIGatewayProxyResult>(async () => {
    throw new Error('boom: a DynamoDB internal error');
  }).use(problemErrorHandler({ logger: { error: () => undefined } }));

  it('advises a GET to retry, without an Idempotency-Key it never had', async () => {
    const response = await failing(apiEvent({ method: 'GET', resource: '/payments/{id}' }), lambdaContext());
    const problem = JSON.parse(response.body) as { detail: string };
    expect(response.statusCode).toBe(500);
    expect(problem.detail).toBe('The request could not be completed. It is safe to retry.');
    expect(response.body).not.toContain('boom');
  });

  it('advises a request that carried an Idempotency-Key to retry with the same one', async () => {
    const response = await failing(apiEvent({ headers: { 'Idempotency-Key': 'k-1' } }), lambdaContext());
    expect(JSON.parse(response.body)).toMatchObject({
      detail: 'The request could not be completed. It is safe to retry with the same Idempotency-Key.',
    });
  });
});
