// Issue 27, twenty-first step (docs/benchmarks.md): etcd's CPU per job against jobs per request.
//
//   node docs/experiments/issue27-etcd-jobs-per-txn.mjs        (etcd on PATH; built workspace)
//
// Starts a private etcd (fresh data dir, free port) and sends 8,000 grant-sized jobs — each a
// nested txn with one compare (key absent) and two puts (a 300 B value and a small one) — as
// requests of k jobs each, k = 1, 2, 4, 8, 16, 32 (k = 1 with 8 requests in flight, the others
// with 4), twice over; prints etcd's CPU (utime + stime of /proc/<pid>/stat, 10 ms ticks) per job.
// What a request costs etcd besides its ops (gRPC, a raft proposal, a WAL entry, an apply) is
// what falls as k grows.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(new URL('../../packages/coordinator/package.json', import.meta.url));
const { Etcd3 } = require('etcd3');

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const dir = mkdtempSync(join(tmpdir(), 'etcd-jobs-'));
const [client, peer] = [await freePort(), await freePort()];
const etcd = spawn(
  'etcd',
  [
    ['--data-dir', join(dir, 'data')],
    ['--listen-client-urls', `http://127.0.0.1:${client}`],
    ['--advertise-client-urls', `http://127.0.0.1:${client}`],
    ['--listen-peer-urls', `http://127.0.0.1:${peer}`],
    ['--initial-advertise-peer-urls', `http://127.0.0.1:${peer}`],
    ['--initial-cluster', `default=http://127.0.0.1:${peer}`],
  ].flat(),
  { stdio: 'ignore' },
);
const kv = new Etcd3({ hosts: `127.0.0.1:${client}` });
for (let i = 0; ; i += 1) {
  try {
    await kv.get('probe');
    break;
  } catch (err) {
    if (i > 100) throw err;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const cpuMs = () => {
  const f = readFileSync(`/proc/${etcd.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
};
const value = Buffer.from('v'.repeat(300));
let seq = 0;

async function run(k, total, inFlight) {
  const before = cpuMs();
  let left = total / k;
  const lane = async () => {
    while (left-- > 0) {
      const jobs = [];
      for (let j = 0; j < k; j += 1) {
        seq += 1;
        const key = Buffer.from(`task/${seq}`);
        jobs.push({
          request_txn: {
            compare: [{ key, target: 'Version', result: 'Equal', version: 0 }],
            success: [
              { request_put: { key, value } },
              { request_put: { key: Buffer.from(`hold/${seq}`), value: Buffer.from('x') } },
            ],
            failure: [],
          },
        });
      }
      await kv.kv.txn({ compare: [], success: jobs, failure: [] });
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return Math.round((1000 * (cpuMs() - before)) / total);
}

await run(4, 4_000, 4); // warm-up
for (let pass = 1; pass <= 2; pass += 1) {
  const row = [];
  for (const k of [1, 2, 4, 8, 16, 32]) row.push(`k=${k}: ${await run(k, 8_000, k === 1 ? 8 : 4)} µs`);
  console.log(`pass ${pass}, etcd CPU per job: ${row.join(', ')}`);
}
kv.close();
etcd.kill();
rmSync(dir, { recursive: true, force: true });
