import { describe, expect, it } from 'vitest';
import { decideAttemptEnd, type AttemptDecision, type AttemptFacts } from './attempt-outcome.js';

const returned: AttemptFacts = {
  ended: 'returned',
  returnedValue: true,
  stored: false,
  error: 'none',
  aborted: 'none',
  errorIsLocalDeadline: false,
  stopping: false,
};
const threw: AttemptFacts = { ...returned, ended: 'threw', returnedValue: false, error: 'handler' };

describe('decideAttemptEnd', () => {
  const table: [string, Partial<AttemptFacts>, AttemptDecision][] = [
    // The handler returned.
    ['a returned value is written first', {}, { kind: 'write' }],
    [
      'a stored result completes (ctx.write / fencedTransaction landed)',
      { stored: true },
      { kind: 'complete', result: 'stored' },
    ],
    [
      'stored wins over a returned value (never written twice)',
      { stored: true, returnedValue: true },
      { kind: 'complete', result: 'stored' },
    ],
    [
      'nothing returned, nothing stored: a side-effect-only task completes',
      { returnedValue: false },
      { kind: 'complete', result: 'none' },
    ],
    [
      'nothing returned after the coordinator took the lease: lost',
      { returnedValue: false, aborted: 'lost' },
      { kind: 'lost', release: false },
    ],
    [
      'nothing returned within the grace of a close: completes',
      { returnedValue: false, aborted: 'shutdown', stopping: true },
      { kind: 'complete', result: 'none' },
    ],
    [
      'nothing returned past our own deadline only: completes (the coordinator decides)',
      { returnedValue: false, aborted: 'local-deadline' },
      { kind: 'complete', result: 'none' },
    ],
    [
      'a value returned after the lease was lost: still written (the write refuses it)',
      { aborted: 'lost' },
      { kind: 'write' },
    ],
  ];
  const thrown: [string, Partial<AttemptFacts>, AttemptDecision][] = [
    ["the handler's own error: reported", {}, { kind: 'fail' }],
    ['a stored result then an error: reported (the retry replays)', { stored: true }, { kind: 'fail' }],
    [
      'RESULT_CONFLICT: an earlier holder stored the result, the task is done',
      { error: 'result-conflict' },
      { kind: 'complete', result: 'earlier' },
    ],
    [
      'RESULT_CONFLICT wins over an abort',
      { error: 'result-conflict', aborted: 'lost' },
      { kind: 'complete', result: 'earlier' },
    ],
    [
      'closing past the grace: the lease is given back',
      { aborted: 'shutdown', stopping: true, error: 'lease-lost' },
      { kind: 'release', reason: 'shutdown' },
    ],
    [
      'a handler error after the shutdown abort: given back too',
      { aborted: 'shutdown', stopping: true },
      { kind: 'release', reason: 'shutdown' },
    ],
    [
      'STALE_TOKEN at the sink: lost, nothing reported',
      { error: 'write-refused', aborted: 'lost' },
      { kind: 'lost', release: false },
    ],
    ['revoked by the coordinator: lost', { error: 'lease-lost', aborted: 'lost' }, { kind: 'lost', release: false }],
    ['any error once the signal fired: lost', { aborted: 'lost' }, { kind: 'lost', release: false }],
    [
      'only our own deadline passed: lost, and released',
      { error: 'lease-lost', aborted: 'local-deadline' },
      { kind: 'lost', release: true },
    ],
    [
      'the write found our deadline passed (no abort yet): released',
      { error: 'lease-lost', errorIsLocalDeadline: true },
      { kind: 'lost', release: true },
    ],
    ['a LeaseLostError of another cause: not released', { error: 'lease-lost' }, { kind: 'lost', release: false }],
  ];
  it.each(table)('returned: %s', (_name, facts, decision) => {
    expect(decideAttemptEnd({ ...returned, ...facts })).toEqual(decision);
  });
  it.each(thrown)('threw: %s', (_name, facts, decision) => {
    expect(decideAttemptEnd({ ...threw, ...facts })).toEqual(decision);
  });
});
