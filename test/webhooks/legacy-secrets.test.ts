import { createCipheriv, randomBytes } from 'node:crypto';
import t, { type Test } from '#tap';
import { DataCipher } from '../../lib/credentials/data-cipher.js';
import { newSecret } from '../../lib/webhooks/signature.js';
import { integrationTokenKey } from '../../infra/stack.js';
import { client, startApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db, profile, startTier, type Tier, waitFor } from '../helpers/stack.js';
import { startReceiver, verifySignature } from '../helpers/webhook-receiver.js';

// The upgrade of secrets at rest (docs/upgrading.md): an older version kept webhook signing secrets
// (and previous secrets) in clear and wrote provider tokens in the first format (`v1.`, under
// INTEGRATION_TOKEN_KEY). The first start of this version encrypts every such value under the
// current data key, in the background and in batches: deliveries are signed with the secrets their
// receivers hold before, during and after; a core-api killed halfway leaves the rest to its next
// start; a second start rewrites nothing. It rewrites every workspace's rows: a serial file.
t.teardown(closeDb);
const KEY = integrationTokenKey(profile);
const cipher = new DataCipher([KEY]);
const receiver = await startReceiver(t);
const [w, bulk] = await Promise.all([bootstrap(), bootstrap()]);
/** Enough rows for many batches of the pass (200 rows each): a kill lands in the middle. */
const BULK = 4000;

/** A value in the first format, as an older version wrote provider tokens: v1.<iv>.<tag>.<ciphertext>. */
function v1(plain: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', Buffer.from(KEY, 'base64'), iv);
  const ct = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
  return ['v1', ...[iv, c.getAuthTag(), ct].map((x) => x.toString('base64url'))].join('.');
}

interface Stored {
  id: string;
  secret: string;
  previous_secret: string | null;
}
const subscriptions = (tenant: string) => db()<Stored[]>`
  SELECT id::text, secret, previous_secret FROM webhook_subscriptions WHERE tenant_id = ${tenant} ORDER BY id`;
const current = (v: string | null) => v === null || cipher.isCurrent(v);

// What an older version left: subscriptions with secrets (one with a previous secret) in clear, a
// connected Slack integration with tokens in the first format, and many more subscriptions elsewhere.
const clear = { one: newSecret(), two: newSecret(), previous: newSecret() };
const [one, two] = await db()<Array<{ id: string }>>`
  INSERT INTO webhook_subscriptions (tenant_id, url, events, secret, previous_secret, previous_until)
  VALUES (${w.tenant_id}, ${receiver.url('/one')}, '{*}', ${clear.one}, NULL, NULL),
         (${w.tenant_id}, ${receiver.url('/two')}, '{*}', ${clear.two}, ${clear.previous}, now() + interval '1 day')
  RETURNING id::text`;
const tokens = {
  access: `xoxb-${randomBytes(12).toString('hex')}`,
  refresh: `xoxe-${randomBytes(12).toString('hex')}`,
};
await db()`
  INSERT INTO integrations (tenant_id, name, status, access_token, refresh_token, token_expires_at, connected_at)
  VALUES (${w.tenant_id}, 'slack', 'connected', ${v1(tokens.access)}, ${v1(tokens.refresh)},
          now() + interval '1 hour', now())`;
await db()`
  INSERT INTO webhook_subscriptions (tenant_id, url, events, secret, previous_secret, previous_until, enabled)
  SELECT ${bulk.tenant_id}, 'https://example.com/hook', '{*}', 'whsec_' || md5(i::text), 'whsec_p' || md5(i::text),
         now() + interval '1 day', false
  FROM generate_series(1, ${BULK}) i`;
const bulkClear = new Map((await subscriptions(bulk.tenant_id)).map((s) => [s.id, s]));

const processors = await startTier(t, 'processors', { WEBHOOK_TENANTS: w.tenant_id, WEBHOOK_POLL_MS: '50' });
t.teardown(() => processors.stop('SIGTERM'));

/** A ping through a subscription, verified by the receiver with the secret it was shown. */
async function pingVerifies(t: Test, api: Tier, id: string, path: string, secret: string) {
  const before = receiver.at(path).length;
  t.equal((await client(api.url, w.api_key).post(`/v1/webhook-subscriptions/${id}/test`)).status, 202, 'ping queued');
  const got = await waitFor(`a ping at ${path}`, () => receiver.at(path)[before]);
  t.ok(verifySignature(secret, got), `${path}: signed with the secret the receiver holds`);
}

t.test('a core-api killed halfway through leaves the rest to its next start', async (t) => {
  const api = await startApi(t);
  // Deliveries meanwhile: the secret is read in clear or encrypted, whichever it is at that moment.
  await pingVerifies(t, api, one.id, '/one', clear.one);
  const partly = await waitFor(
    'some of the rows encrypted, not all',
    async () => {
      const n = (await subscriptions(bulk.tenant_id)).filter((s) => cipher.isCurrent(s.secret)).length;
      return n > 0 && n;
    },
    30_000,
    10,
  );
  await api.stop('SIGKILL');
  const left = (await subscriptions(bulk.tenant_id)).filter((s) => !cipher.isCurrent(s.secret)).length;
  t.ok(partly > 0 && left > 0, `killed with ${left} of ${BULK} secrets still in clear (${partly} or more done)`);
});

t.test('the next start encrypts every value left in clear or in the first format, and the values stay', async (t) => {
  const api = await startApi(t);
  await waitFor(
    'every secret of every workspace under the current key',
    async () => {
      const all = [...(await subscriptions(w.tenant_id)), ...(await subscriptions(bulk.tenant_id))];
      return all.every((s) => current(s.secret) && current(s.previous_secret));
    },
    60_000,
    100,
  );
  const subs = await subscriptions(bulk.tenant_id);
  t.equal(subs.length, BULK);
  t.ok(
    subs.every((s) => {
      const before = bulkClear.get(s.id)!;
      return (
        cipher.decrypt(s.secret) === before.secret && cipher.decrypt(s.previous_secret!) === before.previous_secret
      );
    }),
    `each of ${BULK} secrets and previous secrets opens to the value stored in clear`,
  );
  const [a, b] = await subscriptions(w.tenant_id);
  const mine = new Map([
    [a.id, a],
    [b.id, b],
  ]);
  t.equal(cipher.decrypt(mine.get(one.id)!.secret), clear.one);
  t.equal(cipher.decrypt(mine.get(two.id)!.secret), clear.two);
  t.equal(cipher.decrypt(mine.get(two.id)!.previous_secret!), clear.previous, 'the previous secret too');
  const [slack] = await db()<Array<{ access_token: string; refresh_token: string }>>`
    SELECT access_token, refresh_token FROM integrations WHERE tenant_id = ${w.tenant_id} AND name = 'slack'`;
  t.ok(cipher.isCurrent(slack.access_token) && cipher.isCurrent(slack.refresh_token), 'tokens under the data key');
  t.same(
    [cipher.decrypt(slack.access_token), cipher.decrypt(slack.refresh_token)],
    [tokens.access, tokens.refresh],
    'the tokens the provider issued',
  );
  // Signed with both secrets while the previous one is valid: the receiver's copy of either verifies.
  await pingVerifies(t, api, one.id, '/one', clear.one);
  await pingVerifies(t, api, two.id, '/two', clear.two);
  await pingVerifies(t, api, two.id, '/two', clear.previous);
  await api.stop('SIGTERM');
});

t.test('a start with nothing left in clear rewrites nothing', async (t) => {
  const before = [...(await subscriptions(w.tenant_id)), ...(await subscriptions(bulk.tenant_id))];
  const started = new Date();
  // On a short interval its housekeeping runs the same pass as a job at once, beside the start's.
  const api = await startApi(t, { HOUSEKEEPING_INTERVAL_MS: '1000' });
  await waitFor('the legacy-secrets job finished', async () => {
    const [r] = await db()<Array<{ done: boolean }>>`
      SELECT last_finished_at > ${started} AS done FROM job_leases
      WHERE job = 'housekeeping.legacy_secrets'`;
    return r?.done;
  });
  const after = [...(await subscriptions(w.tenant_id)), ...(await subscriptions(bulk.tenant_id))];
  t.same(after, before, 'every stored value as it was');
  await api.stop('SIGTERM');
});
