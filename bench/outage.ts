import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { consumers, STREAM_EVENTS } from '../lib/nats.js';
import type { BacklogConfig, BacklogResult } from './backlog.js';
import { serverGroups, type BenchContext } from './context.js';
import { emptyWriterBacklog, LandedPoller, startProcessors } from './e2e.js';
import { purgeBenchSubjects } from './ingest-scenario.js';
import { round } from './meter.js';
import { alive } from '../infra/proc.js';
import { ProcSampler, readPidFile, type Usage } from './proc-stats.js';
import { BenchError, dist, mustUndo, runChild, say, sleep, type Tier } from './tiers.js';

export interface OutageResult {
  backlog: BacklogResult;
  /** Processors' RSS (MB) with ClickHouse up and nothing to do, just before the outage. */
  idleRssMb: number;
  outage: {
    seconds: number;
    /** Highest RSS of processors while ClickHouse was down (supervisor and workers summed). */
    maxRssMb: number;
    /** RSS when the backlog started to build and when the outage ended: growth shows buffering. */
    startRssMb: number;
    endRssMb: number;
    /** Most messages the usage writer held un-acked, and the consumer's cap on it. */
    maxAckPending: number;
    maxAckPendingCap: number;
    usage: Usage;
  };
  drain: {
    /** From spawning `infra/cli.js up` until ClickHouse answered. */
    clickhouseStartS: number;
    /** From ClickHouse answering until the last backlog row was queryable. */
    seconds: number;
    /** Rows/s between 10 % and 90 % of the backlog landing. */
    rowsPerSec: number;
    /** Backlog rows over `seconds`, the writer's first retry after the outage included. */
    overallRowsPerSec: number;
    maxRssMb: number;
    /** Rows in ClickHouse when the count stopped moving, if it did before the whole backlog landed. */
    stalledAt?: number;
    usage: Usage;
  };
  /**
   * Pull requests other clients had open on the usage writer's consumer before processors
   * started: another writer shares the backlog, so the figures cover only part of it.
   */
  otherPullRequests: number;
  /** Exact count of the backlog's rows and messages (batch ids) in ClickHouse after the drain. */
  check: { published: number; stored: number; publishedMessages: number; storedMessages: number };
  /** Every 2 s: [seconds since the outage began, phase, processors RSS MB, writer's un-acked messages, messages not yet delivered]. */
  timeline: Array<[number, string, number, number, number]>;
}

/** Outage kept after the backlog is in: longer than two ack waits, so redeliveries would show. */
const HOLD_MS = 25_000;

function isClickHouse(pid: number): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'latin1').startsWith('clickhouse');
  } catch {
    return false;
  }
}

async function stopClickHouse(ctx: BenchContext): Promise<void> {
  const pid = readPidFile(path.join(ctx.profile.dataDir, 'clickhouse.pid'));
  if (pid === undefined || !isClickHouse(pid))
    throw new BenchError(`no running clickhouse-server in ${ctx.profile.dataDir}/clickhouse.pid`);
  process.kill(pid, 'SIGTERM');
  for (const [signal, waitMs] of [
    ['SIGKILL', 60_000],
    [undefined, 10_000],
  ] as const) {
    const deadline = Date.now() + waitMs;
    while (alive(pid) && Date.now() < deadline) await sleep(100);
    if (!alive(pid)) return;
    if (signal) {
      say(`outage: clickhouse-server ${pid} still running ${waitMs / 1000} s after SIGTERM; sending SIGKILL`);
      process.kill(pid, signal);
    }
  }
  throw new BenchError(`clickhouse-server ${pid} did not exit`);
}

async function answers(ctx: BenchContext): Promise<boolean> {
  return ctx.ch.query('SELECT 1').then(
    () => true,
    () => false,
  );
}

/**
 * `infra/cli.js up` in its own process group, so a Ctrl-C at the terminal does not cut off the
 * restart it is meant to finish; tried again if ClickHouse still does not answer.
 */
async function startClickHouse(ctx: BenchContext): Promise<void> {
  for (let attempt = 1; attempt <= 3; attempt++) {
    if (await answers(ctx)) return;
    say(`outage: starting ClickHouse again (infra/cli.js up --profile ${ctx.profile.name})`);
    const p = spawn(process.execPath, [dist('infra/cli.js'), 'up', '--profile', ctx.profile.name], {
      stdio: ['ignore', 'inherit', 'inherit'],
      detached: true,
    });
    await new Promise((r) => p.once('exit', r));
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline) {
      if (await answers(ctx)) return;
      await sleep(250);
    }
  }
  throw new BenchError(
    `ClickHouse of the ${ctx.profile.name} stack did not come back; start it with: node dist/infra/cli.js up --profile ${ctx.profile.name}`,
  );
}

const mb = (bytes: number) => Math.round(bytes / 1024 / 1024);

/**
 * ClickHouse goes down under a running processors tier while a backlog of millions of events is
 * published into EVENTS; processors' memory is sampled throughout. Holding only its current
 * batches (backpressure) keeps RSS flat however large the backlog; buffering shows as RSS that
 * grows with it. Then ClickHouse comes back and the drain is timed, and the exact count of the
 * backlog's rows and batch ids in ClickHouse checks that every message landed once.
 */
export async function outageScenario(ctx: BenchContext): Promise<OutageResult> {
  if (!fs.existsSync(dist('processors/main.js')))
    throw new BenchError('dist/processors/main.js does not exist yet: the outage scenario needs the processors tier');
  await emptyWriterBacklog(ctx);
  const inTenants = `tenant_id IN (${ctx.tenants.map((t) => `'${t.tenantId}'`).join(',')})`;
  const before = async () =>
    (await ctx.ch.query(`SELECT count(), uniqExact(batch_id) FROM csp.events WHERE ${inTenants}`))
      .trim()
      .split('\t')
      .map(Number);
  const [baseRows, baseBatches] = await before();
  const messages = Math.ceil(ctx.opts.outageEvents / ctx.workload.eventsPerBody);

  const otherPullRequests = (await ctx.jsm.consumers.info(STREAM_EVENTS, consumers.usageWriter)).num_waiting;
  if (otherPullRequests)
    say(
      `warning: another client is pulling from ${consumers.usageWriter} (${otherPullRequests} pull requests waiting); it shares the backlog`,
    );
  let processors: Tier | undefined;
  let phase = 'idle';
  const t0 = Date.now();
  const timeline: OutageResult['timeline'] = [];
  let ack = { pending: 0, undelivered: 0, cap: 0 };
  let maxAckPending = 0;
  let watching = true;
  const watcher = (async () => {
    while (watching) {
      const ci = await ctx.jsm.consumers.info(STREAM_EVENTS, consumers.usageWriter).catch(() => undefined);
      if (ci) ack = { pending: ci.num_ack_pending, undelivered: ci.num_pending, cap: ci.config.max_ack_pending ?? 0 };
      if (phase === 'outage') maxAckPending = Math.max(maxAckPending, ack.pending);
      await sleep(1000);
    }
  })();
  const restartClickHouse = mustUndo(() => startClickHouse(ctx));
  let publisherPid = 0;
  const groups = {
    processors: () => (processors ? [processors.pid] : []),
    'bench-backlog': () => (publisherPid ? [publisherPid] : []),
    ...serverGroups(ctx.profile),
  };
  const watch = (each?: (rss: Record<string, number>) => void) => {
    const s = new ProcSampler(groups);
    let n = 0;
    s.onSample = (rss) => {
      each?.(rss);
      if (n++ % 4 === 0)
        timeline.push([round((Date.now() - t0) / 1000, 1), phase, mb(rss.processors), ack.pending, ack.undelivered]);
    };
    return s.start();
  };
  try {
    processors = await startProcessors(ctx);
    const idle = watch();
    await sleep(5000);
    const idleRssMb = idle.stop().groups.processors.maxRssMb;

    say(
      `outage 1/2: stopping ClickHouse, then publishing ${(messages * ctx.workload.eventsPerBody).toLocaleString('en-US')} events (${messages.toLocaleString('en-US')} messages) into EVENTS`,
    );
    phase = 'outage';
    await stopClickHouse(ctx);
    const outageStarted = performance.now();
    let lastRss = 0;
    const outage = watch((rss) => (lastRss = rss.processors));
    const startRss = lastRss;
    const backlog = await runChild<BacklogConfig, BacklogResult>(
      'bench/backlog.js',
      {
        natsUrl: ctx.urls.NATS_URL,
        tenants: ctx.tenants,
        workload: ctx.workload,
        messages,
        inflight: ctx.opts.publishInflight,
      },
      (pid) => (publisherPid = pid),
    );
    say(
      `outage: ${backlog.rows.toLocaleString('en-US')} rows (${mb(backlog.bytes)} MB) in EVENTS after ${backlog.seconds} s; keeping ClickHouse down ${HOLD_MS / 1000} s more`,
    );
    await sleep(HOLD_MS);
    const outageUsage = outage.stop();
    const outageS = (performance.now() - outageStarted) / 1000;
    if (backlog.failed) say(`warning: ${backlog.failed} backlog publishes failed and are not part of the backlog`);

    say('outage 2/2: ClickHouse back; timing the drain');
    phase = 'drain';
    const spawnedAt = performance.now();
    await restartClickHouse();
    const upAt = Date.now();
    const clickhouseStartS = round((performance.now() - spawnedAt) / 1000, 1);
    const drainSampler = watch();
    // Rows of this run's workspaces, not all of csp.events: ClickHouse 18.16 can bring back parts
    // that a TRUNCATE or dropped partition left outdated when it restarts, and the total then
    // jumps. A count over the table (rows only; the batch ids are counted once, at the end), so
    // once a second rather than ten times.
    const poll = new LandedPoller(
      ctx,
      baseRows,
      () => ctx.ch.number(`SELECT count() FROM csp.events WHERE ${inTenants}`),
      1000,
    );
    const drained = await poll.until(backlog.rows, 15 * 60_000, 60_000);
    await poll.stop();
    const drainUsage = drainSampler.stop();
    const landed = drained ? backlog.rows : poll.latest;
    if (!drained)
      say(
        `outage: the writer stopped landing rows at ${landed.toLocaleString('en-US')} of ${backlog.rows.toLocaleString('en-US')}. processors' last output:\n${processors.output().trim().split('\n').slice(-5).join('\n')}`,
      );
    const t10 = poll.firstAt(landed * 0.1);
    const t90 = poll.firstAt(landed * 0.9);
    const tEnd = poll.firstAt(landed) ?? Date.now();
    // Late copies (a message stored twice) would land after the count was reached: wait for the writer to ack everything.
    const settle = Date.now() + 60_000;
    while (drained && Date.now() < settle && (ack.pending > 0 || ack.undelivered > 0)) await sleep(500);
    const [rowsNow, batchesNow] = await before();
    return {
      backlog,
      idleRssMb,
      outage: {
        seconds: round(outageS, 1),
        maxRssMb: outageUsage.groups.processors.maxRssMb,
        startRssMb: mb(startRss),
        endRssMb: mb(lastRss),
        maxAckPending,
        maxAckPendingCap: ack.cap,
        usage: outageUsage,
      },
      drain: {
        clickhouseStartS,
        seconds: round((tEnd - upAt) / 1000, 1),
        rowsPerSec:
          t10 !== undefined && t90 !== undefined && t90 > t10 ? Math.round((landed * 0.8) / ((t90 - t10) / 1000)) : 0,
        overallRowsPerSec: tEnd > upAt ? Math.round(landed / ((tEnd - upAt) / 1000)) : 0,
        maxRssMb: drainUsage.groups.processors.maxRssMb,
        stalledAt: drained ? undefined : landed,
        usage: drainUsage,
      },
      otherPullRequests,
      check: {
        published: backlog.rows,
        stored: rowsNow - baseRows,
        publishedMessages: backlog.messages,
        storedMessages: batchesNow - baseBatches,
      },
      timeline,
    };
  } finally {
    await restartClickHouse();
    watching = false;
    await watcher;
    await processors?.stop();
    // Leaves nothing for a later writer when the run stopped before processors took it all.
    await purgeBenchSubjects(ctx).catch(() => undefined);
  }
}
