import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import t, { type Test } from '#tap';
import { DataCipher } from '../../lib/credentials/data-cipher.js';
import { newSecret } from '../../lib/webhooks/signature.js';
import { call, client, startApi } from '../core-api/_helpers.js';
import { authorizeInBrowser, startFakeProvider } from '../helpers/fake-provider.js';
import { startFakeZendesk, zendeskTicketEvent } from '../helpers/fakes/zendesk.js';
import {
  bootstrap,
  closeDb,
  db,
  dist,
  freePort,
  plainNode,
  profile,
  startTier,
  type Tier,
  waitFor,
} from '../helpers/stack.js';
import { startReceiver, verifySignature } from '../helpers/webhook-receiver.js';

// Secrets at rest across a rotation of the data key (docs/security.md): webhook signing secrets
// and provider tokens are stored encrypted under DATA_ENCRYPTION_KEY's first key; with the new key
// put first, `npm run rotate-data-key` rewrites them under it while the tiers run, and once the old
// key is gone deliveries are still signed with the secrets their receivers hold and provider calls
// still carry the tokens the provider issued, and a Zendesk integration's webhook signing secret
// still verifies Zendesk's deliveries. A webhook secret kept in clear from before secrets were
// encrypted is encrypted by the first start (test/webhooks/legacy-secrets covers that upgrade).
t.teardown(closeDb);
const run = promisify(execFile);
const OLD = randomBytes(32).toString('base64');
const NEW = randomBytes(32).toString('hex');
const keyId = (k: string) => new DataCipher([k]).currentKeyId;
const fake = await startFakeProvider(t, 3600);
const zd = await startFakeZendesk(t, 'acme');
const receiver = await startReceiver(t);
const w = await bootstrap();
// Zendesk delivers to the URL its webhook was created with: core-api keeps its port across restarts.
const apiPort = String(await freePort());

/** core-api and processors holding `keys` (DATA_ENCRYPTION_KEY) and no other. */
async function tiers(keys: string): Promise<{ api: Tier; stop: () => Promise<void> }> {
  const env = { ...fake.env('slack'), ...zd.env, DATA_ENCRYPTION_KEY: keys, INTEGRATION_TOKEN_KEY: '' };
  const api = await startApi(t, { ...env, API_PORT: apiPort });
  const processors = await startTier(t, 'processors', {
    ...env,
    WEBHOOK_TENANTS: w.tenant_id,
    INTEGRATION_TENANTS: w.tenant_id,
    WEBHOOK_POLL_MS: '50',
    NOTIFY_POLL_MS: '100',
  });
  return { api, stop: async () => void (await Promise.all([api.stop(), processors.stop()])) };
}

/** A ping through each subscription, verified by the receiver with the secret it was shown. */
async function pingsVerify(t: Test, api: Tier, subs: Array<{ id: string; secret: string; path: string }>) {
  const admin = client(api.url, w.api_key);
  for (const s of subs) {
    const before = receiver.at(s.path).length;
    t.equal((await admin.post(`/v1/webhook-subscriptions/${s.id}/test`)).status, 202, 'ping queued');
    const got = await waitFor(`a ping at ${s.path}`, () => receiver.at(s.path)[before]);
    t.ok(verifySignature(s.secret, got), `${s.path}: signed with the secret the receiver holds`);
  }
}

/** A Slack notification sent with the token the provider issued last. */
async function notificationSent(t: Test) {
  const [n] = await db()<Array<{ id: string }>>`
    INSERT INTO integration_notifications (tenant_id, name, channel, target, text)
    VALUES (${w.tenant_id}, 'slack', 'slack', '#cs', 'Renewal at risk') RETURNING id::text`;
  const sent = await waitFor('the notification sent', async () => {
    const [r] = await db()<Array<{ status: string; error: string | null }>>`
      SELECT status, error FROM integration_notifications WHERE id = ${n.id}`;
    return r.status !== 'pending' && r;
  });
  t.same(sent, { status: 'sent', error: null }, 'the provider call carried a token it accepts');
  t.equal(fake.calls.at(-1)?.token, fake.issued.at(-1)!.access, 'the token the provider issued');
}

let ticket = 0;
/** A ticket event signed by Zendesk with its webhook's secret: verified, its requester looked up, stored. */
async function zendeskDeliveryVerifies(t: Test) {
  ticket += 1;
  const now = new Date().toISOString();
  const r = await zd.deliver(
    zendeskTicketEvent('ticket.created', {
      id: ticket,
      requester_id: 101,
      status: 'new',
      created_at: now,
      updated_at: now,
    }),
  );
  t.equal(r.status, 200, 'the delivery accepted');
  t.same(r.body, { received: 1, duplicates: 0, unmatched: 0, events: 1 }, 'the signature verified, the ticket stored');
}

/**
 * The stored secrets of the workspace, as the columns hold them: the subscriptions in the order
 * they were made, Slack's tokens, Zendesk's token and webhook signing secret.
 */
const stored = async () => {
  const subs = await db()<Array<{ secret: string }>>`
    SELECT secret FROM webhook_subscriptions WHERE tenant_id = ${w.tenant_id} ORDER BY created_at`;
  const [i] = await db()<Array<{ access_token: string; refresh_token: string }>>`
    SELECT access_token, refresh_token FROM integrations WHERE tenant_id = ${w.tenant_id} AND name = 'slack'`;
  const [z] = await db()<Array<{ access_token: string; webhook_secret: string }>>`
    SELECT access_token, webhook_secret FROM integrations WHERE tenant_id = ${w.tenant_id} AND name = 'zendesk'`;
  return [...subs.map((s) => s.secret), i.access_token, i.refresh_token, z.access_token, z.webhook_secret];
};

const subs: Array<{ id: string; secret: string; path: string }> = [];

t.test('under the old key: secrets are stored encrypted, deliveries and provider calls work', async (t) => {
  // A subscription whose secret was stored in clear, before secrets were encrypted: the start encrypts it.
  const clear = newSecret();
  const [legacy] = await db()<Array<{ id: string }>>`
    INSERT INTO webhook_subscriptions (tenant_id, url, events, secret)
    VALUES (${w.tenant_id}, ${receiver.url('/clear')}, '{*}', ${clear}) RETURNING id::text`;
  const { api, stop } = await tiers(OLD);
  const admin = client(api.url, w.api_key);
  const made = await admin.post('/v1/webhook-subscriptions', { url: receiver.url('/encrypted'), events: ['*'] });
  t.equal(made.status, 201, made.text);
  // In the order stored() lists them: by creation.
  subs.push({ id: legacy.id, secret: clear, path: '/clear' });
  subs.push({ id: made.body.id, secret: made.body.secret, path: '/encrypted' });

  const started = await admin.post('/v1/integrations/slack/connect');
  t.equal(started.status, 200, started.text);
  const auth = await fetch(started.body.authorization_url, { redirect: 'manual' });
  const back = new URL(auth.headers.get('location') ?? '');
  t.equal((await call(back.origin, 'GET', back.pathname + back.search)).status, 200, 'connected');
  const zendesk = await admin.post('/v1/integrations/zendesk/connect?subdomain=acme');
  t.equal(zendesk.status, 200, zendesk.text);
  t.equal((await authorizeInBrowser(zendesk.body.authorization_url)).status, 200, 'zendesk connected');
  t.equal(zd.webhooks.length, 1, 'its webhook created in the account');
  const acme = await admin.post('/v1/customers', { name: 'Acme', email_domain: 'acme.example' });
  t.equal(acme.status, 201, acme.text);
  zd.users.set(101, 'bob@acme.example');

  const values = await waitFor('the secret kept in clear encrypted by the start', async () => {
    const v = await stored();
    return !v.includes(clear) && v;
  });
  t.same(
    values.map((v) => (v.startsWith(`v2.${keyId(OLD)}.`) ? 'old key' : v === clear ? 'clear' : v)),
    ['old key', 'old key', 'old key', 'old key', 'old key', 'old key'],
    'the secret kept in clear, the new secret, the tokens and the Zendesk signing secret under the old key',
  );
  t.notOk(values.includes(made.body.secret), 'the secret shown is not what is stored');
  t.notOk(values.includes(zd.webhooks[0].secret), 'nor is the Zendesk signing secret');
  await pingsVerify(t, api, subs);
  await notificationSent(t);
  await zendeskDeliveryVerifies(t);
  await stop();
});

t.test('the new key first, the rotation while the tiers run, then the old key gone', async (t) => {
  const both = await tiers(`${NEW},${OLD}`);
  const rotate = await run(...plainNode([dist('infra/bin/rotate-data-key.js'), '--tenant', w.tenant_id]), {
    env: {
      ...process.env,
      STACK_PROFILE: profile.name,
      DATA_ENCRYPTION_KEY: `${NEW},${OLD}`,
      INTEGRATION_TOKEN_KEY: '',
    },
  });
  const report = JSON.parse(rotate.stdout);
  t.equal(report.key_id, keyId(NEW));
  t.match(report.rewritten, {
    'webhook_subscriptions.secret': 2,
    'integrations.access_token': 2,
    'integrations.webhook_secret': 1,
  });
  t.same(report.unreadable, {}, 'every value opened');
  t.ok(
    (await stored()).every((v) => v.startsWith(`v2.${keyId(NEW)}.`)),
    'every secret under the new key, the one kept in clear too',
  );
  await pingsVerify(t, both.api, subs);
  await notificationSent(t);
  await zendeskDeliveryVerifies(t);
  await both.stop();

  const again = await run(...plainNode([dist('infra/bin/rotate-data-key.js'), '--tenant', w.tenant_id]), {
    env: { ...process.env, STACK_PROFILE: profile.name, DATA_ENCRYPTION_KEY: NEW, INTEGRATION_TOKEN_KEY: '' },
  });
  t.same(JSON.parse(again.stdout).rewritten, {}, 'a second run has nothing to do');

  const newOnly = await tiers(NEW);
  await pingsVerify(t, newOnly.api, subs);
  await notificationSent(t);
  await zendeskDeliveryVerifies(t);
  const rotated = await client(newOnly.api.url, w.api_key).post(
    `/v1/webhook-subscriptions/${subs[0].id}/rotate-secret`,
  );
  t.equal(rotated.status, 200);
  t.ok((await stored())[0].startsWith(`v2.${keyId(NEW)}.`), 'a secret rotated by its subscription: the new key');
  await newOnly.stop();
});
