import { splitProperties } from '../../lib/event-properties.js';
import { EVENT_ROW_COLUMNS, FORMAT_HEADER, ROW_FORMAT, RowBinaryWriter } from '../../lib/row-binary.js';
import { headers, type JetStreamClient } from 'nats';
import type { TransactionSql } from 'postgres';
import type { Logger } from '../../lib/logger.js';
import { subjects } from '../../lib/nats.js';
import { inTenants, type Sql } from '../../lib/pg.js';
import type { EventRow } from '../../schemas/rows.js';
import type { OutboxMetrics } from '../metrics.js';

export interface RelayOptions {
  /**
   * Longest pause between polls when the outbox was drained: a poll comes sooner when PostgreSQL
   * notifies that rows were written (channel `outbox`, migration 0089), or when the relay listens
   * again after its LISTEN was lost.
   */
  pollMs: number;
  /** Rows per poll, at most. */
  batch: number;
  /** Published rows older than this are deleted by the daily purge. */
  keepMs: number;
  /** The workspaces whose rows this relay publishes (OUTBOX_TENANTS); empty: every workspace. */
  tenants: readonly string[];
}

/**
 * What a relay moves: rows of one outbox table (`id`, `published_at` and an `occurred_at` to order
 * by), each published as one JetStream message whose Nats-Msg-Id is the row's id.
 */
export interface RelaySource<R extends { id: string }> {
  table: 'event_outbox' | 'webhook_outbox';
  /**
   * Up to `batch` unpublished rows, oldest first, locked FOR UPDATE SKIP LOCKED; of the workspaces in
   * `tenants` only, unless it is empty (`inTenants`).
   */
  lock(tx: TransactionSql, batch: number, tenants: readonly string[]): Promise<R[]>;
  publish(r: R, now: number): Promise<void>;
  /**
   * Extra writes, in the poll's transaction, for the rows that were published; what it returns
   * runs once the transaction committed.
   */
  published?(tx: TransactionSql, rows: R[]): Promise<(() => void) | undefined>;
}

/**
 * What a source's publish() throws for a row that no retry can publish (it cannot be encoded as a
 * message): the relay sets the row aside instead of retrying it, and with it the rows behind it, forever.
 */
export class Unpublishable extends Error {
  constructor(cause: unknown) {
    super(String(cause), { cause });
    this.name = 'Unpublishable';
  }
}

const DAY_MS = 24 * 3600_000;

/**
 * Relays an outbox (rows written in the transaction of the state change that causes them) into
 * JetStream:
 * - each poll locks up to `batch` unpublished rows with FOR UPDATE SKIP LOCKED, so instances
 *   share the outbox without waiting on each other, publishes each row as one message, and marks
 *   published only the rows whose PubAck came;
 * - a row that cannot be published at all (Unpublishable) is set aside: marked published with the
 *   reason in `unpublishable`, and logged; one bad row held every poll in the retry backoff before;
 * - the row id is the message's Nats-Msg-Id: a row published twice (a crash between PubAck and
 *   commit) is one message to the stream within its duplicate window, and consumers deduplicate
 *   by it after that;
 * - published rows are deleted after `keepMs` by a daily purge;
 * - a drained relay waits for a notification on channel `outbox` naming its table (sent by a trigger
 *   when a transaction that inserted rows commits), or `pollMs` at most;
 * - the LISTEN is postgres.js's `sql.listen`, on a connection of its own that it opens again
 *   whenever that connection closes (a restart of PostgreSQL), or fails to open (a first LISTEN
 *   while PostgreSQL is down: the failed listener stays registered and is subscribed again), after
 *   the pool's `backoff` (processors/main.ts bounds it: postgres.js's default grows to 20 s). Its
 *   `onlisten`, called at every subscription, polls at once, also out of a failed poll's backoff:
 *   what was notified while nobody listened is relayed as soon as the relay listens again, not a
 *   poll later. Only a LISTEN refused on a connection that stays open (a standby) is not retried by
 *   postgres.js; the relay then relays on `pollMs` alone.
 */
export class OutboxRelay<R extends { id: string }> {
  private stopping = false;
  private loop?: Promise<void>;
  private purgeTimer?: NodeJS.Timeout;
  private firstPurge?: NodeJS.Timeout;
  private listening?: Promise<{ unlisten: () => Promise<void> } | undefined>;
  /** A notification came since the last poll began. */
  private notified = false;
  /** The relay listened (again) since the last poll began. */
  private subscribed = false;
  /** How many times the LISTEN took effect: the first, then after each loss. */
  private subscriptions = 0;
  /** Ends the current pause; `listening`: woken by a new subscription (ends a failed poll's backoff too). */
  private wakeUp?: (listening: boolean) => void;

  constructor(
    private readonly sql: Sql,
    private readonly source: RelaySource<R>,
    private readonly log: Logger,
    private readonly metrics: OutboxMetrics,
    private readonly o: RelayOptions,
  ) {}

  start(): void {
    // Listening before the first poll: a row written after that poll and before the LISTEN took
    // effect would wait for the next subscription's poll.
    this.listening = this.sql
      .listen(
        'outbox',
        (table) => {
          if (table === this.source.table) this.wake();
        },
        () => this.listened(),
      )
      .catch((err) => {
        // postgres.js subscribes this listener again once its connection opens (see the contract).
        this.log.warn(
          { err: String(err), table: this.source.table },
          'outbox notifications not listened to yet; listening again once PostgreSQL answers, polling meanwhile',
        );
        return undefined;
      });
    this.loop = this.listening.then(() => this.run());
    this.firstPurge = setTimeout(() => void this.purge(), 60_000);
    this.purgeTimer = setInterval(() => void this.purge(), DAY_MS);
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      let r = { locked: 0, failed: 0 };
      this.notified = false;
      this.subscribed = false;
      try {
        r = await this.once();
      } catch (err) {
        r.failed = 1;
        this.log.warn({ err: String(err), table: this.source.table }, 'outbox relay poll failed');
      }
      failures = r.failed ? failures + 1 : 0;
      // A failed poll's backoff is not cut short by notifications (a busy outbox would retry a
      // failing publish at their rate), only by a new subscription: PostgreSQL is back.
      if (failures) await this.pause(Math.min(10_000, this.o.pollMs * 2 ** failures), false);
      else if (r.locked < this.o.batch) await this.pause(this.o.pollMs, true);
    }
  }

  private wake(): void {
    if (this.stopping) return;
    this.notified = true;
    this.wakeUp?.(false);
  }

  /** postgres.js's `onlisten`: the LISTEN took effect, the first time or again after a loss. */
  private listened(): void {
    if (this.stopping) return;
    if (this.subscriptions++)
      this.log.info({ table: this.source.table, times: this.subscriptions }, 'outbox notifications listened to again');
    this.subscribed = true;
    this.wakeUp?.(true);
  }

  /**
   * `ms` at most, or until stop(), a new subscription, or (`notified`) a notification; at once when
   * one of those came since the poll began.
   */
  private pause(ms: number, notified: boolean): Promise<void> {
    if (this.stopping || this.subscribed || (notified && this.notified)) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeUp = (listening) => (listening || notified) && done();
    });
  }

  /** One poll: how many rows it locked, and how many of them could not be published. */
  async once(): Promise<{ locked: number; failed: number }> {
    let committed: (() => void) | undefined;
    const r = (await this.sql.begin(async (tx) => {
      const rows = await this.source.lock(tx, this.o.batch, this.o.tenants);
      if (!rows.length) return { locked: 0, failed: 0 };
      const now = Date.now();
      const results = await Promise.allSettled(rows.map((r) => this.source.publish(r, now)));
      const done: string[] = [];
      const setAside: Array<{ id: string; reason: string }> = [];
      let lastErr: unknown;
      results.forEach((res, i) => {
        if (res.status === 'fulfilled') done.push(rows[i].id);
        else if (res.reason instanceof Unpublishable) setAside.push({ id: rows[i].id, reason: res.reason.message });
        else lastErr = res.reason;
      });
      if (setAside.length) {
        await tx`
          UPDATE ${tx(this.source.table)} AS o SET published_at = now(), unpublishable = u.reason
          FROM unnest(${setAside.map((r) => r.id)}::uuid[], ${setAside.map((r) => r.reason)}::text[]) AS u (id, reason)
          WHERE o.id = u.id`;
        for (const r of setAside)
          this.log.error(
            { id: r.id, reason: r.reason, table: this.source.table },
            'outbox row cannot be published; set aside',
          );
      }
      if (done.length) {
        await tx`UPDATE ${tx(this.source.table)} SET published_at = now() WHERE id = ANY(${done}::uuid[])`;
        const published = rows.filter((_, i) => results[i].status === 'fulfilled');
        committed = await this.source.published?.(tx, published);
      }
      this.metrics.relayed(done.length);
      const failed = rows.length - done.length - setAside.length;
      // Left unpublished for the next poll; the commit below still records the rows that made it.
      if (failed)
        this.log.warn(
          { err: String(lastErr), failed, table: this.source.table },
          'outbox rows not published; retrying',
        );
      return { locked: rows.length, failed };
    })) as { locked: number; failed: number };
    committed?.();
    return r;
  }

  async purge(): Promise<number> {
    try {
      const r = await this.sql`
        DELETE FROM ${this.sql(this.source.table)}
        WHERE published_at < now() - (${this.o.keepMs}::float8 * interval '1 ms')`;
      if (r.count) this.log.info({ rows: r.count, table: this.source.table }, 'published outbox rows purged');
      return r.count;
    } catch (err) {
      this.log.warn({ err: String(err), table: this.source.table }, 'outbox purge failed; retried tomorrow');
      return 0;
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.firstPurge);
    clearInterval(this.purgeTimer);
    this.wakeUp?.(true);
    await this.loop;
    // A listener whose first LISTEN failed has no handle: it stays with the pool, ignored (stopping).
    await (await this.listening)?.unlisten().catch(() => {});
  }
}

interface OutboxRow {
  id: string;
  tenant_id: string;
  customer_id: string;
  event_name: string;
  properties: Record<string, unknown>;
  occurred_at: Date;
  /** 'system' (health_changed, task_*) or 'integration' (provider activity). */
  surface: string;
}

/**
 * The events the service generates (event_outbox), relayed to ev.system.<tenant>, where the system
 * writer stores them in csp.events like any event (the outbox id is their event_id and batch_id).
 * The event names it publishes enter the workspace's event catalog in the same transaction (ON
 * CONFLICT DO NOTHING), so a generated name is listed from its first event on; like catalog.ts it
 * remembers the (workspace, name) pairs it has written and skips them.
 */
export class SystemEvents implements RelaySource<OutboxRow> {
  readonly table = 'event_outbox';
  /** `tenant|event_name` pairs known to be in event_catalog. */
  private cataloged = new Set<string>();

  constructor(
    private readonly js: JetStreamClient,
    private readonly publishTimeoutMs: number,
  ) {}

  lock(tx: TransactionSql, batch: number, tenants: readonly string[]): Promise<OutboxRow[]> {
    return tx<OutboxRow[]>`
      SELECT id::text, tenant_id::text, customer_id::text, event_name, properties, occurred_at, surface
      FROM event_outbox WHERE published_at IS NULL AND ${inTenants(tenants)}
      ORDER BY occurred_at LIMIT ${batch}
      FOR UPDATE SKIP LOCKED`;
  }

  async publish(r: OutboxRow, now: number): Promise<void> {
    const h = headers();
    h.set('Cs-Rows', '1');
    h.set('Cs-Names', r.event_name);
    h.set(FORMAT_HEADER, ROW_FORMAT);
    let payload: Buffer;
    try {
      const w = new RowBinaryWriter(512);
      w.row(EVENT_ROW_COLUMNS, systemEventRow(r, now));
      payload = w.take();
    } catch (err) {
      // Not a row of csp.events (e.g. an occurred_at past what DateTime holds): no retry changes that.
      throw new Unpublishable(err);
    }
    await this.js.publish(subjects.system(r.tenant_id), payload, {
      msgID: r.id,
      headers: h,
      timeout: this.publishTimeoutMs,
    });
  }

  /**
   * Upserts the (workspace, name) pairs of `rows` not written before, in key order, so that two
   * instances inserting the same pairs wait for each other instead of deadlocking. The pairs are
   * remembered only once committed: a rolled-back pass writes its names again next time.
   */
  async published(tx: TransactionSql, rows: OutboxRow[]): Promise<(() => void) | undefined> {
    const keys = new Set<string>();
    for (const r of rows) {
      const k = `${r.tenant_id}|${r.event_name}`;
      if (!this.cataloged.has(k)) keys.add(k);
    }
    if (!keys.size) return undefined;
    const fresh = [...keys].sort();
    const tenants = fresh.map((k) => k.slice(0, k.indexOf('|')));
    const names = fresh.map((k) => k.slice(k.indexOf('|') + 1));
    await tx`
      INSERT INTO event_catalog (tenant_id, event_name)
      SELECT u.tenant_id, u.event_name FROM unnest(${tenants}::uuid[], ${names}::text[]) AS u (tenant_id, event_name)
      JOIN tenants t ON t.id = u.tenant_id
      ORDER BY u.tenant_id, u.event_name
      ON CONFLICT DO NOTHING`;
    return () => {
      if (this.cataloged.size > 100_000) this.cataloged.clear();
      for (const k of fresh) this.cataloged.add(k);
    };
  }
}

/**
 * The csp.events row of a generated event, as the ingest tier writes its rows: event_id and
 * batch_id are the outbox id, surface 'system', properties split as lib/event-properties.ts
 * describes, so that filters on properties work on generated events as on ingested ones.
 */
export function systemEventRow(r: OutboxRow, now: number): EventRow {
  const ms = r.occurred_at.getTime();
  const props = splitProperties(r.properties);
  return {
    tenant_id: r.tenant_id,
    customer_id: r.customer_id,
    event_name: r.event_name,
    ts: Math.floor(ms / 1000),
    ts_ms: ms % 1000,
    event_id: r.id,
    batch_id: r.id,
    received_at: Math.floor(now / 1000),
    external_customer_id: '',
    external_source: '',
    user_id: '',
    product_id: '',
    product_code: '',
    surface: r.surface,
    external_id: '',
    properties: props.raw,
    prop_keys: props.keys,
    prop_values: props.values,
    user_email: '',
    user_external_id: '',
    prop_kinds: props.kinds,
  };
}
