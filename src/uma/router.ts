import Router from '@koa/router';
import { routedApi, type RoutedApi } from '../http/router.js';
import type { ApiContext, ApiState, UmaDeps } from './deps.js';
import { permissionRoutes } from './permission.js';
import { resourceRegistrationRoutes } from './registration.js';
import type { ResourceOwner } from './resources.js';

/** Spec, Authentication rule 3: a protection API token carries uma_protection and was issued for urn:as:introspect. */
export const PROTECTION = { scope: 'uma_protection', audience: 'urn:as:introspect', audienceRequired: true } as const;

/** The UMA protection API: resource registration and permission tickets, both behind a PAT. */
export function umaRouter(deps: UmaDeps): RoutedApi<ApiState> {
  const router = new Router<ApiState>({ sensitive: true, strict: true });
  const ownerOf = async (ctx: ApiContext): Promise<ResourceOwner> => {
    const caller = await deps.callers(ctx, PROTECTION);
    return { sub: caller.sub, clientId: caller.clientId };
  };
  resourceRegistrationRoutes(router, deps, ownerOf);
  permissionRoutes(router, deps, ownerOf);
  return routedApi(router);
}
