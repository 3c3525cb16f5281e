import assert from 'node:assert/strict';

/**
 * Asserts that `actual` has every property `expected` names, with the same value: objects compared property by
 * property, recursively (other properties of `actual` are free), arrays of objects element by element (as long as
 * expected), other arrays and everything else strictly. What jest's
 * `toMatchObject` does, with node:assert alone.
 */
export function assertMatches(actual: unknown, expected: unknown, path = 'value'): void {
  if (isPlainObject(expected)) {
    assert.ok(
      actual !== null && typeof actual === 'object',
      `${path}: expected an object, got ${JSON.stringify(actual)}`,
    );
    for (const [name, value] of Object.entries(expected)) {
      assertMatches((actual as Record<string, unknown>)[name], value, `${path}.${name}`);
    }
    return;
  }
  if (Array.isArray(expected) && expected.some(isPlainObject)) {
    // An array of objects: as long, and each element matched as above (a list of records, say).
    assert.ok(Array.isArray(actual), `${path}: expected an array, got ${JSON.stringify(actual)}`);
    assert.equal(actual.length, expected.length, `${path}: expected ${expected.length} elements, got ${actual.length}`);
    for (const [i, item] of expected.entries()) assertMatches(actual[i], item, `${path}[${i}]`);
    return;
  }
  assert.deepStrictEqual(
    actual,
    expected,
    `${path}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`,
  );
}

/** Awaits `promise`, which must reject, and answers what it rejected with. */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('expected a rejection, and the promise resolved');
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}
