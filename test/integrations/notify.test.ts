import t from '#tap';
import { call, client, startApi } from '../core-api/_helpers.js';
import { authorizeInBrowser } from '../helpers/fake-provider.js';
import { GMAIL_SEND, startFakeGoogle } from '../helpers/fakes/google.js';
import { startFakeMicrosoft } from '../helpers/fakes/microsoft.js';
import { SLACK_TEAM, startFakeSlack } from '../helpers/fakes/slack.js';
import { bootstrap, closeDb, db, type Workspace, waitFor } from '../helpers/stack.js';
import { processorsTier } from '../playbooks/support.js';

// Playbook notifications through the providers' own APIs, against fakes written from their
// references: Slack's chat.postMessage with the bot token (HTTP 200 with ok:false is a failure
// with Slack's code; ratelimited waits Retry-After; channel_not_found and not_in_channel are final
// and shown on the run record; invalid_auth puts the integration in error), Microsoft Graph's
// channel messages for Teams and sendMail for Outlook (a channel that does not exist is final; Graph's
// 429 waits Retry-After), Gmail's users.messages.send with a base64url RFC 5322 message; 5xx retried
// with backoff a bounded number of times, never a second delivery once accepted; a send scope the
// user did not grant (Google's 403 insufficient_scope) puts the integration in error naming it.
t.teardown(closeDb);
const slack = await startFakeSlack(t);
const ms = await startFakeMicrosoft(t);
const google = await startFakeGoogle(t);
const env = { ...slack.env, ...ms.env('teams'), ...ms.env('outlook'), ...google.env('gmail') };
const api = await startApi(t, env);
const ws = {
  slack: await bootstrap(),
  microsoft: await bootstrap(),
  gmail: await bootstrap(),
  gmailNoSend: await bootstrap(),
};
await processorsTier(t, [], {
  ...env,
  NOTIFY_POLL_MS: '100',
  INTEGRATION_NOTIFY_RETRIES: '2',
  INTEGRATION_NOTIFY_RETRY_BASE_MS: '200',
  INTEGRATION_TENANTS: Object.values(ws)
    .map((w) => w.tenant_id)
    .join(','),
});

async function connect(w: Workspace, name: string): Promise<void> {
  const started = await client(api.url, w.api_key).post(`/v1/integrations/${name}/connect`);
  if (started.status !== 200) throw new Error(started.text);
  const page = await authorizeInBrowser(started.body.authorization_url);
  if (page.status !== 200) throw new Error(page.text);
}
const entry = async (w: Workspace, name: string) =>
  (await client(api.url, w.api_key).get('/v1/integrations')).body.data.find((i: { name: string }) => i.name === name);

interface Notification {
  status: string;
  attempts: number;
  response_status: number | null;
  error: string | null;
}

async function queue(w: Workspace, name: string, channel: string, target: string, text: string): Promise<string> {
  const [r] = await db()<Array<{ id: string }>>`
    INSERT INTO integration_notifications (tenant_id, name, channel, target, text)
    VALUES (${w.tenant_id}, ${name}, ${channel}, ${target}, ${text}) RETURNING id::text`;
  return r.id;
}
/** The notification once it is sent or failed for good. */
const settled = (id: string) =>
  waitFor(`notification ${id} settled`, async () => {
    const [r] = await db()<Notification[]>`
      SELECT status, attempts, response_status, error FROM integration_notifications
      WHERE id = ${id} AND status <> 'pending'`;
    return r;
  });

t.test('slack: oauth.v2.access quirks, a bot token that does not expire', async (t) => {
  const c = client(api.url, ws.slack.api_key);
  // A code Slack does not know: HTTP 200 with ok:false is still a refusal.
  const first = await c.post('/v1/integrations/slack/connect');
  const u = new URL(first.body.authorization_url);
  t.equal(`${u.origin}${u.pathname}`, `${slack.url}/oauth/v2/authorize`);
  t.equal(u.searchParams.get('scope'), 'chat:write');
  const bad = await call(api.url, 'GET', `/v1/integrations/slack/callback?code=forged&state=${first.body.state}`);
  t.equal(bad.status, 400);
  t.match(bad.text, /invalid_code/);
  t.match(await entry(ws.slack, 'slack'), { status: 'error', error: /invalid_code/ });

  await connect(ws.slack, 'slack');
  t.match(await entry(ws.slack, 'slack'), { status: 'connected', account: SLACK_TEAM.name });
  const [row] = await db()<Array<{ refresh_token: string | null; token_expires_at: Date | null }>>`
    SELECT refresh_token, token_expires_at FROM integrations WHERE tenant_id = ${ws.slack.tenant_id} AND name = 'slack'`;
  t.same(row, { refresh_token: null, token_expires_at: null }, 'xoxb- without rotation: no refresh, no expiry');
});

t.test('slack: chat.postMessage; ratelimited waits Retry-After; 5xx retried; sent once', async (t) => {
  const n = await settled(await queue(ws.slack, 'slack', 'slack', '#cs-alerts', 'Renewal at risk: Acme'));
  t.match(n, { status: 'sent', attempts: 1, response_status: 200, error: null });
  t.match(slack.posted.at(-1), { channel: '#cs-alerts', text: 'Renewal at risk: Acme', token: /^xoxb-/ });

  slack.queue({ status: 429, headers: { 'retry-after': '1' }, body: { ok: false, error: 'ratelimited' } });
  const queuedAt = Date.now();
  const limited = await settled(await queue(ws.slack, 'slack', 'slack', '#renewals', 'Limited'));
  t.match(limited, { status: 'sent', attempts: 2 });
  t.ok(Date.now() - queuedAt >= 1000, 'not before Retry-After');
  t.equal(slack.posted.filter((p) => p.text === 'Limited').length, 1, 'delivered once');

  slack.queue({ status: 500, body: { ok: false, error: 'internal_error' } }, { status: 503 });
  const flaky = await settled(await queue(ws.slack, 'slack', 'slack', '#renewals', 'Flaky'));
  t.match(flaky, { status: 'sent', attempts: 3 }, 'two retries');
  t.equal(slack.posted.filter((p) => p.text === 'Flaky').length, 1);

  slack.queue({ status: 502 }, { status: 502 }, { status: 502 });
  const down = await settled(await queue(ws.slack, 'slack', 'slack', '#renewals', 'Down'));
  t.match(down, { status: 'failed', attempts: 3, response_status: 502, error: 'HTTP 502' }, 'at most 2 retries');
  t.equal(slack.posted.filter((p) => p.text === 'Down').length, 0);
  t.equal(slack.attempts.filter((a) => a.answer === 'HTTP 502').length, 3);
});

t.test('slack: channel_not_found and not_in_channel are final, on the run record and the integration', async (t) => {
  const admin = client(api.url, ws.slack.api_key);
  const customer = (await admin.post('/v1/customers', { name: 'Initech', arr: 50_000 })).body;
  const pb = (
    await admin.post('/v1/playbooks', {
      name: 'Big ones',
      trigger: { type: 'condition', expression: 'arr > 40000' },
      actions: [{ type: 'notify', channel: 'slack', target: '#nowhere' }],
    })
  ).body;
  const run = await admin.post(`/v1/playbooks/${pb.id}/run`, {});
  t.equal(run.status, 200, run.text);
  const failed = await waitFor('the run record to show the failure', async () => {
    const runs = (await admin.get(`/v1/playbooks/${pb.id}/runs`)).body.data;
    const a = runs[0]?.actions.find((x: { customer_id: string }) => x.customer_id === customer.id);
    return a?.status === 'failed' ? a : undefined;
  });
  t.match(failed, { type: 'notify', status: 'failed', via: 'slack', reason: 'slack: channel_not_found' });
  t.match(await entry(ws.slack, 'slack'), {
    status: 'connected',
    last_error: { message: /#nowhere: slack: channel_not_found/, at: String },
  });
  t.equal(slack.attempts.filter((a) => a.channel === '#nowhere').length, 1, 'not retried');

  slack.notMember.add('#private');
  const n = await settled(await queue(ws.slack, 'slack', 'slack', '#private', 'Secret'));
  t.match(n, { status: 'failed', attempts: 1, error: 'slack: not_in_channel' });
});

t.test('slack: invalid_auth puts the integration in error; nothing more is sent', async (t) => {
  slack.revokeAll();
  const n = await settled(await queue(ws.slack, 'slack', 'slack', '#cs-alerts', 'After uninstall'));
  t.match(n, { status: 'failed', attempts: 1, error: 'slack: invalid_auth' });
  t.match(await entry(ws.slack, 'slack'), { status: 'error', error: /invalid_auth.*connect slack again/ });
  const later = await settled(await queue(ws.slack, 'slack', 'slack', '#cs-alerts', 'Later'));
  t.match(later, { status: 'failed', error: 'integration_not_connected' });
});

t.test('teams through Graph channel messages; outlook through sendMail', async (t) => {
  await connect(ws.microsoft, 'teams');
  await connect(ws.microsoft, 'outlook');
  const team = '2ab9c796-2902-45f8-b712-7c5a63cf41c4';
  ms.channels.add(`${team}/19:def@thread.tacv2`);
  const sent = await settled(await queue(ws.microsoft, 'teams', 'teams', `${team}/19:def@thread.tacv2`, 'Hi'));
  t.match(sent, { status: 'sent', attempts: 1, response_status: 201 });
  t.same(ms.sent.at(-1), {
    kind: 'channel',
    team,
    channel: '19:def@thread.tacv2',
    body: { body: { contentType: 'text', content: 'Hi' } },
  });
  const bad = await settled(await queue(ws.microsoft, 'teams', 'teams', 'CS team', 'Hi'));
  t.match(bad, { status: 'failed', attempts: 1, error: /^invalid_target/ });
  const nowhere = await settled(await queue(ws.microsoft, 'teams', 'teams', `${team}/19:gone@thread.tacv2`, 'Hi'));
  t.match(nowhere, { status: 'failed', attempts: 1, response_status: 404, error: 'HTTP 404 NotFound' }, 'final');

  const mail = await settled(await queue(ws.microsoft, 'outlook', 'email', 'cs@example.com', 'Look at Acme'));
  t.match(mail, { status: 'sent', response_status: 202 });
  t.same(ms.sent.at(-1), {
    kind: 'mail',
    body: {
      message: {
        subject: 'Look at Acme',
        body: { contentType: 'Text', content: 'Look at Acme' },
        toRecipients: [{ emailAddress: { address: 'cs@example.com' } }],
      },
      saveToSentItems: true,
    },
  });
  const header = await settled(await queue(ws.microsoft, 'outlook', 'email', 'a@b.co\r\nBcc: x@y.z', 'Injected'));
  t.match(header, { status: 'failed', error: /^invalid_target/ }, 'no header injection through the target');

  // Graph's throttling answer: waited out as Retry-After says, then sent once.
  ms.fail('/v1.0/me/sendMail', {
    status: 429,
    headers: { 'retry-after': '1' },
    body: { error: { code: 'TooManyRequests', message: 'Please retry again later.' } },
  });
  const queuedAt = Date.now();
  const throttled = await settled(await queue(ws.microsoft, 'outlook', 'email', 'cs@example.com', 'Throttled'));
  t.match(throttled, { status: 'sent', attempts: 2, response_status: 202 });
  t.ok(Date.now() - queuedAt >= 1000, 'not before Retry-After');
  t.equal(ms.sent.filter((m) => m.body.message?.subject === 'Throttled').length, 1, 'delivered once');
});

t.test('gmail: users.messages.send with an RFC 5322 message; a 403 for a scope puts it in error', async (t) => {
  await connect(ws.gmail, 'gmail');
  const sent = await settled(await queue(ws.gmail, 'gmail', 'email', 'cs@example.com', 'Renewal día'));
  t.match(sent, { status: 'sent', response_status: 200 });
  const mail = google.sent.at(-1)?.mail ?? '';
  t.match(mail, /^To: cs@example\.com\r\n/);
  t.match(mail, /\r\nSubject: =\?UTF-8\?B\?[A-Za-z0-9+/=]+\?=\r\n/, 'a non-ASCII subject as an encoded word');
  t.equal(Buffer.from(mail.split('\r\n\r\n')[1], 'base64').toString(), 'Renewal día');

  // The user unticked "Send email on your behalf" at Google's consent screen.
  google.withhold.add(GMAIL_SEND);
  t.teardown(() => google.withhold.delete(GMAIL_SEND));
  await connect(ws.gmailNoSend, 'gmail');
  const before = google.sent.length;
  const refused = await settled(await queue(ws.gmailNoSend, 'gmail', 'email', 'cs@example.com', 'No scope'));
  t.match(refused, { status: 'failed', attempts: 1, response_status: 403 });
  t.equal(google.sent.length, before, 'nothing sent');
  t.match(await entry(ws.gmailNoSend, 'gmail'), {
    status: 'error',
    error: /needs the scope https:\/\/www\.googleapis\.com\/auth\/gmail\.send; an admin must connect it again/,
  });
});
