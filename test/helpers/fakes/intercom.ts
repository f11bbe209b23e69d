import { createHmac, randomBytes } from 'node:crypto';
import { redirectBack, startHttpFake } from './http.js';

/**
 * Intercom as its developer docs describe it: `https://app.intercom.com/oauth` redirects back with
 * a code; `POST /auth/eagle/token` (code, client_id, client_secret) answers `{"token_type":
 * "Bearer", "token": …, "access_token": …}` (no refresh token, no expiry), a refused one
 * `{"type": "error.list", "errors": [{code, message}]}`; `POST /auth/uninstall` with the token
 * removes the app; `GET /me` answers the admin who authorized with the workspace the token reaches
 * embedded (`app: {type: "app", id_code, name, …}`). One fake serves several Intercom workspaces:
 * an authorization is granted in `workspace` as it is then. `notify` sends a webhook notification as
 * Intercom does: the `notification_event` envelope with its workspace's `app_id`, signed
 * `X-Hub-Signature: sha1=<hex HMAC-SHA1(client secret, body)>`.
 */
export interface FakeIntercom {
  url: string;
  env: Record<string, string>;
  tokens: string[];
  uninstalled: string[];
  /** The fake's own Intercom workspace (a new id at every start: test databases outlive runs). */
  home: IntercomApp;
  /** The Intercom workspace the next authorization is granted in; `home` unless a test picks another. */
  workspace: IntercomApp;
  /** The next `GET /me` gets this answer instead (then it is cleared). */
  meFault?: { status: number; body: unknown };
  notify(
    endpoint: string,
    topic: string,
    item: object,
    o?: { createdAt?: number; secret?: string; id?: string; appId?: string },
  ): Promise<{ status: number; headers: Headers; text: string; body: any }>;
}

/** An Intercom workspace ("app" in Intercom's API): its id_code is what notifications carry as app_id. */
export interface IntercomApp {
  id_code: string;
  name: string;
}

/** A new Intercom workspace, its id_code shaped like Intercom's (8 lower-case letters and digits). */
export const intercomApp = (name: string): IntercomApp => ({
  id_code: randomBytes(5).toString('hex').slice(0, 8),
  name,
});

export const INTERCOM_SECRET = 'ic-client-secret';

export async function startFakeIntercom(t: { teardown(f: () => unknown): void }): Promise<FakeIntercom> {
  /** Codes and tokens, each with the workspace it was granted in. */
  const codes = new Map<string, IntercomApp>();
  const granted = new Map<string, IntercomApp>();
  const s = { tokens: [] as string[], uninstalled: [] as string[] };
  const errorList = (status: number, code: string, message: string) => ({
    status,
    body: { type: 'error.list', request_id: randomBytes(8).toString('hex'), errors: [{ code, message }] },
  });
  const url = await startHttpFake(t, (r) => {
    if (r.path === '/oauth') {
      const code = randomBytes(8).toString('hex');
      codes.set(code, fake.workspace);
      return redirectBack(r, { code });
    }
    if (r.path === '/auth/eagle/token' && r.method === 'POST') {
      if (r.body.client_id !== 'ic-client' || r.body.client_secret !== INTERCOM_SECRET)
        return errorList(401, 'unauthorized', 'Client authentication failed');
      const app = codes.get(r.body.code);
      if (!app || !codes.delete(r.body.code)) return errorList(400, 'parameter_invalid', 'The code is invalid');
      const token = `dG9rOj${randomBytes(24).toString('base64url')}`;
      s.tokens.push(token);
      granted.set(token, app);
      return { status: 200, body: { token_type: 'Bearer', token, access_token: token } };
    }
    if (r.path === '/auth/uninstall' && r.method === 'POST') {
      if (!s.tokens.includes(r.token)) return errorList(401, 'unauthorized', 'Access Token Invalid');
      s.uninstalled.push(r.token);
      granted.delete(r.token);
      return { status: 200, body: {} };
    }
    if (r.path === '/me' && r.method === 'GET') {
      const fault = fake.meFault;
      fake.meFault = undefined;
      if (fault) return fault;
      const app = granted.get(r.token);
      if (!app) return errorList(401, 'unauthorized', 'Access Token Invalid');
      return {
        status: 200,
        body: {
          type: 'admin',
          id: '991267390',
          email: 'admin@globex.example',
          name: 'Ada Admin',
          email_verified: true,
          app: {
            type: 'app',
            ...app,
            created_at: 1719492696,
            secure: false,
            identity_verification: false,
            timezone: 'Europe/Dublin',
            region: 'US',
          },
          has_inbox_seat: true,
          away_mode_enabled: false,
          away_mode_reassign: false,
          team_ids: [814865],
        },
      };
    }
    return errorList(404, 'not_found', 'Resource Not Found');
  });
  const home = intercomApp('Globex Support');
  const fake: FakeIntercom = {
    url,
    home,
    workspace: home,
    env: {
      INTEGRATION_INTERCOM_CLIENT_ID: 'ic-client',
      INTEGRATION_INTERCOM_CLIENT_SECRET: INTERCOM_SECRET,
      INTEGRATION_INTERCOM_SIGNING_SECRET: INTERCOM_SECRET,
      INTEGRATION_INTERCOM_AUTHORIZE_URL: `${url}/oauth`,
      INTEGRATION_INTERCOM_TOKEN_URL: `${url}/auth/eagle/token`,
      INTEGRATION_INTERCOM_REVOKE_URL: `${url}/auth/uninstall`,
      INTEGRATION_INTERCOM_API_URL: url,
    },
    ...s,
    async notify(endpoint, topic, item, o = {}) {
      const raw = JSON.stringify({
        type: 'notification_event',
        app_id: o.appId ?? home.id_code,
        data: { type: 'notification_event_data', item },
        links: {},
        id: o.id ?? `notif_${randomBytes(8).toString('hex')}`,
        topic,
        delivery_status: 'pending',
        delivery_attempts: 1,
        delivered_at: 0,
        first_sent_at: o.createdAt ?? Math.floor(Date.now() / 1000),
        created_at: o.createdAt ?? Math.floor(Date.now() / 1000),
        self: null,
      });
      const sig = createHmac('sha1', o.secret ?? INTERCOM_SECRET)
        .update(raw)
        .digest('hex');
      const res = await fetch(endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-hub-signature': `sha1=${sig}` },
        body: raw,
      });
      const text = await res.text();
      return { status: res.status, headers: res.headers, text, body: text ? JSON.parse(text) : undefined };
    },
  };
  return fake;
}

/** A conversation as Intercom's webhook item carries it (API 2.x), started by a user. */
export function intercomConversation(id: string, email: string, state: 'open' | 'closed' = 'open'): object {
  const now = Math.floor(Date.now() / 1000);
  return {
    type: 'conversation',
    id,
    created_at: now,
    updated_at: now,
    state,
    open: state === 'open',
    source: {
      type: 'conversation',
      id: '403918316',
      delivered_as: 'customer_initiated',
      subject: '',
      body: '<p>Hi, I need help</p>',
      author: { type: 'user', id: '5310d8e8598c9a0b24000005', name: 'Jo', email },
    },
    contacts: { type: 'contact.list', contacts: [{ type: 'contact', id: '5310d8e8598c9a0b24000005' }] },
  };
}
