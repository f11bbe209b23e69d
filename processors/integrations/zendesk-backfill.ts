import { storeActivities } from '../../lib/integrations/activities.js';
import { tokenDisowned } from '../../lib/integrations/oauth.js';
import type { Logger } from '../../lib/logger.js';
import { inTenant, inTenants, type Sql } from '../../lib/pg.js';
import type { ActivityPush } from '../../schemas/core/integrations.js';
import { PollingJob } from '../polling-job.js';
import { type AccessTokens, missingScope, retryAfterMs } from './access-tokens.js';
import type { IntegrationJobOptions } from './notifier.js';
import { type ProviderAnswer, readAnswer } from './provider-answer.js';

/** How far back a new connection's export starts. */
export const BACKFILL_DAYS = 90;
/** Pages per claim (Zendesk allows 10 export requests a minute); the rest at the next claim. */
const PAGES_PER_CLAIM = 8;
const LEASE_MS = 2 * 60_000;
/** Requested backfills in flight in one instance at most (besides the scheduled look's). */
const REQUESTED_AT_ONCE = 4;
const TIMEOUT_MS = 15_000;

type Activity = ActivityPush['activities'][number];

interface Claim {
  tenant_id: string;
  connection_id: string;
  backfill_cursor: string | null;
}

interface Ticket {
  id?: unknown;
  status?: unknown;
  requester_id?: unknown;
  created_at?: unknown;
  updated_at?: unknown;
}

interface Page {
  tickets?: Ticket[];
  users?: Array<{ id?: unknown; email?: unknown }>;
  after_cursor?: string | null;
  end_of_stream?: boolean;
}

/**
 * The tickets of a new Zendesk connection from before its webhook existed, through Zendesk's
 * cursor-based incremental ticket export (`GET /api/v2/incremental/tickets/cursor.json`, from
 * `start_time` BACKFILL_DAYS ago, then `cursor=after_cursor` until `end_of_stream`), with the
 * requesters side-loaded (`include=users`) for their e-mail addresses. Each ticket is a
 * ticket_opened at its creation and, solved or closed, a ticket_closed at its last update, with
 * the same activity ids as the webhook's, so a ticket both exported and delivered counts once.
 * One instance works on a connection at a time (a lease on the integration's row); the cursor is
 * kept after every page, so a stopped export resumes where it was. A 429 waits Retry-After; a 403
 * for a missing scope, or a 401 (a token Zendesk disowns), puts the integration in `error`; other
 * failures are kept in last_error and tried again a minute later. A reconnection (a new
 * connection_id) starts over. A new connection is looked for on schedule (pollMs, jittered) and at
 * once when the core API says one was made (requested(), requests.ts), under the same lease.
 */
export class ZendeskBackfill extends PollingJob {
  /** Requested backfills under way, by workspace. */
  private readonly inFlight = new Map<string, Promise<number>>();
  private stopped = false;

  constructor(
    private readonly sql: Sql,
    private readonly tokens: AccessTokens | undefined,
    private readonly log: Logger,
    private readonly o: IntegrationJobOptions,
  ) {
    super(log, 'zendesk backfill', o.pollMs);
  }

  /**
   * The workspace's new connection, backfilled now rather than at the next look: one round (the
   * next ones on schedule), unless another instance holds it, or this one already works on it or
   * on REQUESTED_AT_ONCE others (then the scheduled look takes it). Never rejects.
   */
  requested(tenantId: string): Promise<number> {
    const { tenants } = this.o;
    if (this.stopped || !this.tokens || (tenants.length && !tenants.includes(tenantId))) return Promise.resolve(0);
    if (this.inFlight.has(tenantId) || this.inFlight.size >= REQUESTED_AT_ONCE) return Promise.resolve(0);
    const p = this.once(tenantId)
      .catch((err: unknown) => {
        this.log.warn({ tenantId, err: String(err) }, 'requested zendesk backfill: claim failed');
        return 0;
      })
      .finally(() => this.inFlight.delete(tenantId));
    this.inFlight.set(tenantId, p);
    return p;
  }

  override async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([super.stop(), ...this.inFlight.values()]);
  }

  /** One round of the oldest connection due (`tenantId`: that workspace's only); how many it claimed. */
  async once(tenantId?: string): Promise<number> {
    if (!this.tokens) return 0;
    const [claim] = await this.sql<Claim[]>`
      UPDATE integrations i SET backfill_lease_until = now() + ${LEASE_MS}::float8 * interval '1 ms'
      FROM (
        SELECT tenant_id FROM integrations
        WHERE name = 'zendesk' AND status = 'connected' AND backfilled_at IS NULL
          AND coalesce(backfill_lease_until, '-infinity') < now()
          AND ${inTenants(this.o.tenants)}
          ${tenantId ? this.sql`AND ${inTenant(tenantId)}` : this.sql``}
        ORDER BY connected_at LIMIT 1 FOR UPDATE SKIP LOCKED
      ) c
      WHERE i.tenant_id = c.tenant_id AND i.name = 'zendesk'
      RETURNING i.tenant_id::text, i.connection_id::text, i.backfill_cursor`;
    if (!claim) return 0;
    await this.run(claim).catch((err: unknown) =>
      this.log.warn({ tenantId: claim.tenant_id, err: String(err) }, 'zendesk backfill failed'),
    );
    return 1;
  }

  private async run(claim: Claim): Promise<void> {
    const tokens = this.tokens!;
    const c = { tenantId: claim.tenant_id, name: 'zendesk' };
    let cursor = claim.backfill_cursor;
    for (let page = 0; page < PAGES_PER_CLAIM; page++) {
      const q = cursor
        ? `cursor=${encodeURIComponent(cursor)}`
        : `start_time=${Math.floor(Date.now() / 1000) - BACKFILL_DAYS * 86_400}`;
      const res = await tokens.call(c, (token, p) =>
        get(`${p.apiUrl}/api/v2/incremental/tickets/cursor.json?${q}&include=users`, token),
      );
      if (res.status !== 200) return this.refused(claim, res);
      const body = res.body as Page;
      const activities = ticketActivities(body);
      if (activities.length) await storeActivities(this.sql, claim.tenant_id, 'zendesk', activities);
      cursor = body.after_cursor ?? cursor;
      const done = body.end_of_stream === true;
      await this.sql`
        UPDATE integrations SET backfill_cursor = ${cursor}, updated_at = now(),
          backfilled_at = ${done ? new Date() : null},
          backfill_lease_until = CASE WHEN ${done} THEN NULL ELSE backfill_lease_until END
        WHERE ${inTenant(claim.tenant_id)} AND name = 'zendesk' AND connection_id = ${claim.connection_id}`;
      if (done) {
        this.log.info({ tenantId: claim.tenant_id }, 'zendesk backfill complete');
        return;
      }
    }
  }

  private async refused(claim: Claim, res: ProviderAnswer): Promise<void> {
    const c = { tenantId: claim.tenant_id, name: 'zendesk' };
    const scope = missingScope('zendesk', res.status, res.wwwAuthenticate, res.body);
    if (scope) return this.tokens!.fail(c, scope);
    // A 401 after AccessTokens.call's one refresh (Zendesk's tokens usually have none to refresh):
    // only a new connection helps, as for the webhook's requester look-up.
    if (res.status === 401) return this.tokens!.fail(c, `ticket backfill: ${tokenDisowned('Zendesk', 'zendesk')}`);
    const waitMs = res.status === 429 ? retryAfterMs(res.retryAfter, 60_000) : 60_000;
    const error = `ticket backfill: Zendesk answered HTTP ${res.status}`;
    await this.sql`
      UPDATE integrations SET backfill_lease_until = now() + ${waitMs}::float8 * interval '1 ms',
        last_error = ${res.status === 429 ? null : error}, last_error_at = ${res.status === 429 ? null : new Date()}
      WHERE ${inTenant(claim.tenant_id)} AND name = 'zendesk' AND connection_id = ${claim.connection_id}`;
  }
}

const CLOSED = new Set(['solved', 'closed']);

/** A page of the incremental ticket export as ticket activities (ids shared with the webhook). */
export function ticketActivities(page: Page): Activity[] {
  const emails = new Map<string, string>();
  for (const u of page.users ?? []) if (typeof u.email === 'string') emails.set(String(u.id), u.email);
  const out: Activity[] = [];
  for (const t of page.tickets ?? []) {
    if (t.id === undefined || t.status === 'deleted') continue;
    const email = emails.get(String(t.requester_id));
    const participants = email ? [email] : [];
    const created = time(t.created_at);
    if (created)
      out.push({ id: `zendesk:ticket:${t.id}:opened`, type: 'ticket_opened', occurred_at: created, participants });
    const updated = time(t.updated_at);
    if (CLOSED.has(String(t.status)) && updated)
      out.push({ id: `zendesk:ticket:${t.id}:closed`, type: 'ticket_closed', occurred_at: updated, participants });
  }
  return out;
}

const time = (x: unknown) => {
  const t = typeof x === 'string' ? Date.parse(x) : Number.NaN;
  return Number.isFinite(t) ? new Date(t).toISOString() : undefined;
};

async function get(url: string, token: string): Promise<ProviderAnswer> {
  const res = await fetch(url, {
    headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  return readAnswer(res);
}
