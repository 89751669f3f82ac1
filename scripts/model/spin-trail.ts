/**
 * Turns a spin counterexample replay (`spin -t -p model.pml`) into a readable step sequence and a
 * mermaid sequenceDiagram.
 *
 * The model prints one `@@ FROM -> TO : text` or `@@ note WHO : text` line per protocol step (its
 * printf statements run only in replays, never during verification). The violated assertion is
 * named by the comment after it in the model source (`assert(...); /* grant-before-fence *\/`).
 *
 * CLI (scripts/model-check.sh compiles this file to .tmp/model/ with tsc and runs it):
 *   node .tmp/model/spin-trail.js --pml model/leasehold.pml --title "BAD_ACCEPT_GE" < replay.txt
 * prints markdown: the steps as a numbered list and the diagram in a ```mermaid block.
 */
import { readFileSync } from 'node:fs';

export interface TrailEvent {
  /** Participant that acts (W0, C1, etcd, sink, clock, rogue). */
  readonly from: string;
  /** Receiver of a message; undefined for a note. */
  readonly to: string | undefined;
  readonly text: string;
}

export interface Violation {
  /** Property name taken from the assertion's comment (e.g. `two-live-owners`), or the assertion. */
  readonly property: string;
  readonly assertion: string;
  readonly line: number;
}

export interface Trail {
  readonly events: readonly TrailEvent[];
  /** For a liveness counterexample: the index in `events` where the repeating cycle starts. */
  readonly cycleStart: number | undefined;
  /** Number of transitions in the replay (spin's last step number). */
  readonly transitions: number;
  readonly violation: Violation | undefined;
}

const EVENT = /@@ (\S+) -> (\S+) : (.*)$/;
const NOTE = /@@ note (\S+) : (.*)$/;
const STEP = /^\s*(\d+):\s+proc\s+\d+\s/;
const ASSERT_AT = /^spin: .*?:(\d+), Error: assertion violated/;
const ASSERT_TEXT = /^spin: text of failed assertion: (.*)$/;

/** A property name in the comment on a model line: the first kebab-case word of 2+ parts. */
export function propertyOnLine(sourceLine: string): string | undefined {
  const comment = /\/\*(.*?)(\*\/|$)/.exec(sourceLine)?.[1] ?? '';
  return /\b([a-z]+(?:-[a-z]+)+)\b/.exec(comment)?.[1];
}

/** Parse the output of `spin -t -p`; `source` is the model text (to name the violated property). */
export function parseTrail(output: string, source: string): Trail {
  const events: TrailEvent[] = [];
  let transitions = 0;
  let line: number | undefined;
  let assertion = '';
  let cycleStart: number | undefined;
  for (const raw of output.split('\n')) {
    const text = raw.trimEnd();
    if (text.includes('START OF CYCLE')) cycleStart = events.length;
    const step = STEP.exec(text);
    if (step?.[1] !== undefined) {
      // A step line echoes its statement (a printf's format string, too): only count it.
      transitions = Math.max(transitions, Number(step[1]));
      continue;
    }
    const note = NOTE.exec(text);
    const event = note === null ? EVENT.exec(text) : null;
    if (note?.[1] !== undefined && note[2] !== undefined) {
      events.push({ from: note[1], to: undefined, text: note[2].trim() });
    } else if (event?.[1] !== undefined && event[2] !== undefined && event[3] !== undefined) {
      events.push({ from: event[1], to: event[2], text: event[3].trim() });
    }
    const at = ASSERT_AT.exec(text);
    if (at?.[1] !== undefined) line = Number(at[1]);
    const failed = ASSERT_TEXT.exec(text);
    if (failed?.[1] !== undefined) assertion = failed[1].trim();
  }
  let violation: Violation | undefined;
  if (line !== undefined) {
    const sourceLine = source.split('\n')[line - 1] ?? '';
    violation = { property: propertyOnLine(sourceLine) ?? assertion, assertion, line };
  }
  return { events, cycleStart, transitions, violation };
}

const ORDER = ['W0', 'W1', 'W2', 'rogue', 'C0', 'C1', 'etcd', 'sink', 'clock'];

function participants(events: readonly TrailEvent[]): string[] {
  const seen = new Set<string>();
  for (const e of events) {
    seen.add(e.from);
    if (e.to !== undefined) seen.add(e.to);
  }
  const rank = (p: string): number => {
    const i = ORDER.indexOf(p);
    return i < 0 ? ORDER.length : i;
  };
  return [...seen].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

/** Mermaid treats `;` and `#` specially in message text. */
const mermaidText = (text: string): string => text.replace(/;/g, ',').replace(/#/g, 'no. ');

/** The numbered step list, one line per event, and the violated property last. */
export function renderSteps(trail: Trail): string {
  const lines = trail.events.map(
    (e, i) =>
      `${i + 1}. ${i === trail.cycleStart ? '**[the cycle starts]** ' : ''}` +
      `${e.to === undefined ? `(${e.from})` : `${e.from} → ${e.to}:`} ${e.text}`,
  );
  if (trail.cycleStart !== undefined && trail.cycleStart >= trail.events.length) {
    lines.push(
      `${trail.events.length + 1}. **[the cycle starts: from here nothing the claim waits for ever happens]**`,
    );
  }
  if (trail.violation !== undefined) {
    lines.push(
      `${trail.events.length + 1}. **violated: \`${trail.violation.property}\`** — \`${trail.violation.assertion}\``,
    );
  }
  return lines.join('\n');
}

/** A mermaid sequenceDiagram of the trail. */
export function renderMermaid(trail: Trail): string {
  const parts = participants(trail.events);
  const lines = ['sequenceDiagram', ...parts.map((p) => `  participant ${p}`)];
  trail.events.forEach((e, i) => {
    if (i === trail.cycleStart) lines.push(`  Note over ${parts[0] ?? 'sink'}: the cycle starts`);
    lines.push(
      e.to === undefined
        ? `  Note over ${e.from}: ${mermaidText(e.text)}`
        : `  ${e.from}->>${e.to}: ${mermaidText(e.text)}`,
    );
  });
  if (trail.cycleStart !== undefined && trail.cycleStart >= trail.events.length) {
    lines.push(`  Note over ${parts[0] ?? 'sink'}: from here on it cycles without granting the task`);
  }
  if (trail.violation !== undefined) {
    const first = parts[0] ?? 'sink';
    const last = parts[parts.length - 1] ?? first;
    const over = first === last ? first : `${first},${last}`;
    lines.push(`  Note over ${over}: violated: ${mermaidText(trail.violation.property)}`);
  }
  return lines.join('\n');
}

/** Markdown: a title, the step list and the diagram. */
export function renderMarkdown(trail: Trail, title: string): string {
  const head =
    trail.violation !== undefined
      ? `violates \`${trail.violation.property}\``
      : trail.cycleStart !== undefined
        ? 'an acceptance cycle (a liveness claim does not hold)'
        : 'no assertion violated';
  return [
    `### ${title}: ${head} (${trail.transitions} transitions, ${trail.events.length} steps)`,
    '',
    renderSteps(trail),
    '',
    '```mermaid',
    renderMermaid(trail),
    '```',
    '',
  ].join('\n');
}

function main(argv: readonly string[]): void {
  const arg = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i < 0 ? undefined : argv[i + 1];
  };
  const pml = arg('--pml');
  if (pml === undefined) {
    process.stderr.write('usage: spin-trail --pml MODEL.pml [--title TITLE] < spin-replay.txt\n');
    process.exit(2);
  }
  const trail = parseTrail(readFileSync(0, 'utf8'), readFileSync(pml, 'utf8'));
  process.stdout.write(renderMarkdown(trail, arg('--title') ?? 'counterexample'));
}

if (process.argv[1]?.endsWith('spin-trail.js') === true) main(process.argv.slice(2));
