import fs from 'node:fs';
import { isRoot } from './proc.js';

/**
 * Huge pages for PostgreSQL's shared memory. With 4 KB pages every backend takes a page fault on
 * its first touch of each page of shared_buffers; on this kind of VM a fault costs microseconds,
 * and under surface B's load (32 fresh backends writing deduplication keys) PostgreSQL spent more
 * CPU on those faults than on the inserts: bench/RESULTS.md, 28k → 45k events/s with 2 MB pages.
 *
 * The server runs with huge_pages=try: it uses them when the kernel has enough free, 4 KB pages
 * otherwise. Run as root, `reserve` grows vm.nr_hugepages by what the server is short of before
 * it starts and `release` gives that back after it stops; the count is kept in a file of the data
 * folder so a later `down` knows it. Without root nothing is reserved (an operator can set
 * vm.nr_hugepages by hand; `postgres -C shared_memory_size_in_huge_pages` says how many).
 */

const NR = '/proc/sys/vm/nr_hugepages';

interface HugePages {
  total: number;
  /** Free and not promised to a mapping already made (HugePages_Free − HugePages_Rsvd). */
  available: number;
}

export function hugePages(meminfo = fs.readFileSync('/proc/meminfo', 'utf8')): HugePages | undefined {
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(meminfo)?.[1] ?? Number.NaN);
  const total = field('HugePages_Total');
  const available = field('HugePages_Free') - field('HugePages_Rsvd');
  return Number.isFinite(total) && Number.isFinite(available) ? { total, available } : undefined;
}

/** How many pages to add so that `need` are available; 0 when they already are. */
export function shortfall(h: HugePages, need: number): number {
  return Math.max(0, need - h.available);
}

function setTotal(n: number): boolean {
  try {
    fs.writeFileSync(NR, String(n));
    return true;
  } catch {
    return false;
  }
}

/**
 * Makes `need` huge pages available for a server about to start, as far as the kernel can; returns
 * how many it added (recorded in `ledger`), 0 when it could not or did not have to.
 */
export function reserve(need: number, ledger: string): number {
  const h = hugePages();
  if (!h || !isRoot() || !Number.isInteger(need) || need <= 0) return 0;
  const add = shortfall(h, need);
  if (add === 0 || !setTotal(h.total + add)) return 0;
  // The kernel may find fewer contiguous 2 MB blocks than asked: what it gave is what counts.
  const added = Math.max(0, (hugePages()?.total ?? h.total) - h.total);
  const before = Number(fs.existsSync(ledger) ? fs.readFileSync(ledger, 'utf8') : 0) || 0;
  fs.writeFileSync(ledger, String(before + added));
  return added;
}

/** Of `added` pages to give back, how many can go now (those free) and how many stay owed. */
export function giveBack(added: number, available: number): { back: number; owed: number } {
  const back = Math.max(0, Math.min(added, available));
  return { back, owed: added - back };
}

const pause = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * Gives back the pages `reserve` added for a server now stopped. Its shared memory can be unmapped
 * a moment after `pg_ctl stop` returns, so this waits up to `waitMs` for them to be free; pages
 * still in use stay in the ledger for the next `down` (a ledger dropped with them would leave
 * them reserved for good, and the next `up` would find them free and record nothing).
 */
export function release(ledger: string, waitMs = 3000): number {
  if (!fs.existsSync(ledger)) return 0;
  const added = Number(fs.readFileSync(ledger, 'utf8')) || 0;
  let h = hugePages();
  if (!h || !isRoot() || added <= 0) {
    fs.rmSync(ledger, { force: true });
    return 0;
  }
  for (const until = Date.now() + waitMs; h.available < added && Date.now() < until; h = hugePages() ?? h) pause(50);
  const plan = giveBack(added, h.available);
  const given = plan.back > 0 && setTotal(h.total - plan.back) ? plan.back : 0;
  if (given === added) fs.rmSync(ledger, { force: true });
  else fs.writeFileSync(ledger, String(added - given));
  return given;
}
