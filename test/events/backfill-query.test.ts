import t from '#tap';
import { ch, closeDb, db, startTier, waitFor } from '../helpers/stack.js';
import { client, sharedApi } from '../core-api/_helpers.js';
import { BACKFILL, call, DAY, EVENTS, ev, ingest, isProblem, postEvents, workspace, xid } from './support.js';

// Backfill lands in ClickHouse through its own consumer and completes its job; GET /v1/events
// reads ClickHouse with filters and a keyset cursor.
t.teardown(closeDb);
const { ws, ids } = await workspace(2);
const [tier, api] = await Promise.all([ingest(t, { EVENTS_BACKFILLS_PER_MIN: '3' }), sharedApi(t)]);
await startTier(t, 'processors');
const jobs = client(api.url, ws.api_key);

t.test(
  'backfill: 202 with a job id, rows in ClickHouse with their old timestamps, job succeeded with counts',
  async (t) => {
    const old = Date.now() - 500 * DAY;
    const x = xid();
    const res = await postEvents(
      tier.url,
      ws.api_key,
      [
        ev(ids[0], { event_name: 'old_login', timestamp: new Date(old).toISOString(), external_id: x }),
        ev(ids[1], { event_name: 'old_login', timestamp: new Date(old + 1000).toISOString() }),
        ev(ids[1], { event_name: 'old_login', external_id: x, timestamp: new Date(old).toISOString() }),
        ev(ids[0], { event_name: 'old_login', external_id: x, timestamp: new Date(old).toISOString() }),
        ev(ids[0], { event_name: 'too_old', timestamp: new Date(Date.now() - 800 * DAY).toISOString() }),
      ],
      {},
      BACKFILL,
    );
    t.equal(res.status, 202, res.text);
    t.match(res.body, { status: 'queued', accepted: 4, rejected: 1 });
    const job = await waitFor('job succeeded', async () => {
      const r = await jobs.get(`/v1/jobs/${res.body.job_id}`);
      return r.body?.status === 'succeeded' ? r.body : undefined;
    });
    t.match(job, {
      id: res.body.job_id,
      type: 'events.backfill',
      counts: { accepted: 4, rejected: 1, duplicates: 1, stored: 3 },
      progress: { total: 3, processed: 3 },
    });
    const rows = await ch<{ t: number; surface: string }>(
      `SELECT toUInt32(ts) AS t, surface FROM csp.events WHERE tenant_id = toUUID('${ws.tenant_id}') AND event_name = 'old_login' ORDER BY t`,
    );
    t.equal(rows.length, 3);
    t.equal(rows[0].t, Math.floor(old / 1000));
    t.equal(rows[0].surface, 'b');
    // The event catalog learns names from backfill too (its own consumer of ev.backfill.>).
    await waitFor(
      'catalog',
      async () =>
        (await db()`SELECT 1 FROM event_catalog WHERE tenant_id = ${ws.tenant_id} AND event_name = 'old_login'`)
          .length === 1,
    );
  },
);

t.test(
  'a backfill job needs events:write (or events:read) to be read; a bulk-import reader without them is refused',
  async (t) => {
    const r = await jobs.post('/v1/api-keys', {
      name: 'cust',
      mode: 'test',
      role: 'admin',
      scopes: ['customers:read'],
    });
    const res = await postEvents(
      tier.url,
      ws.api_key,
      [ev(ids[0], { timestamp: new Date(Date.now() - 40 * DAY).toISOString() })],
      {},
      BACKFILL,
    );
    t.equal(res.status, 202);
    isProblem(
      t,
      await call(api.url, 'GET', `/v1/jobs/${res.body.job_id}`, { token: r.body.key }),
      403,
      'insufficient_scope',
    );
  },
);

t.test('backfill has its own, stricter rate limit', async (t) => {
  const { ws: w, ids: c } = await workspace(1);
  const one = [ev(c[0], { timestamp: new Date(Date.now() - 60 * DAY).toISOString() })];
  for (let i = 0; i < 3; i++) t.equal((await postEvents(tier.url, w.api_key, one, {}, BACKFILL)).status, 202);
  const r = await postEvents(tier.url, w.api_key, one, {}, BACKFILL);
  isProblem(t, r, 429, 'rate_limited');
  t.equal(r.headers.get('x-ratelimit-limit'), '3');
  t.equal((await postEvents(tier.url, w.api_key, [ev(c[0])])).status, 200, 'live events are not held back by it');
});

t.test('GET /v1/events: filters, newest first, keyset pages, events:read', async (t) => {
  const base = Date.now() - 2 * DAY;
  const events = Array.from({ length: 25 }, (_, i) =>
    ev(ids[i % 2], {
      event_name: i % 5 ? 'page_view' : 'signup',
      timestamp: new Date(base + i * 1000).toISOString(),
      properties: { i },
      external_id: `q-${i}`,
    }),
  );
  t.equal((await postEvents(tier.url, ws.api_key, events)).status, 200);
  const q = (qs: string) => call(tier.url, 'GET', `${EVENTS}?${qs}`, { token: ws.api_key });
  const from = new Date(base - 1000).toISOString();
  await waitFor('indexed', async () => (await q(`from=${from}&limit=1000`)).body?.data?.length >= 25);
  const all = await q(`from=${encodeURIComponent(from)}&limit=1000`);
  t.equal(all.status, 200);
  t.same(Object.keys(all.body).sort(), ['data', 'has_more', 'next_cursor']);
  const recent = all.body.data.filter((e: { external_id: string | null }) => e.external_id?.startsWith('q-'));
  t.same(
    recent.map((e: { properties: { i: number } }) => e.properties.i),
    Array.from({ length: 25 }, (_, i) => 24 - i),
    'newest first',
  );
  t.match(recent[0], {
    customer_id: ids[0],
    event_name: 'page_view',
    surface: 'b',
    timestamp: new Date(base + 24_000).toISOString(),
    external_id: 'q-24',
  });

  const byCustomer = await q(
    `customer_id=${ids[1]}&event_name=page_view&from=${encodeURIComponent(from)}&to=${encodeURIComponent(new Date(base + 25_000).toISOString())}`,
  );
  t.equal(byCustomer.status, 200, byCustomer.text);
  t.ok(
    byCustomer.body.data.every(
      (e: { customer_id: string; event_name: string }) => e.customer_id === ids[1] && e.event_name === 'page_view',
    ),
  );
  t.equal(byCustomer.body.data.length, 10);

  const seen: number[] = [];
  let cursor: string | null = null;
  do {
    const page: {
      body: { data: Array<{ properties: { i: number } }>; next_cursor: string | null; has_more: boolean };
    } = await q(
      `from=${encodeURIComponent(from)}&to=${encodeURIComponent(new Date(base + 25_000).toISOString())}&limit=7${cursor ? `&cursor=${cursor}` : ''}`,
    );
    seen.push(...page.body.data.map((e) => e.properties.i));
    t.equal(page.body.has_more, page.body.next_cursor !== null);
    cursor = page.body.next_cursor;
  } while (cursor);
  t.same(
    seen,
    Array.from({ length: 25 }, (_, i) => 24 - i),
    'pages of 7 cover everything once',
  );

  isProblem(t, await q('cursor=abc'), 400, 'invalid_cursor');
  isProblem(t, await q('limit=1001'), 400, 'validation_failed');
  isProblem(t, await q('customer_id=nope'), 400, 'validation_failed');
  isProblem(t, await q('from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z'), 400, 'validation_failed');
  const other = await workspace(0);
  t.same(
    (await call(tier.url, 'GET', `${EVENTS}?from=${encodeURIComponent(from)}`, { token: other.ws.api_key })).body.data,
    [],
    'another workspace sees none',
  );
});
