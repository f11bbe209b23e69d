/**
 * E-mail addresses as the providers give them, reduced to what matching needs: lower-case bare
 * addresses. Pure functions (test/unit/sync-addresses.test.ts).
 */

const ADDRESS = /[^\s<>",;:()[\]@]+@[^\s<>",;:()[\]@]+\.[^\s<>",;:()[\]@]+/g;

/**
 * The addresses of an RFC 5322 address-list header (From, To, Cc): `"Doe, Jane" <jane@acme.com>,
 * bob@acme.com`. Display names are dropped; a quoted display name that looks like an address is
 * not taken for one when the real address follows in angle brackets.
 */
export function headerAddresses(value: string | undefined): string[] {
  if (!value) return [];
  const out: string[] = [];
  // Quoted display names go first: their commas and @ would split or fake an address.
  const unquoted = value.replace(/"(?:[^"\\]|\\.)*"/g, ' ');
  for (const m of unquoted.matchAll(ADDRESS)) out.push(m[0].toLowerCase());
  return out;
}

export const domainOf = (address: string): string => address.slice(address.lastIndexOf('@') + 1).toLowerCase();

/**
 * The participants worth matching: distinct, lower-case, without the workspace's own addresses
 * (any address of `ownDomains`, and the mailbox itself).
 */
export function externalParticipants(addresses: Iterable<string>, ownDomains: ReadonlySet<string>): string[] {
  const out = new Set<string>();
  for (const a of addresses) {
    const x = a.trim().toLowerCase();
    if (!x.includes('@') || ownDomains.has(domainOf(x))) continue;
    out.add(x);
  }
  return [...out];
}
