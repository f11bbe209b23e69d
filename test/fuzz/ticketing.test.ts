import { createHmac } from 'node:crypto';
import t from '#tap';
import { client } from '../core-api/_helpers.js';
import { authorizeInBrowser } from '../helpers/fake-provider.js';
import { INTERCOM_SECRET, intercomConversation, startFakeIntercom } from '../helpers/fakes/intercom.js';
import { startFakeZendesk, zendeskTicketEvent } from '../helpers/fakes/zendesk.js';
import { closeDb, type Workspace } from '../helpers/stack.js';
import { seededFrom } from './arbitraries.js';
import { type OpenApiDoc, type RouteSeed, routeSurface } from './route-surface.js';
import { apiTier, fuzz, QUICK_RUNS_SEEDED, settings, stillReady, tenantLedger } from './support.js';
import { bearer, fixtures, idsOf } from './workspace.js';

// The ticketing providers' webhooks (Zendesk, Intercom), connected through local fakes that speak
// their formats; requests signed as the providers sign them, and mutated around that.
const o = settings(process.env, QUICK_RUNS_SEEDED);

t.teardown(closeDb);
const zd = await startFakeZendesk(t, 'acme');
const ic = await startFakeIntercom(t);
const api = await apiTier(t, { ...zd.env, ...ic.env });
const doc = (await (await fetch(`${api.url}/v1/openapi.json`)).json()) as OpenApiDoc;
const [own, other] = await Promise.all([fixtures(api.url), fixtures(api.url)]);

async function connect(ws: Workspace, name: string, query = '') {
  const c = client(api.url, ws.api_key);
  const started = await c.post(`/v1/integrations/${name}/connect${query}`);
  if (started.status !== 200) throw new Error(`connect: ${started.status} ${started.text}`);
  const page = await authorizeInBrowser(started.body.authorization_url);
  if (page.status !== 200) throw new Error(`callback: ${page.status} ${page.text.slice(0, 300)}`);
  const list = (await c.get('/v1/integrations')).body.data as Array<{ name: string; connection_id: string }>;
  return list.find((i) => i.name === name)!.connection_id;
}
const mine = {
  zendesk: await connect(own.ws, 'zendesk', '?subdomain=acme'),
  intercom: await connect(own.ws, 'intercom'),
};
const zendeskSecret = zd.webhooks.at(-1)!.secret;
const theirs = { intercom: await connect(other.ws, 'intercom') };

const stamp = () => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
const ticket = { id: 7, requester_id: 101, status: 'new' as const, created_at: stamp(), updated_at: stamp() };
zd.users.set(101, 'jo@acme.example');

const intercomBodies = seededFrom(
  {
    type: 'notification_event',
    id: 'notif_1',
    topic: 'conversation.user.created',
    app_id: ic.home.id_code,
    created_at: Math.floor(Date.now() / 1000),
    data: { type: 'notification_event_data', item: intercomConversation('42', 'jo@acme.example') },
  } as never,
  {
    type: 'notification_event',
    topic: 'ping',
    created_at: Math.floor(Date.now() / 1000),
    data: { item: { type: 'ping', message: 'hi' } },
  } as never,
);
const intercomSign = (body: Buffer): Array<[string, string]> => [
  ['X-Hub-Signature', `sha1=${createHmac('sha1', INTERCOM_SECRET).update(body).digest('hex')}`],
];

const seeds: Record<string, RouteSeed> = {
  'POST /v1/integrations/zendesk/webhooks/{connection_id}': {
    params: { connection_id: { own: [mine.zendesk] } },
    body: seededFrom(
      zendeskTicketEvent('ticket.created', ticket) as never,
      zendeskTicketEvent('ticket.status_changed', ticket, 'solved') as never,
    ),
    sign: (body) => {
      const ts = stamp();
      return [
        ['X-Zendesk-Webhook-Signature-Timestamp', ts],
        ['X-Zendesk-Webhook-Signature', createHmac('sha256', zendeskSecret).update(ts).update(body).digest('base64')],
      ];
    },
    maxBytes: 256 * 1024,
  },
  'POST /v1/integrations/intercom/webhooks/{connection_id}': {
    // Any workspace's connection takes deliveries: the provider's signature is the credential, not a bearer.
    params: { connection_id: { own: [mine.intercom, theirs.intercom] } },
    body: intercomBodies,
    sign: intercomSign,
    maxBytes: 256 * 1024,
  },
  // The app's one URL: routed by app_id to both workspaces (both connected the fake's Intercom workspace).
  'POST /v1/integrations/intercom/webhooks': { body: intercomBodies, sign: intercomSign, maxBytes: 256 * 1024 },
  'GET /v1/integrations/intercom/webhooks': {},
};

const ledger = tenantLedger(own.ws.tenant_id, ['integrations', 'integration_activities']);
const ctx = { doc, port: api.port, auth: bearer(own.ws), tiers: [api], ledger, foreignIds: idsOf(other) };

t.test('ticketing webhooks: every answer documented, nothing stored when refused', async (t) => {
  await fuzz(t, routeSurface('ticketing', 'core ticketing webhooks', seeds, ctx), o);
  await stillReady(t, [api]);
});
