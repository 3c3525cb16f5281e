import { describeStoreContract } from 'keystone-idempotency/testing';
import { MemoryDriver } from '../support/memory-driver';
import { memoryHarness } from '../support/memory-harness';

/**
 * A store of a team's own, proven as the package's are: the published contract suite, against a driver written
 * with nothing but the published entry points (test/support/memory-driver.ts), behind `DriverStore`, with replies
 * lost after the write applied (test/support/memory-harness.ts).
 */
describeStoreContract({ name: 'a driver of its own (in memory)', setup: () => memoryHarness(new MemoryDriver()) });
