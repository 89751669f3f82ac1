/**
 * Named run profiles (`pnpm chaos --profile NAME`): defaults for the runner's options; explicit
 * flags override them. Profiles that need root say what they fall back to without it.
 */
import type { ChaosOptions } from './runner.js';

export interface Profile {
  readonly name: string;
  readonly description: string;
  readonly options: Partial<ChaosOptions>;
}

/** Never killed in the soak (paused and cut off, though), so their resource series span the run. */
export const SOAK_PROTECTED = ['etcd-m0', 'sink', 'coordinator-0', 'worker-0'] as const;

export const PROFILES: readonly Profile[] = [
  {
    name: 'short',
    description: 'The CI profile: random mix on loopback proxies, 50 s of faults, 40 tasks.',
    options: { durationMs: 50_000, tasks: 40, resources: 10, pauseRate: 0.2 },
  },
  {
    name: 'netns-short',
    description:
      'The CI netns profile (root): 3-member etcd, every process in its own namespace, nftables faults and partitions, coordinator clocks jumping; 40 s of faults.',
    options: {
      network: 'netns',
      etcdMembers: 3,
      clock: true,
      durationMs: 40_000,
      tasks: 30,
      resources: 8,
      pauseRate: 0.2,
      intervalMs: 4_000,
    },
  },
  {
    name: 'pg-short',
    description:
      'The CI PostgreSQL profile: two sink replicas on one PostgreSQL (coordinators and workers split across them), the register workload, 35 s of faults.',
    options: {
      sinkStore: 'postgres',
      sinks: 2,
      scenario: 'register',
      durationMs: 35_000,
      tasks: 30,
      resources: 4,
      pauseRate: 0.3,
    },
  },
  {
    name: 'netns-clock',
    description: 'netns + clock faults on a 3-member etcd, 15 min by default (the long run of record).',
    options: { network: 'netns', etcdMembers: 3, clock: true, durationMs: 15 * 60_000 },
  },
  {
    name: 'soak',
    description:
      'Every fault kind (process, userspace link, netns link, clock) on a 3-member etcd for 1 h by default, /proc sampled every 5 s; RSS and fd growth judged. Without root: proxies only (noted in the summary).',
    options: {
      network: 'mixed',
      etcdMembers: 3,
      clock: true,
      durationMs: 3_600_000,
      resourceSampleMs: 5_000,
      protect: [...SOAK_PROTECTED],
      unavailable: 'fallback',
    },
  },
];

export function findProfile(name: string): Profile {
  const p = PROFILES.find((x) => x.name === name);
  if (p === undefined) throw new Error(`unknown profile ${name}; known: ${PROFILES.map((x) => x.name).join(', ')}`);
  return p;
}
