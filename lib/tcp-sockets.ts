import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * The machine's TCP sockets and the processes that hold them, from Linux's /proc: how a
 * supervisor tells how many clients each of its workers holds (lib/lifecycle.ts), and how the
 * benchmark reports the kernel's split of its connections (bench/proc-stats.ts). Elsewhere, or
 * where /proc is not readable, the answers are empty.
 */

/** /proc/net/tcp's states: a connection, and a socket listening. */
export const ESTABLISHED = '01';
export const LISTEN = '0A';

export interface TcpSocket {
  localPort: number;
  state: string;
  inode: string;
}

/** Every TCP socket of the machine (IPv4 and IPv6). */
export function tcpSockets(): TcpSocket[] {
  const out: TcpSocket[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(file, 'latin1');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      // local address (hex ip:port), state (ESTABLISHED, LISTEN, …), socket inode.
      const f = line.trim().split(/\s+/);
      if (f.length > 9) out.push({ localPort: Number.parseInt(f[1].split(':')[1], 16), state: f[3], inode: f[9] });
    }
  }
  return out;
}

/** The inodes of the sockets process `pid` holds; undefined when its descriptors cannot be read. */
export function socketInodes(pid: number): Set<string> | undefined {
  try {
    const inodes = new Set<string>();
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue; // closed meanwhile
      }
      if (target.startsWith('socket:[')) inodes.add(target.slice(8, -1));
    }
    return inodes;
  } catch {
    return undefined;
  }
}

/**
 * The connections clients opened to process `pid`: its established sockets on a port it listens
 * on (not those it opened itself, to NATS or PostgreSQL). Undefined where /proc cannot tell.
 */
export function clientConnections(pid: number): number | undefined {
  const held = socketInodes(pid);
  if (!held) return undefined;
  const sockets = tcpSockets().filter((s) => held.has(s.inode));
  const ports = new Set(sockets.filter((s) => s.state === LISTEN).map((s) => s.localPort));
  return sockets.filter((s) => s.state === ESTABLISHED && ports.has(s.localPort)).length;
}
