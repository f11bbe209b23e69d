import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Workload } from './workload.js';

/** The customer of the probe's and the parse scenario's bodies. */
export const PROBE_CUSTOMER = '0190a000-0000-7000-8000-000000000003';

/** Surface A's benchmark bodies: 100 of 100 events. */
export function usageBodies(): Buffer[] {
  const workload = new Workload(
    [{ tenantId: PROBE_CUSTOMER, key: '', customers: [[PROBE_CUSTOMER, 'ext-1']], products: [] }],
    { bodiesPerTenant: 100, eventsPerBody: 100, seed: 1, customerIdShare: 0.2, now: Date.now() },
  );
  return workload.bodies().map((x) => Buffer.from(x.json));
}

/**
 * What the host probe runs: V8's own JSON reader, not ours. The probe tells a slower host from
 * slower code only while its work stays the same from run to run; it was the byte scanner and the
 * rows (our code), so a change to them moved the probe as much as the load and hid what it did.
 * Stored beside each figure (`probeKind`): probes of different kinds are not compared.
 */
export const HOST_PROBE_KIND = 'JSON.parse of surface A bodies';

/** µs of this process's CPU per event to decode and parse `bodies` once. */
export function probePass(bodies: readonly Buffer[]): number {
  const start = process.cpuUsage();
  let events = 0;
  for (const b of bodies) events += (JSON.parse(b.toString('utf8')) as { events: unknown[] }).events.length;
  const used = process.cpuUsage(start);
  return (used.user + used.system) / events;
}

/**
 * The host's speed: µs of CPU per event of a fixed piece of work as heavy on memory as the ingest
 * tier's (decoding and parsing surface A's bodies, 57 KB each, in this process), the best of 5
 * passes, taken on the quiet machine just before a load run. This VM's speed moves by tens of
 * percent within minutes; beside a figure, the probe tells a slower host from slower code.
 */
export function hostProbe(): number {
  const bodies = usageBodies();
  // The first pass warms the code up.
  probePass(bodies);
  let best = Number.POSITIVE_INFINITY;
  for (let pass = 0; pass < 5; pass++) best = Math.min(best, probePass(bodies));
  return best;
}

/** How often the meter reads the host's speed during a load, and on how much of the probe's work. */
export const METER_INTERVAL_MS = 1000;
export const METER_BODIES = 10;

/**
 * The host's speed during a load, where the probe before it cannot look: a process of its own
 * (bench/host-meter.ts) runs a tenth of the probe's work once a second and reports its CPU per
 * event. CPU time, not wall time: on two saturated cores the meter waits for a turn as long
 * as the load keeps them, and that wait is the load's, not the host's. What stays is how fast
 * the cores run the same instructions: on this VM the same build's surface B took 5.7 and 8.3 µs
 * of ingest CPU per event minutes apart, every function of its profile slower by the same factor,
 * and the probe before the load read 2.80 and 1.82 µs. It costs about 0.5 % of a core.
 */
export class HostMeter {
  private readonly child: ChildProcess;
  private readonly readings: number[] = [];

  constructor() {
    this.child = fork(fileURLToPath(new URL('./host-meter.js', import.meta.url)), [], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    this.child.on('message', (us) => {
      if (typeof us === 'number') this.readings.push(us);
    });
    // A meter that cannot start leaves the figure out; the load goes on.
    this.child.on('error', () => {});
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /**
   * The mean reading so far (µs of CPU per event), with its 10th and 90th percentiles; undefined
   * before three readings. The meter stops. The mean, not the median: ingest's CPU per event is an
   * average over the whole window, and where the host changes speed half-way, so does it.
   */
  stop(): HostReading | undefined {
    this.child.kill();
    const n = this.readings.length;
    if (n < 3) return undefined;
    const sorted = [...this.readings].sort((a, b) => a - b);
    const at = (q: number) => round3(sorted[Math.min(n - 1, Math.floor(q * n))]);
    return { us: round3(this.readings.reduce((a, b) => a + b, 0) / n), p10: at(0.1), p90: at(0.9) };
  }
}

/** The host meter over a window: mean µs of CPU per event of the probe's work, and its spread. */
export interface HostReading {
  us: number;
  p10: number;
  p90: number;
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;
