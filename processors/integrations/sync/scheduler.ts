import type { Providers } from '../../../lib/integrations/providers.js';
import type { Logger } from '../../../lib/logger.js';
import { inTenant, inTenants, type Sql } from '../../../lib/pg.js';
import { Ticker } from '../../../lib/ticker.js';
import type { AccessTokens } from '../access-tokens.js';
import { syncGmail } from './gmail.js';
import { syncGoogleCalendar } from './google-calendar.js';
import { ProviderClient, SyncError } from './http.js';
import { syncOutlookCalendar } from './outlook-calendar.js';
import { syncOutlookMail } from './outlook-mail.js';
import type { Connector, SyncRun } from './run.js';

type SyncName = SyncRun['name'];

/** The connectors that sync, and the scope their reads need (named when a provider refuses one). */
export const SYNC_CONNECTORS: Record<SyncName, { sync: Connector; scope: string }> = {
  gmail: { sync: syncGmail, scope: 'https://www.googleapis.com/auth/gmail.readonly' },
  outlook: { sync: syncOutlookMail, scope: 'Mail.Read' },
  google_calendar: { sync: syncGoogleCalendar, scope: 'https://www.googleapis.com/auth/calendar.readonly' },
  outlook_calendar: { sync: syncOutlookCalendar, scope: 'Calendars.Read' },
};
export const SYNC_NAMES = Object.keys(SYNC_CONNECTORS) as SyncName[];
const isSyncName = (name: string): name is SyncName => (SYNC_NAMES as string[]).includes(name);
const FORGET_EVERY_MS = 10 * 60_000;

export interface IntegrationSyncOptions {
  /** A connection is synced again when its last sync finished longer ago than this. */
  intervalMs: number;
  /** Pause between scheduled looks for due connections (jittered; lib/ticker.ts). */
  pollMs: number;
  /** Lease lifetime; renewed every third of it while a sync lasts. */
  leaseTtlMs: number;
  /** Syncs in flight in this instance at most. */
  concurrency: number;
  /** How far back a first sync reads. */
  lookbackMs: number;
  /** The longest Retry-After a sync waits out. */
  maxWaitMs: number;
  /** This process, as the lease's holder. */
  holder: string;
  /** Only these workspaces (empty: all). */
  tenants: string[];
  /** Told of each sync's outcome (/metrics). */
  finished?: (name: SyncName, outcome: 'ok' | 'failed' | 'stopped') => void;
}

interface Claimed {
  tenant_id: string;
  name: SyncName;
  /** The connection the cursor belongs to; null before the first sync. */
  connection_id: string | null;
  current: string;
  cursor: Record<string, unknown>;
}

/**
 * The e-mail and calendar sync (docs/integrations.md), with any number of processors instances:
 * - at every look an instance claims the connections that are due (connected, a configured provider,
 *   no live lease, and last synced longer than an interval ago, asked for through
 *   POST /v1/integrations/{name}/sync since, or never synced on this connection: a connection
 *   made again is due even while the pause after a failure of the earlier one lasts), up to its
 *   free slots, each with one conditional upsert of its integration_syncs row that succeeds only
 *   while the lease is free (released, or run out): two instances never sync the same connection
 *   at once;
 * - the looks are scheduled (lib/ticker.ts), and one connection is looked at at once when the core API
 *   says its sync was asked for or it was just connected (requested(), requests.ts); a sync asked for
 *   while one ran is claimed as soon as that one ends, by the instance that ran it;
 * - the lease is renewed while the sync lasts and released at its end; a killed holder's lease
 *   runs out after leaseTtlMs and another instance takes the connection over from the stored cursor;
 * - the cursor is kept at the end of the sync, also after a failure (the stages that completed);
 *   a cursor of an earlier connection (disconnected and connected again) is not used;
 * - a provider that refuses a scope puts the integration in `error` naming it; any other failure
 *   is recorded as last_error and the connection is tried again after min(interval, 60 s).
 */
export class IntegrationSync {
  private readonly ticker: Ticker;
  private readonly running = new Set<Promise<unknown>>();
  private forgotAt = 0;
  /** The claims of this instance, one after another: each counts the slots the one before filled. */
  private claims: Promise<unknown> = Promise.resolve();
  /** The connections a requested look is queued or under way for: a second request adds nothing. */
  private readonly asked = new Set<string>();

  constructor(
    private readonly sql: Sql,
    private readonly tokens: AccessTokens | undefined,
    private readonly providers: Providers,
    private readonly log: Logger,
    private readonly o: IntegrationSyncOptions,
  ) {
    this.ticker = new Ticker(
      o.pollMs * 4,
      () => this.once().then(() => {}),
      (err) => log.warn({ err: String(err) }, 'integration sync poll failed'),
    );
  }

  private get stopping(): boolean {
    return this.ticker.stopping;
  }

  start(): void {
    if (!this.tokens) return void this.log.info('no data key: integration sync is off');
    this.ticker.start(0);
  }

  /**
   * Claims what is due (up to the free slots; `only` one connection) and starts the syncs; how
   * many it started.
   */
  once(only?: { tenantId: string; name: SyncName }): Promise<number> {
    const p = this.claims.then(() => this.claimAndStart(only));
    this.claims = p.catch(() => {});
    return p;
  }

  /**
   * A look at one connection now, for a sync asked for or a new connection: started if it is due
   * and a slot is free, else left to the scheduled looks (another instance's, or a later one).
   */
  async requested(tenantId: string, name: string): Promise<number> {
    const { tenants } = this.o;
    if (!this.tokens || this.stopping || !isSyncName(name) || !this.providers[name]) return 0;
    if (tenants.length && !tenants.includes(tenantId)) return 0;
    const key = `${tenantId}/${name}`;
    if (this.asked.has(key)) return 0;
    this.asked.add(key);
    try {
      return await this.once({ tenantId, name });
    } catch (err) {
      this.log.warn({ tenantId, name, err: String(err) }, 'requested integration sync: claim failed');
      return 0;
    } finally {
      this.asked.delete(key);
    }
  }

  private async claimAndStart(only?: { tenantId: string; name: SyncName }): Promise<number> {
    if (Date.now() - this.forgotAt > FORGET_EVERY_MS) {
      this.forgotAt = Date.now();
      await this.forget().catch((err: unknown) =>
        this.log.warn({ err: String(err) }, 'integration sync cleanup failed'),
      );
    }
    const free = this.o.concurrency - this.running.size;
    const names = SYNC_NAMES.filter((n) => this.providers[n]);
    if (free <= 0 || !names.length || this.stopping) return 0;
    const claimed = await this.claim(names, free, only);
    for (const c of claimed) {
      const p = this.run(c).finally(() => this.running.delete(p));
      this.running.add(p);
      // Asked for again while it ran: the next sync now, not at the next look.
      p.then(
        (again) => void (again && this.requested(c.tenant_id, c.name)),
        (err: unknown) => this.log.error({ tenantId: c.tenant_id, name: c.name, err }, 'integration sync run failed'),
      );
    }
    return claimed.length;
  }

  private async claim(
    names: SyncName[],
    limit: number,
    only?: { tenantId: string; name: SyncName },
  ): Promise<Claimed[]> {
    const { holder, leaseTtlMs, intervalMs, tenants } = this.o;
    const sql = this.sql;
    return sql<Claimed[]>`
      WITH due AS (
        SELECT i.tenant_id, i.name, i.connection_id FROM integrations i
        LEFT JOIN integration_syncs s ON s.tenant_id = i.tenant_id AND s.name = i.name
        WHERE i.status = 'connected' AND i.name = ANY(${names}::text[])
          AND ${inTenants(tenants, 'i')}
          ${only ? sql`AND ${inTenant(only.tenantId, 'i')} AND i.name = ${only.name}` : sql``}
          AND (s.tenant_id IS NULL OR (s.lease_expires_at < now() AND (
            s.connection_id IS DISTINCT FROM i.connection_id OR s.last_finished_at IS NULL
            OR s.last_finished_at < now() - (${intervalMs}::float8 * interval '1 ms')
            OR s.requested_at > s.last_started_at))
            -- A connection made again (after an error, say) is synced at once, whatever the
            -- earlier connection's failure left as a pause; never while a sync holds the lease.
            OR (s.holder IS NULL AND s.connection_id IS DISTINCT FROM i.connection_id))
        ORDER BY random() LIMIT ${limit}
      ),
      taken AS (
        INSERT INTO integration_syncs AS s (tenant_id, name, holder, lease_expires_at, last_started_at)
        SELECT tenant_id, name, ${holder}, now() + (${leaseTtlMs}::float8 * interval '1 ms'), now() FROM due
        ORDER BY tenant_id, name
        ON CONFLICT (tenant_id, name) DO UPDATE
          SET holder = EXCLUDED.holder, lease_expires_at = EXCLUDED.lease_expires_at, last_started_at = now()
          WHERE s.lease_expires_at < now() OR s.holder IS NULL
        RETURNING s.tenant_id, s.name, s.connection_id, s.cursor
      )
      SELECT t.tenant_id::text, t.name, t.connection_id::text, d.connection_id::text AS current, t.cursor
      FROM taken t JOIN due d ON d.tenant_id = t.tenant_id AND d.name = t.name`;
  }

  /** One sync, its outcome recorded; whether another was asked for while it ran. */
  private async run(c: Claimed): Promise<boolean> {
    const { holder, leaseTtlMs } = this.o;
    const key = { tenantId: c.tenant_id, name: c.name };
    const renew = setInterval(
      () =>
        void this.sql`
          UPDATE integration_syncs SET lease_expires_at = now() + (${leaseTtlMs}::float8 * interval '1 ms')
          WHERE ${inTenant(c.tenant_id)} AND name = ${c.name} AND holder = ${holder}`.then(
          (r) => r.count === 0 && this.log.warn(key, 'integration sync lease lost during a run'),
          (err: unknown) => this.log.warn({ ...key, err: String(err) }, 'integration sync lease renewal failed'),
        ),
      Math.max(500, Math.floor(leaseTtlMs / 3)),
    );
    const provider = this.providers[c.name];
    const same = c.connection_id === c.current;
    const cursor = same ? { ...c.cursor } : {};
    // A new connection starts over: what an earlier one remembered of the calendar is not its own.
    if (!same)
      await this.sql`
        DELETE FROM integration_pending_meetings WHERE ${inTenant(c.tenant_id)} AND name = ${c.name}`.catch(
        (err: unknown) => this.log.warn({ ...key, err: String(err) }, 'pending meetings of an earlier connection kept'),
      );
    const t0 = performance.now();
    const run: SyncRun = {
      tenantId: c.tenant_id,
      name: c.name,
      apiUrl: provider?.apiUrl ?? '',
      api: new ProviderClient(this.tokens as AccessTokens, key, provider?.apiUrl ?? '', {
        scope: SYNC_CONNECTORS[c.name].scope,
        stopping: () => this.stopping,
        maxWaitMs: this.o.maxWaitMs,
      }),
      cursor,
      now: Date.now(),
      lookbackMs: this.o.lookbackMs,
      ownDomains: await this.ownDomains(c.tenant_id).catch(() => new Set<string>()),
      fetchConcurrency: 4,
      sql: this.sql,
      log: this.log,
      stopping: () => this.stopping,
      counts: { fetched: 0, events: 0, unmatched: 0, resyncs: 0 },
    };
    let failure: { message: string; scope?: boolean; stopped?: boolean; gone?: boolean } | undefined;
    try {
      await SYNC_CONNECTORS[c.name].sync(run);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === 'SYNC_STOPPED') failure = { message: 'stopped', stopped: true };
      else if (code === 'INTEGRATION_NOT_CONNECTED') failure = { message: 'not connected', gone: true };
      else if (err instanceof SyncError || code?.startsWith('INTEGRATION_'))
        failure = { message: (err as Error).message, scope: code === 'SYNC_SCOPE_MISSING' };
      else {
        this.log.error({ ...key, err }, 'integration sync failed');
        failure = { message: 'the sync failed on our side; it is retried' };
      }
    } finally {
      clearInterval(renew);
    }
    const ms = Math.round(performance.now() - t0);
    this.o.finished?.(c.name, !failure ? 'ok' : failure.stopped || failure.gone ? 'stopped' : 'failed');
    const again = await this.finish(c, run, failure).catch((err: unknown) => {
      this.log.warn({ ...key, err: String(err) }, 'integration sync result not recorded; its lease runs out');
      return false;
    });
    if (!failure) this.log.info({ ...key, ms, ...run.counts }, 'integration sync finished');
    else if (!failure.stopped && !failure.gone)
      this.log.warn({ ...key, ms, err: failure.message, ...run.counts }, 'integration sync failed');
    // After a failure the connection waits out its pause; while stopping nothing new starts.
    return again && !failure;
  }

  /**
   * Releases the lease with the cursor and the outcome; a refused scope also puts the integration
   * in error. Whether a sync was asked for since this one started.
   */
  private async finish(
    c: Claimed,
    run: SyncRun,
    f: { message: string; scope?: boolean; stopped?: boolean } | undefined,
  ): Promise<boolean> {
    const { holder, intervalMs } = this.o;
    const backoffMs = f?.stopped ? 0 : Math.min(intervalMs, 60_000);
    return this.sql.begin(async (tx) => {
      const [r] = await tx<Array<{ again: boolean | null }>>`
        UPDATE integration_syncs SET cursor = ${tx.json(run.cursor as never)}, connection_id = ${c.current},
          holder = NULL,
          lease_expires_at = ${f ? tx`now() + (${backoffMs}::float8 * interval '1 ms')` : tx`'-infinity'`},
          last_finished_at = ${f ? tx`last_finished_at` : tx`now()`},
          last_synced_at = ${f ? tx`last_synced_at` : tx`now()`},
          last_error = ${f && !f.stopped ? f.message : tx`last_error`},
          last_error_at = ${f && !f.stopped ? tx`now()` : tx`last_error_at`}
        WHERE ${inTenant(c.tenant_id)} AND name = ${c.name} AND holder = ${holder}
        RETURNING requested_at > last_started_at AS again`;
      if (f?.scope)
        await tx`
          UPDATE integrations SET status = 'error', error = ${f.message}, updated_at = now()
          WHERE ${inTenant(c.tenant_id)} AND name = ${c.name} AND connection_id = ${c.current}
            AND status = 'connected'`;
      return r?.again === true;
    });
  }

  /**
   * What is kept of connections that are no longer connected (disconnected, or in `error`) is
   * forgotten: their pending meetings (outside attendees' addresses) and their cursors (the
   * mailbox's address). Connecting again starts over anyway (a new connection id).
   */
  async forget(): Promise<{ meetings: number; cursors: number }> {
    const { tenants } = this.o;
    const sql = this.sql;
    const meetings = await sql`
      DELETE FROM integration_pending_meetings p
      WHERE NOT EXISTS (SELECT 1 FROM integrations i
        WHERE i.tenant_id = p.tenant_id AND i.name = p.name AND i.status = 'connected') AND ${inTenants(tenants, 'p')}`;
    const cursors = await sql`
      UPDATE integration_syncs s SET cursor = '{}'
      WHERE cursor <> '{}' AND lease_expires_at < now() AND NOT EXISTS (SELECT 1 FROM integrations i
        WHERE i.tenant_id = s.tenant_id AND i.name = s.name AND i.status = 'connected') AND ${inTenants(tenants, 's')}`;
    return { meetings: meetings.count, cursors: cursors.count };
  }

  /** The workspace's own domains: those of its users' addresses. */
  private async ownDomains(tenantId: string): Promise<Set<string>> {
    const rows = await this.sql<Array<{ d: string }>>`
      SELECT DISTINCT lower(split_part(email, '@', 2)) AS d FROM users WHERE ${inTenant(tenantId)}`;
    return new Set(rows.map((r) => r.d).filter(Boolean));
  }

  async stop(): Promise<void> {
    await this.ticker.stop();
    // A requested claim under way may still start syncs: they see stopping and end at once.
    await this.claims;
    await Promise.all([...this.running]);
  }
}
