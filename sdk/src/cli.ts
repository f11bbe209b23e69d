#!/usr/bin/env node
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { type BackfillJob, IngestClient, type IngestClientOptions } from './client.js';
import type { IngestClientError } from './errors.js';

/**
 * csp-ingest send <file.ndjson|-> --url URL (--api-key KEY | --token TOKEN) [options]
 *
 * Streams newline-delimited JSON events through IngestClient: reading waits while the client's
 * queue is full, so nothing is dropped and memory stays bounded whatever the file's size. Events
 * refused one by one and events of batches given up go to the rejected file with their codes and
 * line numbers; the exit status is 1 when any event failed (or a backfill job did), 2 on bad usage.
 */

const USAGE = `usage: csp-ingest send <file.ndjson|-> --url URL (--api-key KEY | --token TOKEN) [options]

  --surface a|b        a: POST /v1/ingest/events with --api-key; b: POST /v1/events with --token
                       (default: a with --api-key, b with --token)
  --backfill           surface b: POST /v1/events/backfill, then follow each job to its end
  --api-url URL        core API serving GET /v1/jobs/{id} for --backfill (default: --url)
  --rejected FILE      where rejected and failed events go (default: <file>.rejected.ndjson,
                       csp-ingest.rejected.ndjson for stdin); written only if there are any
  --concurrency N      requests in flight (default 4)
  --batch-events N     events per request (default: 100 on surface a, 1000 on b)
  --max-retries N      retries per batch (default 10)
  --timeout-ms N       deadline of one request (default 30000)
  --no-gzip            send bodies uncompressed
  --quiet              no progress line`;

class UsageError extends Error {}

interface Outcome {
  line: number;
  outcome: 'rejected' | 'failed';
  code: string;
  message: string;
  status?: number;
  outcome_unknown?: boolean;
  idempotency_key?: string;
  event: unknown;
}

function options(argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      'api-key': { type: 'string' },
      token: { type: 'string' },
      surface: { type: 'string' },
      backfill: { type: 'boolean' },
      'api-url': { type: 'string' },
      rejected: { type: 'string' },
      concurrency: { type: 'string' },
      'batch-events': { type: 'string' },
      'max-retries': { type: 'string' },
      'timeout-ms': { type: 'string' },
      'no-gzip': { type: 'boolean' },
      quiet: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return undefined;
  const [command, file, ...extra] = positionals;
  if (command !== 'send' || file === undefined || extra.length) throw new UsageError('expected: send <file|->');
  if (!values.url) throw new UsageError('--url is required');
  const surface = values.surface ?? (values.token !== undefined ? 'b' : 'a');
  if (surface !== 'a' && surface !== 'b') throw new UsageError('--surface is a or b');
  if (surface === 'a' && !values['api-key']) throw new UsageError('surface a needs --api-key');
  if (surface === 'b' && !values.token) throw new UsageError('surface b needs --token');
  if (values.backfill && surface !== 'b') throw new UsageError('--backfill needs surface b (--token)');
  const num = (name: 'concurrency' | 'batch-events' | 'max-retries' | 'timeout-ms') => {
    const v = values[name];
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new UsageError(`--${name} must be a whole number, got "${v}"`);
    return n;
  };
  const common = {
    url: values.url,
    concurrency: num('concurrency'),
    maxBatchEvents: num('batch-events'),
    maxRetries: num('max-retries'),
    timeoutMs: num('timeout-ms'),
    gzip: !values['no-gzip'],
    // Reading waits for room instead: nothing is dropped.
    maxQueueEvents: 50_000,
    closeTimeoutMs: Number.POSITIVE_INFINITY,
  };
  const client: IngestClientOptions =
    surface === 'a'
      ? { ...common, surface, apiKey: values['api-key']! }
      : { ...common, surface, token: values.token!, backfill: values.backfill === true };
  const rejected =
    values.rejected ?? (file === '-' ? 'csp-ingest.rejected.ndjson' : `${path.basename(file)}.rejected.ndjson`);
  return {
    file,
    client,
    rejected,
    apiUrl: values['api-url'] ?? values.url,
    token: values.token,
    backfill: values.backfill === true,
    progress: !values.quiet && process.stderr.isTTY === true,
  };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

function clock(s: number): string {
  if (!Number.isFinite(s)) return '?';
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = Math.floor(s % 60);
  return `${h ? `${h}:${String(m).padStart(2, '0')}` : m}:${String(sec).padStart(2, '0')}`;
}

/** Lines of a byte stream, with the count of bytes read; the stream is pulled, so a slow consumer slows the reading. */
async function* lines(input: NodeJS.ReadableStream, read: { bytes: number }): AsyncGenerator<string> {
  let tail = '';
  const decoder = new TextDecoder('utf-8');
  for await (const chunk of input as AsyncIterable<Buffer>) {
    read.bytes += chunk.length;
    const text = tail + decoder.decode(chunk, { stream: true });
    const parts = text.split('\n');
    tail = parts.pop()!;
    for (const p of parts) yield p;
  }
  tail += decoder.decode();
  if (tail) yield tail;
}

/** Polls each backfill job (GET /v1/jobs/{id} on the core API) until it succeeded or failed. */
async function followJobs(
  jobs: BackfillJob[],
  apiUrl: string,
  token: string,
  say: (s: string) => void,
): Promise<{ failedJobs: BackfillJob[]; stored: number }> {
  const failedJobs: BackfillJob[] = [];
  let stored = 0;
  for (const [i, job] of jobs.entries()) {
    for (let wait = 250; ; wait = Math.min(2000, wait * 2)) {
      let body: { status?: string; counts?: Record<string, number>; error?: string | null } | undefined;
      try {
        const res = await fetch(new URL(job.statusUrl, apiUrl), { headers: { authorization: `Bearer ${token}` } });
        if (res.ok) body = (await res.json()) as typeof body;
        else if (res.status !== 429 && res.status < 500) {
          say(`job ${job.id}: GET ${job.statusUrl} answered ${res.status}`);
          failedJobs.push(job);
          break;
        }
      } catch {
        // The core API restarting: poll again.
      }
      if (body?.status === 'succeeded') {
        stored += body.counts?.stored ?? 0;
        break;
      }
      if (body?.status === 'failed') {
        say(`job ${job.id} failed: ${body.error ?? 'no reason given'}`);
        failedJobs.push(job);
        break;
      }
      await new Promise((r) => setTimeout(r, wait));
    }
    if (jobs.length > 1) say(`jobs: ${i + 1}/${jobs.length} finished`);
  }
  return { failedJobs, stored };
}

async function send(o: NonNullable<ReturnType<typeof options>>): Promise<number> {
  const say = (s: string) => process.stderr.write(`${s}\n`);
  const client = new IngestClient<Record<string, unknown>>(o.client);
  const lineOf = new WeakMap<object, number>();
  let out: fs.WriteStream | undefined;
  let written = 0;
  const record = (r: Outcome) => {
    out ??= fs.createWriteStream(o.rejected);
    out.write(`${JSON.stringify(r)}\n`);
    written++;
  };
  client.on('rejected', (event, p) =>
    record({ line: lineOf.get(event) ?? 0, outcome: 'rejected', code: p.code, message: p.message, event }),
  );
  client.on('failed', (events, err: IngestClientError) => {
    for (const event of events)
      record({
        line: lineOf.get(event) ?? 0,
        outcome: 'failed',
        code: err.code,
        message: err.message,
        status: (err as { status?: number }).status,
        outcome_unknown: err.outcomeUnknown,
        idempotency_key: err.idempotencyKey,
        event,
      });
  });
  const jobs: BackfillJob[] = [];
  client.on('job', (j) => jobs.push(j));

  const input = o.file === '-' ? process.stdin : fs.createReadStream(o.file);
  const total = o.file === '-' ? undefined : fs.statSync(o.file).size;
  const read = { bytes: 0 };
  let lineNo = 0;
  let localRejected = 0;
  const t0 = Date.now();
  let last = { at: t0, done: 0 };
  let rate = 0;
  const progress = o.progress
    ? setInterval(() => {
        const s = client.stats();
        const now = Date.now();
        const done = s.accepted + s.rejected + s.failed;
        rate =
          rate === 0
            ? ((done - last.done) * 1000) / (now - last.at)
            : rate * 0.7 + ((done - last.done) * 300) / (now - last.at);
        last = { at: now, done };
        const eta =
          total && read.bytes > 0
            ? ((now - t0) / 1000) * ((total - read.bytes) / read.bytes) + (s.queued + s.inFlight) / Math.max(rate, 1)
            : Number.NaN;
        process.stderr.write(
          `\r${fmt(rate)} events/s  read ${fmt(lineNo)}  accepted ${fmt(s.accepted)}  ` +
            `rejected ${fmt(s.rejected + localRejected)}  failed ${fmt(s.failed)}  retries ${fmt(s.retries)}  ` +
            `ETA ${total ? clock(eta) : '?'}   `,
        );
      }, 500)
    : undefined;

  let stop = false;
  process.once('SIGINT', () => {
    stop = true;
    say('\ninterrupted: sending what was read, then stopping (Ctrl-C again to quit now)');
    process.once('SIGINT', () => process.exit(130));
  });
  for await (const line of lines(input, read)) {
    lineNo++;
    if (stop) break;
    const text = line.trim();
    if (text === '') continue;
    let event: unknown;
    try {
      event = JSON.parse(text);
    } catch (err) {
      localRejected++;
      record({ line: lineNo, outcome: 'rejected', code: 'invalid_json', message: (err as Error).message, event: text });
      continue;
    }
    if (typeof event !== 'object' || event === null || Array.isArray(event)) {
      localRejected++;
      record({
        line: lineNo,
        outcome: 'rejected',
        code: 'invalid_event',
        message: 'each line must be a JSON object',
        event,
      });
      continue;
    }
    lineOf.set(event, lineNo);
    if (!client.hasCapacity()) await client.waitForCapacity();
    client.track(event as Record<string, unknown>);
  }
  if (stop && 'destroy' in input) (input as fs.ReadStream).destroy();
  await client.close();
  if (progress) {
    clearInterval(progress);
    process.stderr.write('\n');
  }
  let failedJobs: BackfillJob[] = [];
  let stored: number | undefined;
  if (o.backfill && jobs.length) {
    say(`following ${jobs.length} backfill job${jobs.length > 1 ? 's' : ''}`);
    ({ failedJobs, stored } = await followJobs(jobs, o.apiUrl, o.token!, say));
  }
  if (out) await new Promise<void>((r) => out!.end(r));
  const s = client.stats();
  const secs = (Date.now() - t0) / 1000;
  const failedInJobs = failedJobs.reduce((a, j) => a + j.events, 0);
  say(
    `${fmt(lineNo)} lines in ${secs.toFixed(1)} s ` +
      `(${fmt((s.accepted + s.rejected + s.failed) / Math.max(secs, 0.001))} events/s): ` +
      `accepted ${fmt(s.accepted - failedInJobs)}, rejected ${fmt(s.rejected + localRejected)}, ` +
      `failed ${fmt(s.failed + failedInJobs)}` +
      `${s.dropped ? `, dropped ${fmt(s.dropped)}` : ''}; ${fmt(s.retries)} retries` +
      (stored !== undefined ? `; backfill jobs stored ${fmt(stored)} events` : '') +
      (written ? `\n${fmt(written)} rejected or failed events written to ${o.rejected}` : ''),
  );
  return s.failed + failedInJobs + s.dropped > 0 || failedJobs.length > 0 || stop ? 1 : 0;
}

async function main(): Promise<number> {
  let o: ReturnType<typeof options>;
  try {
    o = options(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  if (o === undefined) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (o.file !== '-' && !fs.existsSync(o.file)) {
    process.stderr.write(`no such file: ${o.file}\n`);
    return 2;
  }
  return send(o);
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`csp-ingest: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
