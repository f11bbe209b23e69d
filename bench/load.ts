import { IngestClient } from '../sdk/src/client.js';
import type { IngestClientError } from '../sdk/src/errors.js';
import { Http1Connection, requestBuffer } from './http1.js';
import { childMain, Meter, type LoadResult } from './meter.js';
import { Workload, type BenchTenant, type UsageEvent, type WorkloadOptions } from './workload.js';

/**
 * The HTTP load generator, run as its own process (bench/run.ts forks it): keeps `connections`
 * requests in flight against surface A, or paces them to `rateEventsPerSec`.
 */
export interface LoadConfig {
  label: string;
  host: string;
  port: number;
  tenants: BenchTenant[];
  workload: WorkloadOptions;
  connections: number;
  durationS: number;
  /** Open-loop pacing in events/s (each request carries eventsPerBody events); closed loop when absent. */
  rateEventsPerSec?: number;
  /** Stop once this many events were accepted (or when durationS is up). */
  maxEvents?: number;
  /**
   * Through the producer client (sdk/, one IngestClient per workspace, `connections` requests in
   * flight in all) instead of prebuilt request bytes: the load process's CPU is then the client's
   * cost per event (checking, serializing, batching, HTTP), which the report shows.
   */
  client?: { gzip: boolean };
}

async function run(c: LoadConfig): Promise<LoadResult> {
  if (c.client) return throughClient(c, c.client);
  const bodies = new Workload(c.tenants, c.workload).bodies();
  const requests = bodies.map((b) =>
    requestBuffer(
      c.host,
      c.port,
      '/v1/ingest/events',
      { 'Content-Type': 'application/json', 'X-API-Key': c.tenants[b.tenant].key },
      b.json,
    ),
  );
  const conns = Array.from({ length: c.connections }, () => new Http1Connection(c.host, c.port));
  const idle = [...conns];
  let inflight = 0;
  let next = 0;
  let running = true;
  const meter = new Meter(c.label, c.durationS, () => inflight, c.rateEventsPerSec);

  let finished: () => void;
  const allDone = new Promise<void>((r) => (finished = r));
  const stop = () => {
    if (!running) return;
    running = false;
    if (inflight === 0) finished();
    // A reply that never comes must not hang the run.
    setTimeout(() => finished(), 15_000).unref();
  };

  const fire = (conn: Http1Connection) => {
    const req = requests[next];
    next = (next + 1) % requests.length;
    const t0 = performance.now();
    inflight++;
    conn.send(req, (err, status, body) => {
      inflight--;
      const us = (performance.now() - t0) * 1000;
      if (err) meter.fail('connection');
      else if (status === 202) meter.ok(us, field(body, '"accepted":'), field(body, '"rejected":'), req.length);
      else meter.fail(status);
      if (c.maxEvents !== undefined && meter.acceptedSoFar >= c.maxEvents) stop();
      if (!running) {
        if (inflight === 0) finished();
        return;
      }
      if (c.rateEventsPerSec === undefined) fire(conn);
      else idle.push(conn);
    });
  };

  meter.start();
  const t0 = performance.now();
  const deadline = setTimeout(stop, c.durationS * 1000);
  if (c.rateEventsPerSec === undefined) {
    for (const conn of conns) fire(conn);
  } else {
    // Open loop: send what the schedule says is due; a request that finds no idle connection waits
    // for one, so a server that falls behind shows as a rate below target, not as hidden latency.
    // The connection idle longest goes next (FIFO), so the load spreads over all of them, and so
    // over the ingest processes the kernel gave them to, as it does from many independent clients;
    // a LIFO pool would send nearly everything over the few connections of one process.
    const perMs = c.rateEventsPerSec / c.workload.eventsPerBody / 1000;
    let sent = 0;
    const pace = () => {
      if (!running) return;
      const due = Math.floor((performance.now() - t0) * perMs);
      while (sent < due && idle.length) {
        sent++;
        fire(idle.shift()!);
      }
      setTimeout(pace, 1);
    };
    pace();
  }
  await allDone;
  clearTimeout(deadline);
  const result = meter.finish();
  for (const conn of conns) conn.close();
  return result;
}

async function throughClient(c: LoadConfig, o: { gzip: boolean }): Promise<LoadResult> {
  const bodies = new Workload(c.tenants, c.workload).bodies();
  const perTenant = Math.max(1, Math.round(c.connections / c.tenants.length));
  const batch = c.workload.eventsPerBody;
  let meter: Meter | undefined;
  const clients = c.tenants.map((t) => {
    const client = new IngestClient<UsageEvent>({
      url: `http://${c.host}:${c.port}`,
      surface: 'a',
      apiKey: t.key,
      concurrency: perTenant,
      maxBatchEvents: batch,
      gzip: o.gzip,
      // Enough queued to keep every sender busy, no more: the closed loop waits for room.
      maxQueueEvents: batch * perTenant * 2,
      flushIntervalMs: 50,
      closeTimeoutMs: 15_000,
    });
    client.on('batch', (b) => meter?.ok(b.ms * 1000, b.accepted, b.rejected, b.bytes));
    client.on('failed', (_e, err: IngestClientError) => meter?.fail((err as { status?: number }).status ?? err.code));
    client.on('dropped', () => {});
    return client;
  });
  const inflight = () => clients.reduce((a, cl) => a + cl.stats().inFlight, 0) / batch;
  meter = new Meter(c.label, c.durationS, inflight, c.rateEventsPerSec);
  let running = true;
  const stop = () => {
    running = false;
  };
  const deadline = setTimeout(stop, c.durationS * 1000);
  meter.start();
  const t0 = performance.now();
  // Each workspace's events go to its own client, in the workload's order.
  const feed = async (ti: number) => {
    const mine = bodies.filter((b) => b.tenant === ti).flatMap((b) => b.events);
    const client = clients[ti];
    const share = c.rateEventsPerSec === undefined ? 0 : c.rateEventsPerSec / c.tenants.length / 1000;
    let sent = 0;
    for (let i = 0; running; i = (i + 1) % mine.length) {
      if (c.maxEvents !== undefined && meter!.acceptedSoFar >= c.maxEvents) break;
      if (share > 0) {
        // Open loop: what the schedule says is due; a full queue drops, which shows as a rate below target.
        while (running && sent >= Math.floor((performance.now() - t0) * share))
          await new Promise((r) => setTimeout(r, 1));
        sent++;
      } else if (!client.hasCapacity()) await client.waitForCapacity();
      client.track(mine[i]);
    }
  };
  await Promise.all(c.tenants.map((_, ti) => feed(ti)));
  clearTimeout(deadline);
  await Promise.all(clients.map((cl) => cl.close()));
  return meter.finish();
}

function field(body: string, name: string): number {
  const i = body.indexOf(name);
  return i < 0 ? 0 : parseInt(body.slice(i + name.length, i + name.length + 12), 10) || 0;
}

childMain(run);
