import { describe, expect, it } from 'vitest';
import { failureReason, storeFailure } from './store-failure.js';

class SocketClosedUnexpectedlyError extends Error {}

describe('failureReason', () => {
  it('names a failure by its code, its leading word, its name or its class, never its message', () => {
    expect(failureReason(Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:6379'), { code: 'ECONNREFUSED' }))).toBe('ECONNREFUSED');
    expect(failureReason(new Error('NOSCRIPT No matching script'))).toBe('NOSCRIPT');
    expect(failureReason(new TypeError('host db.internal'))).toBe('TypeError');
    // A client's own error class whose instances keep the name `Error`.
    expect(failureReason(new SocketClosedUnexpectedlyError('Socket closed unexpectedly to db.internal'))).toBe('SocketClosedUnexpectedlyError');
    expect(failureReason({ socketError: Object.assign(new Error('x'), { code: 'ETIMEDOUT' }) })).toBe('ETIMEDOUT');
    expect(failureReason(new Error('Connection terminated unexpectedly'))).toBe('error');
    expect(failureReason({ message: 'secret' })).toBe('error');
  });

  it('gives a STORE_ERROR that names the action and the database, without the message', () => {
    const error = storeFailure('redis', 'append to session s-1', new SocketClosedUnexpectedlyError('redis://admin:hunter2@db.internal'));
    expect(error).toMatchObject({ code: 'STORE_ERROR', message: 'Could not append to session s-1 (redis: SocketClosedUnexpectedlyError)' });
  });
});
