import { describe, expect, it } from 'vitest';
import { lazy } from './lazy.js';

describe('lazy', () => {
  it('builds nothing until first called, then hands back the one value it built', () => {
    let builds = 0;
    const schema = lazy(() => ({ built: (builds += 1) }));
    expect(builds).toBe(0);
    const first = schema();
    expect(schema()).toBe(first);
    expect(builds).toBe(1);
  });

  it('keeps a value that is undefined without building it again', () => {
    let builds = 0;
    const nothing = lazy(() => {
      builds += 1;
      return undefined;
    });
    nothing();
    nothing();
    expect(builds).toBe(1);
  });
});
