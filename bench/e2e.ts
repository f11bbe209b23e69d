import fs from 'node:fs';
import { consumers, STREAM_EVENTS } from '../lib/nats.js';
import type { BenchContext } from './context.js';
import type { LatencySummary } from './histogram.js';
import { failOnErrors, load, purgeBenchSubjects, startIngest, type Measured } from './ingest-scenario.js';
import { lagSummary } from './lag.js';
import { round } from './meter.js';
import { ProcSampler, type Usage } from './proc-stats.js';
import { serverGroups } from './context.js';
import { BenchError, dist, say, sleep, startTier, type Tier } from './tiers.js';

export interface DrainResult {
  /** WRITER_INSERT_STREAMS of the processors tier that drained it. */
  insertStreams?: number;
  backlogEvents: number;
  /** Time from spawning processors to its /readyz. */
  readyMs: number;
  /** Rows/s between 10 % and 90 % of the backlog landing: the writer's steady rate. */
  rowsPerSec: number;
  /** Backlog size over the time from spawning processors until the last row landed. */
  overallRowsPerSec: number;
  seconds: number;
  /** Rows in ClickHouse when the writer stopped making progress, if it did. */
  stalledAt?: number;
  /** Backlog events dropped from EVENTS after a stall, so the next phase starts clean. */
  purgedEvents: number;
  usage: Usage;
}

export interface SustainedResult {
  load: Measured;
  lag: LatencySummary & { unmatchedEvents: number };
  /** From the last acknowledgement to the moment every accepted event was queryable. */
  drainAfterStopMs: number | null;
}

export interface E2eResult {
  /** The drain with the writer's default two insert streams (WRITER_INSERT_STREAMS). */
  drain: DrainResult;
  /** The same drain with one insert stream (absent in results from before it was measured). */
  drainOneStream?: DrainResult;
  sustained: SustainedResult;
  /** Exact count of the benchmark workspaces' rows against what surface A accepted (less what was purged). */
  check: { accepted: number; stored: number };
}

/** Polls ClickHouse's row count (every ~100 ms by default) into [epoch ms, rows since start]. */
export class LandedPoller {
  readonly samples: Array<[number, number]> = [];
  private active = true;
  private loop: Promise<void>;

  constructor(
    ctx: BenchContext,
    private readonly base: number,
    /** The count polled; all rows of csp.events by default (cheap: from system.parts). */
    private readonly count: () => Promise<number> = () => ctx.ch.eventsRows(),
    private readonly everyMs = 100,
  ) {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    let max = 0;
    while (this.active) {
      const t0 = Date.now();
      const n = (await this.count()) - this.base;
      if (n > max) max = n;
      this.samples.push([Date.now(), max]);
      await sleep(Math.max(0, this.everyMs - (Date.now() - t0)));
    }
  }

  get latest(): number {
    return this.samples.length ? this.samples[this.samples.length - 1][1] : 0;
  }

  firstAt(n: number): number | undefined {
    return this.samples.find(([, c]) => c >= n)?.[0];
  }

  /** Waits until n rows landed; gives up after timeoutMs, or sooner when the count stops moving. */
  async until(n: number, timeoutMs: number, stallMs = 30_000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    let seen = this.latest;
    let movedAt = Date.now();
    while (this.latest < n && Date.now() < deadline) {
      await sleep(50);
      if (this.latest !== seen) {
        seen = this.latest;
        movedAt = Date.now();
      } else if (Date.now() - movedAt > stallMs) {
        say(
          `ClickHouse row count stuck at ${seen.toLocaleString('en-US')} of ${n.toLocaleString('en-US')} for ${stallMs / 1000} s; giving up`,
        );
        break;
      }
    }
    return this.latest >= n;
  }

  async stop(): Promise<void> {
    this.active = false;
    await this.loop;
  }
}

/**
 * The processors tier as deployed, its scheduled work (health, metrics, playbooks, webhooks)
 * limited to the benchmark's workspaces: a stack that ran the test suite or other scenarios holds
 * thousands of other workspaces, up to 100k customers each, whose overdue scheduled runs would
 * otherwise start with the tier and compete with the writer being measured.
 */
export function startProcessors(ctx: BenchContext, env: Record<string, string> = {}): Promise<Tier> {
  const ours = ctx.tenants.map((t) => t.tenantId).join(',');
  return startTier(
    'processors',
    'PROCESSORS_PORT',
    {
      NATS_URL: ctx.urls.NATS_URL,
      CLICKHOUSE_URL: ctx.urls.CLICKHOUSE_URL,
      DATABASE_URL: ctx.urls.DATABASE_URL,
      STACK_PROFILE: ctx.profile.name,
      HEALTH_TENANTS: ours,
      METRICS_TENANTS: ours,
      PLAYBOOKS_TENANTS: ours,
      WEBHOOK_TENANTS: ours,
      ...env,
    },
    120_000,
  );
}

async function writerBacklog(ctx: BenchContext): Promise<{ pending: number; waiting: number }> {
  const ci = await ctx.jsm.consumers.info(STREAM_EVENTS, consumers.usageWriter);
  return { pending: ci.num_pending + ci.num_ack_pending, waiting: ci.num_waiting };
}

/** Lets a processors tier empty what others left in EVENTS, so the drain below times only ours. */
export async function emptyWriterBacklog(ctx: BenchContext): Promise<void> {
  const b = await writerBacklog(ctx);
  if (b.waiting > 0)
    say(
      `warning: something else is pulling from ${consumers.usageWriter} (${b.waiting} pull requests waiting); processors figures will be off`,
    );
  if (b.pending === 0) return;
  say(
    `e2e: ${b.pending} messages were already waiting for ${consumers.usageWriter}; letting processors drain them first`,
  );
  const p = await startProcessors(ctx);
  try {
    const deadline = Date.now() + 15 * 60_000;
    while ((await writerBacklog(ctx)).pending > 0) {
      if (Date.now() > deadline) throw new BenchError(`${consumers.usageWriter} still has a backlog after 15 minutes`);
      await sleep(500);
    }
  } finally {
    await p.stop();
  }
}

/**
 * Ingest and processors together. First the writer's landing rate: a backlog is queued while
 * processors is down, then processors starts and drains it. Then the sustained run: a fixed
 * offered load for e2eDurationS while ClickHouse's row count is polled, giving the delay until
 * each accepted event is queryable.
 */
export async function e2eScenario(ctx: BenchContext): Promise<E2eResult> {
  if (!fs.existsSync(dist('processors/main.js')))
    throw new BenchError(
      'dist/processors/main.js does not exist yet: the end-to-end scenario needs the processors tier',
    );
  await emptyWriterBacklog(ctx);
  const ingest = await startIngest(ctx);
  let processors: Tier | undefined;
  try {
    const baseCount = await ctx.ch.number(
      `SELECT count() FROM csp.events WHERE tenant_id IN (${ctx.tenants.map((t) => `'${t.tenantId}'`).join(',')})`,
    );

    // The writer's landing rate with one insert stream, then with two (the default), on backlogs
    // of the same size: what parallel landing adds, next to the clickhouse-client ceiling.
    const one = await drainPhase(ctx, ingest, 1);
    await one.processors.stop();
    const two = await drainPhase(ctx, ingest, 2);
    processors = two.processors;
    const drain = two.drain;

    say(`e2e 2/2: ${ctx.opts.e2eRate.toLocaleString('en-US')} events/s offered for ${ctx.opts.e2eDurationS} s`);
    const base2 = await ctx.ch.eventsRows();
    const poll2 = new LandedPoller(ctx, base2);
    const sustained = await load(
      ctx,
      ingest,
      { processors: () => [processors!.pid] },
      { label: 'e2e-sustained', durationS: ctx.opts.e2eDurationS, rateEventsPerSec: ctx.opts.e2eRate },
    );
    const all = await poll2.until(sustained.accepted, 120_000);
    await poll2.stop();
    const lastAck = sustained.timeline[sustained.timeline.length - 1][0];
    const doneAt = poll2.firstAt(sustained.accepted);
    const lag = lagSummary(sustained.timeline, poll2.samples);
    if (!all)
      say(
        `warning: only ${poll2.latest} of ${sustained.accepted} accepted events became queryable after the load stopped`,
      );

    const stored =
      (await ctx.ch.number(
        `SELECT count() FROM csp.events WHERE tenant_id IN (${ctx.tenants.map((t) => `'${t.tenantId}'`).join(',')})`,
      )) - baseCount;
    return {
      drain,
      drainOneStream: one.drain,
      sustained: {
        load: sustained,
        lag,
        drainAfterStopMs: doneAt === undefined ? null : Math.max(0, doneAt - lastAck),
      },
      check: {
        accepted:
          one.drain.backlogEvents -
          one.drain.purgedEvents +
          drain.backlogEvents -
          drain.purgedEvents +
          sustained.accepted,
        stored,
      },
    };
  } finally {
    await processors?.stop();
    await ingest.stop();
    // Leaves nothing for a later writer when the run stopped before processors took it all.
    await purgeBenchSubjects(ctx).catch(() => undefined);
  }
}

/**
 * Queues `--backlog-events` events with processors down, then starts processors with
 * `insertStreams` insert streams and times the drain. The tier is left running.
 */
async function drainPhase(
  ctx: BenchContext,
  ingest: Tier,
  insertStreams: number,
): Promise<{ drain: DrainResult; processors: Tier }> {
  const streams = `${insertStreams} insert stream${insertStreams === 1 ? '' : 's'}`;
  say(
    `e2e 1/2: queueing ${ctx.opts.backlogEvents.toLocaleString('en-US')} events with processors stopped (${streams})`,
  );
  const backlog = await load(
    ctx,
    ingest,
    {},
    { label: 'e2e-backlog', durationS: 600, maxEvents: ctx.opts.backlogEvents },
  );
  failOnErrors(backlog, ingest);
  const env = { WRITER_INSERT_STREAMS: String(insertStreams) };
  let procPid = 0;
  const drainSampler = new ProcSampler({
    processors: () => (procPid ? [procPid] : []),
    ...serverGroups(ctx.profile),
  }).start();
  const base1 = await ctx.ch.eventsRows();
  const poll1 = new LandedPoller(ctx, base1);
  const spawned = Date.now();
  let processors = await startProcessors(ctx, env);
  procPid = processors.pid;
  say(`e2e: processors ready in ${processors.readyMs} ms; draining ${backlog.accepted.toLocaleString('en-US')} events`);
  const drained = await poll1.until(backlog.accepted, 10 * 60_000);
  await poll1.stop();
  const drainUsage = drainSampler.stop();
  let purgedEvents = 0;
  let stalledAt: number | undefined;
  if (!drained) {
    stalledAt = poll1.latest;
    say(
      `e2e: processors stopped landing rows at ${stalledAt.toLocaleString('en-US')} of ${backlog.accepted.toLocaleString('en-US')}; restarting it and dropping the rest of the backlog. Its last output:\n${processors.output().trim().split('\n').slice(-5).join('\n')}`,
    );
    await processors.stop();
    // Each message is one request whose 100 events were all accepted.
    purgedEvents = (await purgeBenchSubjects(ctx)) * ctx.workload.eventsPerBody;
    processors = await startProcessors(ctx, env);
  }
  const landed = stalledAt ?? backlog.accepted;
  const t10 = poll1.firstAt(landed * 0.1)!;
  const t90 = poll1.firstAt(landed * 0.9)!;
  const tEnd = poll1.firstAt(landed)!;
  const drain: DrainResult = {
    insertStreams,
    backlogEvents: backlog.accepted,
    readyMs: processors.readyMs,
    rowsPerSec: t90 > t10 ? Math.round((landed * 0.8) / ((t90 - t10) / 1000)) : 0,
    overallRowsPerSec: Math.round(landed / ((tEnd - spawned) / 1000)),
    seconds: round((tEnd - spawned) / 1000, 1),
    stalledAt,
    purgedEvents,
    usage: drainUsage,
  };
  say(
    `e2e: processors landed ${drain.rowsPerSec.toLocaleString('en-US')} rows/s (steady, ${streams}), ${drain.overallRowsPerSec.toLocaleString('en-US')} rows/s overall`,
  );
  return { drain, processors };
}
