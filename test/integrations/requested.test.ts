import t from '#tap';
import { client, startApi } from '../core-api/_helpers.js';
import { startFakeGoogle } from '../helpers/fakes/google.js';
import { startFakeZendesk } from '../helpers/fakes/zendesk.js';
import { bootstrap, closeDb, startTier, waitFor } from '../helpers/stack.js';
import { entry } from './sync-support.js';

// Work an admin asks for starts at once (issue 48): the processors' scheduled looks are made long
// here (INTEGRATION_SYNC_POLL_MS 60 s and INTEGRATION_REFRESH_POLL_MS 10 min: a look every 15 to
// 45 s), so only the core API's notification can start within a second a new gmail connection's
// first sync, the sync POST /v1/integrations/gmail/sync asks for (one asked for while another runs
// follows it at once), and a new Zendesk connection's backfill. Each delay is measured from the
// request that made the work due (the OAuth callback, the sync request) to the provider's first
// request for it.
const SOON_MS = 2_000;
/** Long enough to see the scheduled look come (at most 45 s), so a failure shows the delay. */
const WAIT_MS = 60_000;

t.teardown(closeDb);
const google = await startFakeGoogle(t);
const zd = await startFakeZendesk(t, 'acme');
const env = { ...google.env('gmail'), ...zd.env };
const api = await startApi(t, env);
const ws = await bootstrap();
const tier = await startTier(t, 'processors', {
  ...env,
  INTEGRATION_TENANTS: ws.tenant_id,
  INTEGRATION_SYNC_POLL_MS: '60000',
  INTEGRATION_REFRESH_POLL_MS: '600000',
  INTEGRATION_SYNC_INTERVAL_MS: '3600000',
});
t.teardown(() => tier.stop('SIGTERM'));
const admin = client(api.url, ws.api_key);

/**
 * Connects as a browser would (connect, the provider's authorize page, the callback); when the
 * callback was sent, the request that makes the connection.
 */
async function connect(name: string, query = ''): Promise<number> {
  const started = await admin.post(`/v1/integrations/${name}/connect${query}`);
  if (started.status !== 200) throw new Error(started.text);
  const auth = await fetch(started.body.authorization_url, { redirect: 'manual' });
  const back = auth.headers.get('location') ?? '';
  const t0 = Date.now();
  const page = await fetch(back, { redirect: 'manual' });
  if (page.status !== 200) throw new Error(`callback answered ${page.status}: ${await page.text()}`);
  return t0;
}

/** Milliseconds from `t0` to the first Gmail API request at or after it. */
const firstGmailCall = (t0: number) =>
  waitFor(
    'a Gmail API request',
    () => google.calls.find((c) => c.at >= t0 && c.path.startsWith('/gmail/'))?.at,
    WAIT_MS,
    20,
  ).then((at) => at - t0);

t.test('a new gmail connection is synced at once', async (t) => {
  const ms = await firstGmailCall(await connect('gmail'));
  t.ok(ms < SOON_MS, `the first sync asked Gmail ${ms} ms after the callback`);
  await waitFor('the first sync to finish', async () => (await entry(admin, 'gmail')).last_synced_at ?? false, WAIT_MS);
});

t.test('POST /v1/integrations/gmail/sync starts the sync at once', async (t) => {
  const before = (await entry(admin, 'gmail')).last_synced_at;
  t.ok(before, 'synced once already');
  const t0 = Date.now();
  const r = await admin.post('/v1/integrations/gmail/sync');
  t.equal(r.status, 202, r.text);
  const ms = await firstGmailCall(t0);
  t.ok(ms < SOON_MS, `the requested sync asked Gmail ${ms} ms after the request`);
  const e = await waitFor(
    'the requested sync to finish',
    async () => {
      const e = await entry(admin, 'gmail');
      return e.last_synced_at !== before && e;
    },
    WAIT_MS,
  );
  t.match(e, { status: 'connected', last_error: null });
});

t.test('a sync asked for while one runs starts as soon as that one ends', async (t) => {
  // Gmail's rate limit holds the first sync for 2 s (Retry-After); the second request comes meanwhile.
  google.fail('/gmail/v1/users/me/history', {
    status: 429,
    headers: { 'retry-after': '2' },
    body: { error: { code: 429, message: 'Too many concurrent requests for user.', status: 'RESOURCE_EXHAUSTED' } },
  });
  const t0 = Date.now();
  const history = () => google.calls.filter((c) => c.at >= t0 && c.path === '/gmail/v1/users/me/history');
  t.equal((await admin.post('/v1/integrations/gmail/sync')).status, 202);
  await waitFor('the throttled history request', () => history().length > 0, WAIT_MS, 20);
  const again = await admin.post('/v1/integrations/gmail/sync');
  t.match(again.body, { running: true }, 'the first sync is under way');
  const calls = await waitFor('the second sync', () => history().length >= 3 && history(), WAIT_MS, 20);
  t.same(
    calls.map((c) => c.status),
    [429, 200, 200],
    'the first sync waits out the 429, then the second reads the history',
  );
  const ms = calls[2].at - calls[1].at;
  t.ok(ms < SOON_MS, `the second sync asked Gmail ${ms} ms after the first one's last request`);
});

t.test("a new Zendesk connection's backfill starts at once", async (t) => {
  const t0 = await connect('zendesk', '?subdomain=acme');
  await waitFor('a ticket export request', () => zd.exports.length > 0, WAIT_MS, 20);
  const ms = Date.now() - t0;
  t.ok(ms < SOON_MS, `the backfill asked Zendesk ${ms} ms after the callback`);
});
