/** HTTP header names are case-insensitive; API Gateway passes them as the client sent them. */
export function header(
  headers: Record<string, string | undefined> | null | undefined,
  name: string,
): string | undefined {
  if (!headers) return undefined;
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === wanted) return value;
  }
  return undefined;
}

/** The raw request body as text: API Gateway base64-encodes bodies it considers binary. */
export function rawBody(event: { body: string | null; isBase64Encoded?: boolean }): string | null {
  if (event.body === null || event.body === undefined) return null;
  return event.isBase64Encoded ? Buffer.from(event.body, 'base64').toString('utf8') : event.body;
}
