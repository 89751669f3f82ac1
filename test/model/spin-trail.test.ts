/** The spin trail converter (scripts/model/spin-trail.ts) on a replay shaped like `spin -t -p`. */
import { describe, expect, it } from 'vitest';
import { parseTrail, propertyOnLine, renderMarkdown, renderMermaid } from '../../scripts/model/spin-trail.js';

const source = [
  'line 1',
  '  assert(o_crev[r] == 0);  /* two-live-owners: a new owner interval begins */',
  '  assert(T <= fence[r]);   /* unissued-token-accepted (a token above the fence) */',
].join('\n');

const replay = [
  'Starting Worker with pid 8',
  '  1:\tproc  0 (:init::1) leasehold.pml:913 (state 1)\t[(run Env())]',
  '                              @@ W0 -> C0 : hello',
  ' 10:\tproc  8 (Worker:1) leasehold.pml:786 (state 20)\t[printf(...)]',
  '          @@ note C0 : its index offers task 0 (mod 1)',
  '              @@ C0 -> etcd : grantOwners task 0 for s0 -> owners/0 put, token 3; again #2',
  ' 12:\tproc  6 (Acquirer:1) leasehold.pml:585 (state 62)\t[assert(...)]',
  'spin: leasehold.pml:3, Error: assertion violated',
  'spin: text of failed assertion: assert((250<=fence[(0%2)]))',
  '#processes: 10',
].join('\n');

describe('spin trail converter', () => {
  it('reads the events, the transition count and the violated property', () => {
    const trail = parseTrail(replay, source);
    expect(trail.transitions).toBe(12);
    expect(trail.events).toEqual([
      { from: 'W0', to: 'C0', text: 'hello' },
      { from: 'C0', to: undefined, text: 'its index offers task 0 (mod 1)' },
      { from: 'C0', to: 'etcd', text: 'grantOwners task 0 for s0 -> owners/0 put, token 3; again #2' },
    ]);
    expect(trail.violation).toEqual({
      property: 'unissued-token-accepted',
      assertion: 'assert((250<=fence[(0%2)]))',
      line: 3,
    });
  });

  it('renders a mermaid sequenceDiagram with mermaid-safe text', () => {
    const diagram = renderMermaid(parseTrail(replay, source));
    expect(diagram.split('\n')).toEqual([
      'sequenceDiagram',
      '  participant W0',
      '  participant C0',
      '  participant etcd',
      '  W0->>C0: hello',
      '  Note over C0: its index offers task 0 (mod 1)',
      '  C0->>etcd: grantOwners task 0 for s0 -> owners/0 put, token 3, again no. 2',
      '  Note over W0,etcd: violated: unissued-token-accepted',
    ]);
  });

  it('renders the steps as markdown, and says when nothing was violated', () => {
    const md = renderMarkdown(parseTrail(replay, source), 'BAD_ACCEPT_GE');
    expect(md).toContain('### BAD_ACCEPT_GE: violates `unissued-token-accepted` (12 transitions, 3 steps)');
    expect(md).toContain('1. W0 → C0: hello');
    expect(md).toContain('2. (C0) its index offers task 0 (mod 1)');
    expect(md).toContain('```mermaid');
    expect(renderMarkdown(parseTrail('', source), 'x')).toContain('no assertion violated');
  });

  it('marks where a liveness counterexample starts to cycle', () => {
    const cycling = [
      '   @@ W0 -> C0 : hello',
      '      <<<<<START OF CYCLE>>>>>',
      '   @@ note C0 : the watch shows s0 adopted by a peer',
    ].join('\n');
    const trail = parseTrail(cycling, source);
    expect(trail.cycleStart).toBe(1);
    expect(trail.violation).toBeUndefined();
    const md = renderMarkdown(trail, 'liveness');
    expect(md).toContain('an acceptance cycle (a liveness claim does not hold)');
    expect(md).toContain('2. **[the cycle starts]** (C0) the watch shows s0 adopted by a peer');
    expect(renderMermaid(trail)).toContain('  Note over W0: the cycle starts\n  Note over C0: the watch shows');
  });

  it('names a property by the first kebab-case word of the comment on the line', () => {
    expect(propertyOnLine('assert(x); /* two-live-owners: two intervals overlap */')).toBe('two-live-owners');
    expect(propertyOnLine('assert(x);')).toBeUndefined();
  });
});
