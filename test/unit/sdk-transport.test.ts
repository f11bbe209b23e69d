import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from '#tap';
import { IngestClient, type IngestClientOptions } from '../../sdk/src/client.js';
import type { IngestClientError } from '../../sdk/src/errors.js';
import { waitFor } from '../helpers/stack.js';

/**
 * The producer client's HTTP/1.1 connections (sdk/src/transport.ts) against real local servers:
 * node:http ones, and raw TCP ones that answer with exactly the bytes a test writes, cut as it
 * cuts them. What a producer sees: every event delivered once, connections reused, and each
 * fault turned into the retry or the error the client's rules call for.
 */

type Teardown = { teardown(fn: () => unknown): void };
type Event = Record<string, unknown>;

interface Request {
  headers: Record<string, string>;
  events: Event[];
  /** Which connection (1, 2, …) carried it. */
  conn: number;
}

/** A node:http server answering as `answer` says; it counts connections and their ends. */
async function httpServer(
  t: Teardown,
  answer: (r: Request, n: number, req: http.IncomingMessage, res: http.ServerResponse) => void,
  create: (h: http.RequestListener) => http.Server | https.Server = (h) =>
    http.createServer({ keepAliveTimeout: 30_000 }, h),
) {
  const seen: Request[] = [];
  const state = { opened: 0, closed: 0 };
  const ids = new WeakMap<net.Socket, number>();
  const srv = create((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r = {
        headers: req.headers as Record<string, string>,
        events: JSON.parse(Buffer.concat(chunks).toString()).events as Event[],
        conn: ids.get(req.socket) ?? 0,
      };
      seen.push(r);
      answer(r, seen.length, req, res);
    });
  });
  srv.on(srv instanceof https.Server ? 'secureConnection' : 'connection', (s: net.Socket) => {
    ids.set(s, ++state.opened);
    s.on('close', () => state.closed++);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    srv.closeAllConnections();
    srv.close();
  });
  const port = (srv.address() as net.AddressInfo).port;
  return { srv, port, url: `http://127.0.0.1:${port}`, seen, state };
}

/**
 * A TCP server that reads HTTP/1.1 requests (Content-Length bodies) and lets `answer` write the
 * answer's bytes itself; several requests per connection, one after the other.
 */
async function rawServer(t: Teardown, answer: (socket: net.Socket, r: Request, n: number) => void) {
  const seen: Request[] = [];
  const state = { opened: 0 };
  const srv = net.createServer((socket) => {
    const conn = ++state.opened;
    socket.setNoDelay(true);
    socket.on('error', () => {});
    let buf = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const lines = buf.toString('latin1', 0, end).split('\r\n').slice(1);
        const headers = Object.fromEntries(
          lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
        );
        const length = Number(headers['content-length']);
        if (buf.length < end + 4 + length) return;
        const body = buf.subarray(end + 4, end + 4 + length).toString();
        buf = buf.subarray(end + 4 + length);
        const r = { headers, events: JSON.parse(body).events as Event[], conn };
        seen.push(r);
        answer(socket, r, seen.length);
      }
    });
  });
  const sockets = new Set<net.Socket>();
  srv.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    srv.close();
  });
  return { url: `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`, seen, state };
}

/** Writes `text` one byte per write, each on a later turn of the event loop: one TCP segment each. */
async function dribble(socket: net.Socket, text: string): Promise<void> {
  const bytes = Buffer.from(text);
  for (let i = 0; i < bytes.length && !socket.destroyed; i++) {
    socket.write(bytes.subarray(i, i + 1));
    await new Promise((r) => setImmediate(r));
  }
}

const took = (n: number) => JSON.stringify({ accepted: n, rejected: 0, errors: [] });
const answer202 = (body: string, extra = '') =>
  `HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

const fast = { retryBaseMs: 1, retryCapMs: 5, flushIntervalMs: 10, gzip: false } as const;
const evA = (i: number) => ({ event_name: 'page_view', customer_id: `c-${i}`, user_id: String(i) });
const evB = (i: number) => ({ event_name: 'page_view', customer_id: `c-${i}`, external_id: `x-${i}` });

function client(o: IngestClientOptions) {
  const c = new IngestClient<Event>(o);
  const log = {
    rejected: [] as string[],
    failed: [] as IngestClientError[],
    retries: [] as string[],
    delays: [] as number[],
  };
  c.on('rejected', (e, p) => log.rejected.push(`${String(e.user_id)}:${p.code}`));
  c.on('failed', (_e, err) => log.failed.push(err));
  c.on('retry', (_a, delay, reason) => {
    log.retries.push(reason);
    log.delays.push(delay);
  });
  return { c, log };
}

/** The ids of the events a server saw, in order of arrival. */
const ids = (seen: Request[], key = 'user_id') => seen.flatMap((r) => r.events.map((e) => String(e[key])));
const range = (n: number) => Array.from({ length: n }, (_, i) => String(i));

t.test('keep-alive: all batches travel on at most `concurrency` connections', async (t) => {
  const s = await httpServer(t, (r, _n, _req, res) => {
    res.writeHead(202, { 'content-type': 'application/json' });
    res.end(took(r.events.length));
  });
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k', ...fast, maxBatchEvents: 10, concurrency: 2 });
  for (let i = 0; i < 500; i++) c.track(evA(i));
  await c.flush();
  for (let i = 500; i < 1000; i++) c.track(evA(i));
  await c.close();
  t.equal(s.seen.length, 100);
  t.ok(s.state.opened <= 2, `${s.state.opened} connections for 100 requests`);
  t.same(ids(s.seen).sort(), range(1000).sort(), 'every event once');
  t.same(log.retries, []);
  t.equal(s.seen[0].headers.host, `127.0.0.1:${s.port}`);
  t.equal(s.seen[0].headers['content-type'], 'application/json');
  t.equal(s.seen[0].headers['x-api-key'], 'k');
  await waitFor('the connections closed by close()', () => s.state.closed === s.state.opened, 5000, 10);
});

t.test('a connection the server closed while idle is not used again: the next batch goes once', async (t) => {
  const s = await httpServer(t, (r, n, req, res) => {
    res.writeHead(202, { 'content-type': 'application/json' });
    // The first connection is closed once its answer is out, as a server's idle timeout would.
    if (n === 1) res.on('finish', () => req.socket.end());
    res.end(took(r.events.length));
  });
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k', ...fast, concurrency: 1 });
  for (let i = 0; i < 5; i++) c.track(evA(i));
  await c.flush();
  // Closed on both sides: the client has read the server's FIN and answered it.
  await waitFor('the first connection closed', () => s.state.closed === 1, 5000, 10);
  for (let i = 5; i < 10; i++) c.track(evA(i));
  await c.close();
  t.same(log.retries, [], 'no request went into the closed connection');
  t.same(
    s.seen.map((r) => r.conn),
    [1, 2],
  );
  t.same(ids(s.seen), range(10), 'every event once');
  t.match(c.stats(), { accepted: 10, failed: 0 });
});

t.test('a kept-alive connection closed before any byte of the answer: a network error, retried once', async (t) => {
  const s = await httpServer(t, (r, n, req, res) => {
    if (n === 2) return req.socket.destroy();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(took(r.events.length));
  });
  const { c, log } = client({ url: s.url, surface: 'b', token: 't', ...fast, concurrency: 1 });
  c.track(evB(1));
  await c.flush();
  c.track(evB(2));
  await c.close();
  t.same(
    s.seen.map((r) => r.conn),
    [1, 1, 2],
    'the second batch went on the kept connection, its retry on a new one',
  );
  t.same(log.retries, ['INGEST_NETWORK']);
  t.equal(s.seen[1].headers['idempotency-key'], s.seen[2].headers['idempotency-key'], 'retried under its key');
  t.not(s.seen[0].headers['idempotency-key'], s.seen[1].headers['idempotency-key']);
  t.match(c.stats(), { accepted: 2, failed: 0, retries: 1 });
});

t.test('chunked answers are read, per-event errors included, and the connection kept', async (t) => {
  const s = await httpServer(t, (r, _n, _req, res) => {
    const errors = r.events.flatMap((e, index) =>
      Number(e.user_id) % 7 === 0 ? [{ index, code: 'unknown_customer', message: 'no such customer' }] : [],
    );
    const body = JSON.stringify({ accepted: r.events.length - errors.length, rejected: errors.length, errors });
    res.writeHead(202, { 'content-type': 'application/json' });
    // No Content-Length: node:http sends the pieces as chunks.
    for (let i = 0; i < body.length; i += 7) res.write(body.slice(i, i + 7));
    res.end();
  });
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k', ...fast, maxBatchEvents: 10, concurrency: 1 });
  for (let i = 0; i < 30; i++) c.track(evA(i));
  await c.close();
  t.equal(s.seen.length, 3);
  t.same(new Set(s.seen.map((r) => r.conn)), new Set([1]), 'one connection');
  t.same(log.rejected, [
    '0:unknown_customer',
    '7:unknown_customer',
    '14:unknown_customer',
    '21:unknown_customer',
    '28:unknown_customer',
  ]);
  t.match(c.stats(), { accepted: 25, rejected: 5, failed: 0 });
});

t.test('answers larger than a read, framed both ways, read whole', async (t) => {
  const s = await rawServer(t, (socket, r, n) => {
    const errors = r.events.map((_e, index) => ({ index, code: 'unknown_customer', message: 'é'.repeat(50_000) }));
    const body = JSON.stringify({ accepted: 0, rejected: errors.length, errors });
    if (n === 1) socket.write(answer202(body));
    else {
      const half = Math.floor(body.length / 2);
      const chunk = (x: string) => `${Buffer.byteLength(x).toString(16)}\r\n${x}\r\n`;
      socket.write(`HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n${chunk(body.slice(0, half))}`);
      setImmediate(() => socket.write(`${chunk(body.slice(half))}0\r\n\r\n`));
    }
  });
  const problems: string[] = [];
  const c = new IngestClient<Event>({
    url: s.url,
    surface: 'a',
    apiKey: 'k',
    ...fast,
    maxBatchEvents: 3,
    concurrency: 1,
  });
  c.on('rejected', (e, p) => problems.push(`${String(e.user_id)}:${p.code}:${p.message.length}`));
  for (let i = 0; i < 6; i++) c.track(evA(i));
  await c.close();
  t.same(
    problems,
    range(6).map((i) => `${i}:unknown_customer:50000`),
    'each answer of about 300 KB read to its end',
  );
  t.same(new Set(s.seen.map((r) => r.conn)), new Set([1]), 'and the connection kept');
});

t.test('Retry-After on 429 and 503, from answers cut into one-byte TCP segments', async (t) => {
  const s = await rawServer(t, (socket, r, n) => {
    const past = new Date(Date.now() - 60_000).toUTCString();
    if (n === 1)
      void dribble(socket, 'HTTP/1.1 429 Too Many Requests\r\nRETRY-AFTER: 1\r\nContent-Length: 2\r\n\r\n{}');
    else if (n === 2)
      void dribble(socket, `HTTP/1.1 503 Service Unavailable\r\nRetry-After: ${past}\r\nContent-Length: 0\r\n\r\n`);
    else {
      const body = took(r.events.length);
      void dribble(
        socket,
        `HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
      );
    }
  });
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k', ...fast, concurrency: 1 });
  for (let i = 0; i < 3; i++) c.track(evA(i));
  const t0 = Date.now();
  await c.close();
  t.same(log.retries, ['HTTP 429', 'HTTP 503']);
  t.ok(log.delays[0] >= 1000, `waited ${log.delays[0]} ms after Retry-After: 1`);
  t.ok(Date.now() - t0 >= 1000);
  t.ok(log.delays[1] < 1000, 'an HTTP date in the past: no extra wait');
  t.same(ids(s.seen), ['0', '1', '2', '0', '1', '2', '0', '1', '2'], 'the same batch three times');
  t.same(new Set(s.seen.map((r) => r.conn)), new Set([1]), 'each answer left the connection usable');
  t.match(c.stats(), { accepted: 3, failed: 0 });
});

t.test('an answer that stops halfway times out; the connection is dropped and the retry goes through', async (t) => {
  const s = await rawServer(t, (socket, r, n) => {
    if (n === 1) return socket.write('HTTP/1.1 202 Accepted\r\nContent-Length: 100\r\n\r\n{"acc');
    socket.write(answer202(took(r.events.length)));
  });
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k', ...fast, timeoutMs: 200, concurrency: 1 });
  for (let i = 0; i < 4; i++) c.track(evA(i));
  await c.close();
  t.same(log.retries, ['INGEST_TIMEOUT']);
  t.same(
    s.seen.map((r) => r.conn),
    [1, 2],
    'not read past a half answer',
  );
  t.match(c.stats(), { accepted: 4, failed: 0 });
});

t.test('a silent server: the timeout reports an unknown outcome once retries run out', async (t) => {
  const s = await rawServer(t, () => {});
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k', ...fast, timeoutMs: 50, maxRetries: 1 });
  c.track(evA(1));
  await c.close();
  t.same(log.retries, ['INGEST_TIMEOUT']);
  t.equal(log.failed[0].code, 'INGEST_TIMEOUT');
  t.equal(log.failed[0].outcomeUnknown, true, 'the request was written out: it may have been stored');
  t.equal(s.state.opened, 2, 'a timed-out connection is not reused');
});

t.test('Connection: close and answers framed by the end of the connection', async (t) => {
  const s = await rawServer(t, (socket, r, n) => {
    const body = took(r.events.length);
    if (n === 1) socket.end(answer202(body, 'Connection: close\r\n'));
    else socket.end(`HTTP/1.0 202 Accepted\r\nContent-Type: application/json\r\n\r\n${body}`);
  });
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k', ...fast, maxBatchEvents: 2, concurrency: 1 });
  for (let i = 0; i < 6; i++) c.track(evA(i));
  await c.close();
  t.same(log.retries, []);
  t.same(
    s.seen.map((r) => r.conn),
    [1, 2, 3],
  );
  t.match(c.stats(), { accepted: 6, failed: 0 });
});

t.test('an answer that is not HTTP is a network error, retried on a new connection', async (t) => {
  const s = await rawServer(t, (socket, r, n) => {
    socket.write(n === 1 ? 'SSH-2.0-OpenSSH_9.6\r\n\r\n' : answer202(took(r.events.length)));
  });
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k', ...fast });
  c.track(evA(1));
  await c.close();
  t.same(log.retries, ['INGEST_NETWORK']);
  t.same(
    s.seen.map((r) => r.conn),
    [1, 2],
  );
  t.equal(c.stats().accepted, 1);
});

t.test('a request head longer than the room kept for it in front of the body goes out all the same', async (t) => {
  const s = await httpServer(t, (r, _n, _req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(took(r.events.length));
  });
  const token = 't'.repeat(3000);
  const { c, log } = client({ url: s.url, surface: 'b', token, ...fast, maxBatchEvents: 5, concurrency: 1 });
  for (let i = 0; i < 10; i++) c.track(evB(i));
  await c.close();
  t.same(log.retries, []);
  t.equal(s.seen.length, 2);
  t.ok(
    s.seen.every((r) => r.headers.authorization === `Bearer ${token}`),
    'the whole token in each request',
  );
  t.same(
    ids(s.seen, 'external_id'),
    range(10).map((i) => `x-${i}`),
  );
});

t.test('a header value with a line break is refused before anything is sent', async (t) => {
  const s = await rawServer(t, () => {});
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k\r\nX-Injected: 1', ...fast, maxRetries: 1 });
  c.track(evA(1));
  await c.close();
  t.equal(log.failed[0].code, 'INGEST_NETWORK');
  t.equal(log.failed[0].outcomeUnknown, false);
  t.equal(s.state.opened, 0, 'no connection made');
});

t.test('close() fails what is still in flight and closes the connections', async (t) => {
  const s = await rawServer(t, () => {});
  const { c, log } = client({ url: s.url, surface: 'a', apiKey: 'k', ...fast, closeTimeoutMs: 100 });
  c.track(evA(1));
  await c.close();
  t.equal(log.failed[0].code, 'INGEST_CLOSED');
  t.equal(log.failed[0].outcomeUnknown, true, 'the request was out when it was given up');
  t.equal(s.state.opened, 1);
});

const OPENSSL = spawnSync('openssl', ['version']).status === 0;

t.test('https: the same over TLS', { skip: OPENSSL ? false : 'openssl makes the certificate' }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sdk-tls-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1'].concat([
      '-subj',
      '/CN=localhost',
      '-keyout',
      path.join(dir, 'key.pem'),
      '-out',
      path.join(dir, 'cert.pem'),
    ]),
    { stdio: 'ignore' },
  );
  const key = fs.readFileSync(path.join(dir, 'key.pem'));
  const cert = fs.readFileSync(path.join(dir, 'cert.pem'));
  const s = await httpServer(
    t,
    (r, _n, _req, res) => {
      res.writeHead(202, { 'content-type': 'application/json' });
      res.end(took(r.events.length));
    },
    (h) => https.createServer({ key, cert, keepAliveTimeout: 30_000 }, h),
  );
  // The certificate is its own issuer: trusted for this test only.
  const before = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
  process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
  t.teardown(() => {
    if (before === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    else process.env.NODE_TLS_REJECT_UNAUTHORIZED = before;
  });
  const { c, log } = client({
    url: `https://localhost:${s.port}`,
    surface: 'a',
    apiKey: 'k',
    ...fast,
    maxBatchEvents: 10,
    concurrency: 1,
  });
  for (let i = 0; i < 50; i++) c.track(evA(i));
  await c.close();
  t.same(log.retries, []);
  t.same(ids(s.seen).sort(), range(50).sort());
  t.equal(s.state.opened, 1, 'one TLS connection for 5 requests');
  t.equal(s.seen[0].headers.host, `localhost:${s.port}`);
});
