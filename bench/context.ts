import type { JetStreamManager, NatsConnection } from 'nats';
import path from 'node:path';
import type { StackProfile, StackUrls } from '../infra/stack.js';
import { ProcSampler, readPidFile } from './proc-stats.js';
import type { ClickHouse } from './tiers.js';
import type { BenchTenant, WorkloadOptions } from './workload.js';

export interface BenchOptions {
  profile: 'dev' | 'test';
  /** --profile-cpu: V8 CPU profiles of every ingest process the run starts. */
  profileCpu: boolean;
  /** --empty-event-store: every csp table in ClickHouse emptied before the run. */
  emptyEventStore: boolean;
  /** --load-client: surface A's full load again through the producer client (sdk/), uncompressed like the raw load. */
  loadClient: boolean;
  /** --wrk: surface A's full load again from wrk, a load generator in C (bench/wrk.ts), beside our own. */
  wrk: boolean;
  only: Set<
    | 'parse'
    | 'ceilings'
    | 'ingest'
    | 'events-b'
    | 'e2e'
    | 'outage'
    | 'health'
    | 'metrics'
    | 'playbooks'
    | 'analytics'
    | 'webhooks'
  >;
  /** Seconds per scenario (ceilings, ingest at full load, ingest at half load). */
  durationS: number;
  /** --raw-beside: seconds of each raw publish of the bodies right before and after surface A's full load (0: none). */
  rawBesideS: number;
  /** Seconds of the sustained end-to-end scenario. */
  e2eDurationS: number;
  /** Offered load of the sustained end-to-end scenario, events/s. */
  e2eRate: number;
  /**
   * Offered load of surface A's half-load run, events/s; 0: half of the full-load run's accepted
   * rate. A fixed rate lets runs of two builds be compared on the same load.
   */
  halfRate: number;
  /** Events queued while processors are down, then drained to measure their landing rate. */
  backlogEvents: number;
  /** Events published into EVENTS while ClickHouse is down, in messages of 100 rows. */
  outageEvents: number;
  connections: number;
  ingestProcesses: number;
  publishInflight: number;
  chRows: number;
  /** Longest wait for other work on the machine to stop before a scenario starts. */
  quietWaitS: number;
  tenants: number;
  customers: number;
  products: number;
  bodiesPerTenant: number;
  /** Customers of the health scenario's workspace. */
  healthCustomers: number;
  /** Usage events generated for it (30 days). */
  healthEvents: number;
  /** Concurrent callers of POST …/health/recalculate, and requests each. */
  healthCallers: number;
  healthRequests: number;
  /** Customers and events of the metrics scenario's workspace, and its number of metrics. */
  metricsCustomers: number;
  metricsEvents: number;
  metricsCount: number;
  /** POST /v1/metrics/test requests in all, and concurrent callers. */
  metricsTestRequests: number;
  metricsTestCallers: number;
  /** Customers, generated events and enabled playbooks of the playbooks scenario, and the trigger types used. */
  playbooksCustomers: number;
  playbooksEvents: number;
  playbooksCount: number;
  playbooksKinds: string[];
  /** Customers of the analytics scenario's workspace; requests per endpoint and concurrent callers. */
  analyticsCustomers: number;
  analyticsRequests: number;
  analyticsCallers: number;
}

export interface BenchContext {
  opts: BenchOptions;
  profile: StackProfile;
  urls: StackUrls;
  tenants: BenchTenant[];
  workload: WorkloadOptions;
  nc: NatsConnection;
  jsm: JetStreamManager;
  ch: ClickHouse;
}

/** The stack's servers, so that every figure says how busy each of them was. */
export function serverGroups(p: StackProfile): Record<string, () => number[]> {
  const pid = (file: string) => () => {
    const n = readPidFile(path.join(p.dataDir, file));
    return n === undefined ? [] : [n];
  };
  return { 'nats-server': pid('nats.pid'), clickhouse: pid('clickhouse.pid'), postgres: pid('pg/postmaster.pid') };
}

export function sampler(ctx: BenchContext, extra: Record<string, () => number[]>, alone: string[] = []): ProcSampler {
  return new ProcSampler({ ...extra, ...serverGroups(ctx.profile) }, 500, alone, true).start();
}
