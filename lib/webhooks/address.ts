import { type LookupAddress, type LookupOptions, lookup as dnsLookup } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/**
 * Where a webhook may be sent. A URL a workspace gives must not make the service reach into its
 * own network (SSRF): loopback, private, carrier-grade NAT, link-local (which holds the cloud
 * metadata address 169.254.169.254), unique-local IPv6 (AWS's fd00:ec2::254), multicast and
 * reserved ranges are refused, by the addresses the host resolves to — all of them, since a
 * client may connect to any. The check runs when a subscription is saved and again for every
 * connection the dispatcher opens (the resolved address is the one connected to), so a name that
 * later resolves elsewhere (DNS rebinding) is refused at delivery.
 */

const blocked = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  blocked.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const)
  blocked.addSubnet(net, bits, 'ipv6');

/** IPv4 embedded in an IPv6 address (mapped ::ffff:a.b.c.d, NAT64 64:ff9b::a.b.c.d), else undefined. */
function embeddedV4(addr: string): string | undefined {
  const m = /^(?:::ffff:|64:ff9b::)(?:0:)?(.+)$/i.exec(addr);
  if (!m) return undefined;
  if (isIP(m[1]) === 4) return m[1];
  const hex = /^([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(m[1]);
  if (!hex) return undefined;
  const hi = Number.parseInt(hex[1], 16);
  const lo = Number.parseInt(hex[2], 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** True for an address a webhook must never be sent to. */
export function isForbiddenAddress(addr: string): boolean {
  const bare = addr.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 4) return blocked.check(bare, 'ipv4');
  if (family !== 6) return true;
  const v4 = embeddedV4(bare);
  return v4 !== undefined ? blocked.check(v4, 'ipv4') : blocked.check(bare, 'ipv6');
}

const FORBIDDEN_NAMES = /(^|\.)(localhost|localdomain|internal|local)\.?$/i;

export interface UrlPolicy {
  /** Plain http:// accepted (dev and test profiles). */
  allowHttp: boolean;
  /** Private, loopback and link-local destinations accepted (dev and test profiles). */
  allowPrivate: boolean;
  /** How long a host may take to resolve when a subscription is saved (default LOOKUP_TIMEOUT_MS). */
  lookupTimeoutMs?: number;
}

/**
 * A name whose DNS server does not answer would hold the request for the system resolver's own
 * timeout (5 s a try, more with retries); a subscription's host that has not resolved by then is
 * refused like one that does not resolve. The lookup itself cannot be cancelled (getaddrinfo in
 * libuv's thread pool): it finishes in the background, and its answer is dropped.
 */
export const LOOKUP_TIMEOUT_MS = 2000;

/** The addresses a name resolves to (the system resolver: /etc/hosts, then DNS). */
export type Resolve = (host: string) => Promise<string[]>;
const systemResolve: Resolve = async (host) =>
  (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

class LookupTimeout extends Error {}

async function within<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new LookupTimeout()), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

export class WebhookUrlError extends Error {
  constructor(
    readonly code: 'invalid_url' | 'insecure_url' | 'forbidden_destination' | 'unresolvable_host',
    message: string,
  ) {
    super(message);
  }
}

/** The URL parsed and checked for its form (scheme, no credentials, no fragment); throws WebhookUrlError. */
export function parseWebhookUrl(raw: string, policy: UrlPolicy): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WebhookUrlError('invalid_url', 'url must be an absolute URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new WebhookUrlError('invalid_url', 'url must be an https:// URL');
  if (url.protocol === 'http:' && !policy.allowHttp)
    throw new WebhookUrlError('insecure_url', 'url must use https:// (plain http:// is not accepted)');
  if (url.username || url.password) throw new WebhookUrlError('invalid_url', 'url must not carry credentials');
  if (url.hash) throw new WebhookUrlError('invalid_url', 'url must not have a fragment');
  if (!url.hostname) throw new WebhookUrlError('invalid_url', 'url has no host');
  return url;
}

/**
 * The addresses `host` resolves to, refused (WebhookUrlError) when any is forbidden under `policy`,
 * or when it does not resolve within the policy's lookup timeout.
 */
export async function checkDestination(
  host: string,
  policy: UrlPolicy,
  resolve: Resolve = systemResolve,
): Promise<string[]> {
  const bare = host.replace(/^\[|\]$/g, '');
  const literal = isIP(bare) !== 0;
  if (!policy.allowPrivate && forbiddenLiteral(bare))
    throw new WebhookUrlError(
      'forbidden_destination',
      literal ? `${bare} is a private, loopback or reserved address` : `${bare} names a local or internal host`,
    );
  if (literal) return [bare];
  let addrs: string[];
  const ms = policy.lookupTimeoutMs ?? LOOKUP_TIMEOUT_MS;
  try {
    addrs = await within(resolve(bare), ms);
  } catch (err) {
    throw new WebhookUrlError(
      'unresolvable_host',
      err instanceof LookupTimeout ? `${bare} did not resolve within ${ms / 1000} s` : `${bare} does not resolve`,
    );
  }
  if (!policy.allowPrivate) {
    const bad = addrs.find(isForbiddenAddress);
    if (bad)
      throw new WebhookUrlError(
        'forbidden_destination',
        `${bare} resolves to ${bad}, a private, loopback or reserved address`,
      );
  }
  return addrs;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for http.request that refuses forbidden addresses: the check is made on the very
 * addresses the socket then connects to, so a name re-pointed after the subscription was saved
 * (DNS rebinding) cannot reach the service's own network.
 */
export function guardedLookup(hostname: string, options: LookupOptions, cb: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (err, addrs) => {
    if (err) return cb(err, []);
    const bad = addrs.find((a) => isForbiddenAddress(a.address));
    if (bad) {
      const e: NodeJS.ErrnoException = new Error(`${hostname} resolves to ${bad.address}, a forbidden address`);
      e.code = 'EFORBIDDEN';
      return cb(e, []);
    }
    if (options.all) return cb(null, addrs);
    cb(null, addrs[0].address, addrs[0].family);
  });
}

/** A host given as an address or a local name that must not be connected to (no lookup happens for addresses). */
export function forbiddenLiteral(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  if (isIP(bare)) return isForbiddenAddress(bare);
  return FORBIDDEN_NAMES.test(bare);
}
