/**
 * The HTTP layer's part of Koa's `ctx.state` for one request. Each layer declares its own part
 * beside the code that fills it (tenancy: TenantState, audit: AuditState, oauth: OAuthState) and
 * the root combines them (src/state.ts). A type rather than an interface, like the others, so
 * that it stays assignable to the `Record<string, unknown>` the audit helpers take.
 */
export type RequestState = {
  /** Set first (request-id.ts), echoed in X-Request-Id and every log line of the request. */
  requestId: string;
  /** The parameters of a body Arbiter read itself (a form, or a JSON object): its checks and the audit log read them here. */
  body?: Record<string, unknown>;
  /** The `error` of a refusal, for the audit log. */
  errorCode?: string;
  /** The request's tenant, as log lines and spans name it (src/tenancy fills it, for the surfaces that have one). */
  tenant?: { readonly name: string };
};
