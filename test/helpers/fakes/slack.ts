import { randomBytes } from 'node:crypto';
import { type FakeAnswer, redirectBack, startHttpFake } from './http.js';

/**
 * Slack as its API reference describes it (api.slack.com/methods): `/oauth/v2/authorize`
 * redirects back with a code; `oauth.v2.access` answers HTTP 200 in every case, `{"ok": true,
 * "access_token": "xoxb-…", "token_type": "bot", "scope", "bot_user_id", "app_id", "team": {…}}` or
 * `{"ok": false, "error": "invalid_code"}`; `chat.postMessage` takes `{channel, text}` with the
 * bot token and answers `{"ok": true, "channel", "ts", "message"}` or `{"ok": false, "error"}`
 * (`invalid_auth`, `channel_not_found`, `not_in_channel`…), a 429 with Retry-After for
 * `ratelimited`; `auth.revoke` revokes the token. Bot tokens do not expire (no token rotation).
 */
export interface FakeSlack {
  url: string;
  /** The INTEGRATION_SLACK_* variables pointing here. */
  env: Record<string, string>;
  /** Messages Slack accepted. */
  posted: Array<{ channel: string; text: string; token: string }>;
  /** Every chat.postMessage request with Slack's answer (`ok` or the error code). */
  attempts: Array<{ channel: string; answer: string }>;
  tokens: string[];
  revoked: string[];
  /** The next chat.postMessage requests get these answers, in order, before the normal ones. */
  queue(...answers: FakeAnswer[]): void;
  /** Channels the bot is not a member of. */
  notMember: Set<string>;
  /** The bot token stops working (the app was uninstalled). */
  revokeAll(): void;
}

export const SLACK_TEAM = { id: 'T9TK3CUKW', name: 'Acme Success' };

export async function startFakeSlack(t: { teardown(f: () => unknown): void }): Promise<FakeSlack> {
  const codes = new Set<string>();
  const live = new Set<string>();
  const queued: FakeAnswer[] = [];
  const s = {
    posted: [] as FakeSlack['posted'],
    attempts: [] as FakeSlack['attempts'],
    tokens: [] as string[],
    revoked: [] as string[],
    notMember: new Set<string>(),
  };
  const channels = new Set(['#cs-alerts', 'C0123456', '#renewals', '#private']);
  const ok = (body: object): FakeAnswer => ({ status: 200, body: { ok: true, ...body } });
  const no = (error: string): FakeAnswer => ({ status: 200, body: { ok: false, error } });
  const url = await startHttpFake(t, (r) => {
    if (r.path === '/oauth/v2/authorize') {
      const code = `${randomBytes(6).toString('hex')}.${Date.now()}`;
      codes.add(code);
      return redirectBack(r, { code });
    }
    if (r.path === '/api/oauth.v2.access') {
      if (r.body.client_id !== 'slack-client') return no('invalid_client_id');
      if (r.body.client_secret !== 'slack-secret') return no('bad_client_secret');
      if (!codes.delete(r.body.code)) return no('invalid_code');
      const token = `xoxb-17653672481-19874698323-${randomBytes(12).toString('hex')}`;
      live.add(token);
      s.tokens.push(token);
      return ok({
        access_token: token,
        token_type: 'bot',
        scope: 'chat:write',
        bot_user_id: 'U0KRQLJ9H',
        app_id: 'A0KRD7HC3',
        team: SLACK_TEAM,
        enterprise: null,
        authed_user: { id: 'U1234', scope: '', token_type: 'user' },
      });
    }
    if (r.path === '/api/auth.revoke') {
      if (!live.delete(r.token)) return no('invalid_auth');
      s.revoked.push(r.token);
      return ok({ revoked: true });
    }
    if (r.path === '/api/chat.postMessage') {
      const channel = String(r.body.channel ?? '');
      const answer = (a: FakeAnswer): FakeAnswer => {
        const b = a.body as { ok?: boolean; error?: string } | undefined;
        s.attempts.push({ channel, answer: b?.ok ? 'ok' : (b?.error ?? `HTTP ${a.status}`) });
        return a;
      };
      if (!live.has(r.token)) return answer(no('invalid_auth'));
      const next = queued.shift();
      if (next) return answer(next);
      if (!r.body.text) return answer(no('no_text'));
      if (!channels.has(channel)) return answer(no('channel_not_found'));
      if (s.notMember.has(channel)) return answer(no('not_in_channel'));
      s.posted.push({ channel, text: String(r.body.text), token: r.token });
      const ts = `${Math.floor(Date.now() / 1000)}.${String(s.posted.length).padStart(6, '0')}`;
      return answer(ok({ channel: 'C0123456', ts, message: { type: 'message', text: r.body.text, ts } }));
    }
    return { status: 404, body: { ok: false, error: 'unknown_method' } };
  });
  return {
    url,
    env: {
      INTEGRATION_SLACK_CLIENT_ID: 'slack-client',
      INTEGRATION_SLACK_CLIENT_SECRET: 'slack-secret',
      INTEGRATION_SLACK_SIGNING_SECRET: '8f742231b10e8888abcd99yyyzzz85a5',
      INTEGRATION_SLACK_AUTHORIZE_URL: `${url}/oauth/v2/authorize`,
      INTEGRATION_SLACK_TOKEN_URL: `${url}/api/oauth.v2.access`,
      INTEGRATION_SLACK_REVOKE_URL: `${url}/api/auth.revoke`,
      INTEGRATION_SLACK_API_URL: `${url}/api`,
    },
    ...s,
    queue: (...answers) => void queued.push(...answers),
    revokeAll: () => live.clear(),
  };
}
