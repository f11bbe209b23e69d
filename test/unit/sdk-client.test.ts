import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import t from '#tap';
import { IngestClient, type IngestClientOptions } from '../../sdk/src/client.js';
import type { IngestClientError } from '../../sdk/src/errors.js';

/** The client against an in-process server that answers as the test says: no stack needed. */

interface Seen {
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  events: Array<Record<string, unknown>>;
}

type Handler = (seen: Seen, n: number, req: http.IncomingMessage, res: http.ServerResponse) => void;

async function server(t: { teardown(fn: () => unknown): void }, handler: Handler) {
  const seen: Seen[] = [];
  const srv = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const text = req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
      const s = { headers: req.headers, body: raw, events: JSON.parse(text.toString()).events };
      seen.push(s);
      handler(s, seen.length, req, res);
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    srv.closeAllConnections();
    srv.close();
  });
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, seen };
}

const json = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};
const took = (res: http.ServerResponse, n: number, errors: unknown[] = [], status = 202) =>
  json(res, status, { accepted: n - errors.length, rejected: errors.length, errors });

const fast = { retryBaseMs: 1, retryCapMs: 5, flushIntervalMs: 10 };
const evA = (i: number) => ({ event_name: 'page_view', customer_id: `c-${i}`, user_id: String(i) });
const evB = (i: number) => ({ event_name: 'page_view', customer_id: `c-${i}`, external_id: `x-${i}` });

function client(o: IngestClientOptions) {
  const c = new IngestClient<Record<string, unknown>>(o);
  const log = { rejected: [] as string[], failed: [] as IngestClientError[], retries: [] as string[], dropped: 0 };
  c.on('rejected', (e, p) => log.rejected.push(`${String(e.user_id ?? e.external_id)}:${p.code}`));
  c.on('failed', (_e, err) => log.failed.push(err));
  c.on('retry', (_a, _d, reason) => log.retries.push(reason));
  c.on('dropped', () => log.dropped++);
  return { c, log };
}

t.test('batches of at most maxBatchEvents, every event once, per-event errors reported', async (t) => {
  const s = await server(t, (x, _n, _q, res) =>
    took(
      res,
      x.events.length,
      x.events.flatMap((e, index) =>
        e.user_id === '7' ? [{ index, event_name: 'page_view', code: 'unknown_customer', message: 'no' }] : [],
      ),
    ),
  );
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k', ...fast });
  let all = true;
  for (let i = 0; i < 250; i++) all &&= c.track(evA(i));
  t.ok(all, 'each event queued');
  t.notOk(c.track({ event_name: 'Not Snake' }), 'an invalid event is not queued');
  t.notOk(c.track({ event_name: 'no_customer' }), 'surface A rule 1: a customer reference');
  await c.close();
  t.same(s.seen.map((x) => x.events.length).sort(), [100, 100, 50]);
  t.same(
    s.seen.flatMap((x) => x.events.map((e) => Number(e.user_id))).sort((a, b) => a - b),
    Array.from({ length: 250 }, (_, i) => i),
    'every event once',
  );
  t.same(log.rejected.sort(), [
    '7:unknown_customer',
    'undefined:customer_reference_required',
    'undefined:invalid_event_name',
  ]);
  t.same(c.stats(), {
    queued: 0,
    inFlight: 0,
    sent: 250,
    accepted: 249,
    rejected: 3,
    failed: 0,
    dropped: 0,
    retries: 0,
  });
  t.equal(s.seen[0].headers['x-api-key'], 'k');
  t.equal(s.seen[0].headers['content-encoding'], 'gzip', 'compressed: it saves bytes');
});

t.test(
  '429 and 503 are retried after Retry-After with the same bytes; surface B keeps its Idempotency-Key',
  async (t) => {
    const s = await server(t, (x, n, _q, res) => {
      if (n === 1) return json(res, 429, { detail: 'slow down' }, { 'retry-after': '1' });
      if (n === 2) return json(res, 503, { title: 'busy' }, { 'retry-after': '0' });
      took(res, x.events.length, [], 200);
    });
    const { c, log } = client({ url: s.url, surface: 'b', token: 't', ...fast });
    const t0 = Date.now();
    for (let i = 0; i < 10; i++) c.track(evB(i));
    await c.flush();
    t.ok(Date.now() - t0 >= 1000, 'waited the Retry-After');
    t.same(log.retries, ['HTTP 429', 'HTTP 503']);
    t.equal(s.seen.length, 3);
    const keys = new Set(s.seen.map((x) => x.headers['idempotency-key']));
    t.equal(keys.size, 1, 'one Idempotency-Key across the retries');
    t.match([...keys][0], /^[\x21-\x7e]{1,255}$/);
    t.ok(
      s.seen.every((x) => x.body.equals(s.seen[0].body)),
      'the same body bytes each time',
    );
    t.equal(s.seen[0].headers.authorization, 'Bearer t');
    t.equal(c.stats().accepted, 10);
    await c.close();
  },
);

t.test('a lost answer is retried; on surface B under the same key', async (t) => {
  const s = await server(t, (x, n, req, res) => {
    if (n === 1) return req.socket.destroy();
    took(res, x.events.length, [], 200);
  });
  const { c, log } = client({ url: s.url, surface: 'b', token: 't', ...fast });
  c.track(evB(1));
  await c.close();
  t.same(log.retries, ['INGEST_NETWORK']);
  t.equal(s.seen[0].headers['idempotency-key'], s.seen[1].headers['idempotency-key']);
  t.equal(c.stats().accepted, 1);
});

t.test('a timeout is retried, and counts as an unknown outcome when retries run out', async (t) => {
  const s = await server(t, () => {});
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k', ...fast, timeoutMs: 50, maxRetries: 2 });
  c.track(evA(1));
  await c.close();
  t.same(log.retries, ['INGEST_TIMEOUT', 'INGEST_TIMEOUT']);
  t.equal(log.failed.length, 1);
  t.equal(log.failed[0].code, 'INGEST_TIMEOUT');
  t.equal(log.failed[0].attempts, 3);
  t.equal(log.failed[0].outcomeUnknown, true, 'the request was sent: it may have been stored');
  t.equal(c.stats().failed, 1);
});

t.test('a refused connection is not an unknown outcome', async (t) => {
  const s = await server(t, () => {});
  const url = s.url;
  const { c, log } = client({ url: url.replace(/:\d+$/, ':1'), surface: 'a', apiKey: 'k', ...fast, maxRetries: 1 });
  c.track(evA(1));
  await c.close();
  t.equal(log.failed[0].code, 'INGEST_NETWORK');
  t.equal(log.failed[0].outcomeUnknown, false);
});

t.test('other 4xx are not retried', async (t) => {
  const s = await server(t, (_x, _n, _q, res) => json(res, 401, { detail: 'Invalid API key' }));
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'bad', ...fast });
  for (let i = 0; i < 5; i++) c.track(evA(i));
  await c.close();
  t.equal(s.seen.length, 1);
  t.same(log.retries, []);
  t.equal(log.failed[0].code, 'INGEST_HTTP_STATUS');
  t.equal((log.failed[0] as unknown as { status: number }).status, 401);
  t.match(log.failed[0].message, /Invalid API key/);
  t.equal(c.stats().failed, 5);
});

t.test('a surface-A 422 naming events: those are rejected, the others sent again', async (t) => {
  const s = await server(t, (x, n, _q, res) => {
    if (n === 1)
      return json(res, 422, {
        detail: [{ type: 'string_unicode', loc: ['body', 'events', 2, 'user_id'], msg: 'bad text', input: null }],
      });
    took(res, x.events.length);
  });
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k', ...fast });
  for (let i = 0; i < 5; i++) c.track(evA(i));
  await c.close();
  t.same(log.rejected, ['2:string_unicode']);
  t.same(
    s.seen[1].events.map((e) => e.user_id),
    ['0', '1', '3', '4'],
  );
  t.same(c.stats().accepted, 4);
});

t.test('413: the batch is split until it fits; one event too large is rejected', async (t) => {
  const s = await server(t, (x, _n, _q, res) => {
    if (x.events.length > 2 || x.events.some((e) => e.user_id === '3')) return json(res, 413, { detail: [] });
    took(res, x.events.length);
  });
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k', ...fast });
  for (let i = 0; i < 8; i++) c.track(evA(i));
  await c.close();
  t.same(log.rejected, ['3:payload_too_large']);
  t.equal(c.stats().accepted, 7);
  t.same(log.failed, []);
});

t.test('the queue is bounded: past maxQueueEvents track() drops, and room comes back', async (t) => {
  let release: () => void = () => {};
  const gate = new Promise<void>((r) => (release = r));
  const s = await server(t, (x, _n, _q, res) => void gate.then(() => took(res, x.events.length)));
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k', ...fast, maxQueueEvents: 300, concurrency: 1 });
  let queued = 0;
  for (let i = 0; i < 1000; i++) if (c.track(evA(i))) queued++;
  t.equal(queued, 300);
  t.equal(log.dropped, 700);
  t.equal(c.stats().queued + c.stats().inFlight, 300);
  t.notOk(c.hasCapacity());
  const room = c.waitForCapacity();
  release();
  await room;
  t.ok(c.hasCapacity());
  await c.close();
  t.equal(c.stats().accepted, 300);
  t.equal(c.stats().dropped, 700);
});

t.test('close() gives up what it cannot send in closeTimeoutMs, and says so', async (t) => {
  const s = await server(t, (_x, _n, _q, res) => json(res, 503, {}, { 'retry-after': '0' }));
  const { c, log } = client({
    url: s.url,
    surface: 'a',
    apiKey: 'k',
    ...fast,
    retryBaseMs: 50,
    concurrency: 1,
    closeTimeoutMs: 200,
    maxRetries: 1000,
  });
  for (let i = 0; i < 250; i++) c.track(evA(i));
  await c.close();
  t.equal(c.stats().failed, 250);
  t.ok(log.failed.every((e) => e.code === 'INGEST_CLOSED'));
  t.equal(c.stats().inFlight + c.stats().queued, 0);
  t.notOk(c.track(evA(1)), 'a closed client takes nothing');
  t.equal(log.dropped, 1);
});

t.test('the flush interval sends a batch that does not fill', async (t) => {
  const s = await server(t, (x, _n, _q, res) => took(res, x.events.length));
  const { c } = client({ url: s.url, surface: 'a', apiKey: 'k', flushIntervalMs: 30 });
  c.track(evA(1));
  const t0 = Date.now();
  while (s.seen.length === 0 && Date.now() - t0 < 2000) await new Promise((r) => setTimeout(r, 5));
  t.equal(s.seen.length, 1);
  await c.close();
});
