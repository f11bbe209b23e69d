import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { installMissing } from '../infra/services.js';
import { sampler, type BenchContext } from './context.js';
import type { LoadResult } from './meter.js';
import type { Usage } from './proc-stats.js';
import { type GcDuring, type Tier, say, watchGc } from './tiers.js';
import { Workload } from './workload.js';

/**
 * Surface A's full load from wrk (Debian's package), a load generator written in C that shares no
 * code with ours: the same bodies as bench/load.ts (the workload's, one X-API-Key per workspace),
 * the same connections, closed loop. Its figures stand beside our generator's so that what ingest
 * costs per event is not an artifact of how the load is made. A Lua script cycles through the
 * prebuilt requests and counts the `accepted` of every 202.
 */

const SCRIPT = `
local requests = {}
local threads = {}
-- Globals: done() reads each thread's through thread:get.
accepted, failed = 0, 0

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  local f = assert(io.open(args[1], "rb"))
  local data = f:read("*a")
  f:close()
  local at = 1
  while at <= #data do
    local nl = data:find("\\n", at, true)
    local key_len, body_len = data:sub(at, nl - 1):match("(%d+) (%d+)")
    key_len, body_len = tonumber(key_len), tonumber(body_len)
    local key = data:sub(nl + 1, nl + key_len)
    local body = data:sub(nl + 1 + key_len, nl + key_len + body_len)
    at = nl + key_len + body_len + 1
    table.insert(requests, wrk.format("POST", "/v1/ingest/events",
      { ["Content-Type"] = "application/json", ["X-API-Key"] = key }, body))
  end
  -- Each thread starts at another body, as our generator's connections do.
  counter = (tonumber(args[2]) or 0) % #requests
end

function request()
  counter = counter % #requests + 1
  return requests[counter]
end

function response(status, headers, body)
  if status == 202 then
    accepted = accepted + tonumber(body:match('"accepted":(%d+)') or 0)
  else
    failed = failed + 1
  end
end

function done(summary, latency, requests_)
  local a, f = 0, 0
  for _, t in ipairs(threads) do
    a = a + t:get("accepted")
    f = f + t:get("failed")
  end
  io.write(string.format('WRK_RESULT {"requests":%d,"duration_us":%d,"accepted":%d,"failed":%d,' ..
    '"errors":%d,"mean_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d,"max_us":%d}\\n',
    summary.requests, summary.duration, a, f,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max))
end
`;

interface WrkSummary {
  requests: number;
  duration_us: number;
  accepted: number;
  failed: number;
  errors: number;
  mean_us: number;
  p50_us: number;
  p90_us: number;
  p99_us: number;
  p999_us: number;
  max_us: number;
}

/** wrk against the ingest tier for `durationS`, with CPU of every process sampled meanwhile. */
export async function wrkLoad(
  ctx: BenchContext,
  ingest: Tier,
  durationS: number,
): Promise<LoadResult & { usage: Usage; gc?: GcDuring }> {
  installMissing([{ pkg: 'wrk', bin: 'wrk' }], say);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-wrk-'));
  try {
    const bodies = new Workload(ctx.tenants, ctx.workload).bodies();
    const records = bodies.map((b) => {
      const key = Buffer.from(ctx.tenants[b.tenant].key);
      const body = Buffer.from(b.json);
      return Buffer.concat([Buffer.from(`${key.length} ${body.length}\n`), key, body]);
    });
    const requestBytes = records.reduce((a, r) => a + r.length, 0) / records.length;
    const data = path.join(dir, 'requests.bin');
    fs.writeFileSync(data, Buffer.concat(records));
    const script = path.join(dir, 'bodies.lua');
    fs.writeFileSync(script, SCRIPT);
    const threads = Math.min(2, os.availableParallelism());
    let pid = 0;
    const gc = await watchGc(ingest);
    const s = sampler(ctx, { ingest: () => [ingest.pid], load: () => (pid ? [pid] : []) });
    let out = '';
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(
        'wrk',
        [
          `-t${threads}`,
          `-c${ctx.opts.connections}`,
          `-d${durationS}s`,
          '--timeout',
          '10s',
          '-s',
          script,
          `http://${new URL(ingest.url).host}`,
          '--',
          data,
          String(Math.floor(bodies.length / 2)),
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      pid = child.pid ?? 0;
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.on('error', reject);
      child.on('exit', resolve);
    });
    const usage = s.stop();
    const gcDuring = await gc();
    const line = /^WRK_RESULT (.*)$/m.exec(out)?.[1];
    if (code !== 0 || !line) throw new Error(`wrk exited with ${code}:\n${out.slice(-2000)}`);
    const r = JSON.parse(line) as WrkSummary;
    const seconds = r.duration_us / 1e6;
    const cpuS = ((usage.groups.load?.cpuPct ?? 0) / 100) * seconds;
    return {
      label: 'ingest-full-wrk',
      durationS: seconds,
      requests: r.requests,
      accepted: r.accepted,
      rejectedEvents: 0,
      errors: r.failed + r.errors,
      statusCounts: { '202': r.requests - r.failed },
      eventsPerSec: Math.round(r.accepted / seconds),
      requestsPerSec: Math.round(r.requests / seconds),
      bytesPerSec: Math.round((requestBytes * r.requests) / seconds),
      latency: {
        count: r.requests,
        meanMs: r.mean_us / 1000,
        p50Ms: r.p50_us / 1000,
        p90Ms: r.p90_us / 1000,
        p99Ms: r.p99_us / 1000,
        p999Ms: r.p999_us / 1000,
        maxMs: r.max_us / 1000,
      },
      perSecond: [],
      perSecondP99Ms: [],
      timeline: [],
      cpuS,
      usage,
      gc: gcDuring,
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
