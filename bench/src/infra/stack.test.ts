import { describe, expect, it } from 'vitest';
import { benchCoordinatorEnv, profileArgs } from './stack.js';

describe('profileArgs', () => {
  it('adds the options of LEASEHOLD_BENCH_NODE_ARGS_<WHAT> to that kind of process only, with its name', () => {
    const env = { LEASEHOLD_BENCH_NODE_ARGS_COORDINATOR: ' --log-deopt  --logfile=/tmp/{name}.log ' };
    expect(profileArgs('coordinator', 'cycle-0', env)).toEqual(['--log-deopt', '--logfile=/tmp/cycle-0.log']);
    expect(profileArgs('sink', 'sink', env)).toEqual([]);
  });

  it('puts them before --cpu-prof when the process is profiled too', () => {
    const args = profileArgs('worker', 'w-1', {
      LEASEHOLD_BENCH_NODE_ARGS_WORKER: '--max-semi-space-size=64',
      LEASEHOLD_BENCH_PROFILE: 'sink,worker',
    });
    expect(args[0]).toBe('--max-semi-space-size=64');
    expect(args.slice(1, 4)).toEqual(['--cpu-prof', '--cpu-prof-dir', expect.stringContaining('bench-profiles')]);
    expect(args.at(-1)).toMatch(/^w-1-worker-\d+\.cpuprofile$/);
  });
});

describe('benchCoordinatorEnv', () => {
  it('reads NAME=VALUE pairs (a value may hold "="), and refuses anything else', () => {
    expect(benchCoordinatorEnv({})).toEqual({});
    expect(benchCoordinatorEnv({ LEASEHOLD_BENCH_COORDINATOR_ENV: ' A=1  B=x=y ' })).toEqual({ A: '1', B: 'x=y' });
    expect(() => benchCoordinatorEnv({ LEASEHOLD_BENCH_COORDINATOR_ENV: 'A=1 oops' })).toThrow(/not NAME=VALUE/);
  });
});
