import type { Role } from '../../schemas/core/scopes.js';

/** Who is calling, as established from a bearer credential (API key or OAuth access token). */
export interface Principal {
  tenantId: string;
  kind: 'api_key' | 'user';
  /** API key id or user id. */
  actorId: string;
  role: Role;
  scopes: ReadonlySet<string>;
  /** OAuth: the app acting for the user. */
  clientId?: string;
  expiresAt?: Date | null;
}
