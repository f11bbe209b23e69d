import { blankRowFields, rowStamp, isRejection, storedProperties, writeEventRow } from '../ingest/event-rules.js';
import type { Incoming } from '../ingest/scan.js';
import { scanEvents } from '../ingest/surface-b/events.js';
import { scanUsage } from '../ingest/surface-a/usage.js';
import { BufferPool } from '../lib/buffer-pool.js';
import { decodeJson } from '../lib/json.js';
import { RowBinaryWriter, uuidWire } from '../lib/row-binary.js';
import { compile } from '../schemas/ajv.js';
import { UsageBatchB } from '../schemas/events.js';
import { UsageBatchA } from '../schemas/ingest.js';
import { say } from './tiers.js';
import { PROBE_CUSTOMER as CUSTOMER, usageBodies } from './host-probe.js';

/**
 * The ingest tier's per-event work on a request body, in this process and nothing else: read the
 * events, check them against the surface's schema, and write their rows (properties included)
 * into RowBinary. Two ways side by side on the same bodies, alternated in rounds so both meet the
 * same machine: the general path (UTF-8 decoding, JSON.parse, Ajv, splitProperties) and the byte
 * scanner (ingest/scan.ts). Surface A: the benchmark's usage bodies (100 events, 577 B each);
 * surface B: its 1000-event batches. The customer look-ups, PostgreSQL and the publish are left
 * out: they are the same for both ways.
 */

export interface ParseFigures {
  events: number;
  /** µs of CPU per event. */
  generalUs: number;
  scanUs: number;
}

export interface ParseResult {
  rounds: number;
  a: ParseFigures;
  b: ParseFigures;
}

const CUSTOMER_WIRE = uuidWire(CUSTOMER);
const ROUNDS = 5;
const PASSES = 10;

type Events = Array<Incoming<{ event_name: string; properties?: object; timestamp?: string }>>;

function rows(events: Events, pool: BufferPool): void {
  const w = new RowBinaryWriter(events.length * 1024, pool);
  const stamp = rowStamp({ tenantId: CUSTOMER, batchId: CUSTOMER, now: Date.now(), surface: 'a' });
  // As surface A writes them (ingest/surface-a/usage.ts): one row-fields object, refilled per event.
  const row = blankRowFields(CUSTOMER_WIRE);
  row.externalSource = 'internal';
  for (const e of events) {
    const props = storedProperties(e.properties as Record<string, unknown> | undefined);
    if (isRejection(props)) continue;
    row.eventName = e.event_name;
    row.ts = typeof e.timestamp === 'number' ? e.timestamp : Date.now();
    row.props = props;
    writeEventRow(w, stamp, row);
  }
  pool.give(w.take());
}

/** CPU µs per event of each way over the bodies. */
function compare(
  bodies: Buffer[],
  general: (b: Buffer) => Events | undefined,
  scan: (b: Buffer) => Events | undefined,
): ParseFigures {
  const pool = new BufferPool(64 * 1024, 2 * 1024 * 1024);
  const cpu = { general: 0, scan: 0 };
  let events = 0;
  const pass = (way: 'general' | 'scan', count: boolean) => {
    const read = way === 'general' ? general : scan;
    const start = process.cpuUsage();
    for (let p = 0; p < PASSES; p++)
      for (const b of bodies) {
        const list = read(b);
        if (list === undefined) throw new Error(`parse: a benchmark body failed the ${way} path`);
        rows(list, pool);
        if (count && way === 'general') events += list.length;
      }
    const used = process.cpuUsage(start);
    if (count) cpu[way] += used.user + used.system;
  };
  // One warm-up round each, not counted: both ways reach their optimized code first.
  pass('general', false);
  pass('scan', false);
  for (let r = 0; r < ROUNDS; r++) {
    pass('general', true);
    pass('scan', true);
  }
  return { events, generalUs: cpu.general / events, scanUs: cpu.scan / events };
}

export function parseScenario(): ParseResult {
  const a = compile(UsageBatchA);
  const b = compile(UsageBatchB);
  const parsed = (check: (v: unknown) => boolean) => (body: Buffer) => {
    const d = decodeJson(body);
    return d.ok && check(d.value) ? (d.value as { events: Events }).events : undefined;
  };
  const bodiesA = usageBodies();
  // As bench/scenario-b.ts sends them.
  const bodiesB = Array.from({ length: 10 }, (_, k) =>
    Buffer.from(
      JSON.stringify({
        events: Array.from({ length: 1000 }, (_, i) => ({
          customer_id: CUSTOMER,
          event_name: ['page_view', 'login', 'report_exported'][i % 3],
          external_id: `b-${k}-${String(i).padStart(9, '0')}`,
          user_external_id: `u-${i % 50}`,
          properties: { i, plan: i % 2 ? 'pro' : 'free' },
        })),
      }),
    ),
  );
  say('parse: surface A bodies, the general path and the scanner in turn');
  const fa = compare(bodiesA, parsed(a.check), scanUsage as (b: Buffer) => Events | undefined);
  say('parse: surface B bodies');
  const fb = compare(bodiesB, parsed(b.check), scanEvents as (b: Buffer) => Events | undefined);
  return { rounds: ROUNDS, a: fa, b: fb };
}

export function parseRows(
  r: ParseResult,
): Array<{ figure: string; measured: string; target: string; ratio: string; bound: string }> {
  const row = (what: string, f: ParseFigures) => ({
    figure: `Reading, checking and writing the rows of ${what}, in one process (${r.rounds} rounds of each way, alternated)`,
    measured: `general path (JSON.parse, Ajv, split properties) ${f.generalUs.toFixed(2)} µs, byte scanner ${f.scanUs.toFixed(2)} µs of CPU per event, over ${f.events.toLocaleString('en-US')} events each`,
    target: '—',
    ratio: `scanner ${(f.scanUs / f.generalUs).toFixed(2)} × the general path`,
    bound: 'one thread (this process)',
  });
  return [
    row("surface A's benchmark bodies (100 events of 577 B)", r.a),
    row("surface B's benchmark batches (1000 events)", r.b),
  ];
}
