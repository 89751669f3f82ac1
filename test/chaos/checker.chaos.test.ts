/**
 * The checker is pure: a good history has no violation, and each bad history below is reported
 * under its name. This is the proof that a clean chaos run means something.
 */
import { describe, expect, it } from 'vitest';
import { canonical, checkHistory, logFinding, ViolationName } from './checker.js';
import type { FaultKind, History, WorkerEvent } from './history.js';
import { goodHistory, mutate, names, T0, type MutableHistory } from './history-fixture.js';

describe('chaos checker', () => {
  it('finds nothing wrong with the design note story', () => {
    expect(checkHistory(goodHistory())).toEqual([]);
  });

  it('stale-write-accepted: the sink accepts a token below the fence (a sink without the fence check)', () => {
    const h = mutate((h) => {
      h.decisions = h.decisions.map((d) => (d.seq === 4 ? { ...d, outcome: 'written' } : d));
    });
    const v = checkHistory(h);
    expect(names(v)).toContain(ViolationName.STALE_WRITE_ACCEPTED);
    expect(names(v)).toContain(ViolationName.ACCEPTED_TOKEN_REGRESSED);
    expect(names(v)).toContain(ViolationName.RESULT_STORED_TWICE);
    expect(v.find((x) => x.name === ViolationName.STALE_WRITE_ACCEPTED)).toMatchObject({ resource: 'r1', token: '10' });
  });

  it('unissued-token-accepted: a write above the fence accepted', () => {
    const h = mutate((h) => {
      h.decisions = [
        ...h.decisions,
        { ...h.decisions[2]!, seq: 5, token: '99', fenceBefore: '20', outcome: 'replayed' },
      ];
    });
    expect(names(checkHistory(h))).toEqual([ViolationName.UNISSUED_TOKEN_ACCEPTED]);
  });

  it('fence-regressed: the fence forgotten (e.g. lost on a sink restart)', () => {
    const h = mutate((h) => {
      h.decisions = h.decisions.map((d) => (d.seq === 4 ? { ...d, fenceBefore: '0', outcome: 'FENCE_CONFLICT' } : d));
    });
    expect(names(checkHistory(h))).toContain(ViolationName.FENCE_REGRESSED);
  });

  it('fence-regressed: an advance accepted below the fence', () => {
    const h = mutate((h) => {
      h.decisions = [
        ...h.decisions,
        {
          seq: 5,
          kind: 'advance',
          resource: 'r1',
          token: '15',
          fenceBefore: '20',
          outcome: 'advanced',
          atMs: T0 + 4_500,
        },
      ];
    });
    expect(names(checkHistory(h))).toEqual([ViolationName.FENCE_REGRESSED]);
  });

  it('wrong-refusal: STALE_TOKEN for a token equal to the fence', () => {
    const h = mutate((h) => {
      h.decisions = [...h.decisions, { ...h.decisions[3]!, seq: 5, token: '20', outcome: 'STALE_TOKEN' }];
    });
    expect(names(checkHistory(h))).toEqual([ViolationName.WRONG_REFUSAL]);
  });

  it('stale-write-acknowledged: from worker logs alone, a write sent after a newer grant was told "written"', () => {
    const h = mutate((h) => {
      h.events = h.events.map((e) => (e.kind === 'write' && e.process === 'w1' ? { ...e, outcome: 'written' } : e));
      h.events.push({
        kind: 'write-attempt',
        process: 'w1',
        workerId: 'w1',
        taskId: 't1',
        resource: 'r1',
        token: '10',
        resultId: 'task:t1',
        atMs: T0 + 3_940,
      });
      // (the sink log, if it lies, would not show it)
    });
    const v = checkHistory(h).filter((x) => x.name === ViolationName.STALE_WRITE_ACKNOWLEDGED);
    expect(v).toHaveLength(1);
    expect(v[0]).toMatchObject({ process: 'w1', token: '10', resource: 'r1' });
  });

  it('a write that timed out ("unknown") is neither acknowledged nor an error when it landed', () => {
    const h = mutate((h) => {
      h.events = h.events.map((e) => (e.kind === 'write' && e.process === 'w2' ? { ...e, outcome: 'unknown' } : e));
    });
    expect(checkHistory(h)).toEqual([]);
    const lost = mutate((h) => {
      h.events = h.events.map((e) => (e.kind === 'write' && e.process === 'w2' ? { ...e, outcome: 'unknown' } : e));
      h.decisions = h.decisions.filter((d) => d.seq !== 3);
      h.finalResults = [];
      h.finalTasks = [{ taskId: 't1', state: 'pending' }];
    });
    // Not acknowledged, so not "lost"; the task simply did not complete.
    expect(names(checkHistory(lost))).toEqual([ViolationName.TASK_NOT_COMPLETED]);
  });

  it('two-live-owners: overlapping owner keys in etcd, or one token granted to two workers', () => {
    const overlap = mutate((h) => {
      h.owners = h.owners!.map((o) => (o.token === '10' ? { ...o, endRevision: '25' } : o));
    });
    expect(names(checkHistory(overlap))).toEqual([ViolationName.TWO_LIVE_OWNERS]);
    const never = mutate((h) => {
      h.owners = h.owners!.map((o) => (o.token === '10' ? { ...o, endRevision: undefined } : o));
    });
    expect(names(checkHistory(never))).toEqual([ViolationName.TWO_LIVE_OWNERS]);
    const twice = mutate((h) => {
      h.events.push({ ...(h.events[2] as WorkerEvent), process: 'w3', workerId: 'w3' });
    });
    expect(names(checkHistory(twice))).toEqual([ViolationName.TWO_LIVE_OWNERS]);
  });

  it('grant-not-in-etcd: a grant no owner key was created for', () => {
    const h = mutate((h) => {
      h.owners = h.owners!.filter((o) => o.token !== '20');
    });
    expect(names(checkHistory(h))).toEqual([ViolationName.GRANT_NOT_IN_ETCD]);
    // Without etcd's history the owner checks that need it are skipped, not failed.
    expect(checkHistory(mutate((h) => (h.owners = undefined)))).toEqual([]);
  });

  it('grant-before-fence: the worker saw the grant before the advance, or its write hit FENCE_CONFLICT', () => {
    const late = mutate((h) => {
      h.decisions = h.decisions.map((d) => (d.seq === 2 ? { ...d, atMs: T0 + 3_050 } : d));
    });
    const v = checkHistory(late);
    expect(names(v)).toEqual([ViolationName.GRANT_BEFORE_FENCE]);
    expect(v[0]).toMatchObject({ process: 'w2', token: '20' });
    const conflict = mutate((h) => {
      h.decisions.push({ ...h.decisions[2]!, seq: 5, fenceBefore: '10', outcome: 'FENCE_CONFLICT' });
    });
    expect(names(checkHistory(conflict))).toContain(ViolationName.GRANT_BEFORE_FENCE);
    const never = mutate((h) => {
      h.decisions = h.decisions.filter((d) => d.seq !== 1);
    });
    expect(names(checkHistory(never))).toEqual([ViolationName.GRANT_BEFORE_FENCE]);
    // A pruned decision log cannot prove a missing advance.
    expect(checkHistory(mutate((h) => ((h.decisionsComplete = false), (h.decisions = h.decisions.slice(1)))))).toEqual(
      [],
    );
  });

  it('acknowledged-write-lost: "written" was acknowledged but the sink lost it', () => {
    const h = mutate((h) => {
      h.finalResults = [];
    });
    const v = checkHistory(h);
    expect(names(v)).toEqual([ViolationName.ACKNOWLEDGED_WRITE_LOST, ViolationName.COMPLETED_WITHOUT_RESULT].sort());
    const notInLog = mutate((h) => {
      h.decisions = h.decisions.filter((d) => d.seq !== 3);
    });
    expect(names(checkHistory(notInLog))).toEqual([ViolationName.ACKNOWLEDGED_WRITE_LOST]);
  });

  it('result-stored-twice and result-mismatch: a second "written", a changed result, a wrong deterministic value', () => {
    const twice = mutate((h) => {
      h.decisions.push({ ...h.decisions[2]!, seq: 5, atMs: T0 + 3_300 });
    });
    expect(names(checkHistory(twice))).toEqual([ViolationName.RESULT_STORED_TWICE]);
    const changed = mutate((h) => {
      h.finalResults = [{ ...h.finalResults[0]!, token: '10' }];
    });
    expect(names(checkHistory(changed))).toContain(ViolationName.RESULT_STORED_TWICE);
    const wrong = mutate((h) => {
      h.finalResults = [{ ...h.finalResults[0]!, payload: { v: 2 } }];
    });
    expect(names(checkHistory(wrong))).toEqual([ViolationName.RESULT_MISMATCH]);
    // Non-deterministic tasks may store any value (once).
    expect(
      checkHistory(
        mutate((h) => {
          h.tasks = [{ ...h.tasks[0]!, deterministic: false }];
          h.finalResults = [{ ...h.finalResults[0]!, payload: { nonce: 'x' } }];
        }),
      ),
    ).toEqual([]);
  });

  it('task-not-completed: pending at the end, or completed after the bound', () => {
    const pending = mutate((h) => {
      h.finalTasks = [{ taskId: 't1', state: 'pending' }];
    });
    expect(names(checkHistory(pending))).toEqual([ViolationName.TASK_NOT_COMPLETED]);
    const slow = mutate((h) => {
      h.finalTasks = [{ ...h.finalTasks[0]!, completedSeenAtMs: T0 + 9_000 }];
    });
    expect(names(checkHistory(slow))).toEqual([ViolationName.TASK_NOT_COMPLETED]);
  });

  it('process-logged-error and process-crashed', () => {
    const h = mutate((h) => {
      h.logs = [
        {
          process: 'coordinator-0',
          text: '{"level":50,"time":5,"msg":"watch handler failed","err":{"message":"boom"}}\n',
        },
        { process: 'worker-1', text: 'Error: something\nUnhandledPromiseRejection: x\n' },
        { process: 'sink', text: '{"level":40,"msg":"slow"}\n' },
      ];
      h.exits = [{ process: 'sink', atMs: T0, code: 1, signal: null, expected: false }];
    });
    const v = checkHistory(h);
    expect(v.filter((x) => x.name === ViolationName.PROCESS_LOGGED_ERROR).map((x) => x.process)).toEqual([
      'coordinator-0',
      'worker-1',
    ]);
    expect(names(v)).toContain(ViolationName.PROCESS_CRASHED);
    expect(checkHistory(h, { ignoreLog: [/watch handler/, /Unhandled/] }).map((x) => x.name)).toEqual([
      ViolationName.PROCESS_CRASHED,
    ]);
  });

  it('process-logged-error: a sink reporting a store fault the runner injected is excused, only then', () => {
    const line = (at: number) =>
      `{"level":50,"time":${T0 + at},"msg":"batch commit failed","err":{"message":"postgres failed"}}`;
    const h = (faultTarget: string) =>
      mutate((h) => {
        h.logs = [{ process: 'sink-1', text: `${line(1_000)}\n${line(30_000)}\n` }];
        h.faults.push({ id: 9, kind: 'kill', targets: [faultTarget], startMs: T0 + 500, endMs: T0 + 2_000 });
      });
    // During the PostgreSQL crash: excused; 28 s after it healed: not.
    expect(checkHistory(h('postgres')).map((v) => v.atMs)).toEqual([T0 + 30_000]);
    // A crash of something else does not excuse it.
    expect(checkHistory(h('worker-1')).map((v) => v.atMs)).toEqual([T0 + 1_000, T0 + 30_000]);
  });

  it('process-logged-error: a coordinator reporting etcd unreachable is excused during an etcd or own-link fault only', () => {
    const line = (at: number) =>
      `{"level":50,"time":${T0 + at},"msg":"etcd unreachable: handing sessions to peers and refusing hellos until it answers"}`;
    const h = (kind: FaultKind, target: string) =>
      mutate((h) => {
        h.logs = [{ process: 'coordinator-1', text: `${line(1_500)}\n${line(30_000)}\n` }];
        h.faults.push({ id: 9, kind, targets: [target], startMs: T0 + 500, endMs: T0 + 2_000 });
      });
    expect(checkHistory(h('kill', 'etcd-m0')).map((v) => v.atMs)).toEqual([T0 + 30_000]);
    expect(checkHistory(h('blackhole', 'coordinator-1->etcd-m2')).map((v) => v.atMs)).toEqual([T0 + 30_000]);
    expect(checkHistory(h('pause', 'sink')).map((v) => v.atMs)).toEqual([T0 + 1_500, T0 + 30_000]);
    expect(checkHistory(h('clock-jump', 'coordinator-1')).map((v) => v.atMs)).toEqual([T0 + 1_500, T0 + 30_000]);
    // Under a faked clock 60 s behind, its log times are host time - 60 s (and - a jump during one).
    const skewed = mutate((h) => {
      h.logs = [{ process: 'coordinator-1', text: `${line(1_500 - 60_000)}\n${line(10_000 - 60_000 + 120_000)}\n` }];
      h.clockOffsetsMs = { 'coordinator-1': -60_000 };
      h.faults.push({ id: 9, kind: 'kill', targets: ['etcd-m0'], startMs: T0 + 500, endMs: T0 + 2_000 });
      h.faults.push({
        id: 10,
        kind: 'partition',
        targets: ['coordinator-1->etcd-m0'],
        startMs: T0 + 9_000,
        endMs: T0 + 11_000,
      });
      h.faults.push({
        id: 11,
        kind: 'clock-jump',
        targets: ['coordinator-1'],
        startMs: T0 + 8_000,
        endMs: T0 + 12_000,
        detail: 'clock of coordinator-1 +120 s',
      });
    });
    expect(checkHistory(skewed)).toEqual([]);
    expect(checkHistory({ ...skewed, clockOffsetsMs: undefined }).map((v) => v.name)).toEqual([
      ViolationName.PROCESS_LOGGED_ERROR,
      ViolationName.PROCESS_LOGGED_ERROR,
    ]);
  });

  it('caps the list per name on request and says how many were left out', () => {
    const h = mutate((h) => {
      h.logs = [{ process: 'x', text: Array.from({ length: 10 }, () => '{"level":60,"msg":"f"}').join('\n') }];
    });
    const v = checkHistory(h, { maxPerName: 3 });
    expect(v).toHaveLength(4);
    expect(v[3]!.message).toMatch(/7 more/);
  });

  it('helpers: canonical JSON and log findings', () => {
    expect(canonical({ b: 1, a: [1, { d: 2, c: 3 }] })).toBe('{"a":[1,{"c":3,"d":2}],"b":1}');
    expect(logFinding('{"level":30,"msg":"ok"}')).toBeUndefined();
    expect(logFinding('{"level":60,"msg":"bye"}')).toMatch(/level 60/);
    expect(logFinding('node: uncaught exception')).toBeDefined();
  });
});

/** The story with lease timing: w1's owner key ends with its session 2.1 s after w1 stopped itself; w2's with its completion. */
function timedHistory(): History {
  return mutate((h) => {
    h.lease = { sessionTtlMs: 2_000, heartbeatIntervalMs: 500, marginMs: 1_000 };
    h.owners = [
      { ...h.owners![0]!, startSeenMs: T0 + 100, endSeenMs: T0 + 2_300, endedWithSession: true },
      { ...h.owners![1]!, startSeenMs: T0 + 3_000, endSeenMs: T0 + 3_130, endedWithSession: false },
    ];
  });
}

function retime(fn: (h: MutableHistory) => void): History {
  const h = structuredClone(timedHistory()) as MutableHistory;
  fn(h);
  return h;
}

/** Two register tasks on reg/0 incrementing 0 → 1 → 2 under tokens 30 and 40. */
function registerHistory(): History {
  return mutate((h) => {
    const task = (id: string) => ({
      taskId: id,
      resource: 'reg/0',
      deterministic: false,
      register: true,
      submittedAtMs: T0,
    });
    h.tasks.push(task('a'), task('b'));
    const at = (ms: number) => T0 + ms;
    h.decisions.push(
      { seq: 5, kind: 'advance', resource: 'reg/0', token: '30', fenceBefore: '0', outcome: 'advanced', atMs: at(5_000) },
      { seq: 6, kind: 'write', resource: 'reg/0', token: '30', fenceBefore: '30', outcome: 'written', resultId: 'task:a', workerId: 'w1', atMs: at(5_100) },
      { seq: 7, kind: 'advance', resource: 'reg/0', token: '40', fenceBefore: '30', outcome: 'advanced', atMs: at(5_200) },
      { seq: 8, kind: 'write', resource: 'reg/0', token: '40', fenceBefore: '40', outcome: 'written', resultId: 'task:b', workerId: 'w2', atMs: at(5_300) },
    ); // prettier-ignore
    const result = (id: string, token: string, prev: number) => ({
      resource: 'reg/0',
      resultId: `task:${id}`,
      token,
      workerId: 'w1',
      payload: { register: true, taskId: id, prev, value: prev + 1 },
    });
    h.finalResults.push(result('a', '30', 0), result('b', '40', 1));
    h.finalTasks.push(
      { taskId: 'a', state: 'completed', result: { resultId: 'task:a', token: '30' } },
      { taskId: 'b', state: 'completed', result: { resultId: 'task:b', token: '40' } },
    );
  });
}

/** coordinator-0 sampled every 5 s for 20 min: flat unless `grow` says otherwise. */
function sampled(grow: (i: number) => { rssKb?: number; fds?: number } = () => ({})): History {
  return mutate((h) => {
    h.resources = Array.from({ length: 240 }, (_, i) => ({
      process: 'coordinator-0',
      pid: 100,
      atMs: T0 + i * 5_000,
      rssKb: 100 * 1024,
      fds: 40,
      ...grow(i),
    }));
  });
}

describe('chaos checker: lease bounds, lost updates, resources', () => {
  it('finds nothing wrong with the timed story, the register history and flat resources', () => {
    expect(checkHistory(timedHistory())).toEqual([]);
    expect(checkHistory(registerHistory())).toEqual([]);
    expect(checkHistory(sampled())).toEqual([]);
  });

  it('lease-outlived-bound: a silent holder still owned the resource 3.4 s after it stopped (TTL 2 s + margin 1 s)', () => {
    const late = retime((h) => {
      h.owners = h.owners!.map((o, j) => (j === 0 ? { ...o, endSeenMs: T0 + 3_600 } : o));
    });
    const v = checkHistory(late);
    expect(names(v)).toEqual([ViolationName.LEASE_OUTLIVED_BOUND]);
    expect(v[0]).toMatchObject({ process: 'w1', resource: 'r1', token: '10' });
  });

  it('lease-cut-short: a session ended 0.3 s into the silence, or although its holder was never silent', () => {
    const early = retime((h) => {
      h.owners = h.owners!.map((o, j) => (j === 0 ? { ...o, endSeenMs: T0 + 500 } : o));
    });
    expect(names(checkHistory(early))).toEqual([ViolationName.LEASE_CUT_SHORT]);
    const healthy = retime((h) => {
      h.owners = h.owners!.map((o, j) => (j === 1 ? { ...o, endedWithSession: true } : o));
    });
    const v = checkHistory(healthy);
    expect(names(v)).toEqual([ViolationName.LEASE_CUT_SHORT]);
    expect(v[0]!.message).toMatch(/never silent/);
  });

  it('lease bounds: another fault on the lease path excludes the ownership; a clock jump does not', () => {
    const late = (kind: 'pause' | 'clock-jump') =>
      retime((h) => {
        h.owners = h.owners!.map((o, j) => (j === 0 ? { ...o, endSeenMs: T0 + 3_600 } : o));
        h.faults.push({ id: 9, kind, targets: ['coordinator-0'], startMs: T0 + 1_000, endMs: T0 + 2_000 });
      });
    expect(checkHistory(late('pause'))).toEqual([]);
    expect(names(checkHistory(late('clock-jump')))).toEqual([ViolationName.LEASE_OUTLIVED_BOUND]);
  });

  it('lost-update: a write computed from a stale read (two increments from the same value)', () => {
    const stale = mutate((h) => {
      Object.assign(h, structuredClone(registerHistory()));
      h.finalResults = h.finalResults.map((r) =>
        r.resultId === 'task:b' ? { ...r, payload: { register: true, taskId: 'b', prev: 0, value: 1 } } : r,
      );
    });
    const v = checkHistory(stale);
    expect(names(v)).toEqual([ViolationName.LOST_UPDATE]);
    expect(v[0]).toMatchObject({ resource: 'reg/0', token: '40' });
    // The sabotage shape: a write read before b's increment lands after it (a second token-40 write here).
    const late = mutate((h) => {
      Object.assign(h, structuredClone(registerHistory()));
      h.tasks.push({ taskId: 'c', resource: 'reg/0', deterministic: false, register: true, submittedAtMs: T0 });
      h.decisions.push({ seq: 9, kind: 'write', resource: 'reg/0', token: '40', fenceBefore: '40', outcome: 'written', resultId: 'task:c', workerId: 'w3', atMs: T0 + 5_400 }); // prettier-ignore
      h.finalResults.push({
        resource: 'reg/0',
        resultId: 'task:c',
        token: '40',
        workerId: 'w3',
        payload: { register: true, prev: 1, value: 2 },
      });
      h.finalTasks.push({ taskId: 'c', state: 'completed', result: { resultId: 'task:c', token: '40' } });
    });
    expect(names(checkHistory(late))).toEqual([ViolationName.LOST_UPDATE]);
  });

  it('resource-rss-growth, resource-fd-growth, resource-cap-exceeded', () => {
    const rss = sampled((i) => ({ rssKb: (100 + i) * 1024 }));
    expect(names(checkHistory(rss))).toEqual([ViolationName.RESOURCE_RSS_GROWTH]);
    const fds = sampled((i) => ({ fds: 40 + Math.floor(i / 2) }));
    expect(names(checkHistory(fds))).toEqual([ViolationName.RESOURCE_FD_GROWTH]);
    const cap = sampled((i) => (i === 7 ? { rssKb: 2 * 1024 * 1024 } : {}));
    expect(names(checkHistory(cap))).toEqual([ViolationName.RESOURCE_CAP_EXCEEDED]);
    // etcd grows with its stored history by design: only the caps apply to it.
    const etcd = mutate((h) => {
      h.resources = sampled((i) => ({ rssKb: (100 + i) * 1024 })).resources!.map((s) => ({ ...s, process: 'etcd-m0' }));
    });
    expect(checkHistory(etcd)).toEqual([]);
  });
});
