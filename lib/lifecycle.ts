import { fork, type ChildProcess } from 'node:child_process';
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
    // one too, hands its connections back to the kernel for a moment, which spreads them over all
    // of them. This one too: were only the siblings to close what lands on them, a client that
    // reconnects would go on being closed there until it landed here, and all would end up here.
    child.on('message', (m: { type?: string }) => {
      // A scrape of /metrics reached this worker: every worker's figures, summed (lib/prometheus.ts).
      if (m?.type === 'metrics-scrape') {
        relay ??= import('./prometheus.js').then((p) => p.relayScrapes(children));
        void relay.then((r) => r(child, m));
        return;
      }
      if (m?.type !== 'listening') return;
      listening.add(child);
      if (listening.size > 1) for (const c of listening) if (c.connected) c.send({ type: 'rebalance' });
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
  onShutdown(
    log,
    async () => {
      stopping = true;
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

/** Calls `fn` when the supervisor asks this worker to spread its connections again (see supervise). */
export function onRebalance(fn: () => void): void {
  process.on('message', (m: { type?: string }) => {
    if (m?.type === 'rebalance') fn();
  });
}
