import type { NatsConnection } from 'nats';
import { subjects } from '../lib/nats.js';

/** Core-api's own invalidation subjects: every core-api process listens. */
export const coreSubjects = {
  apiKeyRevoked: subjects.apiKeyRevoked,
  familyRevoked: subjects.familyRevoked,
  jobQueued: 'core.jobs.queued',
} as const;

/**
 * Announcements to the other tiers and processes. The payloads are small JSON documents; a lost
 * message is covered by each consumer's cache TTL.
 */
export class Notifier {
  constructor(private readonly nc: NatsConnection) {}

  /** `inv.customers.<tenant>` with `{"tenant_id", "ids", "op"}`: the ingest resolver drops its cache of the tenant. */
  customersChanged(
    tenantId: string,
    ids: string[],
    op: 'created' | 'updated' | 'deleted' | 'restored' | 'imported',
  ): void {
    this.nc.publish(subjects.customersChanged(tenantId), JSON.stringify({ tenant_id: tenantId, ids, op }));
  }

  /** `inv.ingestion-key` with the tenant id as plain text (what ingest/keys.ts expects). */
  ingestionKeyChanged(tenantId: string): void {
    this.nc.publish(subjects.ingestionKeyChanged, tenantId);
  }

  apiKeyRevoked(keyId: string): void {
    this.nc.publish(coreSubjects.apiKeyRevoked, keyId);
  }

  familyRevoked(familyId: string): void {
    this.nc.publish(coreSubjects.familyRevoked, familyId);
  }

  jobQueued(jobId: string): void {
    this.nc.publish(coreSubjects.jobQueued, jobId);
  }

  /** Waits until the server has the messages published so far, so a revocation is out before we answer. */
  flush(): Promise<void> {
    return this.nc.flush();
  }
}
