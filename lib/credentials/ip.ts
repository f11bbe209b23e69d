import net from 'node:net';
import { ConfigError } from '../config.js';

/**
 * Parses `a.b.c.d/len`, `x::y/len` or a bare address; host bits are cleared. Returns null when invalid.
 * An IPv6 zone (`fe80::1%eth0`) is refused: it names an interface of the sending host, means nothing in an
 * allowlist checked elsewhere, and PostgreSQL's inet does not take it.
 */
export function parseCidr(text: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | null {
  const [addr, len, extra] = text.trim().split('/');
  if (extra !== undefined || addr.includes('%')) return null;
  const v = net.isIP(addr);
  if (v === 0) return null;
  const max = v === 4 ? 32 : 128;
  const prefix = len === undefined ? max : /^\d{1,3}$/.test(len) ? Number(len) : NaN;
  if (!(prefix >= 0 && prefix <= max)) return null;
  return { address: addr, prefix, family: v === 4 ? 'ipv4' : 'ipv6' };
}

/** An IPv4 address seen through a dual-stack socket (`::ffff:a.b.c.d`) is matched as IPv4. */
export function normalizeIp(ip: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  return m ? m[1] : ip;
}

export class Allowlist {
  private readonly list = new net.BlockList();
  readonly empty: boolean;

  constructor(cidrs: readonly string[]) {
    for (const c of cidrs) {
      const p = parseCidr(c);
      if (p) this.list.addSubnet(p.address, p.prefix, p.family);
    }
    this.empty = cidrs.length === 0;
  }

  allows(ip: string): boolean {
    if (this.empty) return true;
    const a = normalizeIp(ip);
    const v = net.isIP(a);
    if (v === 0) return false;
    return this.list.check(a, v === 4 ? 'ipv4' : 'ipv6');
  }
}

/**
 * The caller's address: the socket peer, or, when the peer is a trusted proxy (the edge runs on
 * loopback), the last address the proxy appended to X-Forwarded-For.
 */
export function clientIp(peer: string, forwardedFor: string | undefined, trusted: Allowlist): string {
  const p = normalizeIp(peer);
  if (!forwardedFor || trusted.empty || !trusted.allows(p)) return p;
  const hops = forwardedFor
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const last = hops[hops.length - 1];
  return last && net.isIP(normalizeIp(last)) ? normalizeIp(last) : p;
}

/** A comma-separated list of CIDR ranges from configuration (the edge proxies); a bad entry is a ConfigError. */
export function trustedProxies(variable: string, value: string): Allowlist {
  const cidrs = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = cidrs.find((c) => !parseCidr(c));
  if (bad) throw new ConfigError(`invalid configuration:\n  ${variable}: "${bad}" is not a CIDR range`);
  return new Allowlist(cidrs);
}
