import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local webhook receiver for tests: records every request it gets and verifies its signature
 * with its own implementation of the Standard Webhooks check (standardwebhooks.com, "Verifying
 * webhooks"), written from the specification and sharing no code with the service's signer:
 * base64-decode the secret after `whsec_`, HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`,
 * base64, compared in constant time against each space-separated `v1,<signature>`; the timestamp
 * must be within five minutes.
 */

export interface Received {
  path: string;
  id: string;
  timestamp: number;
  signatures: string[];
  body: string;
  json: { type: string; timestamp: string; data: Record<string, unknown> };
  at: number;
}

/** How a path answers: a status (or a list consumed in order, the last one repeated) and an optional hang. */
export interface Behaviour {
  status?: number | number[];
  /** Wait this long before answering (longer than the dispatcher's timeout: it gives up). */
  delayMs?: number;
}

export function verifySignature(secret: string, r: Pick<Received, 'id' | 'timestamp' | 'body' | 'signatures'>) {
  if (!secret.startsWith('whsec_')) return false;
  if (Math.abs(Date.now() / 1000 - r.timestamp) > 300) return false;
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key).update(`${r.id}.${r.timestamp}.${r.body}`).digest();
  return r.signatures.some((s) => {
    const [v, sig] = s.split(',');
    if (v !== 'v1' || !sig) return false;
    const got = Buffer.from(sig, 'base64');
    return got.length === expected.length && timingSafeEqual(got, expected);
  });
}

export interface Receiver {
  url: (path: string) => string;
  received: Received[];
  on(path: string, b: Behaviour): void;
  at(path: string): Received[];
  close(): Promise<void>;
}

export async function startReceiver(t: { teardown(f: () => unknown): void }): Promise<Receiver> {
  const received: Received[] = [];
  const behaviours = new Map<string, Behaviour>();
  const served = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const path = req.url ?? '/';
      let json: Received['json'];
      try {
        json = JSON.parse(body);
      } catch {
        json = { type: '', timestamp: '', data: {} };
      }
      received.push({
        path,
        id: String(req.headers['webhook-id'] ?? ''),
        timestamp: Number(req.headers['webhook-timestamp'] ?? 0),
        signatures: String(req.headers['webhook-signature'] ?? '')
          .split(' ')
          .filter(Boolean),
        body,
        json,
        at: Date.now(),
      });
      const b = behaviours.get(path) ?? {};
      const n = served.get(path) ?? 0;
      served.set(path, n + 1);
      const statuses = Array.isArray(b.status) ? b.status : [b.status ?? 204];
      const status = statuses[Math.min(n, statuses.length - 1)];
      const answer = () => {
        if (!res.destroyed) res.writeHead(status).end();
      };
      if (b.delayMs) setTimeout(answer, b.delayMs).unref();
      else answer();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  t.teardown(close);
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    received,
    on: (path, b) => void behaviours.set(path, b),
    at: (path) => received.filter((r) => r.path === path),
    close,
  };
}
