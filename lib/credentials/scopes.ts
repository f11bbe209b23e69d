import { ROLE_SCOPES, type Role, type Scope } from '../../schemas/core/scopes.js';
import { ApiError } from '../problem.js';
import type { Principal } from './principal.js';

export const holds = (p: Principal, scope: string): boolean => p.scopes.has(scope) || p.scopes.has('admin:*');

/** A scope requirement: one scope, or several of which any one will do. */
export type ScopeRequirement = Scope | readonly Scope[];

export const alternatives = (r: ScopeRequirement): readonly Scope[] => (typeof r === 'string' ? [r] : r);

/**
 * 403 insufficient_scope naming the accepted scopes and the held ones, unless the credential holds
 * one of `scope`; `what` names what asks for it ("With hard=true this endpoint").
 */
export function requireScope(p: Principal, scope: ScopeRequirement, what = 'This endpoint'): void {
  const any = alternatives(scope);
  if (any.some((s) => holds(p, s))) return;
  const held = [...p.scopes].sort().join(' ') || '(none)';
  throw new ApiError(
    'insufficient_scope',
    `${what} requires the scope ${any.join(' or ')}; the credential holds: ${held}.`,
    undefined,
    [['WWW-Authenticate', `Bearer error="insufficient_scope", scope="${any.join(' ')}"`]],
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
