import { METER_BODIES, METER_INTERVAL_MS, probePass, usageBodies } from './host-probe.js';

// bench/host-probe.ts HostMeter's process: a reading of the host's speed every METER_INTERVAL_MS
// to the benchmark, until it disconnects (or dies: the IPC channel closes with it).
const bodies = usageBodies().slice(0, METER_BODIES);
for (let i = 0; i < 5; i++) probePass(bodies);
// The best of three passes: the first after a pause runs on cold caches (on a quiet machine it
// read twice the probe's figure), and the meter should read the cores, not its own wake-up.
const timer = setInterval(
  () => process.send?.(Math.min(probePass(bodies), probePass(bodies), probePass(bodies))),
  METER_INTERVAL_MS,
);
process.on('disconnect', () => {
  clearInterval(timer);
  process.exit(0);
});
