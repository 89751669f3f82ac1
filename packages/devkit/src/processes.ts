/**
 * Child processes that must never outlive the test run: every spawned service is registered here
 * and SIGKILLed (whole process group) when the test process exits, whatever the reason; registered
 * synchronous cleanups (namespaces, mounts) run right after.
 */
import type { ChildProcess } from 'node:child_process';

const live = new Set<ChildProcess>();
let hooked = false;

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      // already gone
    }
  }
}

export function track(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
  installHooks();
}

const cleanups = new Set<() => void>();

/**
 * Register a synchronous cleanup (delete network namespaces, unmount a tmpfs, ...) that runs when
 * the process exits or dies of SIGTERM / SIGINT / SIGHUP, after every tracked child was killed.
 * Returns the function that unregisters it (call it once the resource was released normally).
 */
export function onExitSync(cleanup: () => void): () => void {
  cleanups.add(cleanup);
  installHooks();
  return () => {
    cleanups.delete(cleanup);
  };
}

function installHooks(): void {
  if (hooked) return;
  hooked = true;
  const killAll = () => {
    for (const c of live) killGroup(c, 'SIGKILL');
    for (const cleanup of [...cleanups]) {
      cleanups.delete(cleanup);
      try {
        cleanup();
      } catch {
        // best effort: the next cleanup still runs
      }
    }
  };
  process.once('exit', killAll);
  // 'exit' does not run when the test process dies of a signal: clean up, then die of it.
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    process.once(signal, () => {
      killAll();
      process.kill(process.pid, signal);
    });
  }
}

/** SIGTERM the process group, then SIGKILL after `graceMs`; resolves when the child has exited. */
export async function stopProcess(child: ChildProcess, graceMs = 3_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      resolve();
    }),
  );
  // A stopped (SIGSTOPped) process cannot handle SIGTERM: continue it first.
  killGroup(child, 'SIGCONT');
  killGroup(child, 'SIGTERM');
  const timer = setTimeout(() => {
    killGroup(child, 'SIGKILL');
  }, graceMs);
  await exited;
  clearTimeout(timer);
}

export function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  killGroup(child, signal);
}
