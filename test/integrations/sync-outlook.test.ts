import t from '#tap';
import { client, startApi } from '../core-api/_helpers.js';
import { startFakeMicrosoft } from '../helpers/fakes/microsoft.js';
import { bootstrap, closeDb, waitFor } from '../helpers/stack.js';
import { processorsTier } from '../playbooks/support.js';
import { ago, connect, DAY_MS, entry, firstSync, produced, stored, storedText, syncNow } from './sync-support.js';

// Outlook mail sync against a local Microsoft Graph: a delta round per folder (Inbox →
// email_received, Sent Items → email_sent) over the 30-day lookback with only the addresses and
// dates selected, pages followed by @odata.nextLink, the @odata.deltaLink kept and used next time;
// immutable ids; drafts and removed messages produce nothing; an expired delta (410
// syncStateNotFound) → a new round without duplicates; 401 → one refresh (rotated) and retry; 429 →
// Retry-After; Mail.Read not granted → the integration in error naming it; consent revoked (the
// refresh answers invalid_grant AADSTS70008) → the integration in error asking to connect again.
t.teardown(closeDb);
const ms = await startFakeMicrosoft(t);
const env = ms.env('outlook');
const api = await startApi(t, env);
const ws = await bootstrap();
const noScope = await bootstrap();
const revoked = await bootstrap();
await processorsTier(t, [], {
  ...env,
  INTEGRATION_TENANTS: `${ws.tenant_id},${noScope.tenant_id},${revoked.tenant_id}`,
  INTEGRATION_SYNC_INTERVAL_MS: '3600000',
  INTEGRATION_SYNC_POLL_MS: '100',
});
const admin = client(api.url, ws.api_key);
const acme = (await admin.post('/v1/customers', { name: 'Acme', email_domain: 'acme.test' })).body;
const globex = (await admin.post('/v1/customers', { name: 'Globex', email_domain: 'globex.test' })).body;
await admin.post('/v1/customers', { name: 'Ourselves', email_domain: 'vendor.test' });
await admin.post(`/v1/customers/${globex.id}/contacts`, { name: 'Dana', email: 'dana@acme.test' });
const me = ms.account;
const SECRET = 'Confidential pricing for Acme';
const deltas = (folder: string) => ms.calls.filter((c) => c.path === `/v1.0/me/mailFolders/${folder}/messages/delta`);

t.test('first round: both folders, 30 days back, page by page, addresses only', async (t) => {
  ms.pageSize = 2;
  t.teardown(() => {
    ms.pageSize = 1000;
  });
  const d = { m1: ago(2 * DAY_MS), m2: ago(DAY_MS) };
  ms.mail.add({ folder: 'inbox', from: 'bob@acme.test', to: [me], date: ago(40 * DAY_MS) });
  const m1 = ms.mail.add({ folder: 'inbox', from: 'bob@acme.test', to: [me], date: d.m1, subject: SECRET });
  ms.mail.add({ folder: 'inbox', from: 'colleague@vendor.test', to: [me], date: ago(DAY_MS) });
  ms.mail.add({ folder: 'inbox', from: 'stranger@nowhere.test', to: [me], date: ago(DAY_MS) });
  const m2 = ms.mail.add({
    folder: 'sentitems',
    from: me,
    to: ['dana@acme.test'],
    cc: ['x@globex.test'],
    date: d.m2,
    subject: SECRET,
  });
  ms.mail.add({ folder: 'sentitems', from: me, to: ['bob@acme.test'], date: ago(DAY_MS), isDraft: true });

  await connect(admin, 'outlook');
  const e = await firstSync(admin, 'outlook');
  t.match(e, { status: 'connected', last_error: null, activities: 2, unmatched_activities: 1 });
  t.same(e.events_24h, { email_sent: 1, email_received: 1 });
  const rows = await produced(ws.tenant_id);
  t.same(
    rows.map((r) => [r.event_name, r.customer_id, r.activity_id, r.occurred_at.toISOString()]),
    [
      ['email_received', acme.id, m1, d.m1.toISOString()],
      ['email_sent', globex.id, m2, d.m2.toISOString()],
    ],
  );
  t.same(rows[1].properties, {
    activity_id: m2,
    integration: 'outlook',
    participants: ['dana@acme.test', 'x@globex.test'],
  });
  t.notOk((await storedText(ws.tenant_id)).includes(SECRET), 'no subject stored');
  await stored(ws.tenant_id, 2);

  const inbox = deltas('inbox');
  t.ok(inbox.length >= 2, 'the inbox round followed @odata.nextLink');
  const q = new URLSearchParams(inbox[0].query);
  t.same(q.get('$select')?.split(',').sort(), [
    'ccRecipients',
    'from',
    'isDraft',
    'receivedDateTime',
    'sentDateTime',
    'toRecipients',
  ]);
  const since = Date.parse(/receivedDateTime ge (\S+)/.exec(q.get('$filter') ?? '')?.[1] ?? '');
  t.ok(Math.abs(since - (Date.now() - 30 * DAY_MS)) < 5 * 60_000, 'the lookback is 30 days');
  t.match(inbox[0].prefer, /IdType="ImmutableId"/);
  t.match(inbox[0].prefer, /odata\.maxpagesize=\d+/);
  t.ok(deltas('sentitems').length >= 1);
});

t.test('then the deltaLink: only what changed, removed messages nothing, never twice', async (t) => {
  const mark = { inbox: deltas('inbox').length, sent: deltas('sentitems').length };
  const m3 = ms.mail.add({ folder: 'inbox', from: 'carol@acme.test', to: [me], date: ago(60_000) });
  const m4 = ms.mail.add({ folder: 'sentitems', from: me, to: ['eve@globex.test'], date: ago(30_000) });
  ms.mail.remove(m3);
  let e = await syncNow(admin, 'outlook');
  t.match(e, { status: 'connected', last_error: null });
  t.ok(new URLSearchParams(deltas('inbox')[mark.inbox].query).has('$deltatoken'), 'the stored deltaLink');
  t.ok(new URLSearchParams(deltas('sentitems')[mark.sent].query).has('$deltatoken'));
  let rows = await produced(ws.tenant_id);
  t.same(
    rows.map((r) => r.activity_id).filter((id) => id === m3 || id === m4),
    [m4],
    'm3 was removed',
  );

  const m5 = ms.mail.add({ folder: 'inbox', from: 'carol@acme.test', to: [me], date: ago(20_000) });
  e = await syncNow(admin, 'outlook');
  await syncNow(admin, 'outlook');
  rows = await produced(ws.tenant_id);
  t.equal(rows.length, 4);
  t.equal(rows.filter((r) => r.activity_id === m5).length, 1);
  t.same(e.events_24h, { email_sent: 2, email_received: 2 });
  await stored(ws.tenant_id, 4);
});

t.test('an expired delta (410 syncStateNotFound): a new round, nothing twice', async (t) => {
  const m6 = ms.mail.add({ folder: 'inbox', from: 'bob@acme.test', to: [me], date: ago(10_000) });
  ms.expireDeltaTokens();
  const mark = deltas('inbox').length;
  const e = await syncNow(admin, 'outlook');
  t.match(e, { status: 'connected', last_error: null });
  const inbox = deltas('inbox').slice(mark);
  t.equal(inbox[0].status, 410);
  t.ok(new URLSearchParams(inbox[1].query).has('$filter'), 'a new round from the lookback');
  const rows = await produced(ws.tenant_id);
  t.equal(rows.length, 5);
  t.equal(rows.filter((r) => r.activity_id === m6).length, 1);
  t.equal(new Set(rows.map((r) => `${r.activity_id}/${r.customer_id}`)).size, 5, 'no duplicates');
});

t.test('401: one refresh and one retry; 429: Retry-After waited out', async (t) => {
  const refreshes = ms.refreshes;
  ms.invalidateAccessTokens();
  const mark = ms.calls.length;
  const m7 = ms.mail.add({ folder: 'inbox', from: 'bob@acme.test', to: [me], date: ago(5_000) });
  let e = await syncNow(admin, 'outlook');
  t.match(e, { status: 'connected' });
  t.equal(ms.refreshes - refreshes, 1);
  t.same(
    ms.calls
      .slice(mark)
      .map((c) => c.status)
      .slice(0, 2),
    [401, 200],
  );
  t.ok((await produced(ws.tenant_id)).some((r) => r.activity_id === m7));

  ms.fail('/v1.0/me/mailFolders/inbox', {
    status: 429,
    headers: { 'retry-after': '1' },
    body: { error: { code: 'ApplicationThrottled', message: 'Application is over its MailboxConcurrency limit.' } },
  });
  const m8 = ms.mail.add({ folder: 'inbox', from: 'bob@acme.test', to: [me], date: ago(5_000) });
  const before = deltas('inbox').length;
  e = await syncNow(admin, 'outlook');
  t.match(e, { status: 'connected' });
  const inbox = deltas('inbox').slice(before);
  t.same(
    inbox.map((c) => c.status),
    [429, 200],
  );
  t.ok(inbox[1].at - inbox[0].at >= 950, `waited Retry-After (${inbox[1].at - inbox[0].at} ms)`);
  t.ok((await produced(ws.tenant_id)).some((r) => r.activity_id === m8));
});

t.test('Mail.Read not granted: the integration in error naming it', async (t) => {
  ms.withhold.add('Mail.Read');
  t.teardown(() => ms.withhold.delete('Mail.Read'));
  const other = client(api.url, noScope.api_key);
  await connect(other, 'outlook');
  const e = await firstSync(other, 'outlook');
  t.match(e, { status: 'error', error: /scope Mail\.Read/, last_error: { message: /Mail\.Read/ } });
});

// Last: revoking the consent voids every token the fake issued, the other workspaces' too.
t.test(
  'consent revoked: the refresh answers invalid_grant, the integration in error asking to connect again',
  async (t) => {
    const other = client(api.url, revoked.api_key);
    await connect(other, 'outlook');
    t.match(await firstSync(other, 'outlook'), { status: 'connected', last_error: null });
    ms.revokeConsent();
    const mark = ms.calls.length;
    const refreshes = ms.refreshes;
    t.equal((await other.post('/v1/integrations/outlook/sync')).status, 202);
    const e = await waitFor('the integration in error', async () => {
      const x = await entry(other, 'outlook');
      return x.status === 'error' ? x : undefined;
    });
    t.match(
      e.error,
      /^token refresh failed: .*invalid_grant: AADSTS70008: The refresh token has expired or was revoked\..*an admin must connect outlook again$/,
    );
    t.equal(ms.refreshes, refreshes, 'no token was issued');
    t.same(
      ms.calls.slice(mark).map((c) => c.status),
      [401],
      'one call with the revoked token (its 401 led to the refresh); none after the refusal',
    );
    const again = await other.post('/v1/integrations/outlook/sync');
    t.equal(again.status, 409, 'nothing to sync until it is connected again');
  },
);
