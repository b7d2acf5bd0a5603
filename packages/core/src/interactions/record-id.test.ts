import { describe, expect, it } from 'vitest';
import { checkRecordId, MAX_RECORD_ID_LENGTH } from './record-id.js';

describe('checkRecordId', () => {
  it('takes ids of 1 to 512 characters, unicode and odd characters included', () => {
    for (const id of ['a', 'x'.repeat(MAX_RECORD_ID_LENGTH), '../中文/x', "it's; DROP {x}*"]) expect(() => checkRecordId('Interaction', id)).not.toThrow();
  });

  it('refuses empty, longer and control-character ids with BAD_REQUEST, showing at most 80 characters', () => {
    expect(() => checkRecordId('Session', '')).toThrow(expect.objectContaining({ code: 'BAD_REQUEST', message: 'Session id "" must be 1 to 512 characters without control characters' }));
    expect(() => checkRecordId('Interaction', 'a\u0000b')).toThrow(expect.objectContaining({ code: 'BAD_REQUEST' }));
    const long = 'y'.repeat(MAX_RECORD_ID_LENGTH + 1);
    expect(() => checkRecordId('Interaction', long)).toThrow(expect.objectContaining({ message: `Interaction id "${'y'.repeat(80)}" must be 1 to 512 characters without control characters` }));
  });
});
