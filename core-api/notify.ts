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

  /**
   * `cmd.integrations.work` with `{"tenant_id", "name"}`: the processors start the work now due on the
   * integration (a requested sync, a new connection's first sync or backfill) instead of at their next
   * scheduled look. Best effort: that look finds the same work due if the message is lost, so a publish
   * that fails (the connection closed) is not the request's failure.
   */
  integrationWork(tenantId: string, name: string): void {
    try {
      this.nc.publish(subjects.integrationWork, JSON.stringify({ tenant_id: tenantId, name }));
    } catch {
      // The scheduled look does the work later (above).
    }
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
