import net from 'node:net';
import t from '#tap';
import { closeDb } from '../helpers/stack.js';
import { sharedApi } from '../core-api/_helpers.js';
import { ingest, workspace } from '../ingest/support.js';
import { header, send, type Req } from '../fuzz/http.js';

// A body the server does not want (over the cap, to an unknown path, with a wrong method, with its
// length in doubt) is read and dropped before the answer: a client still sending reads the answer,
// never a reset (a connection closed with bytes unread is reset by the kernel). Each shape is sent
// several times, as a reset came only now and then.
t.teardown(closeDb);
const ws = await workspace(1);
const [tier, api] = await Promise.all([ingest(t), sharedApi(t)]);
const MiB = 1024 * 1024;
const TIMES = 8;

const key: Array<[string, string]> = [['X-API-Key', ws.ingestion_key]];
const bearer: Array<[string, string]> = [['Authorization', `Bearer ${ws.api_key}`]];
const json: Array<[string, string]> = [['Content-Type', 'application/json']];

/** `{"events":[]}` padded with spaces to `size` bytes. */
function padded(size: number): Buffer {
  const b = Buffer.alloc(size, ' ');
  b.write('{"events":[]}');
  return b;
}

const cases: Array<{ name: string; port: () => number; req: Req; status: number }> = [
  {
    name: 'core bulk import, 8 MiB + 1',
    port: () => api.port,
    req: {
      method: 'POST',
      path: '/v1/customers/bulk-import',
      headers: [...bearer, ...json],
      body: padded(8 * MiB + 1),
    },
    status: 413,
  },
  {
    name: 'core POST /v1/customers, chunked past the cap',
    port: () => api.port,
    req: { method: 'POST', path: '/v1/customers', headers: [...bearer, ...json], body: padded(2 * MiB), chunked: true },
    status: 413,
  },
  {
    name: 'surface A, 1 MiB + 1',
    port: () => tier.port,
    req: { method: 'POST', path: '/v1/ingest/events', headers: [...key, ...json], body: padded(MiB + 1) },
    status: 413,
  },
  {
    name: 'surface B, 3 MiB + 1, chunked',
    port: () => tier.port,
    req: {
      method: 'POST',
      path: '/v1/events',
      headers: [...bearer, ...json],
      body: padded(3 * MiB + 1),
      chunked: true,
    },
    status: 413,
  },
  {
    name: 'surface B, PUT with a 2 MiB body',
    port: () => tier.port,
    req: { method: 'PUT', path: '/v1/events', headers: [...bearer, ...json], body: padded(2 * MiB) },
    status: 405,
  },
  {
    name: 'ingest tier, unknown path with a 2 MiB body',
    port: () => tier.port,
    req: { method: 'POST', path: '/v1/nothing', headers: [...key, ...json], body: padded(2 * MiB) },
    status: 404,
  },
  {
    name: 'surface B, unknown path with a 2 MiB body',
    port: () => tier.port,
    req: { method: 'POST', path: '/v1/events/', headers: [...bearer, ...json], body: padded(2 * MiB) },
    status: 404,
  },
];
// A request asking for the connection to be closed after the answer.
cases.push({
  name: 'core bulk import with Connection: close, 8 MiB + 1',
  port: () => api.port,
  req: {
    method: 'POST',
    path: '/v1/customers/bulk-import',
    headers: [...bearer, ...json, ['Connection', 'close']],
    body: padded(8 * MiB + 1),
  },
  status: 413,
});
// A length in doubt closes the connection (RFC 9112 §6.3): the body, as uWS frames it, is read first.
const twoLengths = (size: number): Array<[string, string]> => [
  ['Content-Length', String(size)],
  ['Content-Length', String(size + 7)],
];
for (const [name, port, path, auth] of [
  ['core API', () => api.port, '/v1/customers', bearer],
  ['surface A', () => tier.port, '/v1/ingest/events', key],
  ['surface B', () => tier.port, '/v1/events', bearer],
  ['ingest tier, unknown path', () => tier.port, '/v1/nothing', key],
] as const)
  cases.push({
    name: `${name}, two different Content-Lengths with a 2 MiB body`,
    port,
    req: { method: 'POST', path, headers: [...auth, ...json, ...twoLengths(2 * MiB)], body: padded(2 * MiB) },
    status: path === '/v1/nothing' ? 404 : 400,
  });

for (const c of cases) {
  t.test(`${c.name}: answered ${c.status} every time, never reset`, async (t) => {
    const seen: string[] = [];
    for (let i = 0; i < TIMES; i++) {
      const a = await send(c.port(), c.req);
      seen.push(a.ok ? String(a.status) : `${a.failure}: ${a.detail}`);
    }
    t.same(seen, Array(TIMES).fill(String(c.status)), `${TIMES} answers of ${c.status}`);
  });
}

/** Writes `first` (a request with its whole body), waits for its answer, then writes `second` on the same connection. */
function twoInTurn(port: number, first: Buffer, second: string): Promise<string[]> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let data = '';
    let sentSecond = false;
    const statuses = () => [...data.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
    const finish = () => {
      clearTimeout(timer);
      s.destroy();
      resolve(statuses());
    };
    const timer = setTimeout(finish, 10_000);
    s.on('error', () => {});
    s.on('close', finish);
    s.on('data', (d: Buffer) => {
      data += d.toString('latin1');
      const n = statuses().length;
      if (n === 1 && !sentSecond) {
        sentSecond = true;
        // The answer may come before the body is all sent: the second request goes after both.
        s.write(Buffer.alloc(0), () => s.write(second));
      } else if (n === 2) finish();
    });
    s.on('connect', () => s.write(first));
  });
}

t.test('after a 413 the connection is kept: the next request on it is served', async (t) => {
  for (const [port, path, auth, next] of [
    [api.port, '/v1/customers/bulk-import', `Authorization: Bearer ${ws.api_key}`, 'GET /healthz'],
    [tier.port, '/v1/ingest/events', `X-API-Key: ${ws.ingestion_key}`, 'GET /healthz'],
    [tier.port, '/v1/events', `Authorization: Bearer ${ws.api_key}`, 'GET /readyz'],
  ] as Array<[number, string, string, string]>) {
    const body = padded(9 * MiB);
    const head = `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const got = await twoInTurn(port, Buffer.concat([Buffer.from(head), body]), `${next} HTTP/1.1\r\nHost: x\r\n\r\n`);
    t.same(got, ['413', '200'], `${path}: 413, then ${next} on the same connection`);
  }
});

t.test('a declared body far past the cap is answered 413 at once and the connection closed', async (t) => {
  // Only the head is sent: the answer comes from the declaration, and nothing waits for the body.
  const a = await send(tier.port, {
    method: 'POST',
    path: '/v1/ingest/events',
    headers: [...key, ...json, ['Content-Length', String(64 * MiB)]],
  });
  t.ok(a.ok && a.status === 413, `413 (${a.ok ? a.status : a.detail})`);
  if (a.ok) t.equal(header(a, 'connection'), 'close', 'Connection: close');
});
