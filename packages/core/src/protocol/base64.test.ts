import { describe, expect, it } from 'vitest';
import { isAgentError } from '../errors/index.js';
import { base64ToBytes, base64ToText, bytesToBase64, textToBase64 } from './base64.js';

function failure(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure');
}

describe('base64', () => {
  it('round-trips bytes and text', () => {
    const bytes = Uint8Array.from({ length: 33_000 }, (_, index) => index % 256);
    expect(base64ToBytes(bytesToBase64(bytes))).toEqual(bytes);
    expect(base64ToText(textToBase64('héllo \u{1F600}'))).toBe('héllo \u{1F600}');
  });

  it('refuses data that is not base64 with a 400 AgentError that does not echo the data', () => {
    for (const data of ['not base64!', 'a-_b', 'YWJj$', '\u{1F600}', 'abcde']) {
      const error = failure(() => base64ToBytes(data));
      expect(isAgentError(error) && { code: error.code, status: error.status }).toEqual({ code: 'BAD_REQUEST', status: 400 });
      expect((error as Error).message).toMatch(/^expected base64 data/);
      expect((error as Error).message).not.toContain(data);
    }
    expect(isAgentError(failure(() => base64ToText('%%%')))).toBe(true);
  });
});
