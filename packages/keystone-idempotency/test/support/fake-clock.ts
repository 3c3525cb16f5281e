/** A clock that moves only when told to: the one the published suites use. */
export { ManualClock as FakeClock } from '../../src/testing/manual-clock';
