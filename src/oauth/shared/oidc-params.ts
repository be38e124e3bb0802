import type { KoaContextWithOIDC } from 'oidc-provider';

/**
 * The request's parameters as oidc-provider assembled them (`ctx.oidc.params`: only those the
 * route allows), read-only: the one place they are typed. Each is a string or absent; the few
 * a route lets repeat (RFC 8707 `resource`, token exchange's `audience`) may be a list, and are
 * read through resourceList or a check of their type. Arbiter's readers change none of them (a
 * grant narrowing its scope writes `ctx.oidc.params` itself: token/grants/gate.ts).
 */
export function oidcParams(ctx: Pick<KoaContextWithOIDC, 'oidc'>): Readonly<Record<string, string | undefined>> {
  // oidc-provider types them `unknown` (UnknownObject); its Params copies the form's or query's
  // values (strings, or lists when repeated), and a request object's made strings, so `string`
  // is what every reader may count on but the repeatable ones named above.
  return (ctx.oidc.params ?? {}) as Readonly<Record<string, string | undefined>>;
}
