import { describe, expect, it } from 'vitest';
import { collectOptions, deepFreeze, splitList, wantsHelp } from './config-options.js';

const table = {
  'sink-url': { env: 'SINK_URL', help: '' },
  verbose: { env: 'VERBOSE', help: '', boolean: true },
};

describe('collectOptions', () => {
  it('lets flags override the environment and accepts both flag spellings', () => {
    const env = { X_SINK_URL: 'http://env', X_VERBOSE: 'false' };
    expect(collectOptions(table, 'X_', env, ['--sink-url', 'http://flag']).raw).toEqual({
      SINK_URL: 'http://flag',
      VERBOSE: 'false',
    });
    expect(collectOptions(table, 'X_', env, ['--sink-url=http://eq', '--verbose']).raw).toEqual({
      SINK_URL: 'http://eq',
      VERBOSE: 'true',
    });
  });

  it('reports every problem at once', () => {
    const { problems } = collectOptions(table, 'X_', {}, ['--nope', 'stray', '--sink-url']);
    expect(problems).toEqual(['unknown flag --nope', 'unexpected argument "stray"', '--sink-url needs a value']);
  });

  it('returns positionals when allowed', () => {
    expect(collectOptions(table, 'X_', {}, ['up', '--verbose'], true).rest).toEqual(['up']);
  });

  it('helpers', () => {
    expect(wantsHelp(['a', '-h'])).toBe(true);
    expect(splitList(' a, b,,c ')).toEqual(['a', 'b', 'c']);
    const frozen = deepFreeze({ a: { b: 1 } });
    expect(Object.isFrozen(frozen.a)).toBe(true);
  });
});
