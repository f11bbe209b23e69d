import { createHmac } from 'node:crypto';
import t from '#tap';
import {
  intercomRequester,
  intercomSignature,
  zendeskActivity,
  zendeskSignature,
} from '../../core-api/integrations/webhooks.js';
import { buildRequest, rfc5322 } from '../../processors/integrations/notifier.js';
import { ticketActivities } from '../../processors/integrations/zendesk-backfill.js';

// The providers' formats as pure functions: signatures, ticket events into activities, the
// incremental export's pages, notification requests and the RFC 5322 message Gmail is sent.

t.test('signatures as the providers compute them', async (t) => {
  const raw = Buffer.from('{"type":"zen:event-type:ticket.created"}');
  const ts = '2024-04-17T17:18:10Z';
  // Zendesk: the timestamp and the body, concatenated, keyed by the webhook's signing secret.
  t.equal(
    zendeskSignature('dGhpcy1zZWNyZXQ=', ts, raw),
    createHmac('sha256', 'dGhpcy1zZWNyZXQ=').update(`${ts}${raw}`).digest('base64'),
  );
  t.match(zendeskSignature('s', ts, raw), /^[A-Za-z0-9+/]{43}=$/, 'base64 of 32 bytes');
  t.not(zendeskSignature('s', '2024-04-17T17:18:11Z', raw), zendeskSignature('s', ts, raw), 'the time is signed');
  t.match(intercomSignature('secret', raw), /^sha1=[0-9a-f]{40}$/);
  t.equal(intercomSignature('secret', raw), `sha1=${createHmac('sha1', 'secret').update(raw).digest('hex')}`);
});

t.test('zendesk ticket events', async (t) => {
  const ev = (type: string, extra: object = {}) => ({ type, id: 'e1', ...extra });
  t.same(zendeskActivity(ev('zen:event-type:ticket.created', { detail: { id: '35' } })), {
    ticketId: '35',
    type: 'ticket_opened',
  });
  t.same(zendeskActivity(ev('zen:event-type:ticket.created', { subject: 'zen:ticket:36' })), {
    ticketId: '36',
    type: 'ticket_opened',
  });
  for (const s of ['SOLVED', 'closed'])
    t.same(
      zendeskActivity(ev('zen:event-type:ticket.status_changed', { detail: { id: 1 }, event: { current: s } })),
      { ticketId: '1', type: 'ticket_closed' },
      s,
    );
  t.equal(
    zendeskActivity(ev('zen:event-type:ticket.status_changed', { detail: { id: 1 }, event: { current: 'PENDING' } })),
    null,
  );
  t.same(
    zendeskActivity(
      ev('zen:event-type:ticket.status_changed', { detail: { id: 2 }, event: { current: { status: 'Solved' } } }),
    ),
    { ticketId: '2', type: 'ticket_closed' },
    'the status nested',
  );
  t.equal(zendeskActivity(ev('zen:event-type:user.created', { detail: { id: 1 } })), null);
  t.equal(zendeskActivity(ev('zen:event-type:ticket.created')), null, 'no ticket id');
});

t.test("intercom: the conversation's requester", async (t) => {
  t.equal(intercomRequester({ source: { author: { type: 'user', email: 'jo@a.example' } } }), 'jo@a.example');
  t.equal(intercomRequester({ source: { author: { type: 'lead', email: 'l@a.example' } } }), 'l@a.example');
  t.equal(intercomRequester({ source: { author: { type: 'admin', email: 'agent@us.example' } } }), undefined);
  t.equal(intercomRequester({ user: { email: 'old@a.example' } }), 'old@a.example', 'the 1.x shape');
});

t.test('zendesk export pages: requesters side-loaded, ids shared with the webhook', async (t) => {
  const acts = ticketActivities({
    tickets: [
      {
        id: 1,
        status: 'solved',
        requester_id: 9,
        created_at: '2026-01-01T00:00:00Z',
        updated_at: '2026-01-02T00:00:00Z',
      },
      {
        id: 2,
        status: 'open',
        requester_id: 8,
        created_at: '2026-01-03T00:00:00Z',
        updated_at: '2026-01-03T00:00:00Z',
      },
      {
        id: 3,
        status: 'deleted',
        requester_id: 9,
        created_at: '2026-01-03T00:00:00Z',
        updated_at: '2026-01-03T00:00:00Z',
      },
    ],
    users: [{ id: 9, email: 'jo@a.example' }],
  });
  t.same(acts, [
    {
      id: 'zendesk:ticket:1:opened',
      type: 'ticket_opened',
      occurred_at: '2026-01-01T00:00:00.000Z',
      participants: ['jo@a.example'],
    },
    {
      id: 'zendesk:ticket:1:closed',
      type: 'ticket_closed',
      occurred_at: '2026-01-02T00:00:00.000Z',
      participants: ['jo@a.example'],
    },
    { id: 'zendesk:ticket:2:opened', type: 'ticket_opened', occurred_at: '2026-01-03T00:00:00.000Z', participants: [] },
  ]);
});

t.test('notification requests in each provider API', async (t) => {
  t.same(buildRequest({ name: 'slack', target: '#a', text: 'x' }), {
    path: '/chat.postMessage',
    body: '{"channel":"#a","text":"x"}',
  });
  t.same(buildRequest({ name: 'teams', target: 't-1/c-2', text: 'x' }), {
    path: '/teams/t-1/channels/c-2/messages',
    body: '{"body":{"contentType":"text","content":"x"}}',
  });
  for (const target of ['t-1', 't/c/d', 't /c'])
    t.match(buildRequest({ name: 'teams', target, text: 'x' }), { error: /^invalid_target/ }, target);
  for (const target of ['a@b', 'a@b.co\r\nBcc: x@y.z', 'A <a@b.co>', 'a@b.co,c@d.co'])
    t.match(buildRequest({ name: 'gmail', target, text: 'x' }), { error: /^invalid_target/ }, JSON.stringify(target));
  t.match(buildRequest({ name: 'outlook', target: 'a@b.co', text: 'x' }), { path: '/me/sendMail' });
  const mail = rfc5322('a@b.co', 'Résumé', 'line 1\nline 2');
  t.match(mail, /^To: a@b\.co\r\nSubject: =\?UTF-8\?B\?UsOpc3Vtw6k=\?=\r\n/);
  t.match(mail, /\r\nContent-Type: text\/plain; charset="UTF-8"\r\nContent-Transfer-Encoding: base64\r\n\r\n/);
  t.equal(Buffer.from(mail.split('\r\n\r\n')[1], 'base64').toString(), 'line 1\nline 2');
});
