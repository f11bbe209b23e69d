import t from '#tap';
import { integrationTokenKey } from '../../infra/stack.js';
import { providersFromConfig } from '../../lib/integrations/config.js';
import { DataCipher } from '../../lib/credentials/data-cipher.js';
import { createLogger } from '../../lib/logger.js';
import { connectPg } from '../../lib/pg.js';
import { AccessTokens } from '../../processors/integrations/access-tokens.js';
import { call, client, startApi } from '../core-api/_helpers.js';
import { startFakeProvider } from '../helpers/fake-provider.js';
import { bootstrap, closeDb, db, profile, type Teardowns, type Workspace, urls, waitFor } from '../helpers/stack.js';
import { processorsTier } from '../playbooks/support.js';

// Provider calls made with a connection's access token (playbook notifications through Slack),
// against a local fake provider whose API refuses a dead token with 401: a token that expired, or
// that expires within the refresh margin, is refreshed before the call; racing sends share one
// refresh, in one process and across processes; a 401 costs one refresh and one retry, never more; a refused refresh leaves the
// integration in `error` with the reason, and the stale token is never sent.
t.teardown(closeDb);
const fake = await startFakeProvider(t, 3600);
const providerEnv = fake.env('slack');
const api = await startApi(t, providerEnv);
const ws = {
  expired: await bootstrap(),
  soon: await bootstrap(),
  race: await bootstrap(),
  processes: await bootstrap(),
  unauthorized: await bootstrap(),
  refused: await bootstrap(),
};
await processorsTier(t, [], {
  ...providerEnv,
  NOTIFY_POLL_MS: '100',
  INTEGRATION_TENANTS: Object.values(ws)
    .map((w) => w.tenant_id)
    .join(','),
});

/** Connects slack as a browser would, with tokens that live `lifetimeS`; the access token issued. */
async function connectSlack(t: Teardowns, w: Workspace, lifetimeS: number): Promise<string> {
  const admin = client(api.url, w.api_key);
  fake.setLifetime(lifetimeS);
  try {
    const started = await admin.post('/v1/integrations/slack/connect');
    if (started.status !== 200) throw new Error(started.text);
    const auth = await fetch(started.body.authorization_url, { redirect: 'manual' });
    const back = new URL(auth.headers.get('location') ?? '');
    const page = await call(back.origin, 'GET', back.pathname + back.search);
    if (page.status !== 200) throw new Error(page.text);
  } finally {
    // Refreshed tokens live an hour: one refresh puts a connection well outside the margin.
    fake.setLifetime(3600);
  }
  t.teardown(() => admin.del('/v1/integrations/slack'));
  return fake.issued.at(-1)!.access;
}

interface Notification {
  status: string;
  attempts: number;
  response_status: number | null;
  error: string | null;
}

/** Queues `n` Slack notifications as a playbook's notify action does; their ids. */
async function queue(w: Workspace, n: number): Promise<string[]> {
  const rows = await db()<Array<{ id: string }>>`
    INSERT INTO integration_notifications (tenant_id, name, channel, target, text)
    SELECT ${w.tenant_id}, 'slack', 'slack', '#cs-alerts', 'Renewal at risk ' || i FROM generate_series(1, ${n}) i
    RETURNING id::text`;
  return rows.map((r) => r.id);
}

/** The notifications once each was attempted (sent, failed, or waiting for a retry with an error). */
const attempted = (ids: string[]) =>
  waitFor(`${ids.length} notification(s) attempted`, async () => {
    const rows = await db()<Notification[]>`
      SELECT status, attempts, response_status, error FROM integration_notifications
      WHERE id = ANY(${ids}::uuid[]) AND (status <> 'pending' OR error IS NOT NULL)`;
    return rows.length === ids.length ? rows : undefined;
  });

const slackEntry = async (w: Workspace) =>
  (await client(api.url, w.api_key).get('/v1/integrations')).body.data.find(
    (i: { name: string }) => i.name === 'slack',
  );

const expiresInS = async (w: Workspace) => {
  const [r] = await db()<Array<{ left: number }>>`
    SELECT extract(epoch FROM token_expires_at - now())::int AS left FROM integrations
    WHERE tenant_id = ${w.tenant_id} AND name = 'slack'`;
  return r.left;
};

/** What the provider saw from here on: API calls and refresh requests. */
function watch() {
  const calls = fake.calls.length;
  const refreshes = fake.refreshRequests;
  return { calls: () => fake.calls.slice(calls), refreshes: () => fake.refreshRequests - refreshes };
}

t.test('an access token that has expired is refreshed before the notification is sent', async (t) => {
  const seen = watch();
  const old = await connectSlack(t, ws.expired, 1);
  await waitFor('the access token to expire at the provider', () => !fake.accepts(old), 10_000);
  const [n] = await attempted(await queue(ws.expired, 1));
  t.match(n, { status: 'sent', attempts: 1, response_status: 200, error: null });
  const calls = seen.calls();
  t.same(
    calls.map((c) => c.status),
    [200],
    'the provider never saw the expired token',
  );
  t.not(calls[0]?.token, old);
  t.equal(seen.refreshes(), 1, 'one refresh');
  t.ok((await expiresInS(ws.expired)) > 3000, 'the new token is stored');
  t.match(await slackEntry(ws.expired), { status: 'connected', error: null });
});

t.test('a token that expires within seconds is refreshed before the notification is sent', async (t) => {
  const seen = watch();
  const old = await connectSlack(t, ws.soon, 5);
  const [n] = await attempted(await queue(ws.soon, 1));
  t.match(n, { status: 'sent', response_status: 200, error: null });
  const calls = seen.calls();
  t.equal(calls.length, 1);
  t.not(calls[0]?.token, old, 'not the token about to expire');
  t.equal(calls[0]?.token, fake.issued.at(-1)!.access, 'the refreshed one');
  t.equal(seen.refreshes(), 1);
  t.ok((await expiresInS(ws.soon)) > 3000);
});

t.test('notifications sent at once share one refresh', async (t) => {
  fake.setRefreshDelay(300);
  t.teardown(() => fake.setRefreshDelay(0));
  const seen = watch();
  const old = await connectSlack(t, ws.race, 5);
  const rows = await attempted(await queue(ws.race, 12));
  t.same(new Set(rows.map((r) => r.status)), new Set(['sent']), 'all 12 sent');
  t.equal(seen.refreshes(), 1, 'exactly one refresh');
  const calls = seen.calls();
  t.equal(calls.length, 12);
  t.same(new Set(calls.map((c) => c.token)), new Set([fake.issued.at(-1)!.access]), 'all with the new token');
  t.not(fake.issued.at(-1)!.access, old);
  t.match(await slackEntry(ws.race), { status: 'connected', error: null });
});

t.test('two processes that find the token due at once: one refresh between them', async (t) => {
  fake.setRefreshDelay(300);
  t.teardown(() => fake.setRefreshDelay(0));
  const seen = watch();
  const old = await connectSlack(t, ws.processes, 5);
  // What each processors instance has: its own pool, so only PostgreSQL can keep them in step.
  const providers = providersFromConfig(providerEnv);
  const cipher = new DataCipher([integrationTokenKey(profile)]);
  const log = createLogger('token-refresh-test', 'silent');
  const instances = [1, 2].map(() => {
    const sql = connectPg(urls.DATABASE_URL, 2);
    t.teardown(() => sql.end());
    return new AccessTokens(sql, providers, cipher, log);
  });
  const send = (a: AccessTokens) =>
    a.call({ tenantId: ws.processes.tenant_id, name: 'slack' }, async (token) => {
      const res = await fetch(`${fake.url}/api/chat.postMessage`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ channel: '#cs-alerts', text: 'From two processes' }),
      });
      await res.arrayBuffer();
      return { status: res.status };
    });
  const answers = await Promise.all([...instances, ...instances].map(send));
  t.same(
    answers.map((a) => a.status),
    [200, 200, 200, 200],
  );
  t.equal(seen.refreshes(), 1, 'exactly one refresh');
  const tokens = new Set(seen.calls().map((c) => c.token));
  t.same(tokens, new Set([fake.issued.at(-1)!.access]), 'all with the new token');
  t.notOk(tokens.has(old));
  t.match(await slackEntry(ws.processes), { status: 'connected', error: null });
});

t.test('a 401 from the provider: one refresh and one retry', async (t) => {
  const seen = watch();
  const old = await connectSlack(t, ws.unauthorized, 3600);
  fake.invalidateAccessTokens();
  const [n] = await attempted(await queue(ws.unauthorized, 1));
  t.match(n, { status: 'sent', attempts: 1, response_status: 200, error: null });
  const calls = seen.calls();
  t.same(
    calls.map((c) => [c.token === old ? 'old' : 'new', c.status]),
    [
      ['old', 401],
      ['new', 200],
    ],
  );
  t.equal(seen.refreshes(), 1);

  // A provider that refuses the refreshed token too: no second refresh, no third call.
  const again = watch();
  fake.invalidateAccessTokens();
  fake.setLifetime(0);
  t.teardown(() => fake.setLifetime(3600));
  const [m] = await attempted(await queue(ws.unauthorized, 1));
  t.match(m, { status: 'pending', attempts: 1, response_status: 401, error: 'HTTP 401' }, 'retried later');
  t.same(
    again.calls().map((c) => c.status),
    [401, 401],
  );
  t.equal(again.refreshes(), 1);
  t.match(await slackEntry(ws.unauthorized), { status: 'connected' });
});

t.test('a refused refresh puts the integration in error with the reason', async (t) => {
  fake.refuseRefresh(true);
  t.teardown(() => fake.refuseRefresh(false));
  const seen = watch();
  await connectSlack(t, ws.refused, 5);
  const [n] = await attempted(await queue(ws.refused, 1));
  // The scheduled refresher may meet the refusal first; then the send finds the integration gone.
  t.match(n, { status: 'failed', response_status: null, error: /invalid_grant|integration_not_connected/ });
  t.same(seen.calls(), [], 'the stale token was not sent');
  t.equal(seen.refreshes(), 1, 'one refresh asked for');
  t.match(await slackEntry(ws.refused), {
    status: 'error',
    connection_id: null,
    error: /^token refresh failed: .*invalid_grant: The grant was revoked/,
  });
  const [later] = await attempted(await queue(ws.refused, 1));
  t.match(later, { status: 'failed', error: 'integration_not_connected' });
  t.equal(seen.refreshes(), 1, 'no refresh for an integration in error');
});
