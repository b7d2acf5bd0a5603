import { describe, expect, it } from 'vitest';
import { withCors } from './cors.js';

const echo = async (request: Request) => new Response(`${request.method} ${new URL(request.url).pathname}`, { headers: { vary: 'Accept' } });

describe('withCors', () => {
  it('answers preflights for any method and header when told to, and decorates answers to allowed origins', async () => {
    const handler = withCors(echo, { origins: ['https://app.example.com'], allowMethods: '*', allowHeaders: '*', maxAgeSeconds: 5 });
    const preflight = await handler(
      new Request('http://api.test/things', {
        method: 'OPTIONS',
        headers: { origin: 'https://app.example.com', 'access-control-request-method': 'DELETE', 'access-control-request-headers': 'x-one, x-two' },
      }),
    );
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-methods')).toBe('DELETE');
    expect(preflight.headers.get('access-control-allow-headers')).toBe('x-one, x-two');
    expect(preflight.headers.get('access-control-max-age')).toBe('5');
    const answer = await handler(new Request('http://api.test/things', { method: 'DELETE', headers: { origin: 'https://app.example.com' } }));
    expect(await answer.text()).toBe('DELETE /things');
    expect(answer.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    expect(answer.headers.get('vary')).toBe('Accept, Origin');
  });

  it('refuses other origins before the handler runs, and leaves same-host and Origin-less calls alone', async () => {
    let calls = 0;
    const handler = withCors(
      async (request) => {
        calls += 1;
        return echo(request);
      },
      { origins: ['https://app.example.com'] },
    );
    const refused = await handler(new Request('http://api.test/x', { method: 'POST', headers: { origin: 'https://evil.example.com' } }));
    expect(refused.status).toBe(403);
    expect((await refused.json()).error).toMatchObject({ code: 'FORBIDDEN', message: expect.stringContaining('https://evil.example.com') });
    expect((await handler(new Request('http://api.test/x', { method: 'POST', headers: { origin: 'null' } }))).status).toBe(403);
    expect(calls).toBe(0);
    const own = await handler(new Request('http://api.test/x', { method: 'POST', headers: { origin: 'http://api.test' } }));
    expect(own.status).toBe(200);
    expect(own.headers.get('access-control-allow-origin')).toBeNull();
    expect((await handler(new Request('http://api.test/x'))).status).toBe(200);
    expect(calls).toBe(2);
  });
});
