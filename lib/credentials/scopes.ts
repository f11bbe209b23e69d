import { ROLE_SCOPES, type Role, type Scope } from '../../schemas/core/scopes.js';
import { ApiError } from '../problem.js';
import type { Principal } from './principal.js';

export const holds = (p: Principal, scope: string): boolean => p.scopes.has(scope) || p.scopes.has('admin:*');

/** 403 insufficient_scope naming the required and the held scopes. */
export function requireScope(p: Principal, scope: Scope): void {
  if (holds(p, scope)) return;
  const held = [...p.scopes].sort().join(' ') || '(none)';
  throw new ApiError(
    'insufficient_scope',
    `This endpoint requires the scope ${scope}; the credential holds: ${held}.`,
    undefined,
    [['WWW-Authenticate', `Bearer error="insufficient_scope", scope="${scope}"`]],
  );
}

export function requireRole(p: Principal, role: Role): void {
  if (role === 'admin' && p.role !== 'admin')
    throw new ApiError(
      'insufficient_role',
      `This endpoint is for admins; the credential acts with the role ${p.role}.`,
    );
}

/** Scopes a credential of `role` may hold out of `wanted`. */
export const allowedFor = (role: Role, wanted: Iterable<string>): string[] =>
  [...wanted].filter((s) => (ROLE_SCOPES[role] as readonly string[]).includes(s));
