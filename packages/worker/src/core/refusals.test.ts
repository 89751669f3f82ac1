import { describe, expect, it } from 'vitest';
import { isFatalRefusal, shouldStopOnRefusal } from './refusals.js';

describe('fatal refusals', () => {
  it.each([
    ['UNAUTHENTICATED', true],
    ['FORBIDDEN', true],
    ['PROTOCOL_VERSION_MISMATCH', true],
    ['UNAVAILABLE', false],
    ['LIMIT_REACHED', false],
    ['SESSION_EXPIRED', false],
  ])('%s is fatal: %s', (code, fatal) => {
    expect(isFatalRefusal(code)).toBe(fatal);
  });

  it.each([
    [1, 1, true],
    [1, 2, false],
    [2, 2, true],
    [3, 2, true],
    [1, 0, true],
    [0, 1, false],
  ])('%i refusals in a row of %i coordinators: stop %s', (consecutive, coordinators, stop) => {
    expect(shouldStopOnRefusal(consecutive, coordinators)).toBe(stop);
  });
});
