/** The service's tests use the clock the library publishes for tests of its stores, under the name they know. */
export { ManualClock as FakeClock } from 'keystone-idempotency/testing';
