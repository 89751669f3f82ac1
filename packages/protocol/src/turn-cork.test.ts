import { describe, expect, it } from 'vitest';
import { TurnCork } from './turn-cork.js';

describe('TurnCork', () => {
  it('corks once per turn and uncorks when the deferred callback runs', () => {
    const calls: string[] = [];
    const deferred: (() => void)[] = [];
    const cork = new TurnCork({ cork: () => calls.push('cork'), uncork: () => calls.push('uncork') }, (run) =>
      deferred.push(run),
    );
    cork.hold();
    cork.hold();
    cork.hold();
    expect(calls).toEqual(['cork']);
    expect(deferred).toHaveLength(1);
    deferred.shift()?.();
    expect(calls).toEqual(['cork', 'uncork']);
    cork.hold();
    expect(calls).toEqual(['cork', 'uncork', 'cork']);
  });

  it('does nothing without a stream', () => {
    const deferred: (() => void)[] = [];
    new TurnCork(undefined, (run) => deferred.push(run)).hold();
    expect(deferred).toEqual([]);
  });
});
