import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A tiny webhook endpoint for tests: records every request exactly as received and answers with the status that
 * `respond` picks (which may wait, to hold deliveries in flight).
 */

export interface ReceivedWebhook {
  readonly headers: IncomingHttpHeaders;
  readonly rawBody: string;
}

export interface Receiver {
  readonly url: string;
  readonly received: ReceivedWebhook[];
  close(): Promise<void>;
}

export type Respond = (webhook: ReceivedWebhook, index: number) => number | Promise<number>;

export async function startReceiver(respond: Respond = () => 200): Promise<Receiver> {
  const received: ReceivedWebhook[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const webhook = { headers: req.headers, rawBody: Buffer.concat(chunks).toString('utf8') };
    received.push(webhook);
    res.writeHead(await respond(webhook, received.length - 1)).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/webhooks`,
    received,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}
