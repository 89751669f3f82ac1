/** Every named scenario, by name (`pnpm chaos --list`, `--scenario NAME`). */
import { SCENARIOS, type Scenario } from './scenarios.js';
import { FAULT_SCENARIOS } from './scenarios-faults.js';

export const ALL_SCENARIOS: readonly Scenario[] = [...SCENARIOS, ...FAULT_SCENARIOS];

export function findScenario(name: string): Scenario {
  const s = ALL_SCENARIOS.find((x) => x.name === name);
  if (s === undefined)
    throw new Error(`unknown scenario ${name}; known: ${ALL_SCENARIOS.map((x) => x.name).join(', ')}`);
  return s;
}
