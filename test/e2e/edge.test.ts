import fs from 'node:fs';
import https from 'node:https';
import tls from 'node:tls';
import t from '#tap';
import { edgeCaFile } from '../../infra/services.js';
import { bootstrap, profile, seed, startTier } from '../helpers/stack.js';

function request(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string; ca?: Buffer },
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method: opts.method ?? 'GET', headers: opts.headers, ca: opts.ca }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => {
        body += d.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** Raw bytes to the edge over TLS (HTTP/1.1): every response it sends back until it closes or `waitMs` pass. */
function rawTls(port: number, ca: Buffer, text: string, waitMs = 3000): Promise<string[]> {
  return new Promise((resolve) => {
    const s = tls.connect({ host: '127.0.0.1', port, ca, ALPNProtocols: ['http/1.1'] }, () => s.write(text));
    let out = '';
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      resolve(out.split(/(?=HTTP\/1\.1 \d{3} )/).filter((r) => r.startsWith('HTTP/1.1')));
    };
    const timer = setTimeout(finish, waitMs);
    s.on('data', (d: Buffer) => {
      out += d.toString('latin1');
    });
    s.on('end', finish);
    s.on('close', finish);
    s.on('error', finish);
  });
}

t.test('the edge serves both tiers over HTTPS, routed by path, and redirects plain HTTP', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 3);
  // The edge proxies to the profile's fixed tier ports.
  await startTier(t, 'ingest', { INGEST_PROCESSES: '1', INGEST_PORT: String(profile.ingestPort) });
  await startTier(t, 'core-api', { API_PORT: String(profile.apiPort) });
  const ca = fs.readFileSync(edgeCaFile(profile));
  const base = `https://127.0.0.1:${profile.edgePort}`;

  const ingest = await request(`${base}/v1/ingest/events`, {
    method: 'POST',
    ca,
    headers: { 'content-type': 'application/json', 'x-api-key': ws.ingestion_key },
    body: JSON.stringify({ events: [{ event_name: 'login', external_customer_id: 'cust-000001' }] }),
  });
  t.equal(ingest.status, 202, `surface A through the edge (${ingest.body.slice(0, 300)})`);
  t.equal(JSON.parse(ingest.body).accepted, 1);
  t.ok(ingest.headers['x-trace-id'], 'X-Trace-Id passes through');

  const me = await request(`${base}/v1/users/me`, { ca, headers: { authorization: `Bearer ${ws.api_key}` } });
  t.equal(me.status, 200, 'the core API through the edge');

  const metrics = await request(`${base}/metrics`, { ca });
  t.equal(metrics.status, 404, "the tiers' /metrics is not served at the edge");
  t.equal(JSON.parse(metrics.body).status, 404);
  t.equal((await fetch(`http://127.0.0.1:${profile.apiPort}/metrics`)).status, 200, "but on the tier's own port");

  await t.rejects(request(`${base}/v1/users/me`, {}), 'a client that does not trust the certificate is refused');

  const plain = await fetch(`http://127.0.0.1:${profile.edgeHttpPort}/v1/customers?limit=5`, { redirect: 'manual' });
  t.equal(plain.status, 308, 'plain HTTP is redirected');
  t.equal(plain.headers.get('location'), `https://127.0.0.1:${profile.edgePort}/v1/customers?limit=5`);
});

t.test('the edge refuses the framing and method shapes the tiers cannot answer', async (t) => {
  const ws = await bootstrap();
  await startTier(t, 'ingest', { INGEST_PROCESSES: '1', INGEST_PORT: String(profile.ingestPort) });
  await startTier(t, 'core-api', { API_PORT: String(profile.apiPort) });
  const ca = fs.readFileSync(edgeCaFile(profile));
  const send = (text: string) => rawTls(profile.edgePort, ca, text);
  const host = 'Host: 127.0.0.1\r\n';

  const two = await send(
    `POST /v1/ingest/events HTTP/1.1\r\n${host}X-API-Key: ${ws.ingestion_key}\r\nContent-Type: application/json\r\n` +
      'Content-Length: 2\r\nContent-Length: 30\r\n\r\n{}',
  );
  t.equal(two.length, 1, 'one answer to two Content-Lengths');
  t.match(two[0], /^HTTP\/1\.1 400 /, 'conflicting Content-Length headers: 400 from the edge');
  t.notMatch(two[0], /x-trace-id/i, 'refused at the edge: the tier never saw it');

  // A body framed both ways, with a second request hidden after the chunked end: the edge reads it
  // chunked (RFC 9112 §6.1) and forwards one request; the tier answers that one only.
  const hidden = `GET /v1/users/me HTTP/1.1\r\n${host}\r\n`;
  const both = await send(
    `POST /v1/ingest/events HTTP/1.1\r\n${host}Content-Type: application/json\r\n` +
      `Content-Length: ${7 + hidden.length}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n` +
      `0\r\n\r\n${hidden}`,
  );
  t.equal(both.length, 1, 'Transfer-Encoding with Content-Length: one request reaches a tier, one answer');
  t.match(both[0], /^HTTP\/1\.1 401 /, "surface A's own answer (no X-API-Key)");
  t.match(both[0], /x-trace-id/i, 'answered by the tier');

  for (const method of ['post', 'FOO']) {
    const [r] = await send(
      `${method} /v1/ingest/events HTTP/1.1\r\n${host}Content-Length: 2\r\nConnection: close\r\n\r\n{}`,
    );
    t.match(r, /^HTTP\/1\.1 501 /, `${method}: 501 from the edge, not a 502 after the tier dropped it`);
    t.match(r, /"detail":"Unknown method/, "with a detail both surfaces' clients read");
  }
});
