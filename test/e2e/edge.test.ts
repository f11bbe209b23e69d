import fs from 'node:fs';
import https from 'node:https';
import t from 'tap';
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

  await t.rejects(request(`${base}/v1/users/me`, {}), 'a client that does not trust the certificate is refused');

  const plain = await fetch(`http://127.0.0.1:${profile.edgeHttpPort}/v1/customers?limit=5`, { redirect: 'manual' });
  t.equal(plain.status, 308, 'plain HTTP is redirected');
  t.equal(plain.headers.get('location'), `https://127.0.0.1:${profile.edgePort}/v1/customers?limit=5`);
});
