import { describe, expect, it } from 'vitest';
import { redactSecrets, redactServerMessage } from './redact.js';

describe('redactSecrets', () => {
  it('hides a token named in a message, not only in a URL query', () => {
    expect(redactSecrets('invalid token=s3cr3t-value-991 for this project')).toBe('invalid token=[redacted] for this project');
    expect(redactSecrets('token=s3cr3t-value-991')).toBe('token=[redacted]');
    expect(redactSecrets('rejected (access_token=s3cr3t-value-991)')).toBe('rejected (access_token=[redacted])');
    expect(redactSecrets('grant_type=refresh_token&refresh_token=1//0gRefresh-991&client_secret=GOCSPX-abc123')).toBe(
      'grant_type=refresh_token&refresh_token=[redacted]&client_secret=[redacted]',
    );
  });

  it('hides the tokens of an echoed OAuth answer', () => {
    const echoed = '{"access_token": "opaque-access-7781", "refresh_token":"1//0gRefresh-991", "id_token": "eyJhbGciOi.x.y", "expires_in": 3599}';
    const redacted = redactSecrets(echoed);
    for (const secret of ['opaque-access-7781', '1//0gRefresh-991', 'eyJhbGciOi.x.y']) expect(redacted).not.toContain(secret);
    expect(redacted).toContain('"expires_in": 3599');
  });

  it('leaves words that only end in a secret name alone', () => {
    expect(redactSecrets('max_token=5 and monkey=banana')).toBe('max_token=5 and monkey=banana');
    expect(redactSecrets('the token was rejected')).toBe('the token was rejected');
  });

  it('keeps server paths and tokens out of an unexpected failure message', () => {
    expect(redactServerMessage("ENOENT: open '/srv/app/secrets/key.json' with token=abc-123-xyz")).toBe("ENOENT: open '[path]' with token=[redacted]");
  });
});
