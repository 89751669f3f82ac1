/** The HTML report shows what ran, the new fault kinds and, when /proc was sampled, the resources. */
import { describe, expect, it } from 'vitest';
import { checkResources } from './checker-resources.js';
import type { History } from './history.js';
import { renderTimeline } from './report-html.js';

const T0 = 1_700_000_000_000;

function history(): History {
  return {
    startedAtMs: T0,
    endedAtMs: T0 + 1_200_000,
    healedAtMs: T0 + 1_100_000,
    completionBoundMs: 45_000,
    tasks: [],
    events: [],
    faults: [
      { id: 1, kind: 'nft-drop', targets: ['worker-0->sink'], startMs: T0 + 1_000, endMs: T0 + 3_000 },
      {
        id: 2,
        kind: 'partition',
        targets: ['coordinator-0->etcd-m1', 'etcd-m0->etcd-m1'],
        startMs: T0 + 5_000,
        endMs: T0 + 8_000,
      },
      {
        id: 3,
        kind: 'clock-jump',
        targets: ['coordinator-1'],
        startMs: T0 + 9_000,
        endMs: T0 + 11_000,
        detail: 'clock of coordinator-1 -120 s',
      },
    ],
    decisions: [],
    decisionsComplete: true,
    owners: [],
    finalTasks: [],
    finalResults: [],
    logs: [],
    exits: [],
    resources: Array.from({ length: 200 }, (_, i) => ({
      process: 'coordinator-0',
      pid: 42,
      atMs: T0 + i * 6_000,
      rssKb: 90_000 + i,
      fds: 30,
    })),
  };
}

describe('chaos report', () => {
  it('renders the environment, fault counts by kind, and RSS / fd sparklines per process', () => {
    const h = history();
    const html = renderTimeline(h, [], {
      ok: true,
      scenario: 'random-mix',
      seed: 1,
      sabotage: null,
      violationCounts: {},
      tasks: { submitted: 0, completed: 0 },
      durationsMs: { total: 1_200_000 },
      environment: {
        network: 'mixed',
        sinkStore: 'sqlite',
        sinks: 1,
        clock: true,
        notes: ['no tc netem in this kernel'],
      },
      faults: { 'nft-drop': 1, partition: 1, 'clock-jump': 1 },
      staleWritesRefused: 3,
      leaseBounds: {
        measured: 9,
        judged: 7,
        silentHolders: 2,
        sessionEnds: 2,
        maxSilenceToEndMs: 2100,
        minSilenceToEndMs: 1700,
      },
      register: null,
      resources: checkResources(h).stats,
    });
    expect(html).toContain('network <b>mixed</b>');
    expect(html).toContain('coordinator clocks <b>faked</b>');
    expect(html).toContain('leases: 7/9 judged');
    expect(html).toContain('note: no tc netem in this kernel');
    for (const k of ['nft-drop × 1', 'partition × 1', 'clock-jump × 1']) expect(html).toContain(k);
    expect(html).toContain('Resources (/proc, every process)');
    expect(html).toMatch(/<td>coordinator-0<\/td><td>42<\/td><td>200<\/td>/);
    expect(html).toContain('<polyline');
    expect(html).toContain('clock of coordinator-1 -120 s');
  });
});
