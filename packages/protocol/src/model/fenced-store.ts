/**
 * The fenced store of the design note, in memory: per-resource fences and results, each operation
 * one atomic step (single-threaded JS: a synchronous method is atomic). It is the reference model
 * the SQLite sink is checked against, and the port the lease table advances fences through.
 */
import { canonicalJson } from '../canonical-json.js';
import { decideAdvance, decideWrite, type AdvanceDecision, type WriteDecision } from './fence-rules.js';

export interface FenceAdvancer {
  /** Durably advance `resource`'s fence to `token` (only grows). */
  advance(resource: string, token: bigint): AdvanceDecision;
  fenceOf(resource: string): bigint;
}

export interface StoredEntry {
  readonly token: bigint;
  readonly payload: string;
}

export type FenceRules = {
  readonly decideAdvance: typeof decideAdvance;
  readonly decideWrite: typeof decideWrite;
};

const DEFAULT_RULES: FenceRules = { decideAdvance, decideWrite };

export class FencedStore implements FenceAdvancer {
  readonly #fences = new Map<string, bigint>();
  readonly #results = new Map<string, Map<string, StoredEntry>>();
  readonly #rules: FenceRules;

  /** `rules` exists so tests can prove the property checks catch a broken rule; leave it default. */
  constructor(rules: FenceRules = DEFAULT_RULES) {
    this.#rules = rules;
  }

  fenceOf(resource: string): bigint {
    return this.#fences.get(resource) ?? 0n;
  }

  advance(resource: string, token: bigint): AdvanceDecision {
    const decision = this.#rules.decideAdvance(this.fenceOf(resource), token);
    if (decision.ok) this.#fences.set(resource, decision.fence);
    return decision;
  }

  write(resource: string, token: bigint, resultId: string, payload: unknown): WriteDecision {
    const canonical = canonicalJson(payload);
    const results = this.#results.get(resource);
    const decision = this.#rules.decideWrite(this.fenceOf(resource), token, results?.get(resultId)?.payload, canonical);
    if (decision.ok && decision.outcome === 'written') {
      const map = results ?? new Map<string, StoredEntry>();
      map.set(resultId, { token, payload: canonical });
      this.#results.set(resource, map);
    }
    return decision;
  }

  resultOf(resource: string, resultId: string): StoredEntry | undefined {
    return this.#results.get(resource)?.get(resultId);
  }

  resources(): string[] {
    return [...new Set([...this.#fences.keys(), ...this.#results.keys()])].sort();
  }
}
