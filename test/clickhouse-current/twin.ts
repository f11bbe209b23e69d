import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Chdb } from '../helpers/chdb.js';
import { withSettings } from './check.js';
import { insertHead, kindOf, type StatementKind } from './shapes.js';

/**
 * Two ClickHouses behind one address: an HTTP server that the product's own clients are pointed at
 * (CLICKHOUSE_URL), which forwards each request unchanged to ClickHouse 18.16 and answers with
 * 18.16's answer, and runs the same statement with the same settings on ClickHouse 26 (chDB) in
 * this process, then compares the two answers row by row. So every read and write below goes
 * through the product's code and its clients (@clickhouse/client, node:http), as sent in
 * production, and each engine sees exactly the same statements and rows:
 * - an INSERT's rows travel in the body: RowBinary is handed to 26 from a file (file(…, 'RowBinary',
 *   structure), the structure read from 26's own system.columns), text formats inline;
 * - answers are parsed by their FORMAT (JSONEachRow, TabSeparated and its variants) and compared
 *   in order where the outermost query has an ORDER BY, else as sorted lists; numbers within 1e-9
 *   relative; RowBinary answers are compared as JSONEachRow of the same statement on both;
 * - reads of system tables describe each server, not the data: run on both, not compared;
 * - mutations run synchronously on 26 (mutations_sync = 2), so that what the product reads after
 *   waiting for 18.16's is what 26 holds too.
 */

export interface Exchange {
  /** What the test was doing (set by the test before each step). */
  label: string;
  sql: string;
  settings: Record<string, string>;
  kind: StatementKind;
  result: 'same' | 'different' | 'not compared';
  why?: string;
  rows?: number;
  detail?: unknown;
}

/** URL parameters of ClickHouse's HTTP interface that are not settings. */
const NOT_SETTINGS = new Set([
  'query',
  'database',
  'query_id',
  'default_format',
  'user',
  'password',
  'session_id',
  'session_timeout',
  'session_check',
  'compress',
  'decompress',
  'buffer_size',
  'wait_end_of_query',
  'quota_key',
]);
/** Tables of the Replacing, Summing and Aggregating engines: how many rows they hold depends on merges. */
const MERGING = ['health_history', 'metric_values', 'event_keys', 'usage_daily(_names)?', 'billing_daily'];
const MERGE_DEPENDENT = new RegExp(
  `\\b(${[...MERGING, 'batch_ledger', 'event_names', 'event_property_keys(ets)?'].join('|')})\\b`,
);
const SERVER_STATE = /\bsystem\.\w+|\bcsp\.(processes|replicas)\b/i;
const REL = 1e-9;

export class Twin {
  readonly exchanges: Exchange[] = [];
  label = '';
  private server?: http.Server;
  private readonly agent = new http.Agent({ keepAlive: true });
  private readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'twin-'));
  private seq = 0;

  constructor(
    private readonly chdb: Chdb,
    private readonly upstream: string,
  ) {
    chdb.run('SET mutations_sync = 2');
  }

  async start(): Promise<string> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.handle(req, Buffer.concat(chunks)).then(
          ([status, headers, body]) => {
            res.writeHead(status, headers);
            res.end(body);
          },
          (err: Error) => {
            res.writeHead(500);
            res.end(`twin: ${err.message}`);
          },
        );
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    await new Promise((resolve) => this.server?.close(resolve));
    this.agent.destroy();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  /** Differences seen so far, and the count of statements compared. */
  differences(): Exchange[] {
    return this.exchanges.filter((e) => e.result === 'different');
  }

  private forward(
    method: string,
    pathAndQuery: string,
    headers: http.IncomingHttpHeaders,
    body: Buffer,
  ): Promise<[number, http.IncomingHttpHeaders, Buffer]> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        `${this.upstream}${pathAndQuery}`,
        { method, headers: withoutHost(headers), agent: this.agent },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve([res.statusCode ?? 0, res.headers, Buffer.concat(chunks)]));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  private async handle(req: http.IncomingMessage, body: Buffer): Promise<[number, http.IncomingHttpHeaders, Buffer]> {
    const url = new URL(req.url ?? '/', 'http://twin');
    const p = url.searchParams;
    const up = await this.forward(req.method ?? 'GET', `${url.pathname}${url.search}`, req.headers, body);
    const inQuery = p.get('query') ?? '';
    const dataInBody = inQuery !== '' && insertHead(inQuery) !== undefined;
    const sql = dataInBody ? inQuery : [inQuery, body.toString('utf8')].filter(Boolean).join('\n');
    const settings: Record<string, string> = {};
    for (const [k, v] of p) if (!NOT_SETTINGS.has(k) && !k.startsWith('param_')) settings[k] = v;
    const e: Exchange = { label: this.label, sql, settings, kind: kindOf(sql), result: 'same' };
    this.exchanges.push(e);
    let mine: string | Error;
    try {
      this.chdb.run(`USE ${p.get('database') ?? 'csp'}`);
      mine = dataInBody
        ? this.insert(inQuery, body, settings)
        : this.chdb.run(e.kind === 'read' ? withSettings(sql, settings) : sql);
    } catch (err) {
      mine = err as Error;
    }
    const theirs = up[0] === 200 ? up[2].toString('utf8') : new Error(up[2].toString('utf8'));
    if (theirs instanceof Error || mine instanceof Error) {
      if (!(theirs instanceof Error && mine instanceof Error)) {
        e.result = 'different';
        e.detail = {
          '18.16': theirs instanceof Error ? theirs.message.slice(0, 400) : 'ok',
          '26': mine instanceof Error ? mine.message.slice(0, 400) : 'ok',
        };
      } else {
        e.result = 'not compared';
        e.why = 'failed on both';
      }
      return up;
    }
    if (e.kind !== 'read') return up;
    if (SERVER_STATE.test(sql)) {
      e.result = 'not compared';
      e.why = 'a system table: what each server holds, not the data';
      return up;
    }
    let [a, b, format] = [theirs, mine, formatOf(sql, p.get('default_format'))];
    if (format === 'RowBinary') {
      const json = sql.replace(/\bFORMAT\s+RowBinary\s*$/i, 'FORMAT JSONEachRow');
      const again = await this.forward('POST', `/?${p}`, {}, Buffer.from(json));
      [a, b, format] = [again[2].toString('utf8'), this.chdb.run(withSettings(json, settings)), 'JSONEachRow'];
    }
    if (MERGE_DEPENDENT.test(sql) && /\bcount\(\)/i.test(sql) && !/Merge\(/.test(sql)) {
      e.why = 'rows counted in a table whose rows merge: compared as present or absent';
      const present = (rows: Row[]) => rows.map((r) => mapNumbers(r, (n) => (n > 0 ? 1 : 0)));
      compare(e, present(parse(a, format)), present(parse(b, format)), isOrdered(sql), false);
    } else compare(e, parse(a, format), parse(b, format), isOrdered(sql), /\bnow\(\)/i.test(sql));
    return up;
  }

  /** An INSERT whose rows are in the body, on 26, with its settings: RowBinary through a file, text formats inline. */
  private insert(head: string, body: Buffer, settings: Record<string, string>): string {
    const h = insertHead(head)!;
    const pairs = Object.entries(settings).map(([k, v]) => `${k} = ${/^-?\d+$/.test(v) ? v : `'${v}'`}`);
    const set = pairs.length ? ` SETTINGS ${pairs.join(', ')}` : '';
    if (h.format !== 'RowBinary')
      return this.chdb.run(
        `${head.replace(/\s+FORMAT\s+\w+\s*$/i, `${set} FORMAT ${h.format}`)}\n${body.toString('utf8')}`,
      );
    const [db, table] = h.table.includes('.')
      ? h.table.split('.')
      : [this.chdb.run('SELECT currentDatabase()').trim(), h.table];
    const types = new Map(
      this.chdb
        .rows<{ name: string; type: string }>(
          `SELECT name, type FROM system.columns WHERE database = '${db}' AND table = '${table}' ORDER BY position`,
        )
        .map((c) => [c.name, c.type]),
    );
    const columns = h.columns ?? [...types.keys()];
    const structure = columns.map((c) => `${c} ${types.get(c)}`).join(', ');
    const file = path.join(this.dir, `rows-${++this.seq}.bin`);
    fs.writeFileSync(file, body);
    try {
      return this.chdb.run(
        `INSERT INTO ${h.table} (${columns.join(', ')}) ` +
          `SELECT * FROM file('${file}', 'RowBinary', '${structure}')${set}`,
      );
    } finally {
      fs.rmSync(file, { force: true });
    }
  }
}

function withoutHost(headers: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const { host: _, ...rest } = headers;
  return rest;
}

function formatOf(sql: string, fallback: string | null): string {
  return /\bFORMAT\s+(\w+)\s*$/i.exec(sql)?.[1] ?? fallback ?? 'TabSeparated';
}

/** Whether the outermost query orders its rows: an ORDER BY outside every parenthesis, near the end. */
export function isOrdered(sql: string): boolean {
  let depth = 0;
  let outer = '';
  for (const c of sql) {
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (depth === 0) outer += c;
  }
  return /\bORDER\s+BY\b/i.test(outer.slice(outer.search(/\bFROM\b[\s\S]*$/i)));
}

type Row = unknown[] | Record<string, unknown>;

function parse(text: string, format: string): Row[] {
  const lines = text.split('\n').filter((l) => l !== '');
  if (/^JSONEachRow$|^JSONCompactEachRow$/i.test(format))
    return lines.map((l) => JSON.parse(l.replace(/:(-?)(nan|inf)\b/g, ':"$1$2"')) as Row);
  if (/^(TabSeparated|TSV)(Raw)?$/i.test(format)) return lines.map((l) => l.split('\t'));
  return [[text]];
}

const isNumeric = (v: unknown) => typeof v === 'string' && /^-?(\d+(\.\d*)?([eE][+-]?\d+)?|nan|inf)$/.test(v);
const DATE_TIME = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/;

/**
 * Equal values: numbers within 1e-9 relative (nan equals nan), numeric text as numbers; date-times
 * within 2 s where the statement read now() (each engine read its own clock).
 */
export function sameValue(a: unknown, b: unknown, clock = false): boolean {
  if (a === b) return true;
  if (typeof a === 'number' && typeof b === 'number')
    return (Number.isNaN(a) && Number.isNaN(b)) || Math.abs(a - b) <= REL * Math.max(Math.abs(a), Math.abs(b));
  if (isNumeric(a) && isNumeric(b)) return sameValue(Number(a), Number(b));
  if (clock && typeof a === 'string' && typeof b === 'string' && DATE_TIME.test(a) && DATE_TIME.test(b))
    return Math.abs(Date.parse(`${a}Z`) - Date.parse(`${b}Z`)) <= 2000;
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((x, i) => sameValue(x, b[i], clock));
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return (
      ka.length === kb.length &&
      ka.every(
        (k, i) => k === kb[i] && sameValue((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], clock),
      )
    );
  }
  return false;
}

function mapNumbers(r: Row, f: (n: number) => number): Row {
  const map = (v: unknown) => (typeof v === 'number' ? f(v) : isNumeric(v) ? f(Number(v)) : v);
  return Array.isArray(r) ? r.map(map) : Object.fromEntries(Object.entries(r).map(([k, v]) => [k, map(v)]));
}

/** A row's sort key: numbers at 9 significant digits, so rows equal within the tolerance sort alike. */
const sortKey = (r: Row) =>
  JSON.stringify(r, (_, v) =>
    typeof v === 'number' ? Number(v.toPrecision(9)) : isNumeric(v) ? Number(Number(v).toPrecision(9)) : v,
  );

function compare(e: Exchange, a: Row[], b: Row[], ordered: boolean, clock: boolean): void {
  e.rows = a.length;
  if (!ordered) {
    a = [...a].sort((x, y) => (sortKey(x) < sortKey(y) ? -1 : 1));
    b = [...b].sort((x, y) => (sortKey(x) < sortKey(y) ? -1 : 1));
  }
  if (a.length !== b.length) {
    e.result = 'different';
    e.detail = { rows: { '18.16': a.length, '26': b.length }, first: { '18.16': a[0], '26': b[0] } };
    return;
  }
  const i = a.findIndex((r, k) => !sameValue(r, b[k], clock));
  if (i >= 0) {
    e.result = 'different';
    e.detail = { row: i, '18.16': a[i], '26': b[i] };
  }
}
