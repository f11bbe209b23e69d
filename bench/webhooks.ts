import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { connectPg } from '../lib/pg.js';
import { sampler, type BenchContext } from './context.js';
import { Histogram, type LatencySummary } from './histogram.js';
import type { Usage } from './proc-stats.js';
import { cpuS, NOBODY, processorsEnv } from './scheduled-job.js';
import { BenchError, say, sleep, startTier } from './tiers.js';
import { generateWorkspace } from './workspace-data.js';

export interface WebhookPhase {
  /** Deliveries the receiver got from healthy subscriptions, and per second. */
  delivered: number;
  perS: number;
  /** Change (the customer UPDATE's time, the payload's timestamp) → arrival at a healthy endpoint. */
  latency: LatencySummary;
  usage: Usage;
  processorsCpuS: number;
  postgresCpuS: number;
  /** Hanging endpoints' requests the receiver saw (each held past the dispatcher's timeout). */
  hangingRequests: number;
}

export interface WebhooksResult {
  subscriptions: number;
  hanging: number;
  eventsPerS: number;
  durationS: number;
  healthy: WebhookPhase;
  withHanging: WebhookPhase;
  /** A million deliveries pending for a dead endpoint: the dispatcher's memory before and after. */
  backlog: { pending: number; rssBeforeMb: number; rssAfterMb: number; seconds: number };
}

/**
 * The receiver: answers 204 at once, or (paths under /hang/) holds the request past the
 * dispatcher's timeout. Records the latency of every healthy delivery from the event's timestamp.
 */
async function receiver(): Promise<{
  url: string;
  stats: () => { n: number; hung: number; h: Histogram };
  reset(): void;
  close(): Promise<void>;
}> {
  let h = new Histogram();
  let n = 0;
  let hung = 0;
  const server = http.createServer((req, res) => {
    if (req.url?.startsWith('/hang/')) {
      hung++;
      req.resume();
      setTimeout(() => res.writeHead(204).end(), 15_000).unref();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      const at = body.indexOf('"timestamp"');
      const ts = at < 0 ? Number.NaN : Date.parse(body.slice(at + 13, at + 37));
      if (Number.isFinite(ts)) h.record((Date.now() - ts) * 1000);
      n++;
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    stats: () => ({ n, hung, h }),
    reset: () => {
      h = new Histogram();
      n = 0;
      hung = 0;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/**
 * 100 subscriptions (`customer.updated`) of one workspace to a local receiver; customers updated
 * at a steady rate (each UPDATE is one event, fanned out to every subscription), for the same
 * duration twice: every endpoint healthy, then 10 % of them hanging past the timeout. Then a
 * million deliveries queued for a dead endpoint, to read the dispatcher's memory.
 */
export async function webhooksScenario(ctx: BenchContext): Promise<WebhooksResult> {
  const subs = 100;
  const hanging = 10;
  // 20 changes/s × 100 subscriptions: the 2,000 deliveries/s the target asks for.
  const eventsPerS = 20;
  const durationS = Math.max(10, Math.min(ctx.opts.durationS, 30));
  const ws = await generateWorkspace(ctx, { customers: 10_000, events: 0, name: 'webhooks' });
  const tenant = ws.tenantId;
  const sql = connectPg(ctx.urls.DATABASE_URL, 4);
  const rx = await receiver();
  const subIds: string[] = [];
  try {
    for (let i = 0; i < subs; i++) {
      const [r] = await sql<Array<{ id: string }>>`
        INSERT INTO webhook_subscriptions (tenant_id, url, events, secret)
        VALUES (${tenant}, ${`${rx.url}/ok/${i}`}, '{customer.updated}', ${`whsec_${Buffer.alloc(32, i).toString('base64')}`})
        RETURNING id::text`;
      subIds.push(r.id);
    }
    const tier = await startTier(
      'processors',
      'PROCESSORS_PORT',
      processorsEnv(ctx, {
        HEALTH_ENABLED: 'false',
        METRICS_TENANTS: NOBODY,
        PLAYBOOKS_TENANTS: NOBODY,
        WEBHOOK_TENANTS: tenant,
        OUTBOX_POLL_MS: '50',
        WEBHOOK_POLL_MS: '50',
      }),
    );
    try {
      const phase = async (label: string): Promise<WebhookPhase> => {
        rx.reset();
        const s = sampler(ctx, { processors: () => [tier.pid] });
        const t0 = performance.now();
        let i = 0;
        // One UPDATE of `eventsPerS / 10` customers every 100 ms.
        const per = Math.max(1, Math.round(eventsPerS / 10));
        while (performance.now() - t0 < durationS * 1000) {
          const from = (i * per) % 9_000;
          await sql.unsafe(`UPDATE customers SET arr = coalesce(arr, 0) + 1 WHERE tenant_id = '${tenant}'
            AND external_id IN (SELECT 'cust-' || lpad(g::text, 6, '0') FROM generate_series(${from + 1}, ${from + per}) g)`);
          i++;
          const next = t0 + i * 100;
          await sleep(Math.max(0, next - performance.now()));
        }
        const offered = i * per * (subs - (label === 'healthy' ? 0 : hanging));
        const deadline = Date.now() + 60_000;
        while (rx.stats().n < offered && Date.now() < deadline) await sleep(100);
        const seconds = (performance.now() - t0) / 1000;
        const usage = s.stop();
        const st = rx.stats();
        if (st.n < offered) throw new BenchError(`webhooks ${label}: ${st.n} of ${offered} deliveries arrived`);
        say(`webhooks ${label}: ${st.n} deliveries in ${seconds.toFixed(1)} s, p99 ${st.h.summary().p99Ms} ms`);
        return {
          delivered: st.n,
          perS: Math.round(st.n / durationS),
          latency: st.h.summary(),
          usage,
          processorsCpuS: cpuS(usage, 'processors'),
          postgresCpuS: cpuS(usage, 'postgres'),
          hangingRequests: st.hung,
        };
      };
      const healthy = await phase('healthy');
      await sql`
        UPDATE webhook_subscriptions SET url = replace(url, '/ok/', '/hang/')
        WHERE id = ANY(${subIds.slice(0, hanging)}::uuid[])`;
      const withHanging = await phase('with 10 % hanging');

      // A million deliveries for one dead subscription, then the dispatcher's memory.
      await sql`DELETE FROM webhook_subscriptions WHERE tenant_id = ${tenant} AND NOT (id = ANY(${subIds.slice(0, 1)}::uuid[]))`;
      const pending = 1_000_000;
      await sql`
        INSERT INTO webhook_deliveries (tenant_id, subscription_id, message_id, event_type, body, next_attempt_at)
        SELECT ${tenant}, ${subIds[0]}, gen_random_uuid(), 'customer.updated',
          '{"type":"customer.updated","timestamp":"2026-01-01T00:00:00.000Z","data":{}}', now()
        FROM generate_series(1, ${pending})`;
      const rss = () => readRssMb(tier.pid);
      const rssBeforeMb = rss();
      const b0 = performance.now();
      await sleep(20_000);
      const rssAfterMb = rss();
      return {
        subscriptions: subs,
        hanging,
        eventsPerS,
        durationS,
        healthy,
        withHanging,
        backlog: { pending, rssBeforeMb, rssAfterMb, seconds: Math.round(performance.now() - b0) / 1000 },
      };
    } finally {
      await tier.stop();
    }
  } finally {
    await sql`DELETE FROM webhook_subscriptions WHERE tenant_id = ${tenant}`.catch(() => {});
    // The million deliveries just deleted would slow the next run's queue until autovacuum came.
    await sql`VACUUM ANALYZE webhook_deliveries`.catch(() => {});
    await sql`VACUUM ANALYZE webhook_attempts`.catch(() => {});
    await sql.end();
    await rx.close();
  }
}

function readRssMb(pid: number): number {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    return Math.round(kb / 1024);
  } catch {
    return 0;
  }
}
