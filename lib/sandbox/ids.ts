import { randomBytes } from 'node:crypto';

/** A random object id with a type prefix, in the processor's style: `ch_…`, `evt_…`, `em_…`, `shp_…`. */
export function newId(prefix: 'ch' | 'evt' | 'em' | 'shp'): string {
  return `${prefix}_${randomBytes(12).toString('hex')}`;
}
