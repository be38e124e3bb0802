import type Router from '@koa/router';
import type { Middleware } from 'koa';
import { unsupportedMethod } from './errors.js';

/**
 * A router's routes as one middleware: a path it serves with a method it does not is a 405
 * naming the methods it does (rather than falling through to the 404 of an unknown path);
 * other paths pass on.
 */
export function routesWithMethods<State>(router: Router<State>): Middleware<State> {
  const routes = router.routes() as unknown as Middleware<State>;
  return async (ctx, next) => {
    const matched = router.match(ctx.path, ctx.method);
    if (matched.path.length > 0 && !matched.route) {
      ctx.set('Allow', [...new Set(matched.path.flatMap((layer) => layer.methods))].join(', '));
      throw unsupportedMethod();
    }
    return routes(ctx, next);
  };
}

/** A router as the route table (src/routes.ts) mounts it: which paths it serves, and its routes as one step. */
export interface RoutedApi<State> {
  serves(path: string): boolean;
  routes: Middleware<State>;
}

export function routedApi<State>(router: Router<State>): RoutedApi<State> {
  return { serves: (path) => router.match(path, 'GET').path.length > 0, routes: routesWithMethods(router) };
}
