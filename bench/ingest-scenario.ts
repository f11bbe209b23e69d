import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { subjects, STREAM_EVENTS } from '../lib/nats.js';
import { trimAcknowledged } from '../processors/stream-trimmer.js';
import { jetstreamCeiling, type JetStreamCeiling } from './ceilings.js';
import { sampler, type BenchContext } from './context.js';
import { hostProbe } from './host-probe.js';
import type { LoadConfig } from './load.js';
import type { LoadResult } from './meter.js';
import { connectionsAfter, type Usage } from './proc-stats.js';
import { BenchError, type GcDuring, runChild, say, startTier, type Tier, watchGc } from './tiers.js';
import { wrkLoad } from './wrk.js';

export type Measured = LoadResult & { usage: Usage; gc?: GcDuring };

/** Longer than the kernel's 30 s dirty expiry, so the half-load run includes its own writeback. */
const HALF_LOAD_MIN_S = 45;
const execFileP = promisify(execFile);

export interface IngestResult {
  processes: number;
  connections: number;
  /** The full load's connections held by each ingest process half-way through, busiest first. */
  split?: number[];
  /** The host probe (bench/parse.ts) right after the full load, µs per event. */
  probeAfterUs?: number;
  full: Measured;
  /**
   * --load-client: the same full load again, its events tracked one by one through the producer
   * client (sdk/, IngestClient, uncompressed like the prebuilt bodies) instead of sent as prebuilt
   * request bytes, right after `full`: the client's CPU per event next to the prebuilt load's.
   */
  viaClient?: Measured;
  /** --wrk: the same full load from wrk (bench/wrk.ts), right after `full`. */
  viaWrk?: Measured;
  half: Measured;
  /**
   * The raw publish of the same request bodies (the bodies ceiling, bench/ceilings.ts) right
   * before and right after the full load: surface A's ratio to it taken within the same minute.
   * This VM's speed drifts between scenarios, and the ceilings scenario runs minutes earlier.
   */
  beside?: { before: JetStreamCeiling; after: JetStreamCeiling };
  /**
   * What JetStream stored per request during the full-load run (payload, subject and headers, from
   * the stream's byte count) against the requests the load sent (head and body).
   */
  stored?: { bytesPerMessage: number; requestBytes: number };
}

export function startIngest(ctx: BenchContext): Promise<Tier> {
  return startTier('ingest', 'INGEST_PORT', {
    NATS_URL: ctx.urls.NATS_URL,
    DATABASE_URL: ctx.urls.DATABASE_URL,
    STACK_PROFILE: ctx.profile.name,
    INGEST_PROCESSES: String(ctx.opts.ingestProcesses),
    INGEST_RATE_LIMIT_PER_MIN: '100000000',
  });
}

/** One load process against surface A, with CPU and memory of every process sampled meanwhile. */
export async function load(
  ctx: BenchContext,
  ingest: Tier,
  extra: Record<string, () => number[]>,
  c: Pick<LoadConfig, 'label' | 'durationS'> & Partial<LoadConfig>,
): Promise<Measured> {
  let loadPid = 0;
  const gc = await watchGc(ingest);
  const s = sampler(ctx, { ingest: () => [ingest.pid], load: () => (loadPid ? [loadPid] : []), ...extra });
  try {
    const port = Number(new URL(ingest.url).port);
    const result = await runChild<LoadConfig, LoadResult>(
      'bench/load.js',
      {
        host: '127.0.0.1',
        port,
        tenants: ctx.tenants,
        workload: ctx.workload,
        connections: ctx.opts.connections,
        ...c,
      },
      (pid) => (loadPid = pid),
    );
    const usage = s.stop();
    return { ...result, usage, gc: await gc() };
  } finally {
    s.stop();
  }
}

/** A run where more than 1 % of requests failed measures a failure, not throughput. */
export function failOnErrors(r: LoadResult, tier: Tier): void {
  if (r.errors <= r.requests * 0.01 && r.accepted > 0) return;
  throw new BenchError(
    `${r.label}: ${r.errors} of ${r.requests} requests failed ${JSON.stringify(r.statusCounts)}; ingest's last output:\n${tier.output().trim().split('\n').slice(-3).join('\n').slice(0, 1500)}`,
  );
}

/**
 * Drops what the benchmark's workspaces left in EVENTS when no writer was there to consume it: all
 * of their subjects, so that surface B's keyed and backfill messages do not stay pending on their
 * consumers and hold up the next user of the stack (a test's processors would work behind them).
 * nats-server 2.9 before 2.9.15 keeps counting what a purge by subject removed against the
 * account's storage (nats-io/nats-server#3876): every run would add the gigabytes it published,
 * until at `max_file_store` the server refuses every publish (ingest answers 503) until it is
 * restarted. A purge by sequence is accounted for, so when EVENTS holds nothing but the
 * benchmark's subjects everything up to its last message goes that way; messages arriving
 * meanwhile have later sequences and stay.
 */
export async function purgeBenchSubjects(ctx: BenchContext): Promise<number> {
  const ours = new Set(
    ctx.tenants.flatMap(({ tenantId: t }) => [
      subjects.usage(t),
      subjects.billing(t),
      subjects.backfill(t),
      subjects.keyed(t),
    ]),
  );
  const onlyOurs = async () => {
    const info = await ctx.jsm.streams.info(STREAM_EVENTS, { subjects_filter: '>' });
    return Object.keys(info.state.subjects ?? {}).every((subject) => ours.has(subject))
      ? info.state.last_seq
      : undefined;
  };
  let last = await onlyOurs();
  // Other workspaces' messages that every consumer has finished with go first, by sequence, as the
  // processors' trimmer would take them (a stack that served the suite holds such leftovers, and
  // each purge by subject there leaked the GBs of a run from the account's storage).
  if (last === undefined && (await trimAcknowledged(ctx.jsm, STREAM_EVENTS)) > 0) last = await onlyOurs();
  if (last !== undefined) return (await ctx.jsm.streams.purge(STREAM_EVENTS, { seq: last + 1 })).purged;
  say("EVENTS holds other workspaces' messages: purging by subject (nats-server 2.9 keeps counting those bytes)");
  let messages = 0;
  for (const subject of ours) messages += (await ctx.jsm.streams.purge(STREAM_EVENTS, { filter: subject })).purged;
  return messages;
}

/**
 * Purges what the benchmark's workspaces put in EVENTS and writes back what is still dirty, so that
 * the next load starts where the first one did (a purged file's dirty pages are dropped unwritten).
 */
async function emptyStream(ctx: BenchContext, after: string): Promise<void> {
  const t0 = Date.now();
  const purged = await purgeBenchSubjects(ctx);
  await execFileP('sync');
  say(
    `ingest: ${purged.toLocaleString('en-US')} messages of ${after} purged, the rest written back, in ${Date.now() - t0} ms`,
  );
}

/**
 * Surface A alone: full load (closed loop, `connections` requests in flight), then half that
 * accepted rate (or `--half-rate`) paced open-loop, for latency. No processors run, so what
 * ingest accepts stays in EVENTS until it is purged at the end.
 */
export async function ingestScenario(ctx: BenchContext): Promise<IngestResult> {
  const ingest = await startIngest(ctx);
  say(`ingest: ${ctx.opts.ingestProcesses} processes ready on ${ingest.url} in ${ingest.readyMs} ms`);
  try {
    await load(ctx, ingest, {}, { label: 'ingest-warmup', durationS: 3 });
    const raw = (when: 'before' | 'after') => {
      if (!ctx.opts.rawBesideS) return undefined;
      say(`ingest: the raw publish of the same bodies, ${when} the full load`);
      return jetstreamCeiling(ctx, 'body', `raw-${when}`, ctx.opts.rawBesideS);
    };
    const rawBefore = await raw('before');
    const before = (await ctx.jsm.streams.info(STREAM_EVENTS)).state;
    // Half-way through, how the kernel split the load's connections over the ingest processes.
    const port = Number(new URL(ingest.url).port);
    const splitTaken = connectionsAfter(ingest.pid, port, (ctx.opts.durationS * 1000) / 2);
    const full = await load(ctx, ingest, {}, { label: 'ingest-full', durationS: ctx.opts.durationS });
    const split = splitTaken();
    const after = (await ctx.jsm.streams.info(STREAM_EVENTS)).state;
    failOnErrors(full, ingest);
    // From where the full-load run started for what comes next: an empty stream and nothing dirty.
    // Right after it, wrk ran while the kernel wrote back its GBs, with nats-server at 2.9 µs per
    // event instead of 0.9 µs, and measured that writeback as much as ingest.
    await emptyStream(ctx, 'the full-load run');
    // The host's speed again, on the quiet machine: the one before the load cannot see it move
    // during the load, and this VM's does within minutes.
    const probeAfterUs = hostProbe();
    const rawAfter = await raw('after');
    let viaClient: Measured | undefined;
    if (ctx.opts.loadClient) {
      viaClient = await load(
        ctx,
        ingest,
        {},
        {
          label: 'ingest-full-client',
          durationS: ctx.opts.durationS,
          client: { gzip: false },
        },
      );
      failOnErrors(viaClient, ingest);
    }
    let viaWrk: Measured | undefined;
    if (ctx.opts.wrk) {
      if (viaClient) await emptyStream(ctx, 'the client run');
      viaWrk = await wrkLoad(ctx, ingest, ctx.opts.durationS);
      failOnErrors(viaWrk, ingest);
    }
    const messages = after.messages - before.messages;
    const stored =
      messages > 0 && full.requests > 0
        ? {
            bytesPerMessage: Math.round((after.bytes - before.bytes) / messages),
            requestBytes: Math.round((full.bytesPerSec * full.durationS) / full.requests),
          }
        : undefined;
    const rate = ctx.opts.halfRate || Math.round(full.eventsPerSec / 2 / 1000) * 1000;
    // The full-load run leaves GBs of stream data dirty in the page cache; 30 s after it was
    // written (vm.dirty_expire_centisecs) the kernel writes it back in one wave, and nats-server's
    // appends wait behind that ext4 journal commit for 100-250 ms. That wave belongs to the run
    // before: its data is purged and the rest written back first. The half-load run then lasts long
    // enough to include the writeback of its own data, which a steady half load does have.
    if (viaWrk || viaClient) await emptyStream(ctx, viaWrk ? 'the wrk run' : 'the client run');
    const half = await load(
      ctx,
      ingest,
      {},
      { label: 'ingest-half', durationS: Math.max(ctx.opts.durationS, HALF_LOAD_MIN_S), rateEventsPerSec: rate },
    );
    failOnErrors(half, ingest);
    return {
      processes: ctx.opts.ingestProcesses,
      connections: ctx.opts.connections,
      split,
      probeAfterUs,
      full,
      viaClient,
      viaWrk,
      half,
      beside: rawBefore && rawAfter ? { before: rawBefore, after: rawAfter } : undefined,
      stored,
    };
  } finally {
    await ingest.stop();
    await purgeBenchSubjects(ctx);
  }
}
