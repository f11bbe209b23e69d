import t from '#tap';
import { closeDb, db } from '../helpers/stack.js';
import { send } from '../ingest/support.js';
import {
  BACKFILL,
  DAY,
  ev,
  expect200,
  ingest,
  isProblem,
  postEvents,
  REQUEST_PATH,
  workspace,
  xid,
} from './support.js';

// The daily event volume per plan holds across both surfaces and every ingest process; past it,
// 429 daily_quota_exceeded with Retry-After until the next UTC day.
t.teardown(closeDb);
const QUOTAS = 'starter=20,growth=1000,scale=100000,enterprise=unlimited';
const [a, b] = await Promise.all([
  // The request path: what a refused request leaves in PostgreSQL's deduplication keys.
  ingest(t, { EVENTS_DAILY_QUOTAS: QUOTAS, ...REQUEST_PATH }),
  ingest(t, { EVENTS_DAILY_QUOTAS: QUOTAS, ...REQUEST_PATH }),
]);
const untilTomorrow = () => Math.ceil((Math.floor(Date.now() / DAY) * DAY + DAY - Date.now()) / 1000);

t.test('both surfaces and both processes draw on one daily quota', async (t) => {
  const { ws, ids } = await workspace(1, ['--plan', 'starter']);
  expect200(
    t,
    await postEvents(
      a.url,
      ws.api_key,
      Array.from({ length: 8 }, () => ev(ids[0])),
    ),
    8,
  );
  const surfaceA = await send(
    b.url,
    '/v1/ingest/events',
    { events: Array.from({ length: 6 }, () => ({ event_name: 'login', external_customer_id: 'cust-000001' })) },
    { key: ws.ingestion_key },
  );
  t.equal(surfaceA.status, 202);
  t.equal(
    (
      await postEvents(
        b.url,
        ws.api_key,
        Array.from({ length: 4 }, () => ev(ids[0], { timestamp: new Date(Date.now() - 60 * DAY).toISOString() })),
        {},
        BACKFILL,
      )
    ).status,
    202,
    'backfill counts too',
  );
  // 18 of 20 used: a batch of 3 no longer fits.
  const over = await postEvents(
    a.url,
    ws.api_key,
    Array.from({ length: 3 }, () => ev(ids[0])),
  );
  isProblem(t, over, 429, 'daily_quota_exceeded');
  const retry = Number(over.headers.get('retry-after'));
  t.ok(Math.abs(retry - untilTomorrow()) <= 2, `Retry-After ${retry} s is the time to the next UTC day`);
  t.match(over.body.detail, /daily event quota of 20 events/);

  const overA = await send(
    b.url,
    '/v1/ingest/events',
    {
      events: [
        { event_name: 'login', external_customer_id: 'cust-000001' },
        { event_name: 'login', external_customer_id: 'cust-000001' },
        { event_name: 'login', external_customer_id: 'cust-000001' },
      ],
    },
    { key: ws.ingestion_key },
  );
  t.equal(overA.status, 429);
  t.match(overA.body, {
    detail: { type: 'daily_quota_exceeded', status: 429, retry_after: Number(overA.headers.get('retry-after')) },
  });
  t.ok(Math.abs(overA.body.detail.retry_after - untilTomorrow()) <= 2);
  // Rejected events cost nothing: a request whose events are all invalid still answers 200.
  expect200(t, await postEvents(a.url, ws.api_key, [ev(ids[0], { event_name: 'meeting_held' })]), 0, 1);
});

t.test('a request refused by the quota records none of its deduplication keys', async (t) => {
  const { ws, ids } = await workspace(1, ['--plan', 'starter']);
  const xs = Array.from({ length: 25 }, xid);
  isProblem(
    t,
    await postEvents(
      a.url,
      ws.api_key,
      xs.map((x) => ev(ids[0], { external_id: x })),
    ),
    429,
    'daily_quota_exceeded',
  );
  const [{ n }] = await db()<
    { n: number }[]
  >`SELECT count(*)::int AS n FROM event_dedup WHERE tenant_id = ${ws.tenant_id}`;
  t.equal(n, 0, 'rolled back');
  // The refused request leased what was left: further events wait for tomorrow on this process.
  await db()`DELETE FROM rate_windows WHERE tenant_id = ${ws.tenant_id}`;
  const fresh = await postEvents(
    b.url,
    ws.api_key,
    xs.slice(0, 5).map((x) => ev(ids[0], { external_id: x })),
  );
  expect200(t, fresh, 5);
  const [{ m }] = await db()<
    { m: number }[]
  >`SELECT count(*)::int AS m FROM event_dedup WHERE tenant_id = ${ws.tenant_id}`;
  t.equal(m, 5, 'the retry was stored, not taken for a duplicate');
});

t.test('duplicates do not count against the quota', async (t) => {
  const { ws, ids } = await workspace(1, ['--plan', 'starter']);
  const batch = Array.from({ length: 15 }, (_, i) => ev(ids[0], { external_id: `same-${i}` }));
  expect200(t, await postEvents(a.url, ws.api_key, batch), 15);
  for (let i = 0; i < 3; i++) expect200(t, await postEvents(b.url, ws.api_key, batch), 15);
  expect200(
    t,
    await postEvents(
      a.url,
      ws.api_key,
      Array.from({ length: 5 }, () => ev(ids[0])),
    ),
    5,
  );
});

t.test('enterprise is unlimited; growth has its own figure', async (t) => {
  const ent = await workspace(1, ['--plan', 'enterprise']);
  for (let i = 0; i < 3; i++)
    expect200(
      t,
      await postEvents(
        a.url,
        ent.ws.api_key,
        Array.from({ length: 1000 }, () => ev(ent.ids[0])),
      ),
      1000,
    );
  const growth = await workspace(1, ['--plan', 'growth']);
  expect200(
    t,
    await postEvents(
      a.url,
      growth.ws.api_key,
      Array.from({ length: 1000 }, () => ev(growth.ids[0])),
    ),
    1000,
  );
  isProblem(t, await postEvents(b.url, growth.ws.api_key, [ev(growth.ids[0])]), 429, 'daily_quota_exceeded');
});
