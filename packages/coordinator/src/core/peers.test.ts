/**
 * Which coordinator each resource is assigned to (core/peers.ts): the members are the
 * coordinators serving at least one session, a resource goes to one of them by rendezvous
 * hashing, and a member leaving moves only its own resources.
 */
import { describe, expect, it } from 'vitest';
import { CoordinatorPeers, rendezvousWeight } from './peers.js';

const resources = Array.from({ length: 3_000 }, (_, i) => `acct/${i}`);

function peersOf(...sessions: [string, string][]): CoordinatorPeers {
  const peers = new CoordinatorPeers();
  peers.reset(sessions);
  return peers;
}

describe('CoordinatorPeers', () => {
  it('members are the coordinators serving a session, sorted, each once', () => {
    const peers = peersOf(['s1', 'c2'], ['s2', 'c1'], ['s3', 'c2']);
    expect(peers.members).toEqual(['c1', 'c2']);
    peers.apply('s2', undefined); // c1's only session ended
    expect(peers.members).toEqual(['c2']);
    peers.apply('s3', 'c3'); // adopted by c3
    expect(peers.members).toEqual(['c2', 'c3']);
    peers.apply('s1', undefined);
    expect(peers.members).toEqual(['c3']);
    peers.reset([]);
    expect(peers.members).toEqual([]);
  });

  it('assigns nothing while fewer than two coordinators serve sessions', () => {
    expect(peersOf().assignee('acct/1')).toBeUndefined();
    expect(peersOf(['s1', 'c1'], ['s2', 'c1']).assignee('acct/1')).toBeUndefined();
  });

  it('assigns every resource to exactly one member, about evenly', () => {
    const peers = peersOf(['s1', 'c1'], ['s2', 'c2'], ['s3', 'c3']);
    const counts = new Map<string, number>();
    for (const r of resources) {
      const a = peers.assignee(r);
      expect(['c1', 'c2', 'c3']).toContain(a);
      counts.set(a ?? '', (counts.get(a ?? '') ?? 0) + 1);
    }
    // 1,000 each expected; rendezvous weights are independent per member.
    for (const n of counts.values()) expect(n).toBeGreaterThan(850);
    for (const n of counts.values()) expect(n).toBeLessThan(1_150);
  });

  it('every coordinator computes the same assignment from the same sessions', () => {
    const a = peersOf(['s1', 'c1'], ['s2', 'c2'], ['s3', 'c3']);
    const b = peersOf(['x9', 'c3'], ['x8', 'c1'], ['x7', 'c2'], ['x6', 'c2']);
    for (const r of resources) expect(b.assignee(r)).toBe(a.assignee(r));
  });

  it('a member leaving moves only the resources it had', () => {
    const peers = peersOf(['s1', 'c1'], ['s2', 'c2'], ['s3', 'c3']);
    const before = new Map(resources.map((r) => [r, peers.assignee(r)]));
    peers.apply('s2', undefined);
    for (const r of resources) {
      if (before.get(r) !== 'c2') expect(peers.assignee(r)).toBe(before.get(r));
      else expect(['c1', 'c3']).toContain(peers.assignee(r));
    }
  });

  it('weights differ by member and by resource, and separate the member from the resource', () => {
    expect(rendezvousWeight('c1', 'r')).not.toBe(rendezvousWeight('c2', 'r'));
    expect(rendezvousWeight('c1', 'r1')).not.toBe(rendezvousWeight('c1', 'r2'));
    expect(rendezvousWeight('c1', 'r')).not.toBe(rendezvousWeight('c', '1r'));
    expect(rendezvousWeight('c1', 'r')).toBe(rendezvousWeight('c1', 'r'));
  });
});
