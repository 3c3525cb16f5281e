import { createServer, type Server } from 'node:net';
import { freePort } from '@keystone-idempotency/local-aws/free-port';
import { ensurePortsFree, portFromEnv } from '../../lib/local/ports';

describe('portFromEnv', () => {
  it('uses the fallback when the variable is unset or empty', () => {
    expect(portFromEnv('PORT', 3000, {})).toEqual({ variable: 'PORT', port: 3000 });
    expect(portFromEnv('PORT', 3000, { PORT: '' })).toEqual({ variable: 'PORT', port: 3000 });
  });

  it('reads 0 (any free port) and ports up to 65535', () => {
    expect(portFromEnv('PROCESSOR_PORT', 0, { PROCESSOR_PORT: '0' }).port).toBe(0);
    expect(portFromEnv('PROCESSOR_PORT', 0, { PROCESSOR_PORT: '65535' }).port).toBe(65_535);
  });

  it.each(['abc', '-1', '3000.5', '65536', '0x10', '1e3'])('rejects %j, naming the variable', (raw) => {
    expect(() => portFromEnv('PROCESSOR_PORT', 0, { PROCESSOR_PORT: raw })).toThrow(
      `PROCESSOR_PORT must be a port number (0 to 65535), got '${raw}'`,
    );
  });
});

describe('ensurePortsFree', () => {
  let held: Server;
  let heldPort: number;
  beforeAll(async () => {
    held = createServer();
    await new Promise<void>((resolve) => held.listen(0, '127.0.0.1', resolve));
    heldPort = (held.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => held.close(() => resolve())));

  it('names the variable whose port is taken', async () => {
    await expect(
      ensurePortsFree([
        { variable: 'PORT', port: 0 },
        { variable: 'PROCESSOR_PORT', port: heldPort },
      ]),
    ).rejects.toThrow(`PROCESSOR_PORT: port ${heldPort} on 127.0.0.1 is already in use`);
  });

  it('rejects two variables set to the same free port', async () => {
    const port = await freePort();
    const settings = [
      { variable: 'PORT', port },
      { variable: 'PROCESSOR_PORT', port },
    ];
    await expect(ensurePortsFree(settings)).rejects.toThrow(`PORT and PROCESSOR_PORT are both ${port}`);
  });

  it('accepts free ports and 0', async () => {
    const settings = [
      { variable: 'PORT', port: await freePort() },
      { variable: 'PROCESSOR_PORT', port: 0 },
    ];
    await expect(ensurePortsFree(settings)).resolves.toBeUndefined();
  });
});
