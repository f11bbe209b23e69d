import os from 'node:os';
import fs from 'node:fs';
import { ESTABLISHED, LISTEN, socketInodes, tcpSockets } from '../lib/tcp-sockets.js';
import { HostMeter } from './host-probe.js';

const CLK_TCK = 100;
const PAGE = 4096;

interface Stat {
  comm: string;
  ppid: number;
  ticks: number;
  /** Of those, the ticks spent in the kernel on the process's behalf (system calls, page faults). */
  sysTicks: number;
  rss: number;
}

function readStat(pid: number): Stat | undefined {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return {
      comm: s.slice(s.indexOf('(') + 1, s.lastIndexOf(')')),
      ppid: Number(f[1]),
      ticks: Number(f[11]) + Number(f[12]),
      sysTicks: Number(f[12]),
      rss: Number(f[21]) * PAGE,
    };
  } catch {
    return undefined;
  }
}

function snapshot(): Map<number, Stat> {
  const all = new Map<number, Stat>();
  for (const name of fs.readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    const st = readStat(pid);
    if (st) all.set(pid, st);
  }
  return all;
}

function tree(all: Map<number, Stat>, roots: number[]): number[] {
  const out = roots.filter((p) => all.has(p));
  for (let i = 0; i < out.length; i++)
    for (const [pid, st] of all) if (st.ppid === out[i] && !out.includes(pid)) out.push(pid);
  return out;
}

function machineTicks(): { busy: number; total: number; iowait: number; steal: number } {
  const cpu = fs.readFileSync('/proc/stat', 'latin1').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = cpu.reduce((a, b) => a + b, 0);
  return { busy: total - cpu[3] - (cpu[4] ?? 0), total, iowait: cpu[4] ?? 0, steal: cpu[7] ?? 0 };
}

/**
 * The kernel's dirty page cache (written, not yet on the disk, in pages) and its background limit,
 * where it starts writing them back to the disk while writers go on.
 */
function dirtyPages(): { dirty: number; background: number } {
  const v = fs.readFileSync('/proc/vmstat', 'latin1');
  const get = (key: string) => Number(new RegExp(`^${key} (\\d+)$`, 'm').exec(v)?.[1] ?? 0);
  return { dirty: get('nr_dirty') + get('nr_writeback'), background: get('nr_dirty_background_threshold') };
}

export interface DirtyUsage {
  /** The most data written and not yet on the disk, machine-wide. */
  maxMb: number;
  /** Seconds of the window with that at the kernel's background limit (it was writing back to the disk). */
  writebackS: number;
}

export interface GroupUsage {
  /** Average CPU over the sampled period, in % of one core (200 % = both cores of this machine). */
  cpuPct: number;
  /**
   * The part of cpuPct spent in the kernel: for nats-server most of it is the loopback socket and
   * writing the stream's files into the page cache, which moves with the host's memory and disk.
   */
  sysPct?: number;
  /** Highest sum of RSS over the tree (supervisor and workers together). */
  maxRssMb: number;
  /** Highest RSS of any single process of the tree. */
  maxProcessRssMb: number;
}

export interface Usage {
  seconds: number;
  /** Machine-wide busy CPU, % of all cores. */
  machineBusyPct: number;
  /** Machine-wide time idle while a disk read or write was outstanding, % of all cores. */
  iowaitPct?: number;
  /** Time the hypervisor ran something else on this virtual machine's cores, % of all cores (counted as busy). */
  stealPct?: number;
  groups: Record<string, GroupUsage>;
  /** CPU of everything outside the groups (other work on the machine, kernel threads), % of one core. */
  otherCpuPct: number;
  /** The busiest of those, e.g. "kworker/u4:2 12 %". */
  otherTop: string[];
  /**
   * The page cache's writes waiting for the disk. A run that writes faster than the disk takes
   * reaches the kernel's background limit and from then on shares the disk with its writeback: a
   * raw publish of the bodies got there after about 5 s on a 2-core, 24 GB machine (2.2 GB limit)
   * with a 300 MB/s disk, and fell from 600k-1M to 250k-450k events/s a few seconds later.
   */
  dirty?: DirtyUsage;
  /**
   * The host's speed during the window (bench/host-probe.ts HostMeter): the mean µs of CPU per
   * event of the probe's work, read once a second beside the load (absent where not measured).
   */
  hostUs?: number;
  /** The 10th and 90th percentiles of those readings: a host that changed speed mid-window. */
  hostRangeUs?: [number, number];
}

/**
 * Samples CPU and resident memory of process trees (a process and all its descendants, e.g. the
 * ingest supervisor and its workers) from /proc, so every figure comes with what was busy.
 */
export class ProcSampler {
  private timer: NodeJS.Timeout | undefined;
  /** `${group}:${pid}` → [ticks, kernel ticks] since the pid was first seen. */
  private last = new Map<string, [number, number]>();
  private seen = new Map<number, [number, number]>();
  private maxRss = new Map<string, number>();
  private maxOne = new Map<string, number>();
  private t0 = 0;
  private t1 = 0;
  private m0 = machineTicks();
  private m1 = this.m0;
  private dirty: DirtyUsage = { maxMb: 0, writebackS: 0 };
  private meter: HostMeter | undefined;

  /** Called after every sample with each group's summed RSS in bytes, for figures over time. */
  onSample?: (rss: Record<string, number>) => void;

  /**
   * `alone`: groups that are just their listed processes, without descendants (the benchmark's
   * own process, whose children are the tiers it measures). `hostMeter`: read the host's speed
   * during the window too (`Usage.hostUs`).
   */
  constructor(
    private readonly groups: Record<string, () => number[]>,
    private readonly intervalMs = 500,
    private readonly alone: string[] = [],
    private readonly hostMeter = false,
  ) {}

  private all0 = new Map<number, Stat>();
  private members = new Set<number>();

  start(): this {
    this.t0 = performance.now();
    this.m0 = machineTicks();
    this.all0 = snapshot();
    if (this.hostMeter) {
      this.meter = new HostMeter();
      // Its half a percent of a core is the measurement's, not work outside the benchmark.
      if (this.meter.pid !== undefined) this.members.add(this.meter.pid);
    }
    this.sample(true);
    this.timer = setInterval(() => this.sample(false), this.intervalMs);
    return this;
  }

  private sample(initial: boolean): Map<number, Stat> {
    const all = snapshot();
    const now: Record<string, number> = {};
    for (const [name, roots] of Object.entries(this.groups)) {
      let rss = 0;
      for (const pid of this.alone.includes(name) ? roots().filter((p) => all.has(p)) : tree(all, roots())) {
        const st = all.get(pid)!;
        this.members.add(pid);
        rss += st.rss;
        if (st.rss > (this.maxOne.get(name) ?? 0)) this.maxOne.set(name, st.rss);
        // Ticks per pid, so that a worker that appears later counts only from when it was seen.
        if (initial || !this.seen.has(pid)) this.seen.set(pid, [st.ticks, st.sysTicks]);
        const [ticks0, sys0] = this.seen.get(pid)!;
        this.last.set(`${name}:${pid}`, [st.ticks - ticks0, st.sysTicks - sys0]);
      }
      this.maxRss.set(name, Math.max(this.maxRss.get(name) ?? 0, rss));
      now[name] = rss;
    }
    this.onSample?.(now);
    const d = dirtyPages();
    this.dirty.maxMb = Math.max(this.dirty.maxMb, mb(d.dirty * PAGE));
    // Within 5 % of the limit: the writeback holds it there.
    if (!initial && d.background > 0 && d.dirty >= 0.95 * d.background) this.dirty.writebackS += this.intervalMs / 1000;
    this.t1 = performance.now();
    this.m1 = machineTicks();
    return all;
  }

  stop(): Usage {
    if (this.timer) clearInterval(this.timer);
    const all = this.sample(false);
    const host = this.meter?.stop();
    const seconds = (this.t1 - this.t0) / 1000;
    const others: Array<[string, number]> = [];
    let other = 0;
    for (const [pid, st] of all) {
      if (this.members.has(pid)) continue;
      const d = st.ticks - (this.all0.get(pid)?.ticks ?? 0);
      if (d <= 0) continue;
      other += d;
      others.push([`${st.comm}[${pid}]`, d]);
    }
    const pctOf = (ticks: number) => (seconds > 0 ? Math.round((ticks / CLK_TCK / seconds) * 100) : 0);
    others.sort((a, b) => b[1] - a[1]);
    const groups: Record<string, GroupUsage> = {};
    for (const name of Object.keys(this.groups)) {
      let ticks = 0;
      let sys = 0;
      for (const [k, [t, kt]] of this.last)
        if (k.startsWith(`${name}:`)) {
          ticks += t;
          sys += kt;
        }
      groups[name] = {
        cpuPct: pctOf(ticks),
        sysPct: pctOf(sys),
        maxRssMb: mb(this.maxRss.get(name)),
        maxProcessRssMb: mb(this.maxOne.get(name)),
      };
    }
    const dt = this.m1.total - this.m0.total;
    return {
      seconds: Math.round(seconds * 10) / 10,
      machineBusyPct: dt > 0 ? Math.round(((this.m1.busy - this.m0.busy) / dt) * 100) : 0,
      iowaitPct: dt > 0 ? Math.round(((this.m1.iowait - this.m0.iowait) / dt) * 100) : 0,
      stealPct: dt > 0 ? Math.round(((this.m1.steal - this.m0.steal) / dt) * 100) : 0,
      groups,
      // Processes that started and ended inside the window are not in either snapshot: count the
      // machine's busy time we cannot attribute to our groups as outside work too.
      otherCpuPct: Math.max(
        pctOf(other),
        Math.round(
          (dt > 0 ? ((this.m1.busy - this.m0.busy) / dt) * 100 * os.availableParallelism() : 0) -
            Object.values(groups).reduce((a, g) => a + g.cpuPct, 0),
        ),
      ),
      otherTop: others
        .slice(0, 3)
        .filter(([, d]) => pctOf(d) >= 2)
        .map(([name, d]) => `${name} ${pctOf(d)} %`),
      dirty: { ...this.dirty },
      ...(host && { hostUs: host.us, hostRangeUs: [host.p10, host.p90] }),
    };
  }
}

/**
 * How many established TCP connections to `port` each process under `root` holds, busiest first:
 * the kernel spreads a client's connections over the processes listening on a port
 * (SO_REUSEPORT) by a hash of each connection, so every run splits them differently.
 */
export function connectionsPerProcess(root: number, port: number): number[] {
  return socketsPerProcess(root, port, ESTABLISHED);
}

/** How many processes of the tree under `root` listen on `port` (each worker of a tier its own socket). */
export function processesListening(root: number, port: number): number {
  return socketsPerProcess(root, port, LISTEN).length;
}

/** Sockets on local `port` in `state` held by each process of the tree under `root` (those holding none left out), most first. */
function socketsPerProcess(root: number, port: number, state: string): number[] {
  const wanted = new Set(
    tcpSockets()
      .filter((s) => s.state === state && s.localPort === port)
      .map((s) => s.inode),
  );
  const counts: number[] = [];
  for (const pid of tree(snapshot(), [root])) {
    let n = 0;
    for (const inode of socketInodes(pid) ?? []) if (wanted.has(inode)) n++;
    if (n > 0) counts.push(n);
  }
  return counts.sort((a, b) => b - a);
}

/**
 * Takes `connectionsPerProcess` once, `ms` from now (half-way through a load): the returned
 * function stops the timer and gives what was taken (empty if the load ended first).
 */
export function connectionsAfter(root: number, port: number, ms: number): () => number[] {
  let split: number[] = [];
  const look = setTimeout(() => (split = connectionsPerProcess(root, port)), ms);
  return () => {
    clearTimeout(look);
    return split;
  };
}

export { readPid as readPidFile } from '../infra/proc.js';

const mb = (bytes = 0) => Math.round(bytes / 1024 / 1024);

/**
 * Waits until the machine has been nearly idle for three seconds in a row (other work on a shared
 * box would be measured as ours), or gives up after maxWaitS and says so.
 */
export async function waitQuiet(say: (line: string) => void, maxWaitS: number, busyPct = 20): Promise<number> {
  const deadline = Date.now() + maxWaitS * 1000;
  let quiet = 0;
  let last = machineTicks();
  let busy = 0;
  let announced = false;
  while (quiet < 3) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = machineTicks();
    busy = Math.round(((now.busy - last.busy) / Math.max(1, now.total - last.total)) * 100);
    last = now;
    quiet = busy < busyPct ? quiet + 1 : 0;
    if (quiet === 0 && !announced) {
      say(`machine is ${busy} % busy with other work; waiting up to ${maxWaitS} s for it to calm down`);
      announced = true;
    }
    if (Date.now() > deadline) {
      say(
        `machine still ${busy} % busy after ${maxWaitS} s; measuring anyway (see "outside the benchmark" in the report)`,
      );
      break;
    }
  }
  return busy;
}
