import fs from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import t from '#tap';
import { ROOT } from '../infra/stack.js';
import { ALONE, LONGEST_FIRST, SERIAL, serialMarkers } from './suites.js';

/**
 * The shape of the code, checked on the source tree (no server): the three tiers never import one
 * another, schemas/ and lib/ stay at the bottom, configuration is read from the environment only
 * by entry points, and our modules have no import cycles. Each failure names the file and the import.
 */

const FOLDERS = ['schemas', 'lib', 'ingest', 'core-api', 'processors', 'infra', 'bench', 'test'];
const TIERS = new Set(['ingest', 'core-api', 'processors']);
const SCHEMA_PACKAGES = new Set(['typebox', 'ajv', 'ajv-formats']);
const BUILTINS = new Set(builtinModules);

interface Import {
  spec: string;
  line: number;
  /** `import type` / `export type`: erased at build time, so no runtime dependency. */
  typeOnly: boolean;
  /** Repository-relative path of the module for a relative import; undefined for a package. */
  target?: string;
  /** Package name (`@scope/name`, `node:` for built-ins) for a bare import. */
  pkg?: string;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory() && e.name !== 'node_modules') out.push(...sourceFiles(rel));
    else if (e.isFile() && e.name.endsWith('.ts')) out.push(rel);
  }
  return out;
}

const lineAt = (text: string, index: number) => text.slice(0, index).split('\n').length;

function packageOf(spec: string): string {
  // `#typebox` and `#tap` are the packages themselves, bundled into one module each (package.json "imports").
  if (spec.startsWith('#')) return packageOf(spec.slice(1));
  if (spec.startsWith('node:') || BUILTINS.has(spec.split('/')[0])) return 'node:';
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

function resolve(file: string, spec: string): string {
  const abs = path.join(path.dirname(file), spec);
  const ts = abs.replace(/\.js$/, '.ts');
  return fs.existsSync(path.join(ROOT, ts)) ? ts : abs;
}

function importsOf(file: string, text: string): Import[] {
  const found: Array<{ spec: string; index: number; typeOnly: boolean }> = [];
  // Static imports and re-exports start a line once formatted.
  const clause = String.raw`(?:[\w$]+\s*,\s*)?(?:\{[^}]*\}|\*(?:\s+as\s+[\w$]+)?|[\w$]+)`;
  const statement = new RegExp(String.raw`^(?:import|export)(\s+type)?\s+${clause}\s*from\s*['"]([^'"]+)['"]`, 'gm');
  for (const m of text.matchAll(statement)) found.push({ spec: m[2], index: m.index, typeOnly: Boolean(m[1]) });
  for (const m of text.matchAll(/^import\s*['"]([^'"]+)['"]/gm))
    found.push({ spec: m[1], index: m.index, typeOnly: false });
  for (const m of text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g))
    found.push({ spec: m[1], index: m.index, typeOnly: false });
  return found.map(({ spec, index, typeOnly }) => {
    const line = lineAt(text, index);
    return spec.startsWith('.')
      ? { spec, line, typeOnly, target: resolve(file, spec) }
      : { spec, line, typeOnly, pkg: packageOf(spec) };
  });
}

const files = FOLDERS.filter((d) => fs.existsSync(path.join(ROOT, d))).flatMap(sourceFiles);
const texts = new Map(files.map((f) => [f, fs.readFileSync(path.join(ROOT, f), 'utf8')]));
const graph = new Map(files.map((f) => [f, importsOf(f, texts.get(f)!)]));
const folderOf = (f: string) => f.split('/')[0];
const show = (file: string, i: Import) =>
  `${file}:${i.line} imports '${i.spec}'${i.target && i.target !== i.spec ? ` (${i.target})` : ''}`;

/** Why `file` may not import `i`, or undefined when it may. */
function forbidden(file: string, i: Import): string | undefined {
  const from = folderOf(file);
  const to = i.target ? folderOf(i.target) : undefined;
  if (i.target && !fs.existsSync(path.join(ROOT, i.target))) return 'which does not exist';
  if (TIERS.has(from) && to !== undefined && to !== from && to !== 'schemas' && to !== 'lib')
    return `${from}/ may import only schemas/, lib/ and ${from}/`;
  // The configuration schema is data, read by infra/config-docs.ts to write docs/configuration.md.
  if (from === 'infra' && to === 'core-api' && i.target !== 'core-api/config.ts')
    return 'infra/ must not import core-api/ (shared code lives in lib/)';
  if (from === 'schemas' && to !== undefined && to !== 'schemas') return 'schemas/ may import only schemas/';
  if (from === 'schemas' && i.pkg !== undefined && !SCHEMA_PACKAGES.has(i.pkg))
    return `schemas/ may import only the packages ${[...SCHEMA_PACKAGES].join(', ')}`;
  if (from === 'lib' && to !== undefined && to !== 'lib' && to !== 'schemas')
    return 'lib/ may import only schemas/, lib/ and packages';
  return undefined;
}

/** Entry points, which alone turn the environment into configuration (STYLE.md, Configuration). */
function mayReadEnv(file: string): boolean {
  const parts = file.split('/');
  return (
    path.basename(file) === 'main.ts' ||
    file.startsWith('infra/bin/') ||
    (parts[0] === 'infra' && parts.length === 2) ||
    parts[0] === 'bench' ||
    parts[0] === 'test'
  );
}

const ENV = /\bprocess\s*(\.\s*env\b|\[\s*['"]env['"]\s*\])|\{\s*env\b[^}]*\}\s*=\s*process\b/;

t.test('the scanner sees the tree and its imports', async (t) => {
  t.ok(files.length > 100, `${files.length} source files`);
  const main = graph.get('ingest/main.ts') ?? [];
  t.ok(
    main.some((i) => i.target === 'lib/config.ts'),
    'ingest/main.ts imports lib/config.ts',
  );
  t.ok(
    (graph.get('ingest/config.ts') ?? []).some((i) => i.pkg === 'node:' || i.pkg === 'typebox'),
    'package imports are recognised',
  );
  // Written in two pieces so that this file's own scan does not take the dynamic import for real.
  const source = "import {\n  a,\n  type B,\n} from '../core-api/y.js';\nawait imp" + "ort('./z.js');\n";
  const probe = importsOf('ingest/x.ts', source);
  t.same(
    probe.map((i) => [i.target, i.line]),
    [
      ['core-api/y.js', 1],
      ['ingest/z.js', 5],
    ],
    'multi-line and dynamic imports are found',
  );
});

t.test('tiers import only schemas/, lib/ and their own folder; lower layers stay below', async (t) => {
  let violations = 0;
  for (const [file, imports] of graph) {
    for (const i of imports) {
      const why = forbidden(file, i);
      if (why === undefined) continue;
      violations++;
      t.fail(`${show(file, i)}: ${why}`);
    }
  }
  if (violations === 0) t.pass(`${files.length} files, no forbidden import`);
});

t.test('process.env is read only by entry points (main.ts, CLIs, bench/, test/)', async (t) => {
  let violations = 0;
  for (const [file, text] of texts) {
    if (mayReadEnv(file)) continue;
    text.split('\n').forEach((line, n) => {
      const code = line.trim();
      if (code.startsWith('//') || code.startsWith('*') || code.startsWith('/*') || !ENV.test(code)) return;
      violations++;
      t.fail(`${file}:${n + 1} reads process.env (${code.slice(0, 80)}): take the value as a parameter from the main`);
    });
  }
  if (violations === 0) t.pass('only entry points read the environment');
});

/** The uWS calls of a request's lifecycle, which only the request kernel makes (lib/http/). */
const LIFECYCLE = /\.(onAborted|onData|cork|writeStatus)\(/;

t.test('only lib/http/ drives a uWS response (onAborted, onData, cork, writeStatus)', async (t) => {
  let violations = 0;
  for (const [file, text] of texts) {
    if (file.startsWith('lib/http/') || !['ingest', 'core-api', 'processors', 'lib'].includes(folderOf(file))) continue;
    text.split('\n').forEach((line, n) => {
      // A Node socket's cork(), not a uWS response's.
      if (!LIFECYCLE.test(line) || (file === 'lib/nats-frames.ts' && /\bsocket\.(un)?cork\(/.test(line))) return;
      violations++;
      t.fail(
        `${file}:${n + 1} calls the uWS lifecycle itself (${line.trim().slice(0, 80)}): go through lib/http/kernel.ts`,
      );
    });
  }
  if (violations === 0) t.pass('every HTTP surface answers through the request kernel');
});

t.test('our modules have no import cycles, type-only imports included', async (t) => {
  // A type-only import is erased at build time, but a circle of them still ties two modules into
  // one for the reader: the shared type belongs below both (core-api/deps.ts holds the routes' Deps).
  const edges = new Map(
    [...graph].map(([f, imports]) => [
      f,
      [...new Set(imports.filter((i) => i.target && graph.has(i.target)).map((i) => i.target!))],
    ]),
  );
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const cycles: string[] = [];
  const visit = (f: string) => {
    state.set(f, 'open');
    stack.push(f);
    for (const next of edges.get(f) ?? []) {
      if (state.get(next) === 'open') cycles.push([...stack.slice(stack.indexOf(next)), next].join(' → '));
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(f, 'done');
  };
  for (const f of edges.keys()) if (!state.has(f)) visit(f);
  for (const c of cycles) t.fail(`import cycle: ${c}`);
  if (cycles.length === 0) t.pass(`${edges.size} modules, no cycle`);
});

/** Product code: what ships, not its tests and benchmarks. */
const PRODUCT = new Set(['schemas', 'lib', 'ingest', 'core-api', 'processors', 'infra']);
/** Text a line may carry whole: a URL, or SQL inside a template literal (a keyword of a statement). */
const UNBREAKABLE = /https?:\/\/|`[^`]*\b(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|FROM|WHERE|JOIN|VALUES)\b/;

t.test('no line of product code runs past 120 characters, outside SQL text and URLs', async (t) => {
  let long = 0;
  for (const f of files.filter((x) => PRODUCT.has(folderOf(x)))) {
    texts
      .get(f)!
      .split('\n')
      .forEach((line, i) => {
        const width = [...line].length;
        if (width <= 120 || UNBREAKABLE.test(line)) return;
        long++;
        t.fail(`${f}:${i + 1} is ${width} characters long`);
      });
  }
  if (long === 0) t.pass('every line within 120 characters');
});

/** A ClickHouse query placed in a URL (`?query=` or `&query=`): refused past about 16 KB. */
const QUERY_IN_URL = /[?&]query=\$\{/;

t.test('the tiers send ClickHouse queries in a request body, never in a URL', async (t) => {
  let violations = 0;
  for (const [file, text] of texts) {
    if (!['ingest', 'core-api', 'processors', 'lib'].includes(folderOf(file))) continue;
    text.split('\n').forEach((line, n) => {
      if (!QUERY_IN_URL.test(line)) return;
      violations++;
      t.fail(`${file}:${n + 1} puts a query in a URL (${line.trim().slice(0, 80)}): use ClickHouseEndpoints.read`);
    });
  }
  if (violations === 0) t.pass('no query travels in a URL');
});

/**
 * Workspace scoping (DESIGN.md section 6, lib/pg.ts): the tables with a tenant_id column, read from the
 * migrations. A literal of product code that reads, updates or deletes one of them (FROM, JOIN, UPDATE)
 * writes its filter with `inTenant`/`inTenants` (lib/pg.ts), `p.inTenant` (SqlParams text) or core-api's
 * `c.tenant`, or is counted in GLOBAL. An INSERT writes the tenant id as a value: no filter. The unit is
 * a literal (a template with its nested fragments, or a string), so a statement built from several is
 * judged by the one that names the table. A tenant_id compared with a value written in place (a
 * parameter, a literal, a list: PostgreSQL's or ClickHouse's, whose filter is `chTenant`) is refused.
 */
const MIGRATIONS = 'core-api/db/migrations';
const WORKSPACE_TABLES = fs
  .readdirSync(path.join(ROOT, MIGRATIONS))
  .flatMap((f) => [
    ...fs.readFileSync(path.join(ROOT, MIGRATIONS, f), 'utf8').matchAll(/^CREATE (?:TABLE|VIEW) (\w+)([^;]*);/gm),
  ])
  .filter((m) => /\btenant_id\b/.test(m[2]))
  .map((m) => m[1]);
const TOUCHES = new RegExp(String.raw`\b(?:FROM|JOIN|UPDATE)\s+(${WORKSPACE_TABLES.join('|')})\b`);
const SCOPED = /\binTenants?\(|\$\{c\.tenant\}/;
const HAND_WRITTEN = /\btenant_id\s*(?:=|<>|!=)\s*(?:\$|'|toUUID\(|ANY\s*\()|\btenant_id\s+IN\s*\(/;
/** Where the filters are written. */
const SCOPE_HELPERS = new Set(['lib/pg.ts', 'lib/sql-params.ts', 'lib/metrics/literal.ts']);

/**
 * Statements global on purpose: per file, how many of its literals touch a workspace table without the
 * filter (or compare tenant_id by hand), and why. Exact counts: a new one, or one gone, is noticed.
 */
const GLOBAL: Readonly<Record<string, [number, string]>> = {
  'lib/credentials/api-keys.ts': [1, "an API key's hash names its workspace (authentication)"],
  'lib/credentials/stored-secrets.ts': [
    1,
    "data-key rotation over every workspace, or a staged list: checked ids inlined, the table's name a constant",
  ],
  'lib/idempotency.ts': [1, 'housekeeping: keys older than 24 hours, of every workspace'],
  'lib/lease.ts': [1, "renews the holder's leases by (job, workspace) pairs"],
  'lib/playbooks/condition-sql.ts': [1, 'a subquery correlated to the customer c of a statement scoped on c'],
  'lib/rate-limit.ts': [1, 'housekeeping: windows older than 2 days, of every workspace'],
  'ingest/keys.ts': [2, "an ingestion key's hash names its workspace (all keys at start, one on a miss)"],
  'ingest/surface-b/dedup.ts': [
    6,
    "a request's reservation by its batch id, rows by keys found per workspace (keyRow), the sweep of expired ones",
  ],
  'core-api/customers/repo.ts': [
    1,
    'WITH_HEALTH: customer_health_current joined by id to c, in statements scoped on c',
  ],
  'core-api/housekeeping/jobs.ts': [2, 'housekeeping: purges over every workspace'],
  'core-api/integrations/routes.ts': [
    2,
    "the OAuth callback's state, a bridge's connection id: each names its workspace",
  ],
  'core-api/integrations/webhooks.ts': [
    3,
    "a provider's delivery names its connection or app, which names the workspace",
  ],
  'core-api/jobs/runner.ts': [6, "the job queue: a job of any workspace claimed, then its row by the job's id"],
  'core-api/oauth/apps.ts': [1, 'a client_id names the app, in any workspace'],
  'core-api/oauth/token.ts': [7, 'an authorization code or a refresh token names its workspace and user'],
  'core-api/users/routes.ts': [2, 'an invite token names its workspace and user'],
  'processors/alerts/alerts.ts': [1, "API keys' usage spikes, looked for in every workspace at once"],
  'processors/dedup/ownership.ts': [2, 'instances register in job_leases under a random id of their own, no workspace'],
  'processors/erasure/erased-customers.ts': [1, 'the erasures of every workspace, watched by each process'],
  'processors/erasure/eraser.ts': [4, 'the rows this holder claimed, by customer id and holder'],
  'processors/health/store.ts': [2, "one workspace's scored customers, by their ids"],
  'processors/integrations/notifier.ts': [1, "a notification's outcome, by the id of the row it claimed"],
  'processors/lease.ts': [1, 'the workspaces due for a scheduled run (tenants joined with job_leases)'],
  'processors/playbooks/event-marks.ts': [1, 'marks the workspaces of a batch of events, a probe per workspace'],
  'processors/signals.ts': [1, "the scheduled runs' gauges, over every workspace"],
  'processors/webhooks/dispatcher.ts': [1, "deliveries' outcomes, by the ids of the rows claimed"],
  'processors/webhooks/fanout.ts': [1, "events of many workspaces, each joined to its own workspace's subscriptions"],
  'infra/demo/progress.ts': [3, "the demo's progress, by the id of the job row it created"],
};

/** The string and template literals of a file, outermost templates whole (their fragments inside). */
function literalsOf(src: string): Array<{ line: number; text: string }> {
  const out: Array<{ line: number; text: string }> = [];
  let i = 0;
  const quoted = () => {
    const q = src[i++];
    while (i < src.length && src[i] !== q) i += src[i] === '\\' ? 2 : 1;
    i++;
  };
  const regex = () => {
    let inClass = false;
    for (i++; i < src.length && (src[i] !== '/' || inClass); i++) {
      if (src[i] === '\\') i++;
      else if (src[i] === '[' || src[i] === ']') inClass = src[i] === '[';
    }
    i++;
  };
  const template = () => {
    for (i++; i < src.length && src[i] !== '`'; ) {
      if (src[i] === '\\') i += 2;
      else if (src.startsWith('${', i)) {
        i += 2;
        code(true);
      } else i++;
    }
    i++;
  };
  /** Code up to the brace that closes an interpolation (`inner`), or to the end of the file. */
  const code = (inner: boolean) => {
    let depth = 0;
    while (i < src.length) {
      const start = i;
      const c = src[i];
      if (src.startsWith('//', i)) i = src.includes('\n', i) ? src.indexOf('\n', i) : src.length;
      else if (src.startsWith('/*', i)) i = src.indexOf('*/', i + 2) + 2;
      else if (c === "'" || c === '"' || c === '`') {
        if (c === '`') template();
        else quoted();
        if (!inner) out.push({ line: lineAt(src, start), text: src.slice(start, i) });
      } else if (c === '/' && /(?:[(,=:[!&|?{};]|\breturn)\s*$/.test(src.slice(Math.max(0, i - 8), i))) regex();
      else if (c === '}' && inner && depth-- === 0) return void i++;
      else {
        if (c === '{') depth++;
        i++;
      }
    }
  };
  code(false);
  return out;
}

/** Why a literal breaks the rule, or undefined. */
function unscoped(text: string): string | undefined {
  if (HAND_WRITTEN.test(text)) return `compares tenant_id by hand (${HAND_WRITTEN.exec(text)![0]})`;
  const table = TOUCHES.exec(text)?.[1];
  if (table !== undefined && !SCOPED.test(text)) return `reads or changes ${table} without the workspace filter`;
  return undefined;
}

t.test('every statement on a workspace table is scoped by lib/pg.ts, or global on purpose', async (t) => {
  t.ok(
    WORKSPACE_TABLES.includes('customers') && WORKSPACE_TABLES.includes('customer_health_current'),
    `${WORKSPACE_TABLES.length} workspace tables in the migrations`,
  );
  t.notOk(WORKSPACE_TABLES.includes('tenants'), 'tenants has no tenant_id');
  // Written in pieces so that this file's own literals are not what the probes find.
  const probe = (s: string) => literalsOf(s).map((l) => unscoped(l.text) ?? 'ok');
  /** `${e}` as text: an interpolation of the probe's own source. */
  const at = (e: string) => '$' + `{${e}}`;
  const id = at('id');
  t.same(
    probe(`const [r] = await sql\`SELECT name FROM customers WHERE id = ${id}\`;`),
    ['reads or changes customers without the workspace filter'],
    'a statement without the filter is found',
  );
  t.same(
    probe(`await tx\`UPDATE tasks SET title = ${id} WHERE ${at('c.tenant')} AND id = ${id}\`;`),
    ['ok'],
    'one through the helper passes',
  );
  t.same(
    probe(`sql\`SELECT 1 FROM users u WHERE u.tenant_id = ${at('t')}\`; const x = 'tenant_id = $1';`),
    ['compares tenant_id by hand (tenant_id = $)', 'compares tenant_id by hand (tenant_id = $)'],
    'a hand-written filter is found, in a template or a string',
  );
  t.same(
    probe(`const re = /['\`]/; sql\`INSERT INTO customers (tenant_id) VALUES (${id})\`;`),
    ['ok'],
    'an INSERT is no filter; a regular expression is no string',
  );
  const found = new Map<string, string[]>();
  const scanned = files.filter((f) => PRODUCT.has(folderOf(f)) && !SCOPE_HELPERS.has(f));
  for (const f of scanned) {
    for (const l of literalsOf(texts.get(f)!)) {
      const why = unscoped(l.text);
      if (why !== undefined) found.set(f, [...(found.get(f) ?? []), `${f}:${l.line} ${why}`]);
    }
  }
  let violations = 0;
  for (const [f, list] of found) {
    if (list.length <= (GLOBAL[f]?.[0] ?? 0)) continue;
    violations++;
    const allowed = GLOBAL[f] ? ` (GLOBAL counts ${GLOBAL[f][0]} in this file)` : '';
    for (const x of list)
      t.fail(`${x}${allowed}: write the filter with inTenant (lib/pg.ts), or count the statement in GLOBAL with why`);
  }
  for (const [f, [n]] of Object.entries(GLOBAL)) {
    const m = found.get(f)?.length ?? 0;
    if (m >= n) continue;
    violations++;
    t.fail(`GLOBAL counts ${n} global statements in ${f}, which has ${m}: lower the count`);
  }
  const statements = [...found.values()].reduce((n, l) => n + l.length, 0);
  if (violations === 0) t.pass(`${scanned.length} files; ${statements} global statements, each counted in GLOBAL`);
});

/**
 * Suites that run one file at a time anyway (test:newcomer, test:upgrade, test:clickhouse-current) or
 * need no server (the fast layer).
 */
const UNGROUPED = (file: string) =>
  file.startsWith('test/unit/') ||
  file.startsWith('test/newcomer/') ||
  file.startsWith('test/upgrade/') ||
  file.startsWith('test/clickhouse-current/') ||
  file === 'test/architecture.test.ts';

t.test('a stack test that touches what other files share is in the serial group (test/suites.ts)', async (t) => {
  let violations = 0;
  for (const [file, text] of texts) {
    if (!file.endsWith('.test.ts') || UNGROUPED(file) || SERIAL[file] !== undefined) continue;
    const markers = serialMarkers(text);
    if (markers.length === 0) continue;
    violations++;
    t.fail(`${file} ${markers.join(', ')}: add it to SERIAL in test/suites.ts, or keep it to its own servers`);
  }
  for (const file of [...Object.keys(SERIAL), ...LONGEST_FIRST]) {
    if (texts.has(file)) continue;
    violations++;
    t.fail(`test/suites.ts lists ${file}, which does not exist`);
  }
  for (const file of LONGEST_FIRST.filter((f) => SERIAL[f] !== undefined)) {
    violations++;
    t.fail(`test/suites.ts puts ${file} both in LONGEST_FIRST and in SERIAL`);
  }
  for (const file of [...ALONE].filter((f) => SERIAL[f] === undefined)) {
    violations++;
    t.fail(`test/suites.ts puts ${file} in ALONE, which is for files of SERIAL`);
  }
  if (violations === 0) t.pass(`${Object.keys(SERIAL).length} serial files, every other stack test concurrent`);
  const probe = "const pid = fs.readFileSync(path.join(profile.dataDir, 'nats.pid'), 'utf8');";
  t.same(serialMarkers(probe), ["reads a server's pid file (1)"], 'the markers see a pid file');
  t.same(serialMarkers('process.kill(process.pid);'), [], 'but not a process of its own');
});
