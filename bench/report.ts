import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { analyticsRows, type AnalyticsResult } from './analytics.js';
import type { CeilingsResult, JetStreamCeiling } from './ceilings.js';
import type { DrainResult, E2eResult } from './e2e.js';
import type { HealthResult } from './health.js';
import type { IngestResult, Measured } from './ingest-scenario.js';
import type { LoadResult } from './meter.js';
import type { MetricsResult } from './metrics.js';
import type { PlaybooksResult } from './playbooks.js';
import type { WebhooksResult } from './webhooks.js';
import type { OutageResult } from './outage.js';
import { parseRows, type ParseResult } from './parse.js';
import type { Usage } from './proc-stats.js';
import type { GcDuring } from './tiers.js';
import type { ScenarioBResult } from './scenario-b.js';

export interface Section<T> {
  at: string;
  command: string;
  machine: Machine;
  options: Record<string, unknown>;
  data: T;
  /** The run of the same scenario this one replaced: how far apart two runs of one command are. */
  previous?: {
    at: string;
    command: string;
    eventsPerSec: number;
    ingestUsPerEvent: number;
    probeUs?: number;
    /** What the probes ran (bench/host-probe.ts HOST_PROBE_KIND); absent: the byte scanner and the rows. */
    probeKind?: string;
    /**
     * What else took the CPU during the run, % of one core: each process group but ingest, nats-server's
     * part in the kernel, and everything outside the benchmark (absent in runs from before they were kept).
     */
    othersPct?: Record<string, number>;
    /** The garbage collector's share of the ingest processes' CPU (absent where it was not read). */
    gcPctOfIngest?: number;
    /** The host's speed during the load (Usage.hostUs), µs per event of the probe's work. */
    hostDuringUs?: number;
    /** Surface A: the full load's connections held by each ingest process (IngestResult.split). */
    split?: readonly number[];
    /** Surface A: the host probe right after the full load (IngestResult.probeAfterUs). */
    probeAfterUs?: number;
    /** Surface A ÷ the raw publish of the same bodies right before and after it (ofRawBeside). */
    ofRawBeside?: { early: number; late: number; whole: number };
    /** The whole machine: busy, and idle waiting on the disk, % of all cores. */
    machineBusyPct?: number;
    iowaitPct?: number;
    stealPct?: number;
  };
  /** The host's speed just before the run (bench/host-probe.ts hostProbe), µs per event. */
  probeUs?: number;
  /** What the probes ran (bench/host-probe.ts HOST_PROBE_KIND); absent: the byte scanner and the rows. */
  probeKind?: string;
}

/** A run's host figures beside its rates (`runExtras`). */
export interface RunExtras {
  probeUs?: number;
  probeKind?: string;
  split?: readonly number[];
  probeAfterUs?: number;
  ofRawBeside?: { early: number; late: number; whole: number };
}

/** What a run of surface A or B is compared on with the run before it (`previous`). */
export function reproducible(
  at: string,
  command: string,
  m: { eventsPerSec: number; usage: Usage; durationS?: number; gc?: GcDuring },
  host: RunExtras = {},
): NonNullable<Section<unknown>['previous']> {
  return {
    at,
    command,
    eventsPerSec: m.eventsPerSec,
    ingestUsPerEvent: usPerEvent(m.usage, 'ingest', m.eventsPerSec),
    gcPctOfIngest: gcPctOfIngest(m),
    hostDuringUs: m.usage.hostUs,
    ...host,
    othersPct: {
      ...Object.fromEntries(
        Object.entries(m.usage.groups)
          .filter(([g]) => g !== 'ingest')
          .map(([g, u]) => [g, u.cpuPct]),
      ),
      ...(m.usage.groups['nats-server']?.sysPct !== undefined && {
        'nats-server in the kernel': m.usage.groups['nats-server'].sysPct,
      }),
      'outside the benchmark': m.usage.otherCpuPct,
    },
    machineBusyPct: m.usage.machineBusyPct,
    iowaitPct: m.usage.iowaitPct,
    stealPct: m.usage.stealPct,
  };
}

/**
 * A run's per-second rates split where they changed most (one change point, the first second left
 * out as the start): the rate before and after and the second it changed at; undefined where the
 * two differ by less than a quarter. A raw publish on this 2-core VM runs at 600k-1M events/s
 * while the page cache takes its writes, and at 250k-450k once about 4 GB are written and the
 * disk (300 MB/s) sets the pace, whatever the stream's byte cap.
 */
export function rateChange(
  perSecond: readonly number[] = [],
): { before: number; after: number; at: number } | undefined {
  const x = perSecond.slice(1);
  const mean = (a: readonly number[]) => a.reduce((t, v) => t + v, 0) / a.length;
  let best: { score: number; before: number; after: number; at: number } | undefined;
  for (let k = 3; k <= x.length - 3; k++) {
    const before = mean(x.slice(0, k));
    const after = mean(x.slice(k));
    const score = k * (x.length - k) * (before - after) ** 2;
    if (!best || score > best.score) best = { score, before, after, at: k + 1 };
  }
  if (!best || Math.abs(best.before - best.after) < 0.25 * Math.max(best.before, best.after)) return undefined;
  return { before: Math.round(best.before), after: Math.round(best.after), at: best.at };
}

/** "; 781,000 events/s for its first 9 s, 312,000 after", or '' where its rate held. */
function rateChangeText(r: Pick<LoadResult, 'perSecond'>): string {
  const c = rateChange(r.perSecond);
  return c ? `; ${n(c.before)} events/s for its first ${c.at} s, ${n(c.after)} after` : '';
}

/**
 * Surface A's full load ÷ the raw publish of the same bodies measured right before and right after
 * it (their mean): `early`, against the raw publish while the page cache took its writes (CPU
 * against CPU: surface A writes a third as fast and stays there), `late`, against it once the disk
 * set its pace (the machine's sustained ceiling), and `whole`, against its whole runs. Undefined
 * for a run from before they were measured.
 */
export function ofRawBeside(i: IngestResult): { early: number; late: number; whole: number } | undefined {
  const b = i.beside;
  if (!b) return undefined;
  const runs = [b.before, b.after];
  const of = (rate: (r: JetStreamCeiling) => number) =>
    i.full.eventsPerSec / (runs.reduce((t, r) => t + rate(r), 0) / runs.length);
  return {
    early: of((r) => rateChange(r.perSecond)?.before ?? r.eventsPerSec),
    late: of((r) => rateChange(r.perSecond)?.after ?? r.eventsPerSec),
    whole: of((r) => r.eventsPerSec),
  };
}

/**
 * What `reproducible` compares of a run of surface A or B besides its rates: the host probes, the
 * kernel's split of the connections and, for surface A, the raw publish beside it.
 */
export function runExtras(sec: {
  probeUs?: number;
  probeKind?: string;
  data: IngestResult | ScenarioBResult;
}): RunExtras {
  const d = sec.data;
  const probe = { probeUs: sec.probeUs, probeKind: sec.probeKind };
  return 'full' in d
    ? { ...probe, split: d.split, probeAfterUs: d.probeAfterUs, ofRawBeside: ofRawBeside(d) }
    : { ...probe, split: d.split };
}

/** "; the kernel gave the ingest processes 36 and 28 of the connections", or '' where not recorded. */
const splitText = (split: readonly number[] | undefined) =>
  split?.length ? `; the kernel gave the ingest processes ${split.join(' and ')} of the connections` : '';

export interface Stored {
  parse?: Section<ParseResult>;
  ceilings?: Section<CeilingsResult>;
  ingest?: Section<IngestResult>;
  eventsB?: Section<ScenarioBResult>;
  /** Surface B with SURFACE_B_DEDUP=stream, the same run. */
  eventsBStream?: Section<ScenarioBResult>;
  e2e?: Section<E2eResult>;
  outage?: Section<OutageResult>;
  health?: Section<HealthResult>;
  metrics?: Section<MetricsResult>;
  playbooks?: Section<PlaybooksResult>;
  analytics?: Section<AnalyticsResult>;
  webhooks?: Section<WebhooksResult>;
}

export interface Machine {
  cores: number;
  memoryGb: number;
  cpu: string;
  node: string;
  kernel: string;
  natsServer: string;
  clickhouse: string;
}

export function machine(natsServer: string, clickhouse: string): Machine {
  const cpu =
    /model name\s*:\s*(.+)/.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ??
    os.cpus()[0]?.model ??
    'unknown';
  return {
    cores: os.availableParallelism(),
    memoryGb: Math.round(os.totalmem() / 1024 ** 3),
    cpu,
    node: process.version,
    kernel: os.release(),
    natsServer,
    clickhouse,
  };
}

const n = (x: number) => Math.round(x).toLocaleString('en-US');
const k = (x: number) => (x >= 1e6 ? `${(x / 1e6).toFixed(2)}M` : `${Math.round(x / 1000)}k`);
const pct = (x: number) => `${Math.round(x * 100)} %`;

/** "machine 97 % busy: ingest 121 %, nats-server 44 %, …" with an interpretation. */
export function boundBy(u: Usage, singleThreaded: string[] = []): string {
  const busy = Object.entries(u.groups)
    .filter(([, g]) => g.cpuPct >= 5)
    .sort((a, b) => b[1].cpuPct - a[1].cpuPct);
  // nats-server's kernel share (its socket and page-cache writes) is what moves between runs.
  const list = busy
    .map(
      ([name, g]) =>
        `${name} ${g.cpuPct} %${name === 'nats-server' && g.sysPct ? ` (${g.sysPct} % in the kernel)` : ''}`,
    )
    .join(', ');
  // A single-threaded process (or a group whose one busy process does the work) tops out at a core.
  const single = busy.find(
    ([name, g]) =>
      g.cpuPct >= 90 && (singleThreaded.includes(name) || (u.machineBusyPct < 90 && (u.iowaitPct ?? 0) < 5)),
  );
  let verdict: string;
  if (u.machineBusyPct >= 90) verdict = `CPU: both cores saturated (top: ${busy[0]?.[0] ?? '?'})`;
  else if (single) verdict = `one thread: ${single[0]} at ${single[1].cpuPct} % of a core`;
  else if ((u.iowaitPct ?? 0) >= 5)
    verdict = `not CPU (machine ${u.machineBusyPct} % busy): waits, on the disk among them (iowait ${u.iowaitPct} %)`;
  else verdict = `not CPU (machine ${u.machineBusyPct} % busy): waits/concurrency`;
  const other =
    u.otherCpuPct >= 5
      ? `; outside the benchmark ${u.otherCpuPct} %${u.otherTop.length ? ` (${u.otherTop.join(', ')})` : ''}`
      : '';
  const stolen = (u.stealPct ?? 0) >= 2 ? ` (${u.stealPct} % stolen by the hypervisor)` : '';
  const disk = u.dirty?.writebackS
    ? `; the disk: the kernel wrote back to it for ${u.dirty.writebackS} s of ${u.seconds} (dirty pages at its background limit, ${u.dirty.maxMb} MB)`
    : '';
  return `${verdict}. CPU (% of one core): ${list || 'idle'}${other}; machine ${u.machineBusyPct} % busy${stolen}${disk}`;
}

/** µs of one group's CPU per event at `eventsPerSec`. */
function usPerEvent(u: Usage, group: string, eventsPerSec: number): number {
  const g = u.groups[group];
  return g && eventsPerSec > 0 ? (g.cpuPct / 100) * (1e6 / eventsPerSec) : Number.NaN;
}

/** "; the garbage collector 1.4 % of ingest's CPU (0.3 full collections a second)", or nothing where it was not read. */
function gcShare(m: { usage: Usage; durationS: number; gc?: GcDuring }): string {
  const pct = gcPctOfIngest(m);
  return pct === undefined || !m.gc
    ? ''
    : `; the garbage collector ${pct.toFixed(1)} % of ingest's CPU (${m.gc.fullPerSec.toFixed(1)} full collections a second)`;
}

/** The host meter during the load (Usage.hostUs), beside a CPU per event it explains. */
function hostDuring(u: Usage): string {
  if (u.hostUs === undefined) return '';
  const range = u.hostRangeUs
    ? ` (its readings ${u.hostRangeUs[0].toFixed(2)}–${u.hostRangeUs[1].toFixed(2)}, 10th–90th percentile)`
    : '';
  return `; the host meter during the load ${u.hostUs.toFixed(2)} µs per event${range}`;
}

/** The garbage collector's seconds as a % of the ingest processes' CPU seconds over the run. */
function gcPctOfIngest(m: { usage: Usage; durationS?: number; gc?: GcDuring }): number | undefined {
  const cpuS = ((m.usage.groups.ingest?.cpuPct ?? 0) / 100) * (m.durationS ?? 0);
  return m.gc && cpuS > 0 ? (100 * m.gc.seconds) / cpuS : undefined;
}

/** "ingest 19.2 µs, nats-server 3.1 µs (sum 22.3 µs)". */
function cpuPerEvent(u: Usage, eventsPerSec: number, groups: string[]): string {
  const each = groups.map((g) => [g, usPerEvent(u, g, eventsPerSec)] as const).filter(([, us]) => !Number.isNaN(us));
  const sum = each.reduce((a, [, us]) => a + us, 0);
  return `${each.map(([g, us]) => `${g} ${us.toFixed(1)} µs`).join(', ')} (sum ${sum.toFixed(1)} µs)`;
}

interface Row {
  figure: string;
  measured: string;
  target: string;
  ratio: string;
  bound: string;
}

export function rows(s: Stored): Row[] {
  const out: Row[] = [];
  if (s.parse) out.push(...parseRows(s.parse.data));
  const c = s.ceilings?.data;
  const js = c?.jetstream;
  const chBest = c?.clickhouse.best;
  const chViews = c?.clickhouse.runs.find((r) => r.views);
  if (c && js) {
    out.push({
      figure: `Ceiling: raw JetStream publish, 1 Node process, ${s.ceilings!.options.publishInflight} in flight`,
      measured: `${n(js.eventsPerSec)} events/s (${n(js.requestsPerSec)} msgs/s × 100, ${n(js.bytesPerSec / 1024 / 1024)} MB/s; PubAck p50 ${js.latency.p50Ms} ms, p99 ${js.latency.p99Ms} ms)${rateChangeText(js)}`,
      target: '—',
      ratio: '1.00 (reference)',
      bound: boundBy(js.usage, ['bench-publisher', 'nats-server']),
    });
    for (const r of c.clickhouse.runs) {
      // Compared by value: results.json, read back, holds the best run as a copy.
      const isBest = r.method === chBest!.method && r.streams === chBest!.streams && !r.views;
      out.push({
        figure: `Ceiling: ${r.method === 'http' ? 'HTTP POST' : 'clickhouse-client'} insert, ${r.streams} stream${r.streams > 1 ? 's' : ''}${r.views ? ', into a table with the materialized views of csp.events' : ''}`,
        measured: `${n(r.rowsPerSec)} rows/s (${r.mbPerSec} MB/s, ${n(r.rows)} rows in ${r.seconds} s)`,
        target: '—',
        ratio: isBest ? '1.00 (reference)' : (r.rowsPerSec / chBest!.rowsPerSec).toFixed(2),
        bound: boundBy(r.usage, ['clickhouse-client']),
      });
    }
  }
  const jb = c?.jetstreamBody;
  if (c && jb) {
    out.push({
      figure: `Ceiling: raw JetStream publish of the request bodies as sent (${n(jb.payloadBytes)} B per message)`,
      measured: `${n(jb.eventsPerSec)} events/s (${n(jb.requestsPerSec)} msgs/s × 100, ${n(jb.bytesPerSec / 1024 / 1024)} MB/s; PubAck p50 ${jb.latency.p50Ms} ms, p99 ${jb.latency.p99Ms} ms)${rateChangeText(jb)}`,
      target: '—',
      ratio: js
        ? `${(jb.eventsPerSec / js.eventsPerSec).toFixed(2)} × the rows ceiling; rows payload ${(js.payloadBytes / jb.payloadBytes).toFixed(2)} × the body`
        : '—',
      bound: boundBy(jb.usage, ['bench-publisher', 'nats-server']),
    });
  }
  const i = s.ingest?.data;
  if (i) {
    const ofCeiling = (x: JetStreamCeiling | undefined, what: string) =>
      x ? `${(i.full.eventsPerSec / x.eventsPerSec).toFixed(2)} of the ${what} ceiling` : `no ${what} ceiling`;
    const b = i.beside;
    const o = ofRawBeside(i);
    const beside =
      b && o
        ? `; against the raw publish of the same bodies right before and after it: ${o.early.toFixed(2)} of its rate while the page cache took its writes, ${o.late.toFixed(2)} of its rate once the disk set the pace, ${o.whole.toFixed(2)} of its whole runs (before: ${n(b.before.eventsPerSec)} events/s${rateChangeText(b.before)}; after: ${n(b.after.eventsPerSec)}${rateChangeText(b.after)})`
        : '';
    const r = `${ofCeiling(js, 'rows')}, ${ofCeiling(jb, 'bodies')}${beside}`;
    out.push({
      figure: `Surface A, full load (${i.connections} connections, ${i.processes} ingest processes)`,
      measured: `${n(i.full.eventsPerSec)} events/s (${n(i.full.requestsPerSec)} req/s), p50 ${i.full.latency.p50Ms} ms, p99 ${i.full.latency.p99Ms} ms, errors ${i.full.errors}${splitText(i.split)}`,
      target: `≥ 600k events/s, ≥ 0.45 × ceiling${b ? '; ≥ 0.5 × the raw publish beside it' : ''}`,
      ratio: `${r}; ${pct(i.full.eventsPerSec / 600_000)} of target`,
      bound: boundBy(i.full.usage, ['load']),
    });
    out.push({
      figure: `Surface A, half load (${k(i.half.targetEventsPerSec ?? 0)} events/s offered)`,
      measured: `${n(i.half.eventsPerSec)} events/s over ${i.half.durationS} s, p50 ${i.half.latency.p50Ms} ms, p99 ${i.half.latency.p99Ms} ms, p99.9 ${i.half.latency.p999Ms} ms, errors ${i.half.errors}; ${secondsWithin(i.half.perSecondP99Ms ?? [], 10)}`,
      target: 'p99 ≤ 10 ms at half of 600k',
      ratio: `p99 ${(i.half.latency.p99Ms / 10).toFixed(2)} × target`,
      bound: boundBy(i.half.usage, ['load']),
    });
    out.push({
      figure: 'CPU per accepted event, surface A full load',
      measured: `${cpuPerEvent(i.full.usage, i.full.eventsPerSec, ['ingest', 'nats-server'])}${gcShare(i.full)}${hostDuring(i.full.usage)}`,
      target: 'ingest ≤ 6 µs',
      ratio: `${(usPerEvent(i.full.usage, 'ingest', i.full.eventsPerSec) / 6).toFixed(2)} × target`,
      bound: '—',
    });
    const w = i.viaWrk;
    if (w) {
      const ingestUs = (m: Measured) => usPerEvent(m.usage, 'ingest', m.eventsPerSec);
      out.push({
        figure: `Surface A, full load from wrk (a load generator in C, ${i.connections} connections, the same bodies; --wrk)`,
        measured: `${n(w.eventsPerSec)} events/s (${n(w.requestsPerSec)} req/s), p50 ${w.latency.p50Ms} ms, p99 ${w.latency.p99Ms} ms, errors ${w.errors}; ${cpuPerEvent(w.usage, w.eventsPerSec, ['ingest', 'nats-server'])}${gcShare(w)}${hostDuring(w.usage)}; wrk ${usPerEvent(w.usage, 'load', w.eventsPerSec).toFixed(2)} µs per event`,
        target: 'ingest ≤ 6 µs',
        ratio: `${(w.eventsPerSec / i.full.eventsPerSec).toFixed(2)} × our generator's rate, ingest CPU per event ${(ingestUs(w) / ingestUs(i.full)).toFixed(2)} × its; ${jb ? `${(w.eventsPerSec / jb.eventsPerSec).toFixed(2)} of the bodies ceiling` : 'no bodies ceiling'}; ${(ingestUs(w) / 6).toFixed(2)} × target`,
        bound: boundBy(w.usage, ['load']),
      });
    }
    const load = usPerEvent(i.full.usage, 'load', i.full.eventsPerSec);
    const producer = (m: Measured) =>
      `${usPerEvent(m.usage, 'load', m.eventsPerSec).toFixed(2)} µs (${m.usage.groups.load?.cpuPct ?? '?'} % of a core at ${n(m.eventsPerSec)} events/s; ingest ${usPerEvent(m.usage, 'ingest', m.eventsPerSec).toFixed(1)} µs)`;
    out.push({
      figure: 'CPU per accepted event in the producer: the load generator sending prebuilt bodies, surface A full load',
      measured: `load ${producer(i.full)}`,
      target: '—',
      ratio: '—',
      bound: '—',
    });
    const vc = i.viaClient;
    if (vc) {
      const client = usPerEvent(vc.usage, 'load', vc.eventsPerSec);
      out.push({
        figure:
          'CPU per accepted event in the producer: the same full load through IngestClient (sdk/, --load-client), each event tracked one by one',
        measured: `load ${producer(vc)}, p99 ${vc.latency.p99Ms} ms, errors ${vc.errors}`,
        target: 'client ≤ 2 µs',
        ratio: `${(client / 2).toFixed(2)} × target; ${(client / load).toFixed(2)} × the prebuilt bodies' CPU; surface A ${(vc.eventsPerSec / i.full.eventsPerSec).toFixed(2)} × the prebuilt bodies' rate`,
        bound: boundBy(vc.usage, ['load']),
      });
    }
    // The resolver's cache answers surface A: PostgreSQL idles through its stages, a cold start
    // included (a plan that read every customer of a workspace per look-up once made it the bound).
    const pg = (u: Usage) => u.groups.postgres?.cpuPct ?? 0;
    // What else took the CPU while surface A was measured: two runs that differ by more than their
    // noise differ here first (ClickHouse merging earlier runs' parts, nats-server writing back).
    const servers = (u: Usage) =>
      ['nats-server', 'clickhouse']
        .map((g) => `${g} ${u.groups[g]?.cpuPct ?? 0} %`)
        .concat(`outside the benchmark ${u.otherCpuPct} %`)
        .join(', ');
    out.push({
      figure: 'PostgreSQL during surface A (customer look-ups the resolver did not answer from memory)',
      measured: `full load ${pg(i.full.usage)} % of a core (${usPerEvent(i.full.usage, 'postgres', i.full.eventsPerSec).toFixed(2)} µs per event; ${servers(i.full.usage)}), half load ${pg(i.half.usage)} % (${servers(i.half.usage)})`,
      target: '≤ 5 % of a core',
      ratio: `${(Math.max(pg(i.full.usage), pg(i.half.usage)) / 5).toFixed(2)} × target`,
      bound: '—',
    });
    if (i.stored)
      out.push({
        figure: 'JetStream message per surface-A request (stored bytes, headers included)',
        measured: `${i.stored.bytesPerMessage} B per message for a ${i.stored.requestBytes} B request (head and body)`,
        target: '≤ the request',
        ratio: `${(i.stored.bytesPerMessage / i.stored.requestBytes).toFixed(2)} × the request`,
        bound: '—',
      });
    const rss = i.full.usage.groups.ingest;
    out.push({
      figure: 'Ingest RSS at full load (max)',
      measured: `${rss.maxRssMb} MB all ingest processes (largest single process ${rss.maxProcessRssMb} MB)`,
      target: '≤ 300 MB',
      ratio: (rss.maxRssMb / 300).toFixed(2),
      bound: '—',
    });
  }
  for (const b of [s.eventsB?.data, s.eventsBStream?.data]) {
    if (!b) continue;
    const toA = (x: number) => (i ? `${(x / i.full.eventsPerSec).toFixed(2)} × surface A` : 'no surface A figure');
    const toJs = (x: number) =>
      js ? `${(x / js.eventsPerSec).toFixed(2)} of JetStream ceiling` : 'no ceiling measured';
    const stream = b.dedupAt === 'stream';
    const pg = usPerEvent(b.usage, 'postgres', b.storedPerSec);
    out.push({
      figure: `Surface B, full load, deduplication ${stream ? 'after the stream (SURFACE_B_DEDUP=stream)' : 'on the request path'} (${b.connections} connections, ${b.processes} ingest processes, ${b.batchEvents}-event batches, ${pct(b.duplicateShare)} duplicates)`,
      measured: `${n(b.eventsPerSec)} events/s accepted, ${n(b.storedPerSec)} events/s stored (${n(b.requests / b.durationS)} req/s), p50 ${b.latencyMs.p50} ms, p99 ${b.latencyMs.p99} ms, failures ${b.failures}; PostgreSQL ${pg.toFixed(1)} µs per stored event; ingest ${usPerEvent(b.usage, 'ingest', b.eventsPerSec).toFixed(1)} µs per accepted event${gcShare(b)}${hostDuring(b.usage)}${splitText(b.split)}`,
      target: stream ? '≥ 0.9 × surface A; PostgreSQL ≤ 2 µs per stored event' : '—',
      ratio: `accepted ${toA(b.eventsPerSec)}, ${toJs(b.eventsPerSec)}; stored ${toA(b.storedPerSec)}, ${toJs(b.storedPerSec)}; p50 ${i ? (b.latencyMs.p50 / i.full.latency.p50Ms).toFixed(2) : '?'} × and p99 ${i ? (b.latencyMs.p99 / i.full.latency.p99Ms).toFixed(2) : '?'} × surface A's (per request of 1000 vs 100 events)`,
      bound: boundBy(b.usage, ['load']),
    });
  }
  for (const [name, sec, m] of [
    ['Surface A, full load', s.ingest, s.ingest?.data.full],
    ['Surface B (after the stream), full load', s.eventsBStream, s.eventsBStream?.data],
  ] as const) {
    const p = sec?.previous;
    if (!sec || !p || !m) continue;
    const rate = m.eventsPerSec / p.eventsPerSec;
    const now = reproducible(sec.at, sec.command, m, runExtras(sec));
    const cpu = now.ingestUsPerEvent / p.ingestUsPerEvent;
    const outside = Math.abs(rate - 1) > 0.1 || Math.abs(cpu - 1) > 0.1;
    // The host probe of each run: how much of the difference is the machine's speed, not the code's.
    // Only probes of the same work compare (HOST_PROBE_KIND).
    const sameProbe = sec.probeKind === p.probeKind;
    const host = sec.probeUs && p.probeUs && sameProbe ? sec.probeUs / p.probeUs : undefined;
    const afterLoad =
      now.probeAfterUs !== undefined && sameProbe
        ? `, after the load ${now.probeAfterUs.toFixed(2)} against ${p.probeAfterUs?.toFixed(2) ?? '—'}`
        : '';
    // Surface A against the raw publish beside it in each run: a ratio that holds while both rates move is the host's speed.
    const raw =
      now.ofRawBeside !== undefined
        ? `; surface A ${now.ofRawBeside.early.toFixed(2)} against ${p.ofRawBeside?.early?.toFixed(2) ?? '—'} × the raw publish of the same bodies beside it (page cache; once the disk set the pace ${now.ofRawBeside.late.toFixed(2)} against ${p.ofRawBeside?.late?.toFixed(2) ?? '—'})`
        : '';
    const probe = host
      ? `; the host probe ${sec.probeUs?.toFixed(2)} against ${p.probeUs?.toFixed(2)} µs per event (${host.toFixed(2)} ×)${afterLoad}`
      : sec.probeUs && p.probeUs
        ? `; the host probes ran different work (${sec.probeKind ?? 'the byte scanner and the rows'} against ${p.probeKind ?? 'the byte scanner and the rows'}): not compared`
        : '';
    // The meter during the load sees what the probe before it cannot: the host slowing down mid-run.
    const during =
      now.hostDuringUs !== undefined && p.hostDuringUs !== undefined ? now.hostDuringUs / p.hostDuringUs : undefined;
    const meter =
      now.hostDuringUs !== undefined
        ? `; the host meter during the load ${now.hostDuringUs.toFixed(2)} against ${p.hostDuringUs?.toFixed(2) ?? '—'} µs per event${during ? ` (${during.toFixed(2)} ×)` : ''}`
        : '';
    const speedOf = during ?? host;
    const perUnit = speedOf ? cpu / speedOf : undefined;
    const speed =
      speedOf && perUnit
        ? `; per unit of the host's speed${during ? ' during the load' : ''} ${perUnit.toFixed(2)} ×${Math.abs(speedOf - 1) > 0.1 ? `, the host took ${speedOf.toFixed(2)} × the CPU for the same work${outside && during && Math.abs(perUnit - 1) <= 0.1 ? ': the host, not the code' : ''}` : ''}`
        : '';
    // What else took the two cores in each run: the load generator's and nats-server's shares move the rate.
    const was = p.othersPct;
    const connections = now.split?.length
      ? `; connections per ingest process ${now.split.join('/')} against ${p.split?.join('/') ?? '—'}`
      : '';
    const gcAgainst =
      now.gcPctOfIngest !== undefined
        ? `; the garbage collector ${now.gcPctOfIngest.toFixed(1)} against ${p.gcPctOfIngest?.toFixed(1) ?? '—'} % of ingest's CPU`
        : '';
    const others = was
      ? `; what else took the CPU (% of one core, this run against that one): ${Object.entries(now.othersPct ?? {})
          .map(([g, pct]) => `${g} ${pct} against ${was[g] ?? '—'}`)
          .join(
            ', ',
          )}${connections}${gcAgainst}; the machine ${now.machineBusyPct} against ${p.machineBusyPct ?? '—'} % busy, iowait ${now.iowaitPct ?? '—'} against ${p.iowaitPct ?? '—'} %, stolen by the hypervisor ${now.stealPct ?? '—'} against ${p.stealPct ?? '—'} %`
      : '';
    out.push({
      figure: `${name}: this run against the previous run of the scenario (${p.at.slice(0, 16)}, \`${p.command}\`)`,
      measured: `${n(m.eventsPerSec)} against ${n(p.eventsPerSec)} events/s; ingest ${now.ingestUsPerEvent.toFixed(2)} against ${p.ingestUsPerEvent.toFixed(2)} µs per event${raw}${probe}${meter}${others}`,
      target: 'within ±10 %',
      ratio: `rate ${rate.toFixed(2)} ×, ingest CPU per event ${cpu.toFixed(2)} ×${outside ? `: outside; ${others ? 'what else took the CPU is named in the measured column' : 'the CPU of the other processes is in the rows above'}` : ''}${speed}`,
      bound: '—',
    });
  }
  const e = s.e2e?.data;
  if (e) {
    const d = e.drain;
    const d1 = e.drainOneStream;
    const ofCeiling = (x: DrainResult) =>
      chBest
        ? `${(x.rowsPerSec / chBest.rowsPerSec).toFixed(2)} of the clickhouse-client ceiling${chViews ? `, ${(x.rowsPerSec / chViews.rowsPerSec).toFixed(2)} of it with the views` : ''}`
        : 'no ceiling measured';
    if (d1)
      out.push({
        figure: `Processors landing rate, 1 insert stream (draining a ${k(d1.backlogEvents)}-event backlog)`,
        measured: `${n(d1.rowsPerSec)} rows/s steady (${n(d1.overallRowsPerSec)} rows/s overall incl. start, ${d1.seconds} s; ready in ${d1.readyMs} ms)${d1.stalledAt !== undefined ? `; STALLED at ${n(d1.stalledAt)} of ${n(d1.backlogEvents)}` : ''}`,
        target: '—',
        ratio: ofCeiling(d1),
        bound: boundBy(d1.usage, ['processors']),
      });
    out.push({
      figure: `Processors landing rate${d1 ? `, ${d.insertStreams ?? 2} insert streams` : ''} (draining a ${k(d.backlogEvents)}-event backlog)`,
      measured: `${n(d.rowsPerSec)} rows/s steady (${n(d.overallRowsPerSec)} rows/s overall incl. start, ${d.seconds} s; ready in ${d.readyMs} ms)${d.stalledAt !== undefined ? `; STALLED: the writer stopped landing rows at ${n(d.stalledAt)} of ${n(d.backlogEvents)} (rates are over what landed; the other ${n(d.purgedEvents)} events were purged)` : ''}`,
      target: d1 ? '≥ 0.8 × clickhouse-client; ≥ 1.3 × 1 insert stream' : '≥ 0.8 × clickhouse-client',
      ratio: `${ofCeiling(d)}${d1 && d1.rowsPerSec > 0 ? `; ${(d.rowsPerSec / d1.rowsPerSec).toFixed(2)} × 1 insert stream` : ''}`,
      bound: boundBy(d.usage, ['processors']),
    });
    const su = e.sustained;
    out.push({
      figure: `End to end, ${k(su.load.targetEventsPerSec ?? 0)} events/s offered for ${Math.round(su.load.durationS)} s`,
      measured: `${n(su.load.eventsPerSec)} events/s accepted (p99 request ${su.load.latency.p99Ms} ms, errors ${su.load.errors}); ${lagText(su)}`,
      target: '≥ 100k events/s for 60 s, p99 ≤ 2 s',
      ratio: `${(su.load.eventsPerSec / 100_000).toFixed(2)} of rate; ${su.lag.unmatchedEvents / su.load.accepted > 0.01 ? 'p99 lag unbounded (events never landed)' : `p99 lag ${(su.lag.p99Ms / 2000).toFixed(2)} × target`}`,
      bound: boundBy(su.load.usage, ['load', 'processors']),
    });
    out.push({
      figure: 'CPU per accepted event, end to end',
      measured: cpuPerEvent(su.load.usage, su.load.eventsPerSec, ['ingest', 'nats-server', 'processors', 'clickhouse']),
      target: '—',
      ratio: '—',
      bound: '—',
    });
    const g = su.load.usage.groups;
    out.push({
      figure: 'RSS during the end-to-end run (max)',
      measured: `ingest ${g.ingest.maxRssMb} MB (largest process ${g.ingest.maxProcessRssMb} MB), processors ${g.processors?.maxRssMb ?? '?'} MB (largest process ${g.processors?.maxProcessRssMb ?? '?'} MB)`,
      target: 'ingest ≤ 300 MB',
      ratio: (g.ingest.maxRssMb / 300).toFixed(2),
      bound: '—',
    });
    out.push({
      figure: 'Every accepted event stored once',
      measured: `${n(e.check.stored)} rows stored for ${n(e.check.accepted)} events accepted`,
      target: 'equal',
      ratio: e.check.stored === e.check.accepted ? 'equal' : `${n(e.check.stored - e.check.accepted)} difference`,
      bound: '—',
    });
  }
  const o = s.outage?.data;
  if (o) out.push(...outageRows(o, chBest));
  const h = s.health?.data;
  if (h) out.push(...healthRows(h));
  const mt = s.metrics?.data;
  if (mt) out.push(...metricsRows(mt));
  const pb = s.playbooks?.data;
  if (pb) out.push(...playbooksRows(pb));
  const an = s.analytics?.data;
  if (an) out.push(...analyticsRows(an, (u) => boundBy(u)));
  const wh = s.webhooks?.data;
  if (wh) out.push(...webhooksRows(wh));
  return out;
}

function playbooksRows(p: PlaybooksResult): Row[] {
  const c = p.ceiling;
  const kinds = Object.entries(p.kinds)
    .map(([kind, n]) => `${n} ${kind}`)
    .join(', ');
  const cpu = (r: PlaybooksResult['steady']) =>
    `CPU: processors ${r.processorsCpuS} s, ClickHouse ${r.clickhouseCpuS} s`;
  return [
    {
      figure: `Playbooks: first scheduled evaluation of ${p.playbooks} enabled playbooks (${kinds}) over ${k(p.customers)} customers, ${k(p.events)} events`,
      measured: `${p.first.seconds} s${p.first.tasks !== undefined ? `, ${k(p.first.tasks)} tasks created (${k(Math.round(p.first.tasks / p.first.seconds))}/s)` : ''}; ${cpu(p.first)}`,
      target: '≤ 10 s',
      ratio: `${(p.first.seconds / c.seconds).toFixed(2)} × the bare trigger work; ${(p.first.seconds / 10).toFixed(2)} of target`,
      bound: boundBy(p.first.usage, ['processors']),
    },
    ...(p.relay
      ? [
          {
            figure: "Playbooks: the first evaluation's generated events (task_created) relayed to the event stream",
            measured: `${k(p.relay.events)} events in ${p.relay.seconds} s (${k(Math.round(p.relay.events / Math.max(p.relay.seconds, 0.001)))} events/s)`,
            target: '—',
            ratio: '—',
            bound: boundBy(p.relay.usage, ['processors']),
          },
        ]
      : []),
    {
      figure: 'Playbooks: the next evaluation (same matches, nothing fires; the relay done)',
      measured: `${p.steady.seconds} s; ${cpu(p.steady)}`,
      target: '≤ 10 s',
      ratio: `${(p.steady.seconds / c.seconds).toFixed(2)} × the bare trigger work; ${(p.steady.seconds / 10).toFixed(2)} of target`,
      bound: boundBy(p.steady.usage, ['processors']),
    },
    {
      figure: 'Playbooks ceiling: each trigger alone (its ClickHouse read, one count over its compiled predicate)',
      measured: `${c.seconds} s (ClickHouse reads ${c.readS} s, SQL ${c.sqlS} s), ${k(c.matched)} matches; ClickHouse CPU ${c.clickhouseCpuS} s`,
      target: '—',
      ratio: '1.00 (reference)',
      bound: boundBy(c.usage),
    },
  ];
}

function webhooksRows(w: WebhooksResult): Row[] {
  const h = w.healthy;
  const x = w.withHanging;
  const cpu = (p: WebhooksResult['healthy']) =>
    `CPU per 1,000 deliveries: processors ${((1000 * p.processorsCpuS) / p.delivered).toFixed(2)} s, ` +
    `PostgreSQL ${((1000 * p.postgresCpuS) / p.delivered).toFixed(2)} s`;
  return [
    {
      figure: `Webhooks: ${w.subscriptions} subscriptions, ${w.eventsPerS} changes/s for ${w.durationS} s, every endpoint healthy`,
      measured: `${k(h.perS)} deliveries/s (${h.delivered} in all); change → delivery p50 ${h.latency.p50Ms} ms, p99 ${h.latency.p99Ms} ms; ${cpu(h)}`,
      target: '≥ 2,000/s, p99 ≤ 1 s',
      ratio: `${(h.perS / 2000).toFixed(2)} of the rate; p99 ${(h.latency.p99Ms / 1000).toFixed(2)} of target`,
      bound: boundBy(h.usage, ['processors']),
    },
    {
      figure: `Webhooks: the same with ${w.hanging} of the endpoints hanging past the timeout`,
      measured: `${k(x.perS)} deliveries/s to the healthy ones; p50 ${x.latency.p50Ms} ms, p99 ${x.latency.p99Ms} ms; ${x.hangingRequests} requests held by the hanging ones`,
      target: 'healthy p99 ≤ 2 × the all-healthy p99',
      ratio: `${(x.latency.p99Ms / Math.max(h.latency.p99Ms, 1)).toFixed(2)} × the all-healthy p99`,
      bound: boundBy(x.usage, ['processors']),
    },
    {
      figure: `Webhooks: ${k(w.backlog.pending)} deliveries pending for a dead endpoint`,
      measured: `dispatcher RSS ${w.backlog.rssBeforeMb} MB → ${w.backlog.rssAfterMb} MB after ${w.backlog.seconds} s`,
      target: 'bounded',
      ratio: `${(w.backlog.rssAfterMb / Math.max(w.backlog.rssBeforeMb, 1)).toFixed(2)} ×`,
      bound: '—',
    },
  ];
}

function metricsRows(m: MetricsResult): Row[] {
  const r = m.run;
  const c = m.ceiling;
  const q = m.testQuery;
  return [
    {
      figure: `Metrics: materialization of ${m.metrics} metrics (${Object.entries(m.calculations)
        .map(([calc, n]) => `${n} ${calc}`)
        .join(', ')}) for ${k(m.customers)} customers over ${k(m.events)} events`,
      measured: `${r.seconds} s${r.rows ? `, ${k(r.rows)} values stored` : ''}; CPU: processors ${r.processorsCpuS} s, ClickHouse ${r.clickhouseCpuS} s (events generated in ${m.generateS} s)`,
      target: '≤ 60 s for 50 metrics, 100k customers, 20M events',
      ratio: `${(r.seconds / c.seconds).toFixed(2)} × the bare ClickHouse queries; ${(r.seconds / 60).toFixed(2)} of target`,
      bound: boundBy(r.usage, ['processors']),
    },
    {
      figure: `Metrics ceiling: the materializer's ${c.queries} queries (one per source event) straight against ClickHouse, one after another`,
      measured: `${c.seconds} s; ClickHouse CPU ${c.clickhouseCpuS} s`,
      target: '—',
      ratio: '1.00 (reference)',
      bound: boundBy(c.usage),
    },
    {
      figure: `Metrics: one query per metric instead (${m.perMetric.queries} queries), straight against ClickHouse`,
      measured: `${m.perMetric.seconds} s; ClickHouse CPU ${m.perMetric.clickhouseCpuS} s`,
      target: '—',
      ratio: `${(m.perMetric.seconds / c.seconds).toFixed(2)} × the grouped queries`,
      bound: boundBy(m.perMetric.usage),
    },
    {
      figure: `Metrics: POST /v1/metrics/test on that data, sampled customers, ${q.callers} callers`,
      measured: `p50 ${q.p50Ms} ms, p99 ${q.p99Ms} ms over ${q.count} requests, ${q.errors} errors`,
      target: 'p99 ≤ 500 ms',
      ratio: `${(q.p99Ms / 500).toFixed(2)} of target`,
      bound: '—',
    },
  ];
}

function healthRows(h: HealthResult): Row[] {
  const per1000 = (cpuS: number) => (cpuS / (h.customers / 1000)).toFixed(3);
  const r = h.run;
  const c = h.ceiling;
  const phases = r.phases
    ? ` (${Object.entries(r.phases)
        .map(([p, ms]) => `${p} ${ms} ms`)
        .join(', ')})`
    : '';
  const out: Row[] = [
    {
      figure: `Health: full recalculation of one workspace (${k(h.customers)} customers, ${k(h.events)} events over 30 days, ${k(h.billingEvents)} billing events)`,
      measured: `${r.seconds} s${phases}; CPU per 1000 customers: processors ${per1000(r.processorsCpuS)} s, ClickHouse ${per1000(r.clickhouseCpuS)} s (events generated in ${h.generateS} s)`,
      target: '≤ 60 s for 100k customers and 20M events',
      ratio: `${(r.seconds / c.seconds).toFixed(2)} × the bare ClickHouse aggregation; ${(r.seconds / 60).toFixed(2)} of target`,
      bound: boundBy(r.usage, ['processors']),
    },
    {
      figure: 'Health ceiling: the same GROUP BY customer_id queries straight against ClickHouse (best of 3)',
      measured: `${c.seconds} s; ClickHouse CPU per 1000 customers ${per1000(c.clickhouseCpuS)} s`,
      target: '—',
      ratio: '1.00 (reference)',
      bound: boundBy(c.usage),
    },
  ];
  if (h.recalc)
    out.push({
      figure: `Health: POST /v1/customers/{id}/health/recalculate, ${h.recalc.callers} concurrent callers`,
      measured: `p50 ${h.recalc.p50Ms} ms, p99 ${h.recalc.p99Ms} ms, max ${h.recalc.maxMs} ms over ${n(h.recalc.requests)} requests, errors ${h.recalc.errors} ${JSON.stringify(h.recalc.statusCounts)}`,
      target: 'p99 ≤ 250 ms',
      ratio: `p99 ${(h.recalc.p99Ms / 250).toFixed(2)} × target`,
      bound: '—',
    });
  else if (h.recalcSkipped)
    out.push({
      figure: 'Health: POST …/health/recalculate',
      measured: `skipped: ${h.recalcSkipped}`,
      target: 'p99 ≤ 250 ms',
      ratio: '—',
      bound: '—',
    });
  return out;
}

function outageRows(o: OutageResult, chBest: CeilingsResult['clickhouse']['best'] | undefined): Row[] {
  const gb = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(2)} GB`;
  const avgMsg = o.backlog.bytes / Math.max(1, o.backlog.messages);
  const held = `the writer held up to ${n(o.outage.maxAckPending)} messages un-acked (${n((o.outage.maxAckPending * avgMsg) / 1024 / 1024)} MB of payload; the consumer's max_ack_pending caps it at ${n(o.outage.maxAckPendingCap)} = ${gb(o.outage.maxAckPendingCap * avgMsg)})`;
  const growth = o.outage.endRssMb - o.outage.startRssMb;
  const d = o.drain;
  const c = o.check;
  const exact = c.stored === c.published && c.storedMessages === c.publishedMessages;
  const shared = o.otherPullRequests
    ? `; another client had ${o.otherPullRequests} pull requests open on the writer's consumer and shared the backlog`
    : '';
  return [
    {
      figure: `Processors RSS with ClickHouse down while a ${k(o.backlog.rows)}-event backlog (${gb(o.backlog.bytes)}) builds`,
      measured: `max ${o.outage.maxRssMb} MB over ${o.outage.seconds} s (idle before ${o.idleRssMb} MB; ${o.outage.startRssMb} MB when ClickHouse went down, ${o.outage.endRssMb} MB at the end); backlog published in ${o.backlog.seconds} s (${n(o.backlog.rows / o.backlog.seconds)} events/s)`,
      target: 'bounded: RSS does not grow with the backlog',
      ratio: `max RSS / backlog ${((o.outage.maxRssMb * 1024 * 1024) / o.backlog.bytes).toFixed(3)}; growth during the outage / backlog ${((growth * 1024 * 1024) / o.backlog.bytes).toFixed(3)}`,
      bound: held + shared,
    },
    {
      figure: `Backlog drain after ClickHouse returns (${k(o.backlog.rows)} events)`,
      measured: `${n(d.rowsPerSec)} rows/s steady (${n(d.overallRowsPerSec)} rows/s overall, ${d.seconds} s from ClickHouse answering; ClickHouse took ${d.clickhouseStartS} s to start); processors RSS max ${d.maxRssMb} MB${d.stalledAt !== undefined ? `; STALLED: the writer stopped landing rows at ${n(d.stalledAt)} of ${n(o.backlog.rows)}` : ''}`,
      target: '≥ 0.55 × clickhouse-client',
      ratio: chBest
        ? `${(d.rowsPerSec / chBest.rowsPerSec).toFixed(2)} of clickhouse-client ceiling (overall ${(d.overallRowsPerSec / chBest.rowsPerSec).toFixed(2)})`
        : 'no ceiling measured',
      bound: boundBy(d.usage, ['processors']),
    },
    {
      figure: 'Outage backlog stored exactly once',
      measured: `${n(c.stored)} rows in ${n(c.storedMessages)} batches stored for ${n(c.published)} events in ${n(c.publishedMessages)} messages published`,
      target: 'equal',
      ratio: exact
        ? 'equal'
        : `${n(c.stored - c.published)} rows, ${n(c.storedMessages - c.publishedMessages)} batches difference`,
      bound: shared ? shared.slice(2) : '—',
    },
  ];
}

function lagText(su: E2eResult['sustained']): string {
  const lag = `queryable after p50 ${su.lag.p50Ms} ms, p99 ${su.lag.p99Ms} ms, max ${su.lag.maxMs} ms`;
  if (su.lag.unmatchedEvents > 0)
    return `${lag} for the events that landed; ${n(su.lag.unmatchedEvents)} accepted events (${pct(su.lag.unmatchedEvents / su.load.accepted)}) never became queryable (row count stopped moving)`;
  return `${lag}; all in ClickHouse ${su.drainAfterStopMs} ms after the last ack`;
}

export function table(rs: Row[]): string {
  const lines = ['| figure | measured | target | ratio | what bounds it |', '|---|---|---|---|---|'];
  for (const r of rs) lines.push(`| ${r.figure} | ${r.measured} | ${r.target} | ${r.ratio} | ${r.bound} |`);
  return lines.join('\n');
}

const NOTES = /<!-- notes -->[\s\S]*<!-- \/notes -->/;

export function writeResults(dir: string, s: Stored): void {
  fs.writeFileSync(path.join(dir, 'results.json'), JSON.stringify(s, null, 2) + '\n');
  const file = path.join(dir, 'RESULTS.md');
  const old = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  const notes = NOTES.exec(old)?.[0] ?? '<!-- notes -->\n<!-- /notes -->';
  const sections = (
    [
      'parse',
      'ceilings',
      'ingest',
      'eventsB',
      'eventsBStream',
      'e2e',
      'outage',
      'health',
      'metrics',
      'playbooks',
      'analytics',
      'webhooks',
    ] as const
  )
    .filter((x) => s[x])
    .map((x) => {
      const sec = s[x]!;
      const m = sec.machine;
      return `- **${x === 'eventsB' ? 'events-b' : x === 'eventsBStream' ? 'events-b (stream)' : x}**: ${sec.at}, \`${sec.command}\`\n  on ${m.cores} cores (${m.cpu}), ${m.memoryGb} GB RAM, Linux ${m.kernel}, Node ${m.node}, nats-server ${m.natsServer}, ClickHouse ${m.clickhouse}; options ${JSON.stringify(sec.options)}`;
    });
  const md = `# Benchmark results

Written by \`npm run bench\` (bench/run.ts); the raw figures are in bench/results.json. The load
generator runs on the same 2-core machine as everything it measures, so every figure includes
its CPU cost; "what bounds it" lists the CPU each process used while the figure was measured
(% of one core; 200 % is the whole machine).

## Runs

${sections.join('\n')}

## Figures

${table(rows(s))}

## What bounds us

${notes}
`;
  fs.writeFileSync(file, md);
}

/** How the seconds of a run spread: the median of their p99s and how many kept p99 within `ms`. */
function secondsWithin(p99s: number[], ms: number): string {
  if (p99s.length === 0) return 'no per-second figures';
  const sorted = [...p99s].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)];
  return `per second: median p99 ${median.toFixed(1)} ms, ${p99s.filter((p) => p <= ms).length} of ${p99s.length} seconds with p99 ≤ ${ms} ms`;
}
