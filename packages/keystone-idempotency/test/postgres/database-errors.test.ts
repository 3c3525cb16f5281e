import { isConnectionFailure, isQueryTimeout } from '../../src/postgres/database-errors';

/**
 * Which of pg's errors mean "the connection is gone, whether the last request landed is unknown": the store sends
 * the call again on a fresh connection for those, and only those.
 */
describe('isConnectionFailure', () => {
  it.each([
    'Connection terminated',
    'Connection terminated unexpectedly',
    'Client has encountered a connection error and is not queryable',
    'Client was closed and is not queryable',
  ])('counts pg’s dead-client error "%s", which carries no code', (message) => {
    expect(isConnectionFailure(new Error(message))).toBe(true);
  });

  it('counts the server ending the session and socket failures, by SQLSTATE and errno', () => {
    expect(isConnectionFailure(Object.assign(new Error('terminating connection'), { code: '57P01' }))).toBe(true);
    expect(isConnectionFailure(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }))).toBe(true);
  });

  it('does not count an error of the statement, a bug in an effect, or the call running out of time', () => {
    expect(isConnectionFailure(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false);
    expect(isConnectionFailure(new Error('undefined is not a function'))).toBe(false);
    expect(isConnectionFailure(new Error('Query read timeout'))).toBe(false);
    expect(isQueryTimeout(new Error('Query read timeout'))).toBe(true);
  });
});
