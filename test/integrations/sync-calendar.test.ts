import t from '#tap';
import { client, isProblem, startApi } from '../core-api/_helpers.js';
import { CALENDAR_READ, startFakeGoogle } from '../helpers/fakes/google.js';
import { startFakeMicrosoft } from '../helpers/fakes/microsoft.js';
import { bootstrap, closeDb, db, waitFor, type Workspace } from '../helpers/stack.js';
import { processorsTier } from '../playbooks/support.js';
import { createLogger } from '../../lib/logger.js';
import { IntegrationSync } from '../../processors/integrations/sync/scheduler.js';
import type { FakeAnswer } from '../helpers/fakes/http.js';
import {
  ago,
  type Client,
  connect,
  DAY_MS,
  entry,
  firstSync,
  produced,
  stored,
  storedText,
  syncNow,
} from './sync-support.js';

// Calendar sync against a local Google Calendar (events.list with singleEvents, timeMin, pages,
// syncToken; 410 fullSyncRequired) and a local Microsoft Graph (calendarView/delta over a window,
// nextLink pages, deltaLink; 410 syncStateNotFound), the same story for both: one meeting_held per
// (event, customer) once the meeting has ended, with an attendee matching a customer (contact
// first, then domain; the own domain never); cancelled and all-day events, declined attendees and
// meetings older than 30 days produce nothing; a meeting not yet ended is remembered and produced
// after its end, at its final time when it was moved; an expired cursor → a full resync without
// duplicates; no title or description kept. The provider's failures: a 401 costs one refresh and
// one retry; a 429 (and Google's 403 rateLimitExceeded) is waited out, a page amid a listing
// included, and a throttle longer than the sync waits ends it, retried later without duplicates; a
// 403 for a scope puts the integration in error naming the scope.
t.teardown(closeDb);
const google = await startFakeGoogle(t);
const ms = await startFakeMicrosoft(t);
const env = { ...google.env('google_calendar'), ...ms.env('outlook_calendar') };
const api = await startApi(t, env);
const spaces = { google_calendar: await bootstrap(), outlook_calendar: await bootstrap() };
// Workspaces whose connection lacks the calendar scope.
const noScope = { google_calendar: await bootstrap(), outlook_calendar: await bootstrap() };
await processorsTier(t, [], {
  ...env,
  INTEGRATION_TENANTS: [...Object.values(spaces), ...Object.values(noScope)].map((w) => w.tenant_id).join(','),
  INTEGRATION_SYNC_INTERVAL_MS: '3600000',
  INTEGRATION_SYNC_POLL_MS: '100',
});
const SECRET = 'Confidential: Acme price increase';

/** What the story needs of a calendar, over either fake. */
interface Calendar {
  name: 'google_calendar' | 'outlook_calendar';
  me: string;
  put(e: { id?: string; start: Date; end: Date; with: string[]; declined?: string[]; allDay?: boolean }): string;
  cancel(id: string): void;
  expire(): void;
  setPageSize(n: number): void;
  /** The calendar calls made so far, with their status and time. */
  calls(): Array<{ query: string; status: number; at: number }>;
  /** The status of the provider's latest API answer (any call). */
  lastStatus(): number | undefined;
  /** The read scope the connector needs, and how the provider names it. */
  scope: string;
  withhold: Set<string>;
  refreshes(): number;
  invalidateAccessTokens(): void;
  fail(answer: FakeAnswer): void;
  /** `answer` for the calendar call after the next `skip` ones. */
  failLater(skip: number, answer: FakeAnswer): void;
  /** The provider's throttling answer (429 with Retry-After), as its reference shows it. */
  throttled(retryAfterSeconds: number): FakeAnswer;
  /** The provider's 403 for a permission the token lacks, without naming it in a header. */
  forbidden: FakeAnswer;
}

/** What either fake provides alike, around its calendar endpoint `path`. */
const common = (fake: typeof google | typeof ms, path: string) => ({
  setPageSize: (n: number) => {
    fake.pageSize = n;
  },
  calls: () => fake.calls.filter((c) => c.path === path),
  lastStatus: () => fake.calls.at(-1)?.status,
  withhold: fake.withhold,
  refreshes: () => fake.refreshes,
  invalidateAccessTokens: () => fake.invalidateAccessTokens(),
  fail: (a: FakeAnswer) => fake.fail(path, a),
  failLater: (skip: number, a: FakeAnswer) => fake.failLater(path, skip, a),
});

const calendars: Calendar[] = [
  {
    name: 'google_calendar',
    me: google.account,
    put: (e) =>
      google.calendar.put({
        id: e.id,
        start: e.start,
        end: e.end,
        summary: SECRET,
        description: SECRET,
        allDay: e.allDay,
        attendees: [
          google.account,
          ...e.with,
          ...(e.declined ?? []).map((email) => ({ email, responseStatus: 'declined' })),
        ],
      }),
    cancel: (id) => google.calendar.cancel(id),
    expire: () => google.calendar.expireSyncTokens(),
    ...common(google, '/calendar/v3/calendars/primary/events'),
    scope: CALENDAR_READ,
    // developers.google.com/workspace/calendar/api/guides/errors: "429: Too many requests".
    throttled: (s) => ({
      status: 429,
      headers: { 'retry-after': String(s) },
      body: {
        error: {
          errors: [{ domain: 'usageLimits', reason: 'rateLimitExceeded', message: 'Rate Limit Exceeded' }],
          code: 429,
          message: 'Rate Limit Exceeded',
          status: 'RESOURCE_EXHAUSTED',
        },
      },
    }),
    forbidden: {
      status: 403,
      body: {
        error: {
          code: 403,
          message: 'Request had insufficient authentication scopes.',
          errors: [{ message: 'Insufficient Permission', domain: 'global', reason: 'insufficientPermissions' }],
          status: 'PERMISSION_DENIED',
        },
      },
    },
  },
  {
    name: 'outlook_calendar',
    me: ms.account,
    put: (e) =>
      ms.calendar.put({
        id: e.id,
        start: e.start,
        end: e.end,
        subject: SECRET,
        isAllDay: e.allDay,
        attendees: [...e.with, ...(e.declined ?? []).map((address) => ({ address, response: 'declined' }))],
      }),
    cancel: (id) => ms.calendar.cancel(id),
    expire: () => ms.expireDeltaTokens(),
    ...common(ms, '/v1.0/me/calendarView/delta'),
    scope: 'Calendars.Read',
    // learn.microsoft.com/graph/throttling: 429 with Retry-After and an error object.
    throttled: (s) => ({
      status: 429,
      headers: { 'retry-after': String(s) },
      body: {
        error: {
          code: 'ApplicationThrottled',
          message: 'Application is over its MailboxConcurrency limit.',
          innerError: { date: new Date().toISOString(), 'request-id': '9f4c2b1e-1d2a-4b7e-9c1d-2f3a4b5c6d7e' },
        },
      },
    }),
    // learn.microsoft.com/graph/errors: 403 Forbidden, the directory's code for a missing permission.
    forbidden: {
      status: 403,
      body: {
        error: {
          code: 'Authorization_RequestDenied',
          message: 'Insufficient privileges to complete the operation.',
          innerError: { date: new Date().toISOString(), 'request-id': '0c3e9f1a-8b7d-4c6e-a5f4-3d2c1b0a9e8f' },
        },
      },
    },
  },
];

const MIN = 60_000;
const after = (ms: number) => new Date(Math.floor((Date.now() + ms) / 1000) * 1000);
const pending = async (w: Workspace) =>
  (
    await db()<Array<{ event_id: string }>>`
      SELECT event_id FROM integration_pending_meetings WHERE tenant_id = ${w.tenant_id} ORDER BY event_id`
  ).map((r) => r.event_id);

for (const cal of calendars) {
  const w = spaces[cal.name];
  const admin: Client = client(api.url, w.api_key);
  const acme = (await admin.post('/v1/customers', { name: 'Acme', email_domain: 'acme.test' })).body;
  const globex = (await admin.post('/v1/customers', { name: 'Globex', email_domain: 'globex.test' })).body;
  await admin.post('/v1/customers', { name: 'Ourselves', email_domain: 'vendor.test' });
  await admin.post(`/v1/customers/${globex.id}/contacts`, { name: 'Dana', email: 'dana@acme.test' });
  const ids: Record<string, string> = {};

  t.test(`${cal.name}: the first sync, page by page`, async (t) => {
    cal.setPageSize(2);
    t.teardown(() => cal.setPageSize(1000));
    const held = { start: ago(DAY_MS), end: ago(DAY_MS - 30 * MIN) };
    ids.held = cal.put({ ...held, with: ['bob@acme.test', 'dana@acme.test'] });
    cal.put({ start: ago(2 * DAY_MS), end: ago(2 * DAY_MS - 30 * MIN), with: ['colleague@vendor.test'] });
    cal.put({ start: ago(40 * DAY_MS), end: ago(40 * DAY_MS - 30 * MIN), with: ['bob@acme.test'] });
    const cancelled = cal.put({ start: ago(3 * DAY_MS), end: ago(3 * DAY_MS - 30 * MIN), with: ['bob@acme.test'] });
    cal.cancel(cancelled);
    cal.put({ start: ago(4 * DAY_MS), end: ago(4 * DAY_MS - 30 * MIN), with: [], declined: ['carol@acme.test'] });
    cal.put({ start: ago(5 * DAY_MS), end: ago(4 * DAY_MS), with: ['bob@acme.test'], allDay: true });
    // Not ended yet: remembered, produced after its end.
    ids.soon = cal.put({ start: ago(10 * MIN), end: after(60 * MIN), with: ['eve@globex.test'] });

    await connect(admin, cal.name);
    const e = await firstSync(admin, cal.name);
    t.match(e, { status: 'connected', last_error: null, events_24h: { meeting_held: 2 } });
    const rows = await produced(w.tenant_id);
    t.same(
      rows.map((r) => [r.event_name, r.customer_id, r.activity_id, r.occurred_at.toISOString()]).sort(),
      [
        ['meeting_held', acme.id, ids.held, held.start.toISOString()],
        ['meeting_held', globex.id, ids.held, held.start.toISOString()],
      ].sort(),
      'one per (event, customer): bob → Acme by domain, dana → Globex by contact',
    );
    t.match(rows[0].properties, { activity_id: ids.held, integration: cal.name, duration_minutes: 30 });
    t.notOk(JSON.stringify(rows[0].properties).includes('vendor.test'), 'no own address stored');
    t.same(await pending(w), [ids.soon], 'the meeting not yet ended is remembered');
    t.notOk((await storedText(w.tenant_id)).includes(SECRET), 'no title or description stored');
    t.ok(cal.calls().length >= 3, 'pages followed');
    if (cal.name === 'google_calendar') {
      const q = new URLSearchParams(cal.calls()[0].query);
      t.equal(q.get('singleEvents'), 'true');
      t.notMatch(q.get('fields') ?? 'everything', /summary|description|location|everything/, 'times and people only');
      t.ok(Math.abs(Date.parse(q.get('timeMin') ?? '') - (Date.now() - 30 * DAY_MS)) < 5 * MIN, 'timeMin 30 days back');
    } else {
      const q = new URLSearchParams(cal.calls()[0].query);
      t.ok(
        Math.abs(Date.parse(q.get('startDateTime') ?? '') - (Date.now() - 30 * DAY_MS)) < 5 * MIN,
        'window from 30 days back',
      );
    }
    await stored(w.tenant_id, 2);
  });

  t.test(`${cal.name}: moved, cancelled, ended: counted once at the final time`, async (t) => {
    // Moved to end in a moment: produced by the first sync after that, at its new start.
    const moved = { start: ago(5 * MIN), end: after(4000) };
    cal.put({ id: ids.soon, ...moved, with: ['eve@globex.test'] });
    const gone = cal.put({ start: ago(MIN), end: after(4000), with: ['bob@acme.test'] });
    let e = await syncNow(admin, cal.name);
    t.match(e, { last_error: null });
    t.same((await pending(w)).sort(), [ids.soon, gone].sort(), 'both remembered while they last');
    t.equal(
      cal
        .calls()
        .at(-1)
        ?.query.includes(cal.name === 'google_calendar' ? 'syncToken' : '%24deltatoken'),
      true,
    );
    cal.cancel(gone);
    await syncNow(admin, cal.name);
    t.same(await pending(w), [ids.soon], 'the cancelled one forgotten');
    await waitFor('the moved meeting to end', () => Date.now() > moved.end.getTime() + 100, 10_000);
    e = await syncNow(admin, cal.name);
    let rows = await produced(w.tenant_id);
    const soon = rows.filter((r) => r.activity_id === ids.soon);
    t.same(
      soon.map((r) => [r.customer_id, r.occurred_at.toISOString()]),
      [[globex.id, moved.start.toISOString()]],
      'produced once it ended, at its final time',
    );
    t.same(await pending(w), []);
    t.notOk(
      rows.some((r) => r.activity_id === gone),
      'a cancelled meeting produces nothing',
    );
    // A meeting produced already, changed again: nothing more.
    cal.put({ id: ids.held, start: ago(DAY_MS + 60 * MIN), end: ago(DAY_MS), with: ['bob@acme.test'] });
    e = await syncNow(admin, cal.name);
    rows = await produced(w.tenant_id);
    t.equal(rows.length, 3);
    t.same(e.events_24h, { meeting_held: 3 });
    await stored(w.tenant_id, 3);
  });

  t.test(`${cal.name}: an expired cursor: a full resync, nothing twice`, async (t) => {
    const late = cal.put({ start: ago(3 * 60 * MIN), end: ago(2 * 60 * MIN), with: ['bob@acme.test'] });
    cal.expire();
    const mark = cal.calls().length;
    const e = await syncNow(admin, cal.name);
    t.match(e, { status: 'connected', last_error: null });
    const calls = cal.calls().slice(mark);
    t.equal(calls[0].status, 410);
    t.equal(calls[1].status, 200);
    const rows = await produced(w.tenant_id);
    t.equal(rows.length, 4, 'only the meeting the cursor missed is new');
    t.equal(rows.filter((r) => r.activity_id === late).length, 1);
    t.equal(new Set(rows.map((r) => `${r.activity_id}/${r.customer_id}`)).size, 4, 'no duplicates');
    await stored(w.tenant_id, 4);
  });

  t.test(`${cal.name}: disconnected, what was remembered is forgotten; connected again, nothing twice`, async (t) => {
    const future = cal.put({ start: after(60 * MIN), end: after(90 * MIN), with: ['bob@acme.test'] });
    await syncNow(admin, cal.name);
    t.same(await pending(w), [future]);
    t.equal((await admin.del(`/v1/integrations/${cal.name}`)).status, 204);
    // What a processors instance does every 10 minutes, run here at once.
    const cleanup = new IntegrationSync(db(), undefined, {}, createLogger('sync-test', 'silent'), {
      intervalMs: 60_000,
      pollMs: 1000,
      leaseTtlMs: 60_000,
      concurrency: 1,
      lookbackMs: 30 * DAY_MS,
      maxWaitMs: 1000,
      holder: 'test',
      tenants: [w.tenant_id],
    });
    t.match(await cleanup.forget(), { meetings: 1, cursors: 1 });
    t.same(await pending(w), [], 'no outside attendee kept');
    const [sync] = await db()<Array<{ cursor: object }>>`
      SELECT cursor FROM integration_syncs WHERE tenant_id = ${w.tenant_id} AND name = ${cal.name}`;
    t.same(sync.cursor, {}, 'no cursor (nor the account) kept');

    await connect(admin, cal.name);
    const e = await syncNow(admin, cal.name);
    t.match(e, { status: 'connected', last_error: null });
    t.same(await pending(w), [future], 'the new connection read the calendar again');
    t.equal((await produced(w.tenant_id)).length, 4, 'and stored nothing twice');
  });

  t.test(`${cal.name}: 401: one refresh, the call retried, the sync done`, async (t) => {
    const met = cal.put({ start: ago(3 * 60 * MIN), end: ago(150 * MIN), with: ['bob@acme.test'] });
    const before = (await produced(w.tenant_id)).length;
    const refreshes = cal.refreshes();
    cal.invalidateAccessTokens();
    const mark = cal.calls().length;
    const e = await syncNow(admin, cal.name);
    t.match(e, { status: 'connected', error: null, last_error: null });
    t.equal(cal.refreshes() - refreshes, 1, 'one refresh');
    t.same(
      cal
        .calls()
        .slice(mark)
        .map((c) => c.status),
      [401, 200],
      'the refused call made again once, with the new token',
    );
    const rows = await produced(w.tenant_id);
    t.equal(rows.length, before + 1);
    t.same(
      rows.filter((r) => r.activity_id === met).map((r) => r.customer_id),
      [acme.id],
    );
  });

  t.test(`${cal.name}: 429 on a page amid the listing: Retry-After waited out, nothing twice`, async (t) => {
    cal.setPageSize(1);
    t.teardown(() => cal.setPageSize(1000));
    const a = cal.put({ start: ago(5 * 60 * MIN), end: ago(4 * 60 * MIN), with: ['bob@acme.test'] });
    const b = cal.put({ start: ago(7 * 60 * MIN), end: ago(6 * 60 * MIN), with: ['eve@globex.test'] });
    const before = (await produced(w.tenant_id)).length;
    cal.failLater(1, cal.throttled(1));
    const mark = cal.calls().length;
    const e = await syncNow(admin, cal.name);
    t.match(e, { status: 'connected', error: null, last_error: null });
    const calls = cal.calls().slice(mark);
    t.same(
      calls.map((c) => c.status),
      [200, 429, 200],
      'the first page read, the second throttled, then read',
    );
    t.ok(calls[2].at - calls[1].at >= 950, `waited Retry-After (${calls[2].at - calls[1].at} ms)`);
    t.equal(calls[2].query, calls[1].query, 'the throttled page asked again');
    const rows = await produced(w.tenant_id);
    t.equal(rows.length, before + 2, 'one meeting_held per meeting');
    t.same(
      [a, b].map((id) => rows.filter((r) => r.activity_id === id).map((r) => r.customer_id)),
      [[acme.id], [globex.id]],
    );
    t.equal(new Set(rows.map((r) => `${r.activity_id}/${r.customer_id}`)).size, rows.length, 'no duplicates');
    await stored(w.tenant_id, rows.length);
  });

  if (cal.name === 'google_calendar')
    t.test('google_calendar: 403 rateLimitExceeded is a throttle, not a missing scope', async (t) => {
      const met = cal.put({ start: ago(9 * 60 * MIN), end: ago(8 * 60 * MIN), with: ['bob@acme.test'] });
      // developers.google.com/workspace/calendar/api/guides/errors: "403: Rate Limit Exceeded", no Retry-After.
      cal.fail({
        status: 403,
        body: {
          error: {
            errors: [{ domain: 'usageLimits', reason: 'rateLimitExceeded', message: 'Rate Limit Exceeded' }],
            code: 403,
            message: 'Rate Limit Exceeded',
          },
        },
      });
      const mark = cal.calls().length;
      const e = await syncNow(admin, cal.name);
      t.match(e, { status: 'connected', error: null, last_error: null });
      const calls = cal.calls().slice(mark);
      t.same(
        calls.map((c) => c.status),
        [403, 200],
      );
      t.ok(calls[1].at - calls[0].at >= 950, `backed off (${calls[1].at - calls[0].at} ms)`);
      t.equal((await produced(w.tenant_id)).filter((r) => r.activity_id === met).length, 1);
    });

  t.test(`${cal.name}: ${cal.scope} not granted, or withdrawn: the integration in error naming it`, async (t) => {
    const nw = noScope[cal.name];
    const other: Client = client(api.url, nw.api_key);
    await other.post('/v1/customers', { name: 'Acme', email_domain: 'acme.test' });
    const named = new RegExp(`scope ${cal.scope.replace(/[./]/g, '\\$&')}; reconnect`);
    cal.withhold.add(cal.scope);
    t.teardown(() => cal.withhold.delete(cal.scope));
    await connect(other, cal.name);
    cal.withhold.delete(cal.scope);
    let e = await firstSync(other, cal.name);
    t.match(e, { status: 'error', error: named, last_synced_at: null, last_error: { message: named } });
    t.equal(cal.lastStatus(), 403, 'the provider refused the read');
    isProblem(t, await other.post(`/v1/integrations/${cal.name}/sync`), 409, 'integration_not_connected');
    t.equal((await produced(nw.tenant_id)).length, 0, 'nothing produced');

    // Connected again with the scope granted: the calendar is read.
    await connect(other, cal.name);
    e = await waitFor('the sync of the new connection', async () => {
      const x = await entry(other, cal.name);
      return x.status === 'connected' && x.last_synced_at ? x : undefined;
    });
    const rows = await produced(nw.tenant_id);
    t.ok(rows.length > 0, `the calendar read (${rows.length} meetings)`);

    // The permission withdrawn later (the provider's 403, the scope not named in a header).
    cal.fail(cal.forbidden);
    e = await syncNow(other, cal.name);
    t.match(e, { status: 'error', error: named, last_error: { message: named } });
    t.match(e.error, cal.name === 'google_calendar' ? /insufficientPermissions/ : /Authorization_RequestDenied/);
    t.equal((await produced(nw.tenant_id)).length, rows.length, 'nothing more produced');
  });
}
