/** Scopes of SPEC.md "Scopes", and which scopes each role may hold. */
export const SCOPES = [
  'customers:read',
  'customers:write',
  'customers:delete',
  'health:read',
  'health:write',
  'playbooks:read',
  'playbooks:write',
  'tasks:read',
  'tasks:write',
  'events:write',
  'events:read',
  'webhooks:read',
  'webhooks:write',
  'users:read',
  'users:write',
  'analytics:read',
  'metrics:read',
  'metrics:write',
  'admin:*',
] as const;
export type Scope = (typeof SCOPES)[number];

export const SCOPE_DESCRIPTIONS: Record<Scope, string> = {
  'customers:read': 'GET customers, contacts, objectives and segments',
  'customers:write': 'POST/PATCH customers and contacts, POST/DELETE objectives, POST/PATCH/DELETE segments',
  'customers:delete': 'DELETE customers (soft-delete)',
  'health:read': 'GET health scores',
  'health:write': 'POST recalculate, PATCH health model',
  'playbooks:read': 'GET playbooks and tasks',
  'playbooks:write': 'POST/PATCH playbooks',
  'tasks:read': 'GET tasks',
  'tasks:write': 'PATCH tasks, complete tasks',
  'events:write': 'POST events (ingestion)',
  'events:read': 'GET events',
  'webhooks:read': 'GET webhook subscriptions',
  'webhooks:write': 'POST/PATCH webhook subscriptions',
  'users:read': 'GET users',
  'users:write': 'POST invite, PATCH role (restricted)',
  'analytics:read': 'GET analytics endpoints',
  'metrics:read': 'GET metrics and their materialized values, the metric test query, usage widget values',
  'metrics:write': 'POST/PATCH/DELETE metrics, materialize now, proposals and usage widgets (admin role only)',
  'admin:*': 'Full admin access; only an OAuth grant with the admin role or a key created by an admin',
};

export const ROLES = ['admin', 'csm', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

/** The most a credential of each role can hold; a grant or key is cut down to this. */
export const ROLE_SCOPES: Record<Role, readonly Scope[]> = {
  admin: SCOPES,
  csm: SCOPES.filter((s) => s !== 'admin:*' && s !== 'users:write' && s !== 'metrics:write'),
  viewer: SCOPES.filter((s) => s.endsWith(':read')),
};
