import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { uuidv7 } from '../lib/ids.js';
import type { BenchTenant } from './workload.js';
import { Workload } from './workload.js';

/**
 * Two builds of the ingest tier side by side in one process: surface A's per-event work (the byte
 * scanner, the resolver's look-ups, the rules and the rows) over the benchmark's bodies, build by
 * build in alternating rounds, so that both meet the same host. This VM's speed moves by tens of
 * percent within minutes, more than most changes move the code: two load runs minutes apart cannot
 * tell a change of 5 %, and this can. It leaves out what does not depend on the body (HTTP, the
 * publish), about a third of the tier's CPU at full load.
 *
 *   node dist/bench/builds.js <revision> [<revision>]   (the second defaults to the working tree's dist/)
 *
 * A revision is built into .builds/<commit>/ (a git worktree, ignored; npm run build's first step,
 * with this checkout's node_modules). The workspaces are the benchmark's: 4 of 5,000 customers, 20
 * products, 100 bodies of 100 events each, a fifth of the events naming their customer by UUID.
 * The resolver's look-ups are answered from memory once its cache holds every customer (as at full
 * load); its first fill reads them from the list here, not PostgreSQL.
 */

interface Build {
  name: string;
  dist: string;
  one(b: Body): Promise<number>;
  usPerEvent: number[];
}

interface Body {
  tenant: BenchTenant;
  bytes: Buffer;
}

const TENANTS = 4;
const CUSTOMERS = 5000;
const PASSES_PER_ROUND = 3;

/** The dist/ folder of a revision, built once into .builds/<commit>/. */
function distOf(rev: string): string {
  const root = resolve(import.meta.dirname, '../..');
  const commit = execFileSync('git', ['rev-parse', '--verify', `${rev}^{commit}`], {
    cwd: root,
    encoding: 'utf8',
  }).trim();
  const tree = resolve(root, '.builds', commit);
  if (!existsSync(resolve(tree, 'dist/ingest/surface-a/usage.js'))) {
    if (!existsSync(tree))
      execFileSync('git', ['worktree', 'add', '--detach', tree, commit], { cwd: root, stdio: 'ignore' });
    execFileSync(process.execPath, ['infra/build.mjs'], { cwd: tree, stdio: 'inherit' });
  }
  return resolve(tree, 'dist');
}

function workspaces(): BenchTenant[] {
  return Array.from({ length: TENANTS }, (_, t) => ({
    tenantId: uuidv7(),
    key: '',
    customers: Array.from({ length: CUSTOMERS }, (_, i): [string, string] => [
      uuidv7(),
      `ext-${t}-${String(i).padStart(6, '0')}`,
    ]),
    products: Array.from({ length: 20 }, (_, i): [string, string] => [uuidv7(), `product_${i}`]),
  }));
}

/** Surface A's work of the build in `dist`, one body at a time, with its own resolver and buffers. */
async function load(name: string, dist: string): Promise<Build> {
  const { scanUsage, prepareUsage } = await import(`${dist}/ingest/surface-a/usage.js`);
  const { Resolver } = await import(`${dist}/ingest/resolver.js`);
  const { BufferPool } = await import(`${dist}/lib/buffer-pool.js`);
  // The tenant whose body is being read: the resolver's only queries are for it.
  let tenant: BenchTenant | undefined;
  const sql = (strings: TemplateStringsArray) => {
    const t = tenant as BenchTenant;
    return Promise.resolve(
      strings.join('?').includes('FROM products')
        ? t.products.map(([id, code]) => ({ id, code }))
        : t.customers.map(([id, ext]) => ({ id, external_source: 'internal', external_id: ext })),
    );
  };
  const resolver = new Resolver(sql, { negativeTtlMs: 60_000, maxEntriesPerTenant: 1_000_000, maxAgeMs: 3_600_000 });
  const payloads = new BufferPool(64 * 1024, 64 * 1024 * 1024);
  const one = async (b: Body) => {
    tenant = b.tenant;
    const events = scanUsage(b.bytes);
    if (events === undefined) throw new Error(`${name}: a benchmark body did not scan`);
    const p = await prepareUsage(events, {
      tenantId: b.tenant.tenantId,
      batchId: uuidv7(),
      now: Date.now(),
      futureSkewMs: 300_000,
      ageGraceMs: 3_600_000,
      resolver,
      payloads,
    });
    if (p.accepted !== events.length) throw new Error(`${name}: refused ${JSON.stringify(p.errors[0])}`);
    payloads.give(p.rows);
    return events.length as number;
  };
  return { name, dist, one, usPerEvent: [] };
}

const sorted = (a: number[]) => [...a].sort((x, y) => x - y);

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { rounds: { type: 'string', default: '16' } },
  });
  if (positionals.length < 1 || positionals.length > 2) {
    console.error('usage: node dist/bench/builds.js <revision> [<revision>] [--rounds N]');
    process.exit(2);
  }
  const here = resolve(import.meta.dirname, '..');
  const named = positionals.length === 2 ? positionals : [positionals[0], 'the working tree'];
  const dists = named.map((rev) => (rev === 'the working tree' ? here : distOf(rev)));
  const tenants = workspaces();
  const bodies: Body[] = new Workload(tenants, {
    bodiesPerTenant: 100,
    eventsPerBody: 100,
    seed: 7,
    customerIdShare: 0.2,
    now: Date.now(),
  })
    .bodies()
    .map((b) => ({ tenant: tenants[b.tenant], bytes: Buffer.from(b.json) }));
  const builds: Build[] = [];
  for (const [i, dist] of dists.entries()) {
    const b = await load(named[i], dist);
    // The first pass fills the resolver's caches and warms the code up.
    for (const body of bodies) await b.one(body);
    builds.push(b);
  }
  const rounds = Number(values.rounds);
  for (let r = 0; r < rounds + 2; r++)
    for (const b of r % 2 === 0 ? builds : [...builds].reverse()) {
      const start = process.cpuUsage();
      let events = 0;
      for (let p = 0; p < PASSES_PER_ROUND; p++) for (const body of bodies) events += await b.one(body);
      const used = process.cpuUsage(start);
      // Two more rounds than asked, the first two left out: both builds' code optimized.
      if (r >= 2) b.usPerEvent.push((used.user + used.system) / events);
    }
  const [a, b] = builds.map((x) => {
    const s = sorted(x.usPerEvent);
    return { ...x, best: s[0], median: s[s.length >> 1] };
  });
  console.log(
    `surface A's per-event work in one process (scan, look-ups, rules, rows), ${rounds} alternated rounds of ${(PASSES_PER_ROUND * bodies.length).toLocaleString('en-US')} requests:`,
  );
  for (const x of [a, b])
    console.log(
      `  ${x.name.padEnd(20)} best ${x.best.toFixed(2)} µs, median ${x.median.toFixed(2)} µs of CPU per event`,
    );
  console.log(
    `  ${b.name} ÷ ${a.name}: best ${(b.best / a.best).toFixed(3)}, median ${(b.median / a.median).toFixed(3)}; per round ${b.usPerEvent
      .map((v, i) => (v / a.usPerEvent[i]).toFixed(2))
      .join(' ')}`,
  );
}

await main();
