import { type ChildProcess, execFileSync, fork } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type UsageEvent, Workload } from './workload.js';

/**
 * The producer client's own CPU per event (issue 35, point 5), without the service: a child
 * process serves surface A on localhost and answers every request 202 at once; each measured
 * client runs in a fresh process that tracks `--events` events of about 255 B (`--workload ingest`:
 * the ingest benchmark's own generator, about 530 B on average with its ids) (closed loop:
 * waits for room, as bench/load.ts does) with concurrency 8, batches of 100, no gzip (`--gzip`: the
 * client's default, level 1), and reports
 * its process.cpuUsage() from the first track() to the end of close(), after a warm-up.
 *
 *   node dist/bench/sdk-client.js                                   # the client in this tree
 *   node dist/bench/sdk-client.js --rounds 3 --client /path/client.js   # alternated with another build
 *
 * `--client` names a built client.js (e.g. an earlier commit's sdk/src compiled elsewhere); the
 * runs alternate between it ("other") and this tree's ("this") round by round.
 */

const HERE = fileURLToPath(import.meta.url);
const THIS_CLIENT = fileURLToPath(new URL('../sdk/src/client.js', import.meta.url));
const ANSWER = '{"accepted":100,"errors":[]}';

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : def;
}

function serve(): void {
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    req.on('data', () => {});
    req.on('end', () => {
      res.writeHead(202, { 'Content-Type': 'application/json', 'Content-Length': ANSWER.length });
      res.end(ANSWER);
    });
  });
  server.listen(0, '127.0.0.1', () => {
    const a = server.address();
    process.send?.({ port: typeof a === 'object' && a !== null ? a.port : 0 });
  });
}

interface BenchEvent {
  event_name: string;
  external_customer_id: string;
  user_id: string;
  properties: Record<string, unknown>;
  timestamp: string;
}

/** 1,000 distinct events of 255 B as JSON, reused in turn (as the ingest benchmark reuses its workload). */
function events(): BenchEvent[] {
  const names = ['page_view', 'feature_used', 'api_call', 'session_started', 'report_exported'];
  const out: BenchEvent[] = [];
  const t0 = Date.parse('2026-11-27T12:00:00.000Z');
  for (let i = 0; i < 1000; i++) {
    const e: BenchEvent = {
      event_name: names[i % names.length],
      external_customer_id: `ext-${String(i % 5000).padStart(6, '0')}`,
      user_id: `user-${String(i).padStart(6, '0')}-${i % 20}`,
      properties: { plan: 'growth', page: '/reports/weekly', duration_ms: (i * 7919) % 30_000, success: i % 33 !== 0 },
      timestamp: new Date(t0 - i * 61_000).toISOString(),
    };
    const pad = 255 - JSON.stringify(e).length - ',"note":""'.length;
    e.properties.note = 'lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod'.repeat(4).slice(0, pad);
    out.push(e);
  }
  return out;
}

/**
 * The ingest benchmark's own events (bench/workload.ts: 100 B–2 KB, about 530 B on average with
 * these ids, most of it in a few long strings), 1,000 of them from one workspace of 1,000 customers.
 */
function workloadEvents(): UsageEvent[] {
  const customers: Array<[string, string]> = Array.from({ length: 1000 }, (_, i) => [
    `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    `ext-${String(i).padStart(6, '0')}`,
  ]);
  const tenant = { tenantId: '00000000-0000-4000-8000-000000000000', key: 'bench', customers, products: [] };
  const w = new Workload([tenant], {
    bodiesPerTenant: 10,
    eventsPerBody: 100,
    seed: 42,
    customerIdShare: 0.2,
    now: Date.now(),
  });
  return w.bodies().flatMap((b) => b.events);
}

async function measure(
  clientPath: string,
  port: number,
  n: number,
  warm: number,
  workload: string,
  gzip: boolean,
): Promise<void> {
  const { IngestClient } = (await import(pathToFileURL(clientPath).href)) as typeof import('../sdk/src/client.js');
  const pool: object[] = workload === 'ingest' ? workloadEvents() : events();
  const run = async (count: number) => {
    const client = new IngestClient<object>({
      url: `http://127.0.0.1:${port}`,
      surface: 'a',
      apiKey: 'bench',
      concurrency: 8,
      maxBatchEvents: 100,
      gzip,
      maxQueueEvents: 100 * 8 * 2,
      flushIntervalMs: 50,
    });
    let accepted = 0;
    let failed = 0;
    client.on('batch', (b) => {
      accepted += b.accepted;
    });
    client.on('failed', (e) => {
      failed += e.length;
    });
    for (let i = 0; i < count; i++) {
      if (!client.hasCapacity()) await client.waitForCapacity();
      client.track(pool[i % pool.length]);
    }
    await client.close();
    if (failed > 0 || accepted !== count) throw new Error(`accepted ${accepted} of ${count}, failed ${failed}`);
  };
  await run(warm);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await run(n);
  const cpu = process.cpuUsage(c0);
  const ms = performance.now() - t0;
  process.stdout.write(
    `${JSON.stringify({ usPerEvent: (cpu.user + cpu.system) / n, userUs: cpu.user / n, sysUs: cpu.system / n, ms })}\n`,
  );
}

async function main(): Promise<void> {
  if (process.argv[2] === 'serve') return serve();
  const n = Number(arg('events', '300000'));
  const warm = Number(arg('warm', '50000'));
  const workload = arg('workload', 'small');
  if (workload !== 'small' && workload !== 'ingest') throw new Error(`--workload is small or ingest, got ${workload}`);
  const gzip = process.argv.includes('--gzip');
  if (process.argv[2] === 'measure')
    return measure(arg('client', THIS_CLIENT), Number(arg('port', '0')), n, warm, workload, gzip);
  const rounds = Number(arg('rounds', '1'));
  const other = arg('client', '');
  const server: ChildProcess = fork(HERE, ['serve'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  try {
    const port = await new Promise<number>((resolve) =>
      server.once('message', (m) => resolve((m as { port: number }).port)),
    );
    const builds: Array<[string, string]> = other
      ? [
          ['other', other],
          ['this', THIS_CLIENT],
        ]
      : [['this', THIS_CLIENT]];
    const got = new Map<string, number[]>(builds.map(([name]) => [name, []]));
    const what = workload === 'ingest' ? "the ingest benchmark's events (about 530 B)" : 'events of 255 B';
    console.log(`${n} ${what}, concurrency 8, batches of 100, gzip ${gzip ? 'on' : 'off'}; CPU of the client process`);
    for (let r = 1; r <= rounds; r++)
      for (const [name, path] of builds) {
        const cmd = [
          HERE,
          'measure',
          '--client',
          path,
          '--port',
          String(port),
          '--events',
          String(n),
          '--warm',
          String(warm),
          '--workload',
          workload,
          ...(gzip ? ['--gzip'] : []),
        ];
        const out = JSON.parse(execFileSync(process.execPath, cmd, { encoding: 'utf8' })) as {
          usPerEvent: number;
          userUs: number;
          sysUs: number;
          ms: number;
        };
        got.get(name)!.push(out.usPerEvent);
        console.log(
          `round ${r} ${name}: ${out.usPerEvent.toFixed(2)} µs/event (user ${out.userUs.toFixed(2)}, ` +
            `system ${out.sysUs.toFixed(2)}), ${Math.round(n / (out.ms / 1000))} events/s`,
        );
      }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    for (const [name, xs] of got) console.log(`${name}: median ${median(xs).toFixed(2)} µs/event over ${xs.length}`);
  } finally {
    server.kill();
  }
}

await main();
