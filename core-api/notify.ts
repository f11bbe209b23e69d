import type { NatsConnection } from 'nats';
import type { Invalidations } from '../lib/credentials/invalidations.js';
import { subjects } from '../lib/nats.js';

/**
 * Announcements to the other tiers and processes. The payloads are small JSON documents; a lost
 * message is covered by each consumer's cache TTL.
 */
export class Notifier {
  constructor(
    private readonly nc: NatsConnection,
    private readonly invalidations: Invalidations,
  ) {}

  /** `inv.customers.<tenant>` with `{"tenant_id", "ids", "op"}`: the ingest resolver drops its cache of the tenant. */
  customersChanged(
    tenantId: string,
    ids: string[],
    op: 'created' | 'updated' | 'deleted' | 'restored' | 'imported',
  ): void {
    this.nc.publish(subjects.customersChanged(tenantId), JSON.stringify({ tenant_id: tenantId, ids, op }));
  }

  /** `inv.ingestion-key` with the tenant id as plain text: resolves once every ingest process dropped the old key. */
  ingestionKeyChanged(tenantId: string): Promise<void> {
    return this.invalidations.publish(subjects.ingestionKeyChanged, tenantId);
  }

  /** Resolves once every process that accepts API keys has dropped the key (lib/credentials/invalidations.ts). */
  apiKeyRevoked(keyId: string): Promise<void> {
    return this.invalidations.publish(subjects.apiKeyRevoked, keyId);
  }

  /** Resolves once every process that accepts access tokens refuses the family's. */
  familyRevoked(familyId: string): Promise<void> {
    return this.invalidations.publish(subjects.familyRevoked, familyId);
  }
}
