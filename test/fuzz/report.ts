import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, stackProfile } from '../../infra/stack.js';
import { FAILURE_CLASSES, type FailureClass } from './properties.js';
import { FIXED } from './known.js';

/**
 * Figures of the fuzz suite. Each test file saves what it measured per surface: a long run
 * (`npm run test:fuzz`, FUZZ_RECORD=1) into docs/fuzz-figures/ in the repository, one file per
 * surface replaced by that surface's next long run, so a long run can be made a few surfaces at a
 * time (FUZZ_FILES) and the record still covers all; any other run under the test stack's data
 * folder. `report.js write` rewrites the "Fuzzing" section of docs/reliability.md from the record.
 * Run by tap without an argument (it lies among the test files), it does nothing.
 */

export interface Figures {
  surface: string;
  /** Cases generated and sent in the main run (shrinking a failure sends more, not counted). */
  cases: number;
  seed: number;
  durationMs: number;
  /** Answers by HTTP status, or by failure to answer. */
  statuses: Record<string, number>;
  failures: Partial<Record<FailureClass, number>>;
  /** Failures of issues known and not fixed yet (known.ts), by id. */
  known: Record<string, number>;
  /** The smallest failing case fast-check found, and how to replay it. */
  counterexample?: string;
  /** The same request in full (body in base64), to paste into a case. */
  request?: { method: string; path: string; headers: Array<[string, string]>; chunked?: boolean; body?: string };
  replay?: string;
  /** When the run ended (ISO 8601). */
  at?: string;
}

const DIR =
  process.env.FUZZ_RECORD === '1'
    ? path.join(ROOT, 'docs', 'fuzz-figures')
    : path.join(stackProfile('test').dataDir, 'fuzz');
const slug = (s: string) => s.replace(/[^a-z0-9]+/gi, '-').toLowerCase();

export function saveFigures(f: Figures): void {
  fs.mkdirSync(DIR, { recursive: true });
  fs.writeFileSync(
    path.join(DIR, `${slug(f.surface)}.json`),
    `${JSON.stringify({ ...f, at: new Date().toISOString() }, null, 2)}\n`,
  );
}

function loadFigures(): Figures[] {
  if (!fs.existsSync(DIR)) return [];
  return fs
    .readdirSync(DIR)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(fs.readFileSync(path.join(DIR, f), 'utf8')) as Figures)
    .sort((a, b) => a.surface.localeCompare(b.surface));
}

/** Rewrites one `## heading` section of a markdown file, keeping the rest. */
export function writeSection(file: string, heading: string, body: string): void {
  const full = path.join(ROOT, file);
  const text = fs.existsSync(full) ? fs.readFileSync(full, 'utf8') : '# Reliability\n';
  const section = `\n## ${heading}\n\n${body.trim()}\n`;
  const start = text.indexOf(`\n## ${heading}\n`);
  if (start < 0) {
    fs.writeFileSync(full, `${text.trimEnd()}\n${section}`);
    return;
  }
  const next = text.indexOf('\n## ', start + 1);
  fs.writeFileSync(full, text.slice(0, start) + section + (next < 0 ? '' : text.slice(next)));
}

const statusMix = (s: Record<string, number>) =>
  Object.entries(s)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}: ${v}`)
    .join(', ');

export function render(figs: Figures[]): string {
  const total = (f: Figures) => Object.values(f.failures).reduce((n, v) => n + (v ?? 0), 0);
  const cases = figs.reduce((n, f) => n + f.cases, 0);
  const seconds = figs.reduce((n, f) => n + f.durationMs, 0) / 1000;
  const lines = [
    `Written by \`npm run test:fuzz\` on ${new Date().toISOString().slice(0, 16)}Z (${os.cpus().length} cores, ` +
      `${Math.round(os.totalmem() / 2 ** 30)} GiB) from the record of each surface's last long run ` +
      `(docs/fuzz-figures/, the date in the table): ${cases} generated requests in ${seconds.toFixed(0)} s of sending.`,
    'A long run of every surface at 100,000 cases takes about five hours on this machine, so it can be made a few',
    'surfaces at a time (`FUZZ_FILES=dist/test/fuzz/ingest-a.test.js npm run test:fuzz`, and `FUZZ_SURFACE=health` for the',
    'surfaces whose name contains it, so that one process runs one surface); a surface missing from the',
    'table has had only the quick run of `npm test` since the record began.',
    'Each surface gets the same number of cases (`FUZZ_RUNS`): valid-looking payloads with fields dropped, duplicated',
    'or retyped, boundary sizes and lengths, odd numbers, malformed, truncated and non-UTF-8 JSON, NUL and unpaired',
    'surrogate escapes, nesting up to 100,000 levels, `__proto__` keys, wrong content types, valid and corrupt gzip,',
    'missing, duplicate and oversized headers, odd framing, other methods, and odd query strings. An answer fails',
    'when the connection is dropped unanswered, on a 5xx other than 503 with Retry-After, on an undocumented status',
    "or body shape (2xx bodies against the OpenAPI document's schemas for the surfaces built from route seeds),",
    'without X-Trace-Id, when a refused request stored anything, when a resource of another workspace was served,',
    'changed or named (foreign_access), or when the tier went down. Every route of the OpenAPI document has a',
    'surface (test/fuzz/targets.ts; test/fuzz/coverage.test.ts fails on a route without one).',
    '',
    'Failures of known issues (test/fuzz/known.ts, each with a todo case in test/fuzz/cases.test.ts) are counted',
    'apart, under "known". All of them are requests the HTTP parser of uWebSockets.js closes unanswered; where',
    'it calls our handler first (a body length in doubt), no step of the route runs: see "Limits of the HTTP parser"',
    'below.',
    '',
    'Found by this suite and fixed (each is now a plain case in test/fuzz/cases.test.ts and a regression test):',
    '',
    ...FIXED.map((f) => `- \`${f.id}\`: ${f.fix}.`),
    '',
    `| surface | run at | cases | seconds | ${FAILURE_CLASSES.join(' | ')} | known | answers by status |`,
    `|---|---|---|---|${FAILURE_CLASSES.map(() => '---|').join('')}---|---|`,
    ...figs.map(
      (f) =>
        `| ${f.surface} | ${f.at?.slice(0, 16).replace('T', ' ') ?? '?'} | ${f.cases} | ${(f.durationMs / 1000).toFixed(1)} | ` +
        `${FAILURE_CLASSES.map((k) => f.failures[k] ?? 0).join(' | ')} | ` +
        `${statusMix(f.known ?? {}) || 'none'} | ${statusMix(f.statuses)} |`,
    ),
  ];
  const failed = figs.filter((f) => total(f) > 0 && f.counterexample);
  if (failed.length) {
    lines.push('', 'Smallest failing cases (replay with the seed and `FUZZ_RUNS` given):', '');
    for (const f of failed)
      lines.push(`- ${f.surface} (${f.replay}): \`${f.counterexample!.slice(0, 400).replace(/[`\r\n]/g, ' ')}\``);
  }
  return lines.join('\n');
}

const command = process.argv[2];
if (command === 'clear') fs.rmSync(DIR, { recursive: true, force: true });
if (command === 'write') {
  const figs = loadFigures();
  writeSection('docs/reliability.md', 'Fuzzing', render(figs));
  console.log(`docs/reliability.md: Fuzzing section from ${figs.length} surfaces`);
}
