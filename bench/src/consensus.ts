/**
 * Suite `consensus`: etcd's own `etcdctl check perf --load=xl` (60 s of puts from many clients, up
 * to 15,000 writes/s asked) against a fresh etcd started like every other suite's (one member,
 * temp data dir, fsync on). Its throughput is the ceiling of consensus writes this machine gives:
 * a task cycle needs at least three of them (submit, grant, complete), so cycles/s × 3 can be read
 * against it. etcd's and etcdctl's CPU per write are read from /proc, over the writes counted by
 * etcd's revision before and after.
 */
import { spawn, spawnSync } from 'node:child_process';
import { cpuMs } from './infra/proc.js';
import { startEtcd } from './infra/etcd.js';
import { limitRow, type BenchRow } from './report.js';

export interface ConsensusOptions {
  readonly log: (line: string) => void;
}

/** etcd's current revision (`etcdctl endpoint status`), or undefined when it cannot be read. */
function revisionOf(endpoint: string): bigint | undefined {
  const r = spawnSync('etcdctl', ['--endpoints', endpoint, 'endpoint', 'status', '-w', 'json'], {
    encoding: 'utf8',
    env: { ...process.env, ETCDCTL_API: '3' },
  });
  // Parsed as text: the revision may exceed 2^53 in JSON.parse's doubles (not here, but exactly).
  const m = /"revision":(\d+)/.exec(r.stdout);
  return r.status === 0 && m?.[1] !== undefined ? BigInt(m[1]) : undefined;
}

export async function runConsensusBench(o: ConsensusOptions): Promise<BenchRow[]> {
  if (spawnSync('etcdctl', ['version']).status !== 0) {
    o.log('consensus: etcdctl not found (apt-get install etcd-client): skipped');
    return [];
  }
  const etcd = await startEtcd();
  try {
    const rev0 = revisionOf(etcd.endpoint);
    const etcd0 = cpuMs(etcd.pid) ?? 0;
    const t0 = performance.now();
    const child = spawn('etcdctl', ['--endpoints', etcd.endpoint, 'check', 'perf', '--load=xl', '--auto-compact'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ETCDCTL_API: '3' },
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (out += d.toString('utf8')));
    let clientCpu = 0;
    const timer = setInterval(() => {
      clientCpu = cpuMs(child.pid ?? 0) ?? clientCpu;
    }, 250);
    // 'close', not 'exit': the verdict is the last output, and 'exit' may come before it is read.
    const exit = await new Promise<string>((resolve) =>
      child.once('close', (code, signal) => {
        resolve(signal === null ? `exit code ${String(code)}` : `signal ${signal}`);
      }),
    );
    clearInterval(timer);
    const seconds = (performance.now() - t0) / 1000;
    const etcdCpu = (cpuMs(etcd.pid) ?? 0) - etcd0;
    // "PASS: Throughput is 15000 writes/s" or "FAIL: Throughput too low: 3056 writes/s"
    const throughput = Number(/Throughput[^\d]*(\d+) writes\/s/.exec(out)?.[1] ?? 0);
    const verdicts = out
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => /^(PASS|FAIL)/.test(l))
      .join('; ');
    // Every put of the check moved the revision by one (its closing range delete by one more);
    // without both readings, its reported rate over its 60 s load.
    const rev1 = revisionOf(etcd.endpoint);
    const counted = rev0 !== undefined && rev1 !== undefined && rev1 > rev0;
    const writes = counted ? Number(rev1 - rev0) : throughput * 60;
    o.log(`consensus: ${verdicts}`);
    if (verdicts === '') {
      o.log(`consensus: no verdict from etcdctl (${exit}); its output ended with: ${out.slice(-400)}`);
      return [];
    }
    return [
      {
        ...limitRow({
          name: 'etcd consensus ceiling: etcdctl check perf --load=xl',
          value: throughput,
          unit: 'writes/s',
          digits: 0,
          note:
            `${verdicts}; CPU µs per write (over ${Math.round(seconds)} s, start-up included; ${writes} writes, ` +
            `${counted ? "counted from etcd's revision" : 'estimated as the reported rate × 60 s'}): ` +
            `etcd ${writes > 0 ? Math.round((etcdCpu * 1000) / writes) : 0}, ` +
            `etcdctl ${writes > 0 ? Math.round((clientCpu * 1000) / writes) : 0}`,
        }),
        cpuPerOp: writes > 0 ? Math.round((etcdCpu * 1000) / writes) : null,
      },
    ];
  } finally {
    await etcd.stop();
  }
}
