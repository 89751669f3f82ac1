/**
 * What a running etcd was started with, read from the outside: a gauge of its `/metrics` (e.g.
 * `etcd_server_quota_backend_bytes`: the quota in force) and the flags of the etcd process serving
 * a data directory (from /proc: auto-compaction has no gauge). Read-only; it signals nothing.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface EtcdClientTls {
  readonly ca: Buffer;
  readonly cert: Buffer;
  readonly key: Buffer;
}

/** The value of one unlabelled gauge of etcd's /metrics (on its client URL). */
export function etcdGauge(clientUrl: string, name: string, tls?: EtcdClientTls): Promise<number> {
  const url = new URL('/metrics', clientUrl);
  return new Promise((resolve, reject) => {
    const done = (res: IncomingMessage) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        if (text.length > 4 * 1024 * 1024) res.destroy(new Error('etcd /metrics over 4 MiB'));
      });
      res.on('error', reject);
      res.on('end', () => {
        const line = text.split('\n').find((l) => l.startsWith(`${name} `));
        if (line === undefined) reject(new Error(`${name} not in etcd's /metrics (status ${res.statusCode})`));
        else resolve(Number(line.slice(name.length + 1)));
      });
    };
    const req =
      url.protocol === 'https:'
        ? httpsRequest(url, { ca: tls?.ca, cert: tls?.cert, key: tls?.key, timeout: 5_000 }, done)
        : httpRequest(url, { timeout: 5_000 }, done);
    req.on('timeout', () => req.destroy(new Error('etcd /metrics: no answer in 5 s')));
    req.on('error', reject);
    req.end();
  });
}

/** Flag -> value of the etcd process whose `--data-dir` is `dataDir` (a flag without a value: ''). */
export function etcdProcessFlags(dataDir: string): Map<string, string> {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    } catch {
      continue; // gone, or not ours to read
    }
    if (!/(^|\/)etcd$/.test(argv[0] ?? '')) continue;
    const flags = new Map<string, string>();
    for (let i = 1; i < argv.length; i++) {
      const m = /^--([^=]+)(?:=(.*))?$/.exec(argv[i] ?? '');
      if (m === null) continue;
      if (m[2] !== undefined) flags.set(m[1] ?? '', m[2]);
      else if (argv[i + 1] !== undefined && !(argv[i + 1] ?? '').startsWith('--'))
        flags.set(m[1] ?? '', argv[++i] ?? '');
      else flags.set(m[1] ?? '', '');
    }
    if (flags.get('data-dir') === dataDir) return flags;
  }
  throw new Error(`no etcd process with --data-dir ${dataDir}`);
}
