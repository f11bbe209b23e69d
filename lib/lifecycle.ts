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
  let stopping = false;
  const start = (slot: number) => {
    const child = fork(process.argv[1], process.argv.slice(2), {
      env: { ...env, [childEnv]: String(slot) },
      stdio: 'inherit',
      execArgv: [...process.execArgv, ...execArgv],
    });
    children.add(child);
    child.on('exit', (code, signal) => {
      children.delete(child);
      if (stopping) return;
      log.error({ slot, code, signal }, 'worker process exited; restarting');
      setTimeout(() => start(slot), 500).unref();
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
