import { randomBytes } from 'node:crypto';

/** A random object id with a type prefix, in the processor's style: `ch_…`, `re_…`, `evt_…`, `em_…`, `shp_…`. */
export function newId(prefix: 'ch' | 're' | 'evt' | 'em' | 'shp'): string {
  return `${prefix}_${randomBytes(12).toString('hex')}`;
}
