/**
 * The register workload's rule. Each register task reads its resource's value at the sink — the
 * payload `value` of the accepted result with the highest token (ties: the later write) — and
 * writes `{ register: true, prev, value: prev + 1 }` under a result id of its own grant,
 * `task:<id>@<attempt>` (one with a single id per task would make a stale holder's increment a
 * replay or a RESULT_CONFLICT: the idempotency check would hide a missing fence). With fencing, a
 * holder's write lands only while its token is the fence, so every accepted write was computed
 * from the value the register held when it committed.
 *
 * `lost-update`: in commit (decision seq) order per resource, an accepted write whose `prev` is not
 * the register's value at that point — two writes computed from one read, one increment lost. The
 * final value then falls short of the number of accepted writes. Pure.
 */
import type { Violation } from './violation.js';
import type { FinalResult, History } from './history.js';

export const RegisterViolation = { LOST_UPDATE: 'lost-update' } as const;

export interface RegisterStats {
  readonly resources: number;
  /** Accepted (`written`) register writes. */
  readonly acceptedWrites: number;
  /** Sum over resources of the final register value. */
  readonly finalValueSum: number;
  readonly lostUpdates: number;
}

interface RegisterPayload {
  readonly register: true;
  readonly prev: number;
  readonly value: number;
}

function registerPayload(r: FinalResult | undefined): RegisterPayload | undefined {
  const p = r?.payload as Partial<RegisterPayload> | null | undefined;
  if (p === null || typeof p !== 'object' || p.register !== true) return undefined;
  if (typeof p.prev !== 'number' || typeof p.value !== 'number') return undefined;
  return p as RegisterPayload;
}

export function checkRegister(history: History): { violations: Violation[]; stats: RegisterStats | undefined } {
  const resources = new Set(history.tasks.filter((t) => t.register === true).map((t) => t.resource));
  if (resources.size === 0) return { violations: [], stats: undefined };
  const out: Violation[] = [];
  const results = new Map(history.finalResults.map((r) => [`${r.resource}|${r.resultId}`, r]));
  let accepted = 0;
  let finalSum = 0;
  const writes = [...history.decisions]
    .filter((d) => d.kind === 'write' && d.outcome === 'written' && resources.has(d.resource))
    .sort((a, b) => a.seq - b.seq);
  for (const resource of resources) {
    let value = 0;
    let valueToken = -1n;
    let count = 0;
    for (const d of writes) {
      if (d.resource !== resource) continue;
      const stored = results.get(`${resource}|${d.resultId ?? ''}`);
      const p = registerPayload(stored);
      if (p === undefined) continue; // not a register result, or lost (acknowledged-write-lost says so)
      count += 1;
      if (p.prev !== value || p.value !== p.prev + 1) {
        out.push({
          name: RegisterViolation.LOST_UPDATE,
          message: `${resource}: ${d.resultId ?? '?'} (token ${d.token}, seq ${d.seq}) wrote ${p.prev} → ${p.value} while the register held ${value}`,
          atMs: d.atMs,
          resource,
          token: d.token,
          ...(d.workerId === undefined ? {} : { process: d.workerId }),
        });
      }
      const token = BigInt(d.token);
      if (token >= valueToken) {
        value = p.value;
        valueToken = token;
      }
    }
    accepted += count;
    finalSum += value;
  }
  return {
    violations: out,
    stats: { resources: resources.size, acceptedWrites: accepted, finalValueSum: finalSum, lostUpdates: out.length },
  };
}
