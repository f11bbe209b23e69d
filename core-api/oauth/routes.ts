import type { OAuthDeps } from '../deps.js';
import type { Route } from '../http/router.js';
import { appRoutes } from './apps.js';
import { authorizeRoutes } from './authorize.js';
import { tokenRoutes } from './token.js';

/**
 * The OAuth 2.0 authorization server (SPEC.md): apps registered by a workspace's admins
 * (apps.ts), the sign-in and consent page that hands out codes (authorize.ts), and the token
 * endpoint that exchanges codes and refresh tokens (token.ts), in the OpenAPI document's order.
 */
export function oauthRoutes(d: OAuthDeps): Route[] {
  return [...appRoutes(d), ...authorizeRoutes(d), ...tokenRoutes(d)];
}
