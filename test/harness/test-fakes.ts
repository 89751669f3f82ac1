/**
 * What counts as a test fake in a published tarball: a file under a `testing/` folder, a file
 * named like a fake or a contract suite, or code that defines one of the fakes or imports a test
 * runner, or mentions sabotage. Only `@leasehold/testing` may ship them (on purpose: users test their handlers with
 * them). Used by test/integration/packed-fakes.int.test.ts.
 */

/** Names of files that are fakes, harnesses or contract suites. */
const FAKE_PATHS: readonly RegExp[] = [
  /(^|\/)testing\//,
  /memory-etcd|memory-backend|manual-clock|manual-timers|service-harness|memory-fence/,
  /(^|[/-])contract\.[jt]s$/,
  /\.test\.[jt]s$/,
];

/** Code that defines a fake or a suite, or pulls in a test runner. */
const FAKE_CODE: readonly RegExp[] = [
  /\bclass (ManualClock|ManualTimers|MemoryEtcd|MemoryBackend|ServiceCluster|MemoryFenceTarget|MemoryFenceStore)\b/,
  /\bdescribe(Backend|Store|Fence)Contract\b/,
  /from ['"]vitest['"]/,
  // Sabotage lives in the chaos runner's test entry points (test/chaos/sabotage/), never in shipped code.
  /sabotage/i,
];

export interface PackedFile {
  /** Path inside the tarball (`package/dist/...`). */
  readonly path: string;
  readonly text: string;
}

/** The files of a tarball that are (or contain) test fakes, each with why. */
export function fakesIn(files: readonly PackedFile[]): string[] {
  const found: string[] = [];
  for (const file of files) {
    const path = file.path.replace(/^package\//, '');
    const byPath = FAKE_PATHS.find((re) => re.test(path));
    if (byPath !== undefined) {
      found.push(`${path} (name matches ${String(byPath)})`);
      continue;
    }
    if (!/\.(js|mjs|cjs|d\.ts)$/.test(path)) continue;
    const byCode = FAKE_CODE.find((re) => re.test(file.text));
    if (byCode !== undefined) found.push(`${path} (code matches ${String(byCode)})`);
  }
  return found;
}
