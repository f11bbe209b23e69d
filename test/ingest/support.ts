import { columnsOf, decodeRows, FORMAT_HEADER, formatOf } from '../../lib/row-binary.js';
import net from 'node:net';
import http from 'node:http';
import type { Test } from '#tap';
import { AckPolicy, DeliverPolicy, connect, nanos, nuid, type JetStreamManager, type NatsConnection } from 'nats';
import {
  bootstrap,
  db,
  propertiesText,
  seed,
  type StoredPropertyColumns,
  startTier,
  urls,
  type Teardowns,
  type Tier,
  type Workspace,
} from '../helpers/stack.js';

export const USAGE = '/v1/ingest/events';
export const BILLING = '/v1/ingest/billing-events';
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export type Asserts = Test;

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * POST as a client would. `body` objects are sent as JSON; strings and bytes as they are.
 * `contentType: null` sends no Content-Type at all (bytes bodies get none from fetch).
 */
export async function send(
  base: string,
  path: string,
  body: unknown,
  opts: { key?: string | null; contentType?: string | null; headers?: Record<string, string>; method?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers['x-api-key'] = opts.key;
  const ct = opts.contentType === undefined ? 'application/json' : opts.contentType;
  if (ct !== null) headers['content-type'] = ct;
  let raw: string | Uint8Array | undefined;
  if (body === undefined) raw = undefined;
  else if (typeof body === 'string') raw = ct === null ? Buffer.from(body) : body;
  else if (body instanceof Uint8Array) raw = body;
  else raw = JSON.stringify(body);
  const res = await fetch(base + path, { method: opts.method ?? 'POST', headers, body: raw });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, body: parse(text) };
}

/** One request on its own TCP connection, so requests spread over the processes sharing a port. */
export function sendFresh(base: string, path: string, body: unknown, key: string): Promise<Answer> {
  const payload = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = http.request(
      base + path,
      {
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          'x-api-key': key,
          'content-length': payload.length,
          connection: 'close',
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
          resolve({ status: res.statusCode!, headers, text, body: parse(text) });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * A request written straight to the socket, so a test decides exactly which bytes are sent and
 * where sending stops (chunked bodies, a declared length with no body). Callers stop at the point
 * where the server is expected to answer: writing on after the server has answered and closed
 * gets a reset, and Node then drops the answer already received.
 */
export function sendRaw(port: number, path: string, headerLines: string[], chunks: Buffer[]): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let settled = false;
    const finish = () => {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return false;
      const head = buf.subarray(0, end).toString().split('\r\n');
      const headers = new Headers();
      for (const line of head.slice(1)) {
        const i = line.indexOf(':');
        headers.append(line.slice(0, i).trim(), line.slice(i + 1).trim());
      }
      const len = Number(headers.get('content-length') ?? NaN);
      const bodyBytes = buf.subarray(end + 4);
      if (!(bodyBytes.length >= len)) return false;
      const text = bodyBytes.subarray(0, len).toString();
      settled = true;
      s.destroy();
      resolve({ status: Number(head[0].split(' ')[1]), headers, text, body: parse(text) });
      return true;
    };
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      finish();
    });
    // Write errors after the server has answered and closed are expected; the answer is what counts.
    s.on('error', () => {});
    s.on('close', () => {
      if (!settled && !finish())
        reject(
          new Error(`connection closed without a complete response: ${JSON.stringify(buf.toString().slice(0, 200))}`),
        );
    });
    s.on('connect', async () => {
      s.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headerLines.map((l) => `${l}\r\n`).join('')}\r\n`);
      for (const c of chunks) {
        if (s.destroyed || settled) return;
        await new Promise<void>((r) => s.write(c, () => r()));
      }
    });
  });
}

/** Every surface-A answer carries X-Trace-Id; returns it. */
export function traceOf(t: Asserts, res: Answer): string {
  const id = res.headers.get('x-trace-id') ?? '';
  t.match(id, UUID_RE, 'X-Trace-Id header is a UUID');
  return id;
}

/** A surface-A 422: `{detail: [{type, loc, msg, input}]}`; returns the details. */
export function expect422(
  t: Asserts,
  res: Answer,
  want: { type: string; loc: Array<string | number> },
  only = true,
): Array<{ type: string; loc: Array<string | number>; msg: string; input: unknown }> {
  t.equal(res.status, 422, `422 (${res.text.slice(0, 300)})`);
  traceOf(t, res);
  const detail = res.body?.detail;
  t.ok(Array.isArray(detail) && detail.length > 0, 'detail is a non-empty array');
  if (!Array.isArray(detail)) return [];
  for (const d of detail) {
    t.same(Object.keys(d).sort(), ['input', 'loc', 'msg', 'type'], 'each detail has exactly type, loc, msg, input');
    t.equal(typeof d.msg, 'string');
  }
  if (only) t.equal(detail.length, 1, 'exactly one detail');
  t.ok(
    detail.some(
      (d: { type: string; loc: unknown }) => d.type === want.type && JSON.stringify(d.loc) === JSON.stringify(want.loc),
    ),
    `a detail of type ${want.type} at ${JSON.stringify(want.loc)}; got ${JSON.stringify(detail).slice(0, 300)}`,
  );
  return detail;
}

/** A 202 from the usage endpoint with exactly the documented keys; returns the body. */
export function expect202(
  t: Asserts,
  res: Answer,
  accepted: number,
  rejected = 0,
): {
  accepted: number;
  rejected: number;
  errors: Array<{ index: number; event_name: string; code: string; message: string }>;
  message: string;
} {
  t.equal(res.status, 202, `202 (${res.text.slice(0, 300)})`);
  traceOf(t, res);
  t.same(
    Object.keys(res.body ?? {}).sort(),
    ['accepted', 'errors', 'message', 'rejected'],
    'body has accepted, rejected, errors, message',
  );
  t.equal(res.body?.accepted, accepted, 'accepted count');
  t.equal(res.body?.rejected, rejected, 'rejected count');
  t.equal(res.body?.errors?.length, rejected, 'one error per rejected event');
  t.equal(typeof res.body?.message, 'string');
  for (const e of res.body?.errors ?? [])
    t.same(
      Object.keys(e).sort(),
      ['code', 'event_name', 'index', 'message'],
      'error has index, event_name, code, message',
    );
  return res.body;
}

export interface Env {
  ws: Workspace;
  tier: Tier;
  base: string;
}

/** A fresh workspace with `customers` internal customers (cust-000001…) and one ingest process. */
export async function workspace(customers: number, extra: string[] = []): Promise<Workspace> {
  const ws = await bootstrap();
  if (customers > 0 || extra.length > 0) await seed(ws.tenant_id, customers, extra);
  return ws;
}

export async function ingest(t: Teardowns, env: Record<string, string> = {}): Promise<Tier> {
  const tier = await startTier(t, 'ingest', { INGEST_PROCESSES: '1', ...env });
  // Runs before startTier's SIGKILL (teardowns run last-registered first): a supervisor killed
  // outright would leave its forked processes listening.
  t.teardown(() => tier.stop('SIGTERM'));
  return tier;
}

/** external_id → customer UUID of one source in a workspace. */
export async function customerIds(tenantId: string, source = 'internal'): Promise<Map<string, string>> {
  const rows = await db()<
    { id: string; external_id: string }[]
  >`SELECT id::text, external_id FROM customers WHERE tenant_id = ${tenantId} AND external_source = ${source}`;
  return new Map(rows.map((r) => [r.external_id, r.id]));
}

export async function productIds(tenantId: string): Promise<Map<string, string>> {
  const rows = await db()<
    { id: string; code: string }[]
  >`SELECT id::text, code FROM products WHERE tenant_id = ${tenantId}`;
  return new Map(rows.map((r) => [r.code, r.id]));
}

/** A message's rows with the values of its columns, whichever format it was written in. */
export function messageRows(subject: string, format: string | undefined, data: Uint8Array): any[] {
  const f = formatOf(format);
  if (f === 'JSONEachRow') return JSON.parse(`[${Buffer.from(data).toString('utf8')}]`) as any[];
  if (f === undefined) throw new Error(`unknown row format ${format}`);
  return decodeRows(data, columnsOf(f, subject.startsWith('ev.billing.') ? 'billing_events' : 'events'));
}

/**
 * A message's rows as a reader sees them: an event's `properties` is its raw JSON, rebuilt from
 * keys, values and kinds where the column is empty (lib/event-properties.ts).
 */
export function rowsOf(subject: string, format: string | undefined, data: Uint8Array): any[] {
  const rows = messageRows(subject, format, data);
  if (subject.startsWith('ev.billing.')) return rows;
  return rows.map((r) => ({ ...r, properties: propertiesText(r as StoredPropertyColumns) }));
}

export interface Published {
  subject: string;
  msgId: string;
  headers: Record<string, string>;
  rows: any[];
}

/**
 * Reads what the ingest tier stored in the EVENTS stream for one subject from now on. The
 * consumer is created before anything is sent: EVENTS keeps a message only while some consumer
 * still wants it, so a processor acknowledging it first cannot make it vanish under the test.
 */
export class StreamTap {
  private constructor(
    private readonly jsm: JetStreamManager,
    private readonly nc: NatsConnection,
    readonly name: string,
    readonly subject: string,
  ) {}

  static async open(t: Teardowns, nc: NatsConnection, subject: string): Promise<StreamTap> {
    const jsm = await nc.jetstreamManager();
    const name = `test-ingest-${nuid.next()}`;
    await jsm.consumers.add('EVENTS', {
      name,
      filter_subject: subject,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.New,
      inactive_threshold: nanos(5 * 60_000),
    });
    t.teardown(() => jsm.consumers.delete('EVENTS', name).catch(() => {}));
    return new StreamTap(jsm, nc, name, subject);
  }

  /** Messages stored for the subject and not read yet. */
  async pending(): Promise<number> {
    return (await this.jsm.consumers.info('EVENTS', this.name)).num_pending;
  }

  /** Everything stored since the last call, in order. */
  async drain(): Promise<Published[]> {
    const c = await this.nc.jetstream().consumers.get('EVENTS', this.name);
    const out: Published[] = [];
    for (let n = await this.pending(); n > 0; n--) {
      const m = await c.next({ expires: 5000 });
      if (!m) throw new Error(`stream said ${n} messages were pending on ${this.subject} but none came`);
      m.ack();
      const headers: Record<string, string> = {};
      for (const k of m.headers?.keys() ?? []) headers[k] = m.headers!.get(k);
      out.push({
        subject: m.subject,
        msgId: headers['Nats-Msg-Id'] ?? '',
        headers,
        rows: rowsOf(m.subject, headers[FORMAT_HEADER], m.data),
      });
    }
    return out;
  }

  /** The one message a request stored. */
  async one(t: Asserts): Promise<Published> {
    const all = await this.drain();
    t.equal(all.length, 1, `exactly one message stored on ${this.subject}`);
    return all[0];
  }
}

export async function natsClient(t: Teardowns): Promise<NatsConnection> {
  const nc = await connect({ servers: urls.NATS_URL, name: 'test-ingest' });
  t.teardown(() => nc.close());
  return nc;
}

export const event = (extra: Record<string, unknown> = {}) => ({
  event_name: 'feature_used',
  external_customer_id: 'cust-000001',
  ...extra,
});
export const batch = (n: number, extra: Record<string, unknown> = {}) => ({
  events: Array.from({ length: n }, () => event(extra)),
});
