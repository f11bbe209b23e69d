import net from 'node:net';
import t, { type Test } from '#tap';
import { closeDb } from '../helpers/stack.js';
import { sharedApi } from '../core-api/_helpers.js';
import { customerIds, ingest, natsClient, StreamTap, workspace } from '../ingest/support.js';

// HTTP/1.1 framing on the uWS tiers, over raw sockets: what a client reads after each answer must
// be the next answer. HEAD answers carry no content; a request whose length is in doubt is
// refused and its connection closed; where uWS answers nothing itself, the test records it.
t.teardown(closeDb);
const ws = await workspace(1);
const [tier, api] = await Promise.all([ingest(t), sharedApi(t)]);
const nc = await natsClient(t);
const usage = await StreamTap.open(t, nc, `ev.usage.${ws.tenant_id}`);
const [c1] = [...(await customerIds(ws.tenant_id)).values()];
const event = JSON.stringify({ events: [{ event_name: 'x', customer_id: c1 }] });

interface Wire {
  /** Everything the server sent. */
  data: Buffer;
  /** The server closed the connection (or reset it) before the wait ended. */
  closed: boolean;
  ms: number;
}

/** Writes `requests` on one connection and collects what comes back until close or `waitMs`. */
function wire(port: number, requests: string | Buffer, waitMs = 1500): Promise<Wire> {
  return new Promise((resolve) => {
    const started = Date.now();
    const s = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const done = (closed: boolean) => {
      clearTimeout(timer);
      s.destroy();
      resolve({ data: Buffer.concat(chunks), closed, ms: Date.now() - started });
    };
    const timer = setTimeout(() => done(false), waitMs);
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', () => {});
    s.on('close', () => done(true));
    s.write(requests);
  });
}

interface Parsed {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Splits a byte stream into responses; `heads[i]` says the i-th request was HEAD (no content). */
function parse(data: Buffer, heads: boolean[]): { responses: Parsed[]; rest: string } {
  const responses: Parsed[] = [];
  let at = 0;
  for (const head of heads) {
    const end = data.indexOf('\r\n\r\n', at);
    if (end < 0) break;
    const lines = data.subarray(at, end).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':');
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    const len = head ? 0 : Number(headers['content-length'] ?? 0);
    responses.push({
      status: Number(lines[0].split(' ')[1]),
      headers,
      body: data.subarray(end + 4, end + 4 + len).toString(),
    });
    at = end + 4 + len;
  }
  return { responses, rest: data.subarray(at).toString('latin1') };
}

/**
 * Requests one after another on one connection, each sent once the answer before it is complete
 * (uWS v20.30 drops pipelined requests behind an answer that is still pending), then a short wait
 * for any stray bytes: `rest` must be empty when every answer was framed as its headers say.
 */
function inTurn(port: number, steps: Array<{ request: string; head: boolean }>): Promise<ReturnType<typeof parse>> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    const heads = steps.map((x) => x.head);
    let data = Buffer.alloc(0);
    let sent = 0;
    const timers: NodeJS.Timeout[] = [];
    const finish = () => {
      for (const x of timers) clearTimeout(x);
      s.destroy();
      resolve(parse(data, heads));
    };
    const next = () => {
      if (sent < steps.length) s.write(steps[sent++].request);
      else timers.push(setTimeout(finish, 300));
    };
    s.on('data', (d: Buffer) => {
      data = Buffer.concat([data, d]);
      const answered = parse(data, heads.slice(0, sent)).responses.length;
      if (answered === sent && timers.length === 1) next();
    });
    s.on('error', reject);
    s.on('close', finish);
    s.on('connect', next);
    timers.push(setTimeout(finish, 10_000));
  });
}

const req = (method: string, path: string, headers: string[] = [], body = '') =>
  `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n${body}`;

function noContent(t: Test, w: Wire | ReturnType<typeof parse>, heads: boolean[], statuses: number[]): Parsed[] {
  const { responses, rest } = 'data' in w ? parse(w.data, heads) : w;
  t.same(
    responses.map((r) => r.status),
    statuses,
    `answers ${statuses.join(', ')}: ${JSON.stringify(responses.map((r) => r.headers)).slice(0, 400)}`,
  );
  t.equal(rest, '', 'nothing after the last answer: no body was sent with HEAD');
  return responses;
}

t.test('HEAD on a POST-only route: 405 with Allow and no body', async (t) => {
  for (const [port, path] of [
    [tier.port, '/v1/ingest/events'],
    [tier.port, '/v1/ingest/billing-events'],
    [tier.port, '/v1/events/backfill'],
    [api.port, '/v1/oauth/token'],
    [api.port, '/v1/nope'],
  ] as Array<[number, string]>) {
    const w = await wire(port, req('HEAD', path));
    const [r] = noContent(t, w, [true], [path === '/v1/nope' ? 404 : 405]);
    if (r?.status === 405) t.equal(r.headers.allow, 'POST', `${path}: Allow: POST`);
    if (port === tier.port) t.match(r?.headers['x-trace-id'] ?? '', /^[0-9a-f-]{36}$/, 'X-Trace-Id');
  }
});

t.test('HEAD on a GET route: the GET answer without its content; the connection stays usable', async (t) => {
  const auth = `Authorization: Bearer ${ws.api_key}`;
  const head = (path: string, h: string[] = []) => ({ request: req('HEAD', path, h), head: true });
  const get = (path: string, h: string[] = []) => ({ request: req('GET', path, h), head: false });
  // core API: HEAD then GET of the same resource on one connection.
  const w = await inTurn(api.port, [head('/v1/customers', [auth]), get('/v1/customers', [auth])]);
  const [h, g] = noContent(t, w, [true, false], [200, 200]);
  t.equal(h?.headers['content-length'], g?.headers['content-length'], 'Content-Length as GET would send');
  t.equal(h?.headers['content-type'], 'application/json');
  t.ok(JSON.parse(g?.body ?? '{}').data, 'the GET after it is read whole');
  // Health probes of both tiers, and surface B's GET /v1/events.
  for (const port of [api.port, tier.port])
    noContent(t, await inTurn(port, [head('/healthz'), get('/healthz')]), [true, false], [200, 200]);
  const q = await inTurn(tier.port, [head('/v1/events', [auth]), get('/healthz')]);
  const [e] = noContent(t, q, [true, false], [200, 200]);
  t.match(e?.headers['x-trace-id'] ?? '', /^[0-9a-f-]{36}$/, 'X-Trace-Id');
});

t.test('two Content-Length headers that differ: 400 and the connection is closed', async (t) => {
  const ingestKey = `X-API-Key: ${ws.ingestion_key}`;
  for (const [port, path, auth, body, shape] of [
    [tier.port, '/v1/ingest/events', ingestKey, event, 'detail'],
    [tier.port, '/v1/events', `Authorization: Bearer ${ws.api_key}`, event, 'problem'],
    [api.port, '/v1/customers', `Authorization: Bearer ${ws.api_key}`, '{"name":"smuggled"}', 'problem'],
  ] as Array<[number, string, string, string, string]>) {
    const headers = [auth, 'Content-Type: application/json', `Content-Length: ${body.length}`, 'Content-Length: 5'];
    const w = await wire(port, req('POST', path, headers, body), 3000);
    const { responses } = parse(w.data, [false]);
    t.equal(responses[0]?.status, 400, `${path}: 400 (${w.data.toString().slice(0, 300)})`);
    t.equal(responses[0]?.headers.connection, 'close', 'Connection: close');
    t.ok(w.closed, 'and closed');
    const b = JSON.parse(responses[0]?.body ?? '{}');
    if (shape === 'detail') t.match(b, { detail: /Content-Length/ });
    else t.match(b, { status: 400, type: /\/errors\/invalid_request$/ });
    if (port === tier.port) t.match(responses[0]?.headers['x-trace-id'] ?? '', /^[0-9a-f-]{36}$/, 'X-Trace-Id');
  }
  const same = await wire(
    tier.port,
    req(
      'POST',
      '/v1/ingest/events',
      [
        `X-API-Key: ${ws.ingestion_key}`,
        'Content-Type: application/json',
        `Content-Length: ${event.length}`,
        `Content-Length: ${event.length}`,
      ],
      event,
    ),
  );
  t.equal(parse(same.data, [false]).responses[0]?.status, 202, 'two equal Content-Length headers are one length');
  t.equal((await usage.drain()).length, 1, 'only that request stored events');
});

t.test('a transfer coding other than chunked: 400 and the connection is closed', async (t) => {
  const chunked = `${event.length.toString(16)}\r\n${event}\r\n0\r\n\r\n`;
  for (const [port, path, auth] of [
    [tier.port, '/v1/ingest/events', `X-API-Key: ${ws.ingestion_key}`],
    [tier.port, '/v1/events', `Authorization: Bearer ${ws.api_key}`],
    [api.port, '/v1/customers', `Authorization: Bearer ${ws.api_key}`],
  ] as Array<[number, string, string]>) {
    const headers = [auth, 'Content-Type: application/json', 'Transfer-Encoding: gzip, chunked'];
    const w = await wire(port, req('POST', path, headers, chunked), 3000);
    const r = parse(w.data, [false]).responses[0];
    t.equal(r?.status, 400, `${path}: 400 (${w.data.toString().slice(0, 200)})`);
    t.match(r?.body ?? '', /Transfer-Encoding/);
    t.ok(w.closed, 'closed');
  }
  const plain = await wire(
    tier.port,
    req(
      'POST',
      '/v1/ingest/events',
      [`X-API-Key: ${ws.ingestion_key}`, 'Content-Type: application/json', 'Transfer-Encoding: chunked'],
      `${event.length.toString(16)}\r\n${event}\r\n0\r\n\r\n`,
    ),
  );
  t.equal(parse(plain.data, [false]).responses[0]?.status, 202, 'chunked alone is fine');
  t.equal((await usage.drain()).length, 1, 'only that request stored events');
});

t.test('uWS closes the connection unanswered where the length cannot be known (documented)', async (t) => {
  const chunked = `${event.length.toString(16)}\r\n${event}\r\n0\r\n\r\n`;
  for (const framing of [
    ['Content-Length: 5', 'Transfer-Encoding: chunked'],
    ['Transfer-Encoding: chunked', 'Content-Length: 5'],
    ['Content-Length: abc'],
    ['Content-Length: -5'],
    ['Content-Length: 5, 6'],
    ['Transfer-Encoding: identity'],
    ['Transfer-Encoding: gzip'],
  ]) {
    // The handler does run for a coding it cannot take; its 400 sometimes leaves before uWS closes.
    const racy = framing[0].startsWith('Transfer-Encoding') && framing.length === 1;
    for (const [port, path] of [
      [tier.port, '/v1/ingest/events'],
      [api.port, '/v1/customers'],
    ] as Array<[number, string]>) {
      const headers = [`X-API-Key: ${ws.ingestion_key}`, 'Content-Type: application/json', ...framing];
      const w = await wire(port, req('POST', path, headers, chunked));
      t.ok(w.closed, `${path} with ${framing.join(', ')}: closed`);
      if (racy && w.data.length > 0) t.equal(parse(w.data, [false]).responses[0]?.status, 400, 'or after a 400');
      else t.equal(w.data.length, 0, 'without an answer');
    }
  }
  t.equal(await usage.pending(), 0, 'nothing stored');
});

t.test(
  'more than 48 header fields: uWS drops the request and closes after its idle timeout (documented)',
  async (t) => {
    const fields = (n: number) => Array.from({ length: n - 1 }, (_, i) => `X-Filler-${i}: ${i}`);
    const [ok, dropped] = await Promise.all([
      wire(api.port, req('GET', '/healthz', fields(48))),
      wire(tier.port, req('GET', '/healthz', fields(49)), 25_000),
    ]);
    t.equal(parse(ok.data, [false]).responses[0]?.status, 200, '48 fields (Host included) are answered');
    t.equal(dropped.data.length, 0, '49 fields: no answer at all');
    t.ok(dropped.closed, `the connection is closed (after ${dropped.ms} ms)`);
  },
);

t.test(
  'a request line longer than one read: uWS closes the connection unanswered; the tier stays up (documented)',
  async (t) => {
    for (const [port, path] of [
      [tier.port, '/v1/events'],
      [api.port, '/v1/customers'],
    ] as Array<[number, string]>) {
      // One read takes at most 512 KiB: this head always spans two, and uWS keeps 4 KiB of a split head.
      const w = await wire(port, req('GET', `${path}?q=${'a'.repeat(600_000)}`, []), 5000);
      t.ok(w.closed, `${path}: closed (after ${w.ms} ms)`);
      t.equal(w.data.length, 0, 'without an answer');
      const next = await wire(port, req('GET', '/healthz', ['Connection: close']));
      t.equal(parse(next.data, [false]).responses[0]?.status, 200, 'the tier still answers');
    }
  },
);
