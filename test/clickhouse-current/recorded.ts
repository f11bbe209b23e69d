import fs from 'node:fs';
import path from 'node:path';
import { QUERY_LOG_CUT } from '../../infra/services.js';
import { ROOT, stackProfile } from '../../infra/stack.js';
import { SUITE_STARTED } from '../suites.js';
import { kindOf, shapeOf, type StatementKind } from './shapes.js';

/**
 * The statements a stack suite run sent, read back from the query log of the stacks it ran on
 * (`test`, and `serial` for the serial group: infra/services.ts has both log every statement).
 * Only statements that ran to the end on 18.16 (QueryFinish) count; a statement that failed there
 * is not one the product relies on. What this module itself and curl send is left out.
 */

export interface Recorded {
  shape: string;
  kind: StatementKind;
  /** The first statement of this shape in the log, as sent. */
  example: string;
  /** The settings it was sent with that the server's profile does not set (readonly, max_execution_time, …). */
  settings: Record<string, string>;
  /** How many statements of the shape the log holds. */
  count: number;
  /** The HTTP client that sent the example: clickhouse-js (processors), node (fetch: infra), '' (node:http). */
  agent: string;
  stack: string;
  first: string;
}

export interface StackLog {
  stack: string;
  /** Statements on databases a test made for itself (test/infra/regranulate): not the product's. */
  ownDatabases: number;
  /** Why this stack's log was not read, when it was not. */
  unread?: string;
  statements: number;
  /** Statements the log cut at log_queries_cut_to_length: they cannot be checked. */
  cut: string[];
  /** Distinct statement texts that failed on 18.16 (not checked). */
  failed: number;
}

interface Row {
  example: string;
  agent: string;
  n: string;
  first_at: string;
  names: string[];
  values: string[];
  cut: string;
}

const post = async (url: string, sql: string): Promise<string> => {
  const res = await fetch(url, { method: 'POST', body: sql, signal: AbortSignal.timeout(120_000) });
  const text = await res.text();
  if (!res.ok) throw new Error(text.trim().slice(0, 300));
  return text;
};

/**
 * Statements grouped on the server by their text with UUIDs and digits masked (the bulk of what
 * differs between two sends of one statement), so a suite's hundreds of thousands of statements
 * come back as a few thousand rows; shapeOf folds those further here.
 */
const READ = `
SELECT argMin(query, event_time) AS example, argMin(http_user_agent, event_time) AS agent, toString(count()) AS n,
       toString(min(event_time)) AS first_at, argMin(Settings.Names, event_time) AS names,
       argMin(Settings.Values, event_time) AS values,
       toString(max(length(query)) >= toUInt64(getSetting_cut)) AS cut
FROM system.query_log
WHERE type = 2 AND is_initial_query AND http_user_agent NOT LIKE 'curl/%' AND query NOT LIKE '%system.query_log%'
GROUP BY replaceRegexpAll(replaceRegexpAll(query,
  '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', 'U'), '[0-9]+', '0'),
  arrayStringConcat(Settings.Names, ',')
ORDER BY first_at
FORMAT JSONEachRow`;

/** The databases statements in the log made. */
const OWN_DATABASES = `SELECT DISTINCT extract(query, '^CREATE DATABASE (?:IF NOT EXISTS )?([A-Za-z0-9_]+)')
FROM system.query_log
WHERE type = 2 AND query LIKE 'CREATE DATABASE %' FORMAT TSVRaw`;
const KNOWN_DATABASES = new Set(['csp', 'csp_local', 'system', 'default']);

/** The settings every statement on the stack carries from the server's profile (users.xml), not from its sender. */
const PROFILE_SETTINGS = 'SELECT name FROM system.settings WHERE changed FORMAT TSVRaw';

/**
 * When the whole stack suite last started (test/run.ts notes it), or undefined where no run is
 * noted: only what the log holds since is read, so a statement that older code sent is not checked.
 */
export function suiteStarted(): number | undefined {
  try {
    return Number(fs.readFileSync(path.join(ROOT, SUITE_STARTED), 'utf8')) || undefined;
  } catch {
    return undefined;
  }
}

export async function recordedStatements(
  stacks = ['test', 'serial'],
  since = suiteStarted(),
): Promise<{ shapes: Recorded[]; logs: StackLog[] }> {
  const byShape = new Map<string, Recorded>();
  const logs: StackLog[] = [];
  for (const stack of stacks) {
    const url = `http://127.0.0.1:${stackProfile(stack).chHttpPort}/`;
    const log: StackLog = { stack, ownDatabases: 0, statements: 0, cut: [], failed: 0 };
    logs.push(log);
    try {
      await post(url, 'SYSTEM FLUSH LOGS');
      if ((await post(url, 'EXISTS TABLE system.query_log')).trim() !== '1') {
        log.unread =
          'its ClickHouse keeps no query log (started before infra/services.ts turned it on: infra:down, infra:up)';
        continue;
      }
      const cut = (
        await post(url, "SELECT value FROM system.settings WHERE name = 'log_queries_cut_to_length'")
      ).trim();
      const profile = new Set((await post(url, PROFILE_SETTINGS)).split('\n').filter(Boolean));
      const after = `event_time >= toDateTime(${since ?? 0})`;
      const read = READ.replace('getSetting_cut', `'${Number(cut) || QUERY_LOG_CUT}'`).replace(
        'WHERE type = 2',
        `WHERE type = 2 AND ${after}`,
      );
      const rows = (await post(url, read))
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Row);
      const own = (await post(url, OWN_DATABASES)).split('\n').filter((d) => d && !KNOWN_DATABASES.has(d));
      const onOwn = own.length ? new RegExp(`\\b(${own.join('|')})\\.\\w`) : undefined;
      const failed = `SELECT uniq(query) FROM system.query_log WHERE type IN (3, 4) AND ${after}`;
      log.failed = Number((await post(url, failed)).trim());
      for (const r of rows) {
        if (onOwn?.test(r.example)) {
          log.ownDatabases += Number(r.n);
          continue;
        }
        log.statements += Number(r.n);
        if (r.cut === '1') log.cut.push(r.example.slice(0, 200));
        const shape = shapeOf(r.example);
        const seen = byShape.get(shape);
        if (seen) {
          seen.count += Number(r.n);
          continue;
        }
        const settings: Record<string, string> = {};
        r.names.forEach((name, i) => {
          if (!profile.has(name)) settings[name] = r.values[i];
        });
        byShape.set(shape, {
          shape,
          kind: kindOf(r.example),
          example: r.example,
          settings,
          count: Number(r.n),
          agent: r.agent,
          stack,
          first: r.first_at,
        });
      }
    } catch (err) {
      log.unread = `not reachable or not readable: ${(err as Error).message}`;
    }
  }
  return { shapes: [...byShape.values()], logs };
}
