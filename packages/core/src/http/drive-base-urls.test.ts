import { describe, expect, it } from 'vitest';
import { readDriveBaseUrls } from './index.js';

describe('readDriveBaseUrls', () => {
  it('maps one Google API origin to the three APIs, and lets each API setting win', () => {
    expect(readDriveBaseUrls({})).toBeUndefined();
    expect(readDriveBaseUrls({ GOOGLE_API_BASE_URL: '  ' })).toBeUndefined();
    expect(readDriveBaseUrls({ GOOGLE_API_BASE_URL: 'http://127.0.0.1:9100/' })).toEqual({
      drive: 'http://127.0.0.1:9100/drive/v3',
      upload: 'http://127.0.0.1:9100/upload/drive/v3',
      sheets: 'http://127.0.0.1:9100/v4',
    });
    expect(readDriveBaseUrls({ GOOGLE_API_BASE_URL: 'http://gw.test', SHEETS_BASE_URL: 'https://sheets.test/v4/' })).toEqual({
      drive: 'http://gw.test/drive/v3',
      upload: 'http://gw.test/upload/drive/v3',
      sheets: 'https://sheets.test/v4',
    });
    expect(readDriveBaseUrls({ DRIVE_BASE_URL: 'https://drive.test/drive/v3', DRIVE_UPLOAD_BASE_URL: 'https://drive.test/upload/drive/v3' })).toEqual({
      drive: 'https://drive.test/drive/v3',
      upload: 'https://drive.test/upload/drive/v3',
    });
  });

  it('refuses a value that is not an http(s) URL, naming the setting and never repeating the value', () => {
    for (const value of ['not a url', 'ftp://user:secret@host', 42]) {
      let error: unknown;
      try {
        readDriveBaseUrls({ SHEETS_BASE_URL: value });
      } catch (caught) {
        error = caught;
      }
      expect(error).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringMatching(/^SHEETS_BASE_URL must be an http\(s\) URL/) });
      expect((error as Error).message).not.toContain('secret');
    }
  });
});
