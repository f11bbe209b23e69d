import t from '#tap';
import { AckPolicy, DeliverPolicy, connect } from 'nats';
import { KEYED_PARTITIONS, keyedPartition, keyedWriter, STREAM_EVENTS } from '../../lib/nats.js';
import { columnsOf, decodeRows, FORMAT_HEADER, formatOf, type RowBinaryFormat } from '../../lib/row-binary.js';
import { jetstream, writersIdle } from '../helpers/observe.js';
import { ch, closeDb, db, privateJetStream, startTier, waitFor } from '../helpers/stack.js';
import { BACKFILL, DAY, ev, ingest, postEvents, workspace, xid } from './support.js';

// SURFACE_B_DEDUP=stream: every valid event is published, and the keyed writer of the workspace's
// partition, run by one processors instance at a time, stores the first event of each
// (customer_id, external_id) in stream order and drops the later ones, forever. Two ingest
// processes and two processors instances sharing the partitions; overlapping requests sent at
// once; the owner killed and the keys taken over.
t.teardown(closeDb);
const { ws, ids } = await workspace(3);
const nats = await privateJetStream(t);
const stream = { ...nats.env, SURFACE_B_DEDUP: 'stream' };
const [a, b] = await Promise.all([ingest(t, stream), ingest(t, stream)]);
const processorsEnv = { ...stream, KEYED_WRITER_LEASE_MS: '2000' };
const first = await startTier(t, 'processors', processorsEnv);
const second = await startTier(t, 'processors', processorsEnv);
const jsm = await jetstream(t, nats.url);
const nc = await connect({ servers: nats.url });
t.teardown(() => nc.close());
// A consumer that never acknowledges: the stream keeps every keyed message of this workspace (the
// processors purge what all consumers acknowledged), so `published` reads them all.
await jsm.consumers.add(STREAM_EVENTS, {
  durable_name: 'test-keep-keyed',
  filter_subject: `ev.keyed.${ws.tenant_id}.*`,
  ack_policy: AckPolicy.Explicit,
  deliver_policy: DeliverPolicy.All,
});

const scope = (await jsm.streams.info(STREAM_EVENTS)).created;
/** Every keyed message of the workspace's partition published so far is stored or dropped. */
const settled = (tenant = ws.tenant_id) => writersIdle(jsm, keyedWriter(keyedPartition(tenant)), 'events');
/** The processors instance (its pid) holding each partition's lease. */
const holders = async () =>
  new Map(
    (
      await db()<{ job: string; holder: string }[]>`
        SELECT job, holder FROM job_leases WHERE job LIKE ${`keyed-writer:${scope}:%`} AND expires_at > now()`
    ).map((r) => [Number(r.job.slice(r.job.lastIndexOf(':') + 1)), r.holder]),
  );
const pidOf = (tier: { proc: { pid?: number } }) => String(tier.proc.pid);

interface Row {
  customer_id: string;
  external_id: string;
  event_id: string;
}

/** The rows of every keyed message in the stream, in stream order. */
async function published(): Promise<Row[]> {
  const name = `t${Date.now()}`;
  await jsm.consumers.add(STREAM_EVENTS, {
    name,
    filter_subject: `ev.keyed.${ws.tenant_id}.*`,
    ack_policy: AckPolicy.None,
    deliver_policy: DeliverPolicy.All,
    inactive_threshold: 10_000_000_000,
  });
  const info = await jsm.consumers.info(STREAM_EVENTS, name);
  const rows: Row[] = [];
  const c = await nc.jetstream().consumers.get(STREAM_EVENTS, name);
  for (let left = info.num_pending; left > 0; ) {
    const batch = await c.fetch({ max_messages: left, expires: 2000 });
    for await (const m of batch) {
      left--;
      const format = formatOf(m.headers?.get(FORMAT_HEADER)) as RowBinaryFormat;
      for (const r of decodeRows(m.data, columnsOf(format, 'events'))) rows.push(r as unknown as Row);
    }
  }
  // The consumer goes by itself once idle (inactive_threshold).
  return rows;
}

/** What must be stored: the first row of each key in stream order, and every row without a key. */
function firstOfEach(rows: Row[]): string[] {
  const seen = new Set<string>();
  const keep: string[] = [];
  for (const r of rows) {
    const key = `${r.customer_id} ${r.external_id}`;
    if (r.external_id !== '' && seen.has(key)) continue;
    seen.add(key);
    keep.push(r.event_id);
  }
  return keep.sort();
}

const storedIds = async () =>
  (
    await ch<{ id: string }>(
      `SELECT toString(event_id) AS id FROM csp.events WHERE tenant_id = toUUID('${ws.tenant_id}') ORDER BY id`,
    )
  ).map((r) => r.id);

/** `requests` requests of 20 events each over both ingest processes at once, keys drawn from `pool`. */
async function overlapping(pool: string[], requests: number): Promise<number> {
  const sends = Array.from({ length: requests }, (_, i) => {
    const events = Array.from({ length: 20 }, (_, j) =>
      j % 5 === 4
        ? ev(ids[j % 3], { event_name: `plain_${i}` })
        : ev(ids[j % 3], { event_name: `req_${i}`, external_id: pool[(i * 7 + j) % pool.length] }),
    );
    return postEvents((i % 2 ? a : b).url, ws.api_key, events);
  });
  let accepted = 0;
  for (const res of await Promise.all(sends)) {
    if (res.status !== 200) throw new Error(`status ${res.status}: ${res.text}`);
    accepted += res.body.accepted;
  }
  return accepted;
}

t.test('overlapping requests at once: the first of each key in stream order is stored', async (t) => {
  const pool = Array.from({ length: 40 }, xid);
  const accepted = await overlapping(pool, 24);
  t.equal(accepted, 24 * 20, 'accepted counts every valid event, duplicates included');
  await waitFor('the keyed events stored', async () => (await storedIds()).length > 0);
  await settled();
  const rows = await published();
  t.equal(rows.length, 24 * 20, 'every valid event was published');
  const want = firstOfEach(rows);
  t.ok(want.length < rows.length, `${rows.length - want.length} duplicates among them`);
  t.same(await storedIds(), want);
  const [{ n }] = await db()<
    { n: number }[]
  >`SELECT count(*)::int AS n FROM event_dedup WHERE tenant_id = ${ws.tenant_id}`;
  t.equal(n, 0, 'no key claimed in PostgreSQL');
});

t.test('the two instances share the partitions', async (t) => {
  const shares = await waitFor('each instance holding half the partitions', async () => {
    const h = [...(await holders()).values()];
    const count = (tier: typeof first) => h.filter((x) => x.endsWith(pidOf(tier))).length;
    return h.length === KEYED_PARTITIONS && count(first) === count(second) ? [count(first), count(second)] : undefined;
  });
  t.same(shares, [KEYED_PARTITIONS / 2, KEYED_PARTITIONS / 2]);
});

t.test('the owner killed: another instance loads the stored keys and goes on', async (t) => {
  const pool = Array.from({ length: 30 }, xid);
  await overlapping(pool, 10);
  await settled();
  // Whichever holds the workspace's partition goes; the other takes it over once its lease runs out.
  const partition = keyedPartition(ws.tenant_id);
  const holder = (await holders()).get(partition)!;
  t.ok(holder, "one instance holds the workspace's partition");
  const owner = [first, second].find((x) => holder.endsWith(pidOf(x)))!;
  const survivor = owner === first ? second : first;
  await owner.stop('SIGKILL');
  // Keys stored before the kill, sent again, and new overlapping ones.
  const again = [...pool.slice(0, 15), ...Array.from({ length: 15 }, xid)];
  await overlapping(again, 10);
  await settled();
  const rows = await published();
  t.same(await storedIds(), firstOfEach(rows), 'each key stored once, the first in stream order');
  const now = await waitFor('the survivor holding every partition', async () => {
    const h = await holders();
    return [...h.values()].filter((x) => x.endsWith(pidOf(survivor))).length === KEYED_PARTITIONS ? h : undefined;
  });
  t.ok(now.get(partition)?.endsWith(pidOf(survivor)), "the other instance holds the workspace's partition now");
});

t.test('a backfill job counts the events it did not store as duplicates once it succeeded', async (t) => {
  const stored = xid();
  const live = await postEvents(a.url, ws.api_key, [ev(ids[0], { event_name: 'live', external_id: stored })]);
  t.equal(live.status, 200);
  const ts = new Date(Date.now() - 40 * DAY).toISOString();
  const res = await postEvents(
    b.url,
    ws.api_key,
    [
      ev(ids[0], { event_name: 'old_copy', external_id: stored, timestamp: ts }),
      ev(ids[1], { event_name: 'old_new', external_id: xid(), timestamp: ts }),
      ev(ids[1], { event_name: 'old_plain', timestamp: ts }),
    ],
    {},
    BACKFILL,
  );
  t.equal(res.status, 202, res.text);
  const job = await waitFor('the job done', async () => {
    const [j] = await db()<{ status: string; counts: Record<string, number> }[]>`
      SELECT status, counts FROM jobs WHERE id = ${res.body.job_id}`;
    return j?.status === 'succeeded' ? j : undefined;
  });
  t.match(job.counts, { accepted: 3, stored: 2, duplicates: 1 });
  const names = await ch<{ event_name: string }>(
    `SELECT event_name FROM csp.events WHERE tenant_id = toUUID('${ws.tenant_id}') AND external_id = '${stored}'`,
  );
  t.same(
    names.map((r) => r.event_name),
    ['live'],
  );
});

t.test('keys recorded on the request path before the switch keep deduplicating', async (t) => {
  const { ws: other, ids: customers } = await workspace(1);
  // The same workspace before the switch: an ingest tier that claims keys in PostgreSQL (the default).
  const before = await ingest(t, nats.env);
  const x = xid();
  const first = await postEvents(before.url, other.api_key, [
    ev(customers[0], { event_name: 'before_switch', external_id: x }),
  ]);
  t.equal(first.status, 200, first.text);
  await waitFor(
    'the key in csp.event_keys',
    async () =>
      (await ch(`SELECT 1 FROM csp.event_keys WHERE tenant_id = toUUID('${other.tenant_id}') AND external_id = '${x}'`))
        .length === 1,
  );
  const after = await postEvents(a.url, other.api_key, [
    ev(customers[0], { event_name: 'after_switch', external_id: x }),
    ev(customers[0], { event_name: 'after_switch_new', external_id: xid() }),
  ]);
  t.equal(after.body?.accepted, 2, 'both accepted');
  await waitFor(
    'the new event stored',
    async () =>
      (
        await ch(
          `SELECT 1 FROM csp.events WHERE tenant_id = toUUID('${other.tenant_id}') AND event_name = 'after_switch_new'`,
        )
      ).length === 1,
  );
  await settled(other.tenant_id);
  const names = await ch<{ event_name: string }>(
    `SELECT event_name FROM csp.events WHERE tenant_id = toUUID('${other.tenant_id}') AND external_id = '${x}'`,
  );
  t.same(
    names.map((r) => r.event_name),
    ['before_switch'],
    'the copy sent after the switch is dropped',
  );
});
