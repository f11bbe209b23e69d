import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from '#tap';
import { ROOT } from '../../infra/stack.js';
import { ingest, workspace } from '../events/support.js';
import { ch, closeDb, startTier, waitFor, plainNode } from '../helpers/stack.js';

/** csp-ingest send: a file streamed through the client, refusals written out, the exit status. */

const CLI = path.join(ROOT, 'sdk', 'dist', 'cli.js');
const DAY = 24 * 3600_000;

function run(args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(...plainNode([CLI, ...args]), { timeout: 120_000 }, (err, _stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }),
    );
  });
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csp-ingest-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

const stored = async (tenant: string, name: string) =>
  Number(
    (
      await ch<{ c: string }>(
        `SELECT count() AS c FROM events WHERE tenant_id = '${tenant}' AND event_name = '${name}'`,
      )
    )[0].c,
  );

t.teardown(closeDb);

t.test('surface A: every line accepted or written to the rejected file with its code and line', async (t) => {
  const { ws, ids } = await workspace(10);
  const tier = await ingest(t);
  await startTier(t, 'processors', { WRITER_BATCH_MS: '50' });
  const lines: string[] = [];
  for (let i = 0; i < 2500; i++)
    lines.push(JSON.stringify({ event_name: 'cli_import', customer_id: ids[i % ids.length], user_id: `u${i}` }));
  lines[10] = '{"event_name": "cli_import", ';
  lines[20] = JSON.stringify({ event_name: 'Not Snake', customer_id: ids[0] });
  lines[30] = JSON.stringify({ event_name: 'cli_import', customer_id: '00000000-0000-4000-8000-000000000000' });
  lines[40] = '';
  const file = path.join(dir, 'a.ndjson');
  fs.writeFileSync(file, `${lines.join('\n')}\n`);
  const rejected = path.join(dir, 'a.rejected.ndjson');

  const r = await run(['send', file, '--url', tier.url, '--api-key', ws.ingestion_key, '--rejected', rejected]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stderr, /accepted 2,496, rejected 3, failed 0/);
  const out = fs
    .readFileSync(rejected, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { line: number; outcome: string; code: string });
  t.same(
    out.map((o) => [o.line, o.outcome, o.code]).sort((a, b) => Number(a[0]) - Number(b[0])),
    [
      [11, 'rejected', 'invalid_json'],
      [21, 'rejected', 'invalid_event_name'],
      [31, 'rejected', 'unknown_customer'],
    ],
  );
  await waitFor(
    'the import in ClickHouse',
    async () => (await stored(ws.tenant_id, 'cli_import')) >= 2496,
    60_000,
    200,
  );
  t.equal(await stored(ws.tenant_id, 'cli_import'), 2496);
});

t.test('surface B backfill: the jobs are followed to their end', async (t) => {
  const { ws, ids } = await workspace(3);
  const tier = await ingest(t);
  const api = await startTier(t, 'core-api');
  await startTier(t, 'processors', { WRITER_BATCH_MS: '50' });
  const old = new Date(Date.now() - 90 * DAY).toISOString();
  const lines = Array.from({ length: 1500 }, (_, i) =>
    JSON.stringify({ customer_id: ids[i % 3], event_name: 'cli_backfill', timestamp: old, external_id: `b-${i}` }),
  );
  const file = path.join(dir, 'b.ndjson');
  fs.writeFileSync(file, lines.join('\n'));
  const r = await run(['send', file, '--url', tier.url, '--token', ws.api_key, '--backfill', '--api-url', api.url]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stderr, /following 2 backfill jobs/);
  t.match(r.stderr, /accepted 1,500, rejected 0, failed 0; .*backfill jobs stored 1,500 events/);
  t.equal(await stored(ws.tenant_id, 'cli_backfill'), 1500, 'stored once the jobs succeeded');
});

t.test('a service that cannot be reached: the events are written out as failed, exit status 1', async (t) => {
  const file = path.join(dir, 'c.ndjson');
  fs.writeFileSync(file, `${JSON.stringify({ event_name: 'x', customer_id: 'c' })}\n`);
  const rejected = path.join(dir, 'c.rejected.ndjson');
  const r = await run([
    'send',
    file,
    '--url',
    'http://127.0.0.1:1',
    '--api-key',
    'k',
    '--max-retries',
    '0',
    '--rejected',
    rejected,
  ]);
  t.equal(r.code, 1);
  t.match(JSON.parse(fs.readFileSync(rejected, 'utf8')), { line: 1, outcome: 'failed', code: 'INGEST_NETWORK' });
  t.equal((await run(['send'])).code, 2, 'bad usage: 2');
});
