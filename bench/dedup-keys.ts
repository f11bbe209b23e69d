import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { stackProfile, stackUrls } from '../infra/stack.js';
import { EVENT_ROW_COLUMNS, filterRows, RowBinaryWriter } from '../lib/row-binary.js';
import type { KeySet } from '../processors/dedup/key-set.js';
import { KEY_COLUMNS, WorkspaceKeys } from '../processors/dedup/workspace-keys.js';

/**
 * What surface B's deduplication keys cost where the writer that owns a workspace holds them in
 * memory (processors/dedup/, issue 34), side by side in one run:
 *
 * 1. the writer's CPU per event: messages of `--rows` surface-B rows (`--dup` of the keys already
 *    claimed by an earlier message, 5 % without external_id) walked as the writer walks them to
 *    drop an erased customer's rows, against the same walk that also hashes and claims each key;
 * 2. memory per key of the in-memory set, filled to `--keys`;
 * 3. with `--profile` (a running stack's ClickHouse): the same keys stored as ClickHouse would keep
 *    them (`event_keys`' shape: tenant_id, customer_id, external_id, batch_id), their bytes on disk
 *    per key and for 1 billion keys, and the time and CPU to load them into memory when a writer
 *    takes the workspace over.
 *
 *   node dist/bench/dedup-keys.js --keys 5000000 [--ids seq|random] [--profile test]
 */

const { values: o } = parseArgs({
  options: {
    profile: { type: 'string' },
    keys: { type: 'string', default: '5000000' },
    rows: { type: 'string', default: '1000' },
    dup: { type: 'string', default: '0.1' },
    customers: { type: 'string', default: '5000' },
    ids: { type: 'string', default: 'seq' },
  },
});
const KEYS = Number(o.keys);
const ROWS = Number(o.rows);
const DUP = Number(o.dup);
const tenant = randomUUID();
const customers = Array.from({ length: Number(o.customers) }, () => randomUUID());
const EXT = EVENT_ROW_COLUMNS.findIndex(([c]) => c === 'external_id');
const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;
const say = (line: string) => process.stdout.write(`${line}\n`);
const f1 = (x: number) => x.toFixed(1);

let next = 0;
/** `--ids seq`: growing external ids (sequence numbers, time-ordered ids); `--ids random`: UUIDs. */
const extId = () => (o.ids === 'random' ? randomUUID() : `evt-${String(next++).padStart(12, '0')}`);

/** `count` messages of surface-B rows, `DUP` of their keys taken from earlier rows. */
function messages(count: number): Buffer[] {
  const out: Buffer[] = [];
  const earlier: Array<[string, string]> = [];
  for (let m = 0; m < count; m++) {
    const w = new RowBinaryWriter(ROWS * 300);
    for (let i = 0; i < ROWS; i++) {
      const r = Math.random();
      const key: [string, string] =
        r < DUP && earlier.length > 0
          ? earlier[Math.floor(Math.random() * earlier.length)]
          : [customers[Math.floor(Math.random() * customers.length)], r < DUP + 0.05 ? '' : extId()];
      if (key[1] !== '' && earlier.length < 100_000) earlier.push(key);
      w.row(EVENT_ROW_COLUMNS, eventRow(key[0], key[1], i));
    }
    out.push(w.take());
  }
  return out;
}

function eventRow(customer_id: string, external_id: string, i: number): Record<string, unknown> {
  return {
    tenant_id: tenant,
    customer_id,
    event_name: `feature_${i % 20}_used`,
    ts: 1_764_000_000 + i,
    ts_ms: i % 1000,
    event_id: randomUUID(),
    batch_id: tenant,
    received_at: 1_764_000_000,
    external_customer_id: '',
    external_source: 'internal',
    user_id: `user-${i % 50}`,
    product_id: '',
    product_code: '',
    surface: 'b',
    external_id,
    properties: '',
    prop_keys: ['plan', 'seats', 'region'],
    prop_values: ['enterprise', String(i % 200), 'eu-west-1'],
    user_email: '',
    user_external_id: '',
    prop_kinds: 'sns',
  };
}

// 1. CPU per event, the plain walk against the walk that claims.
{
  const msgs = messages(Math.max(20, Math.ceil(200_000 / ROWS)));
  const events = msgs.length * ROWS;
  const walk = () => {
    const u0 = process.cpuUsage();
    for (const m of msgs) filterRows(m, EVENT_ROW_COLUMNS, EXT, () => true);
    return (cpuMs(process.cpuUsage(u0)) * 1e6) / events;
  };
  const claim = () => {
    const ws = new WorkspaceKeys();
    const u0 = process.cpuUsage();
    let dropped = 0;
    msgs.forEach((m, seq) => {
      dropped += ws.claim(seq + 1, m, EVENT_ROW_COLUMNS, EXT, ROWS).dropped;
      ws.landed(seq + 1);
    });
    return { ns: (cpuMs(process.cpuUsage(u0)) * 1e6) / events, dropped };
  };
  walk();
  claim();
  const walks: number[] = [];
  const claims: number[] = [];
  let dropped = 0;
  for (let r = 0; r < 5; r++) {
    walks.push(walk());
    const c = claim();
    claims.push(c.ns);
    dropped = c.dropped;
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  say(
    `writer CPU per event (${events} events in messages of ${ROWS}, ${dropped} dropped as duplicates; medians of 5):`,
  );
  say(`  walk only (the erasure drop's walk): ${f1(med(walks))} ns`);
  say(`  walk + hash + claim:                 ${f1(med(claims))} ns  (${f1(med(claims) / med(walks))} × the walk)`);
}

// 2. Memory per key.
{
  const ws = new WorkspaceKeys();
  const w = new RowBinaryWriter(1 << 20);
  const u0 = process.cpuUsage();
  for (let i = 0; i < KEYS; i++) {
    w.row(KEY_COLUMNS, { tenant_id: tenant, customer_id: customers[i % customers.length], external_id: extId() });
    if (w.length > 1 << 20 || i === KEYS - 1) ws.load(w.take());
  }
  const ms = cpuMs(process.cpuUsage(u0));
  const set: KeySet = ws.keys;
  say(
    `in memory: ${set.size} keys in ${f1(set.bytes / 2 ** 20)} MiB, ${f1(set.bytes / set.size)} B per key ` +
      `(${f1(((set.bytes / set.size) * 1e9) / 2 ** 30)} GiB per billion keys at this fill; 21–43 B as the table doubles); ` +
      `${f1((ms * 1e6) / KEYS)} ns per key to build (rows and hashes)`,
  );
}

// 3. Stored in ClickHouse, and loaded back.
if (o.profile) {
  const chUrl = stackUrls(stackProfile(o.profile)).CLICKHOUSE_URL;
  const TABLE = 'csp.bench_event_keys';
  const ch = (query: string, body?: Buffer) =>
    new Promise<string>((resolve, reject) => {
      const req = http.request(`${chUrl}/?query=${encodeURIComponent(query)}`, { method: 'POST' }, (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => (res.statusCode === 200 ? resolve(text) : reject(new Error(text))));
      });
      req.on('error', reject);
      req.end(body);
    });
  await ch(`DROP TABLE IF EXISTS ${TABLE}`);
  await ch(
    `CREATE TABLE ${TABLE} (tenant_id UUID, customer_id UUID, external_id String, batch_id UUID)
     ENGINE = MergeTree ORDER BY (tenant_id, customer_id, external_id)`,
  );
  const cols = [...KEY_COLUMNS, ['batch_id', 'UUID']] as typeof KEY_COLUMNS;
  next = 0;
  let w = new RowBinaryWriter(1 << 22);
  let batch = randomUUID();
  for (let i = 0; i < KEYS; i++) {
    if (i % 1000 === 0) batch = randomUUID();
    w.row(cols, {
      tenant_id: tenant,
      customer_id: customers[i % customers.length],
      external_id: extId(),
      batch_id: batch,
    });
    if (w.length > 1 << 24 || i === KEYS - 1) {
      await ch(`INSERT INTO ${TABLE} FORMAT RowBinary`, w.take());
      w = new RowBinaryWriter(1 << 22);
    }
  }
  await ch(`OPTIMIZE TABLE ${TABLE} FINAL`);
  const [rows, bytes] = (
    await ch(`SELECT sum(rows), sum(bytes_on_disk) FROM system.parts WHERE database = 'csp'
              AND table = 'bench_event_keys' AND active`)
  )
    .trim()
    .split('\t')
    .map(Number);
  say(
    `in ClickHouse: ${rows} keys, ${f1(bytes / rows)} B per key on disk (${f1(((bytes / rows) * 1e9) / 2 ** 30)} GiB per billion keys)`,
  );

  const ws = new WorkspaceKeys();
  const u0 = process.cpuUsage();
  const t0 = performance.now();
  let loaded = 0;
  await new Promise<void>((resolve, reject) => {
    const q = `SELECT tenant_id, customer_id, external_id FROM ${TABLE} WHERE tenant_id = '${tenant}' FORMAT RowBinary`;
    http
      .get(`${chUrl}/?query=${encodeURIComponent(q)}`, (res) => {
        let carry: Buffer = Buffer.alloc(0);
        res.on('data', (d: Buffer) => {
          const buf = carry.length ? Buffer.concat([carry, d]) : d;
          const r = ws.load(buf);
          loaded += r.added;
          carry = buf.subarray(r.read);
        });
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
      })
      .on('error', reject);
  });
  const ms = performance.now() - t0;
  const cpu = cpuMs(process.cpuUsage(u0));
  say(
    `loaded back: ${loaded} keys in ${f1(ms)} ms (${f1(loaded / ms / 1000)}M keys/s; ${f1((ms * 1e9) / loaded / 1e3 / 60)} min per ` +
      `billion keys at this rate), writer CPU ${f1((cpu * 1e6) / loaded)} ns per key`,
  );
  await ch(`DROP TABLE ${TABLE}`);
}
