/**
 * Shipped code knows nothing of tests: `pnpm release:pack` (scripts/release-pack.sh, packing the
 * packages as built) makes every published tarball, and none but `@leasehold/testing` may contain
 * a test fake — the in-memory etcd, manual clocks and timers, harnesses, contract suites, anything
 * importing vitest (test/harness/test-fakes.ts says what counts). `@leasehold/testing` must carry
 * them: users test their handlers with them.
 *
 * It packs `dist/` as the build left it (no clean rebuild: other tests run the built daemons
 * meanwhile). In CI that is a fresh build; locally, outputs of deleted sources linger in `dist/`
 * until a clean build (`pnpm release:pack` does one) — and this check names them.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakesIn, type PackedFile } from '../harness/test-fakes.js';

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
let dir: string;
const tarballs = new Map<string, PackedFile[]>();

function walk(path: string, base: string, out: PackedFile[] = []): PackedFile[] {
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    const full = join(path, entry.name);
    if (entry.isDirectory()) walk(full, base, out);
    else out.push({ path: relative(base, full), text: readFileSync(full, 'utf8') });
  }
  return out;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-packed-'));
  const release = join(dir, 'release');
  execFileSync('bash', [join(ROOT, 'scripts/release-pack.sh'), '--no-build', release], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 180_000,
  });
  for (const name of readdirSync(release).filter((n) => n.endsWith('.tgz'))) {
    const unpacked = join(dir, name.replace(/\.tgz$/, ''));
    execFileSync('mkdir', ['-p', unpacked]);
    execFileSync('tar', ['-xzf', join(release, name), '-C', unpacked]);
    tarballs.set(name, walk(unpacked, unpacked));
  }
}, 200_000);

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('the published tarballs', () => {
  it('are all there, @leasehold/testing among them', () => {
    expect([...tarballs.keys()].sort()).toEqual(
      [
        'cli',
        'client',
        'coordinator',
        'daemon-kit',
        'fence-pg',
        'protocol',
        'sink',
        'sink-client',
        'telemetry',
        'testing',
        'worker',
      ].map((pkg) => `leasehold-${pkg}-0.1.0.tgz`),
    );
  });

  it('contain no test fake, except @leasehold/testing', () => {
    const found: Record<string, string[]> = {};
    for (const [name, files] of tarballs) {
      if (name.startsWith('leasehold-testing-')) continue;
      const fakes = fakesIn(files);
      if (fakes.length > 0) found[name] = fakes;
    }
    expect(found).toEqual({});
  });

  it('@leasehold/testing ships the fakes users test with (the check sees real content)', () => {
    const files = tarballs.get('leasehold-testing-0.1.0.tgz') ?? [];
    const fakes = fakesIn(files).join('\n');
    for (const fake of ['memory-etcd', 'manual-clock', 'manual-timers', 'memory-fence-store'])
      expect(fakes).toContain(fake);
    // Its own tests and example are not shipped.
    expect(files.map((f) => f.path).filter((p) => p.includes('.test.'))).toEqual([]);
  });

  it('would catch a planted fake (the scanner itself)', () => {
    expect(
      fakesIn([
        { path: 'package/dist/etcd/memory-etcd.js', text: '' },
        { path: 'package/dist/util.js', text: 'export class ManualClock {}' },
        { path: 'package/dist/suite.js', text: "import { it } from 'vitest';" },
        { path: 'package/dist/testing/harness.js', text: '' },
        { path: 'package/dist/index.js', text: 'export const ok = 1;' },
      ]),
    ).toHaveLength(4);
  });
});
