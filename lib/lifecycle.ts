import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { clientConnections } from './tcp-sockets.js';
import type { Logger } from './logger.js';

/** Runs `stop` once on SIGTERM or SIGINT, then exits; a second signal exits at once. */
export function onShutdown(log: Logger, stop: () => Promise<void>, graceMs = 20_000): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      // A supervised worker gets the terminal's signal and its supervisor's: keep draining.
      if (process.send) return;
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      log.error('shutdown took too long; exiting');
      process.exit(1);
    }, graceMs);
    timer.unref();
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'error during shutdown');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  // A forked worker whose supervisor died (even by SIGKILL) must not live on as an orphan.
  // The supervisor may already be gone by the time this worker has finished starting.
  if (process.send) {
    if (!process.connected) handler('SIGTERM');
    else process.once('disconnect', () => handler('SIGTERM'));
  }
}

/**
 * Forks `count` copies of the current script with the supervisor's environment `env` (each also
 * sees CHILD_ENV=<slot>), restarts any that dies unexpectedly, and on SIGTERM/SIGINT stops them all
 * and waits for them.
 */
export function supervise(
  log: Logger,
  count: number,
  childEnv: string,
  env: NodeJS.ProcessEnv,
  execArgv: string[] = [],
  balance?: Partial<Balance>,
): void {
  const children = new Set<ChildProcess>();
  /** The children that have announced they listen. */
  const listening = new Set<ChildProcess>();
  let stopping = false;
  // Loaded at the first scrape only: the supervisor stays small.
  let relay: Promise<(from: ChildProcess, m: unknown) => void> | undefined;
  const start = (slot: number) => {
    const child = fork(process.argv[1], process.argv.slice(2), {
      env: { ...env, [childEnv]: String(slot) },
      stdio: 'inherit',
      execArgv: [...process.execArgv, ...execArgv],
    });
    children.add(child);
    const started = Date.now();
    // Keep-alive clients that connected while this worker did not listen yet (a tier starting: its
    // first worker answers /readyz before the others listen) or reconnected while it was away are
    // all on its siblings, and would stay there. Once it listens, every worker that listens, this
    // one too, closes as many answers' connections as it holds connections (lib/http/traffic.ts
    // rebalance), and the kernel spreads the clients over all of them. This one too: were only the
    // siblings to close what lands on them, a client that reconnects would go on being closed there
    // until it landed here, and all would end up here.
    child.on('message', (m: { type?: string }) => {
      // A scrape of /metrics reached this worker: every worker's figures, summed (lib/prometheus.ts).
      if (m?.type === 'metrics-scrape') {
        relay ??= import('./prometheus.js').then((p) => p.relayScrapes(children));
        void relay.then((r) => r(child, m));
        return;
      }
      if (m?.type !== 'listening') return;
      listening.add(child);
      if (listening.size > 1) for (const c of listening) askToSpread(c);
    });
    child.on('exit', (code, signal) => {
      children.delete(child);
      listening.delete(child);
      if (stopping) return;
      // A worker that ran a while is back at once (its siblings carry its load meanwhile); one that
      // dies young is not restarted in a tight loop.
      const delayMs = Date.now() - started > 10_000 ? 50 : 1000;
      log.error({ slot, code, signal, delay_ms: delayMs }, 'worker process exited; restarting');
      setTimeout(() => start(slot), delayMs).unref();
    });
  };
  for (let i = 0; i < count; i++) start(i);
  const balancing = balance && evenOutLoad(log, listening, { ...BALANCE, ...balance });
  onShutdown(
    log,
    async () => {
      stopping = true;
      if (balancing) clearInterval(balancing);
      const exits = [...children].map(
        (c) =>
          new Promise<void>((r) => {
            if (c.exitCode !== null || c.signalCode !== null) return r();
            c.once('exit', () => r());
            c.kill('SIGTERM');
          }),
      );
      await Promise.all(exits);
    },
    30_000,
  );
}

/** A supervised worker tells its supervisor it accepts connections (see supervise). */
export function announceListening(): void {
  process.send?.({ type: 'listening' });
}

/** What the supervisor sends a worker that should spread its clients again (`onRebalance`). */
interface RebalanceMessage {
  type: 'rebalance';
  /** How many answers close their connections: as many as the worker holds (undefined where /proc cannot tell). */
  closes?: number;
  /** Set when the worker is asked because it is much busier than another (`evenOutLoad`). */
  load?: boolean;
}

/** Asks worker `c` to close as many answers' connections as it holds clients. */
function askToSpread(c: ChildProcess, load?: boolean): void {
  if (!c.connected || c.pid === undefined) return;
  const m: RebalanceMessage = { type: 'rebalance', closes: clientConnections(c.pid), ...(load && { load }) };
  c.send(m);
}

/**
 * Calls `fn` when the supervisor asks this worker to spread its connections again (see supervise),
 * with how many answers should close theirs when the supervisor could tell (lib/http/traffic.ts
 * rebalance).
 */
export function onRebalance(fn: (closes: number | undefined, m: RebalanceMessage) => void): void {
  process.on('message', (m: RebalanceMessage) => {
    if (m?.type === 'rebalance') fn(m.closes, m);
  });
}

/** How the supervisor evens out its workers' load (`supervise`'s `balance`, `busiest`). */
export interface Balance {
  /** How often it compares the workers' CPU time. */
  everyMs: number;
  /** The busiest worker's CPU over the least busy one's that counts as uneven. */
  ratio: number;
  /** ...when the busiest also used at least this share of a core. */
  minShare: number;
  /** Periods in a row the same worker must be the uneven busiest before it sheds connections. */
  periods: number;
}

const BALANCE: Balance = { everyMs: 2000, ratio: 1.5, minShare: 0.5, periods: 2 };

/**
 * Which worker should shed connections, from each worker's CPU time (ms) over the last period of
 * `periodMs`: the busiest, when it used at least `ratio` times the least busy one's and at least
 * `minShare` of a core; -1 when the load is even enough (or there is one worker).
 */
export function busiest(cpuMs: readonly number[], periodMs: number, b: Pick<Balance, 'ratio' | 'minShare'>): number {
  if (cpuMs.length < 2) return -1;
  let top = 0;
  let least = 0;
  for (let i = 1; i < cpuMs.length; i++) {
    if (cpuMs[i] > cpuMs[top]) top = i;
    if (cpuMs[i] < cpuMs[least]) least = i;
  }
  return cpuMs[top] >= b.minShare * periodMs && cpuMs[top] >= b.ratio * cpuMs[least] ? top : -1;
}

/** CPU time a process has used (ms), from /proc (clock ticks of 10 ms); undefined where unreadable. */
function cpuMsOf(pid: number | undefined): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // After the command's name (which may hold spaces): state, ppid, … utime is the 12th, stime the 13th.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return undefined;
  }
}

/**
 * The kernel hands each new connection to one of the processes listening on the port (SO_REUSEPORT),
 * and a keep-alive client stays where it landed. Spreading them again whenever a worker starts
 * listening (`supervise`) is not enough: clients that got no answer in that moment stay, and a
 * tier started under load kept 51 to 64 of 64 connections on one of its two workers, that worker a
 * core's worth busy and the other idle. So the supervisor compares its workers' CPU time every
 * period and, when the same one is much the busiest `periods` times in a row, asks it alone to
 * close as many answers' connections as it holds; its clients reconnect wherever the kernel sends
 * them. Load, not connections: an idle keep-alive connection weighs nothing.
 */
function evenOutLoad(log: Logger, listening: Set<ChildProcess>, b: Balance): NodeJS.Timeout {
  let last = new Map<ChildProcess, number>();
  let streak = { child: undefined as ChildProcess | undefined, periods: 0 };
  const timer = setInterval(() => {
    const now = new Map<ChildProcess, number>();
    for (const c of listening) {
      const ms = cpuMsOf(c.pid);
      if (ms !== undefined) now.set(c, ms);
    }
    // A worker new since the last look has no period yet: compared from the next one.
    const workers = [...now.keys()].filter((c) => last.has(c));
    const used = workers.map((c) => (now.get(c) as number) - (last.get(c) as number));
    last = now;
    const i = busiest(used, b.everyMs, b);
    const child = i < 0 ? undefined : workers[i];
    streak = child && child === streak.child ? { child, periods: streak.periods + 1 } : { child, periods: 1 };
    if (!child || streak.periods < b.periods) return;
    log.info({ pid: child.pid, cpu_ms: used }, 'uneven load: the busiest worker spreads its connections');
    askToSpread(child, true);
    streak = { child: undefined, periods: 0 };
  }, b.everyMs);
  timer.unref();
  return timer;
}
