import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * A full garbage collection, on demand, without starting Node with `--expose-gc`: for tests of what must survive
 * one (an abort that has to reach a request, say). V8 exposes `gc` to contexts created after the flag is set.
 */
export function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}
