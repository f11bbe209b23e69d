import type { PendingQuery, Row } from 'postgres';
import { inTenant, type Sql } from '../../lib/pg.js';
import { ApiError } from '../../lib/problem.js';

/**
 * Surface B's deduplication keys, (customer_id, external_id), recorded in PostgreSQL
 * (`event_dedup`). A key row names the request that recorded it (`batch_id`); while that request
 * is between recording its keys and its PubAck, it also has a reservation row
 * (`event_dedup_pending`). So a key is, to any other request:
 *
 * - **stored**: its request has no reservation (it was acknowledged, or recorded inside a
 *   transaction that committed after the PubAck, or before reservations existed);
 * - **in flight**: its request's reservation is live. The other request waits for it to end
 *   (a notification on CHANNEL, polling as a fallback): confirmed, the key is stored; released
 *   (the publish failed), the key row is gone and the next request to claim it owns it;
 * - **in doubt**: the reservation expired (its process died between recording and confirming).
 *   The next request takes the key over and stores the event: a copy too many if the dead
 *   process's publish had gone through, never a lost event.
 *
 * A request thus holds no row lock, transaction or connection across its publish; one that
 * shares keys with a request in flight waits for that request's outcome, holding nothing itself.
 */

/** The notification channel: payload, the batch id whose reservation ended. */
export const CHANNEL = 'event_dedup';

/** A key held by another request still in flight, or in doubt. */
interface Held {
  k: number;
  owner: string;
  expired: boolean;
}

export interface KeySet {
  tenantId: string;
  /** This request's batch id (the Nats-Msg-Id): the owner written on its key rows. */
  batchId: string;
  customers: string[];
  externals: string[];
}

export class DedupKeys {
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(
    private readonly sql: Sql,
    private readonly o: {
      /** How long a reservation stands without being confirmed or released before others take its keys over. */
      reservationMs: number;
      /** The longest a request waits for the keys it shares with requests in flight. */
      maxWaitMs: number;
    },
  ) {}

  /** Listens for reservations that end; until it does, waiting requests poll. */
  async listen(): Promise<void> {
    await this.sql.listen(CHANNEL, (batchId) => {
      const wake = this.waiters.get(batchId);
      if (!wake) return;
      this.waiters.delete(batchId);
      for (const w of wake) w();
    });
  }

  /**
   * Records the keys no other request holds, owned by `s.batchId`, and returns which are this
   * request's to store (`fresh[k] = 1`), once every key shared with a request in flight has its
   * outcome. `reserve`: also record the reservation (one statement with the keys); without it the
   * caller's open transaction stands for it (other requests block on its uncommitted rows).
   */
  async claim(db: Sql, s: KeySet, reserve: boolean): Promise<Uint8Array> {
    const fresh = new Uint8Array(s.customers.length);
    const all = Array.from({ length: s.customers.length }, (_, k) => k);
    let { held, unseen } = await this.insert(db, s, all, reserve, fresh);
    const started = Date.now();
    let waitMs = 20;
    let waited = false;
    for (;;) {
      // Keys whose state the last statement could not see: a statement of their own, a new snapshot.
      if (unseen.length) {
        const now = await this.look(db, s, unseen);
        held = held.concat(now.held);
        unseen = [];
        if (now.gone.length) {
          // Released by a request whose publish failed: free to insert.
          const again = await this.insert(db, s, now.gone, false, fresh);
          held = held.concat(again.held);
          unseen = again.unseen;
          continue;
        }
      }
      if (held.length === 0) break;
      const expired = held.filter((h) => h.expired);
      if (expired.length) await this.takeOver(db, s, expired, fresh);
      const live = held.filter((h) => !h.expired);
      if (live.length) {
        if (Date.now() - started > this.o.maxWaitMs)
          throw new ApiError(
            'service_unavailable',
            'Events of this request share external_ids with another request that is still being stored; nothing of ' +
              'this request was stored. Retry shortly.',
            undefined,
            [['Retry-After', '1']],
          );
        await this.wait(new Set(live.map((h) => h.owner)), waitMs);
        waitMs = Math.min(200, waitMs * 2);
        waited = true;
      }
      // What was held is held still, stored, or released: look again.
      unseen = held.map((h) => h.k).filter((k) => fresh[k] !== 1);
      held = [];
    }
    // A long wait ate into this request's own reservation: it starts again before the publish.
    if (waited && reserve && Date.now() - started > this.o.reservationMs / 4) {
      await db`UPDATE event_dedup_pending SET expires_at = now() + ${this.o.reservationMs} * interval '1 millisecond'
        WHERE batch_id = ${s.batchId}`;
    }
    return fresh;
  }

  /** The publish was acknowledged: the keys are stored; requests waiting on them go on. */
  async confirm(s: KeySet): Promise<void> {
    await this.sql`
      WITH d AS (DELETE FROM event_dedup_pending WHERE batch_id = ${s.batchId} RETURNING batch_id)
      SELECT pg_notify(${CHANNEL}, batch_id::text) FROM d`;
  }

  /** Nothing was stored: the request's keys are free again (whoever waits on them may take them). */
  async release(s: KeySet, fresh: Uint8Array | undefined): Promise<void> {
    const c: string[] = [];
    const e: string[] = [];
    if (fresh)
      for (let k = 0; k < fresh.length; k++)
        if (fresh[k] === 1) {
          c.push(s.customers[k]);
          e.push(s.externals[k]);
        }
    // Without the fresh set (an error during the claim), every key this batch may own goes.
    const keys = fresh ? { c, e } : { c: s.customers, e: s.externals };
    // Rows found one key at a time, then deleted by their ctid (see `keyRow`).
    await this.sql`
      WITH l AS (
        SELECT x.ctid FROM unnest(${keys.c}::uuid[], ${keys.e}::text[]) AS u(c, e)
        CROSS JOIN LATERAL ${keyRow(this.sql, s, this.sql`d.ctid`)} x
      ), k AS (
        DELETE FROM event_dedup d WHERE d.ctid = ANY(ARRAY(SELECT ctid FROM l)) AND d.batch_id = ${s.batchId}
      ), p AS (DELETE FROM event_dedup_pending WHERE batch_id = ${s.batchId} RETURNING batch_id)
      SELECT pg_notify(${CHANNEL}, batch_id::text) FROM p`;
  }

  /**
   * Reservations that expired more than `graceMs` ago belong to requests whose process died; their
   * keys stay in doubt until a request shares one. Releases them (keys and reservation, one
   * statement per reservation so no transaction grows large), as a request taking them over would:
   * a copy too many if that publish had gone through, never a lost event. Returns how many.
   */
  async sweep(graceMs: number, limit = 100): Promise<number> {
    const expired = await this.sql<{ batch_id: string; tenant_id: string }[]>`
      SELECT batch_id::text, tenant_id::text FROM event_dedup_pending
      WHERE expires_at < now() - ${graceMs} * interval '1 millisecond' LIMIT ${limit}`;
    // The keys go only with a reservation still expired (not renewed meanwhile). A scan of the
    // workspace's keys (batch_id has no index: every insert would pay for one), once per crash.
    for (const r of expired)
      await this.sql`
        WITH p AS (
          DELETE FROM event_dedup_pending WHERE batch_id = ${r.batch_id} AND expires_at < now() RETURNING batch_id
        ),
        k AS (DELETE FROM event_dedup WHERE ${inTenant(r.tenant_id)} AND batch_id IN (SELECT batch_id FROM p))
        SELECT pg_notify(${CHANNEL}, batch_id::text) FROM p`;
    return expired.length;
  }

  /**
   * Inserts the keys `ks` owned by this batch (sorted, so that concurrent requests lock shared keys
   * in one order) and marks what went in fresh; of the others, returns those held by a request in
   * flight or in doubt, and those the statement's snapshot cannot see (committed while the insert
   * waited on them: `look` decides). A key in neither list is stored. One statement.
   */
  private async insert(
    db: Sql,
    s: KeySet,
    ks: number[],
    reserve: boolean,
    fresh: Uint8Array,
  ): Promise<{ held: Held[]; unseen: number[] }> {
    const c = ks.map((k) => s.customers[k]);
    const e = ks.map((k) => s.externals[k]);
    const reservation = reserve
      ? db`r AS (
          INSERT INTO event_dedup_pending (batch_id, tenant_id, expires_at)
          VALUES (${s.batchId}, ${s.tenantId}, now() + ${this.o.reservationMs} * interval '1 millisecond')
        ),`
      : db``;
    // Only the keys that did not go in come back (a tenth of a retried batch, not all 1000), by index.
    const rows = await db<{ k: number; unseen: boolean; held: boolean; owner: string; expired: boolean }[]>`
      WITH ${reservation} u AS (SELECT c, e, k FROM unnest(${c}::uuid[], ${e}::text[], ${ks}::int[]) AS u(c, e, k)),
      ins AS (
        INSERT INTO event_dedup (tenant_id, customer_id, external_id, batch_id)
        SELECT ${s.tenantId}::uuid, c, e, ${s.batchId}::uuid FROM u ORDER BY e, c
        ON CONFLICT DO NOTHING
        RETURNING customer_id, external_id
      ),
      rest AS (SELECT * FROM u WHERE NOT EXISTS (SELECT 1 FROM ins i WHERE i.customer_id = u.c AND i.external_id = u.e))
      SELECT u.k, d.customer_id IS NULL AS unseen, p.batch_id IS NOT NULL AS held, d.batch_id::text AS owner,
        p.expires_at <= now() AS expired
      FROM rest AS u
      ${this.owners(db, s)}`;
    for (const k of ks) fresh[k] = 1;
    const held: Held[] = [];
    const unseen: number[] = [];
    for (const r of rows) {
      fresh[r.k] = 0;
      if (r.unseen) unseen.push(r.k);
      else if (r.held) held.push({ k: r.k, owner: r.owner, expired: r.expired });
    }
    return { held, unseen };
  }

  /**
   * Where the keys `ks` stand now: held by a request in flight or in doubt, or gone (released); the rest are stored.
   */
  private async look(db: Sql, s: KeySet, ks: number[]): Promise<{ held: Held[]; gone: number[] }> {
    const rows = await db<{ k: number; owner: string | null; expired: boolean | null }[]>`
      SELECT u.k, d.batch_id::text AS owner, p.expires_at <= now() AS expired
      FROM unnest(
        ${ks.map((k) => s.customers[k])}::uuid[], ${ks.map((k) => s.externals[k])}::text[], ${ks}::int[]
      ) AS u(c, e, k)
      ${this.owners(db, s)}
      WHERE d.customer_id IS NULL OR p.batch_id IS NOT NULL`;
    const held: Held[] = [];
    const gone: number[] = [];
    for (const r of rows) {
      if (r.owner === null) gone.push(r.k);
      else held.push({ k: r.k, owner: r.owner, expired: r.expired === true });
    }
    return { held, gone };
  }

  /**
   * Joins each key `u` (c, e) to its row `d` and its owner's reservation `p`, one index look-up each (see `keyRow`).
   */
  private owners(db: Sql, s: KeySet) {
    return db`
      LEFT JOIN LATERAL ${keyRow(db, s, db`d.customer_id, d.batch_id`)} d ON true
      LEFT JOIN LATERAL (
        SELECT p.batch_id, p.expires_at FROM event_dedup_pending p WHERE p.batch_id = d.batch_id LIMIT 1
      ) p ON true`;
  }

  /** Keys whose owner's reservation expired become this batch's (one request wins each key). */
  private async takeOver(db: Sql, s: KeySet, held: Held[], fresh: Uint8Array): Promise<void> {
    // Rows found one key at a time, then updated by their ctid (see `keyRow`); the owner is checked
    // again on the row updated, which a concurrent takeover may have changed since.
    const rows = await db<{ k: number }[]>`
      WITH l AS (
        SELECT x.ctid, u.o, u.k
        FROM unnest(${held.map((h) => s.customers[h.k])}::uuid[], ${held.map((h) => s.externals[h.k])}::text[],
          ${held.map((h) => h.owner)}::uuid[], ${held.map((h) => h.k)}::int[]) AS u(c, e, o, k)
        CROSS JOIN LATERAL ${keyRow(db, s, db`d.ctid`, db`AND d.batch_id = u.o`)} x
      )
      UPDATE event_dedup d SET batch_id = ${s.batchId} FROM l WHERE d.ctid = l.ctid AND d.batch_id = l.o
      RETURNING l.k`;
    for (const r of rows) fresh[r.k] = 1;
  }

  /** Until one of `owners` ends its reservation (notified), or `ms` passes. */
  private wait(owners: Set<string>, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        for (const o of owners) {
          const set = this.waiters.get(o);
          set?.delete(done);
          if (set?.size === 0) this.waiters.delete(o);
        }
        resolve();
      };
      const timer = setTimeout(done, ms);
      for (const o of owners) {
        let set = this.waiters.get(o);
        if (!set) this.waiters.set(o, (set = new Set()));
        set.add(done);
      }
    });
  }
}

/**
 * The row of key `u` (c, e) in `event_dedup`, as `d`, reading `columns`: a subquery for a LATERAL
 * join, one index look-up by the whole key. Every statement finds key rows through this. The LIMIT
 * keeps it a look-up per key: without it PostgreSQL flattens the LATERAL into a plain join, and for
 * a workspace its statistics do not know yet (a new one, or one grown since the last ANALYZE) it
 * estimates one key and hashes every key of the workspace instead, a scan per statement that grows
 * with the workspace (measured: surface B from 50k to 10k events/s on a workspace of a few hundred
 * thousand keys; `test/events/dedup-plans.test.ts` counts the rows read).
 */
function keyRow(db: Sql, s: KeySet, columns: PendingQuery<Row[]>, and: PendingQuery<Row[]> = db``) {
  return db`(
    SELECT ${columns} FROM event_dedup d
    WHERE ${inTenant(s.tenantId, 'd')} AND d.customer_id = u.c AND d.external_id = u.e ${and}
    LIMIT 1
  )`;
}
