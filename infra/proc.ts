import { spawn, execFileSync, type SpawnOptions } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';

/** A failure the operator can fix; printed as one clear line, never as a stack trace. */
export class InfraError extends Error {
  override name = 'InfraError';
}

export function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

export function readPid(file: string): number | undefined {
  try {
    const pid = Number(fs.readFileSync(file, 'utf8').split('\n')[0].trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

export function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function portOpen(port: number, host = '127.0.0.1', timeoutMs = 2000): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host });
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

/** A TCP port nothing listens on right now (for processes started by tests and benchmarks). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  logFile?: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  const tail = logFile ? `\n--- last lines of ${logFile} ---\n${tailFile(logFile, 15)}` : '';
  throw new InfraError(`${what} did not become ready within ${Math.round(timeoutMs / 1000)} s${tail}`);
}

export function tailFile(file: string, lines: number): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Starts a long-running server detached from this process, its output appended to logFile. */
export function spawnDetached(cmd: string, args: string[], logFile: string, opts: SpawnOptions = {}): number {
  const out = fs.openSync(logFile, 'a');
  const child = spawn(cmd, args, { detached: true, stdio: ['ignore', out, out], ...opts });
  fs.closeSync(out);
  if (!child.pid) throw new InfraError(`could not start ${cmd}`);
  child.unref();
  return child.pid;
}

export function which(cmd: string): string | undefined {
  try {
    return execFileSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Stops a process by pid file: SIGTERM, then SIGKILL after the grace period. */
export async function stopByPidFile(file: string, graceMs = 15_000): Promise<boolean> {
  const pid = readPid(file);
  if (!alive(pid)) {
    fs.rmSync(file, { force: true });
    return false;
  }
  process.kill(pid!, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (alive(pid)) process.kill(pid!, 'SIGKILL');
  fs.rmSync(file, { force: true });
  return true;
}
