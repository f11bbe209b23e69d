import type { Logger } from '../../../lib/logger.js';
import type { Sql } from '../../../lib/pg.js';
import { domainOf } from './addresses.js';
import type { ProviderClient } from './http.js';
import { type SyncedActivity, storeSynced } from './store.js';

/**
 * One sync of one connection, as a connector (gmail.ts, outlook-mail.ts, google-calendar.ts,
 * outlook-calendar.ts) sees it. The connector reads `cursor` and replaces its fields as each stage
 * completes: the scheduler keeps whatever it holds at the end, even after a failure, so a stage
 * done is not done again. What it produced is counted in `counts`.
 */
export interface SyncRun {
  tenantId: string;
  name: 'gmail' | 'outlook' | 'google_calendar' | 'outlook_calendar';
  api: ProviderClient;
  /** The connector's API base, no trailing slash. */
  apiUrl: string;
  cursor: Record<string, unknown>;
  /** When the run started (ms since the epoch): the lookback and "has the meeting ended" use it. */
  now: number;
  /** How far back a first sync (or a resync) reads. */
  lookbackMs: number;
  /** The workspace's own domains (its users' e-mail domains); the connector adds its mailbox's. */
  ownDomains: Set<string>;
  /** Messages fetched per page at most in parallel. */
  fetchConcurrency: number;
  sql: Sql;
  log: Logger;
  stopping: () => boolean;
  counts: { fetched: number; events: number; unmatched: number; resyncs: number };
}

export type Connector = (run: SyncRun) => Promise<void>;

/** The mailbox's own address: it and its domain are never a customer's. */
export function ownAddress(run: SyncRun, address: unknown): void {
  if (typeof address !== 'string' || !address.includes('@')) return;
  run.cursor.account = address.toLowerCase();
  run.ownDomains.add(domainOf(address));
}

export async function store(run: SyncRun, activities: SyncedActivity[]): Promise<void> {
  const r = await storeSynced(run.sql, run.tenantId, run.name, activities);
  run.counts.events += r.events;
  run.counts.unmatched += r.unmatched;
}
