import { decodeJwt } from 'jose';
import { SignInError } from './errors.js';
import type { Interaction } from './interaction.js';
import type { UpstreamHints } from './upstream.js';

/** The prompt values of the authorization request that concern authentication, hence the upstream provider. */
const UPSTREAM_PROMPTS = new Set(['login', 'consent', 'select_account']);

/**
 * Reasons of oidc-provider's login prompt that the person's Arbiter session cannot settle: it is
 * too old for `max_age` (OIDC Core §3.1.2.1), or belongs to someone other than the `id_token_hint`
 * or the `claims` parameter's `sub` value names. The session is in all likelihood the upstream's
 * too, so the upstream is asked for a fresh sign-in (`prompt=login`) rather than to reuse it.
 */
const STALE_SESSION_REASONS = new Set(['max_age', 'id_token_hint', 'claims_id_token_sub_value']);

/** oidc-provider's interaction parameters: the authorization request as the client sent it. */
type Parameters = Record<string, unknown>;

/** What the upstream provider is asked for on behalf of this authorization request. */
export function upstreamHints(interaction: Interaction): UpstreamHints {
  const { params, prompt } = interaction;
  const requested = words(params.prompt).filter((value) => UPSTREAM_PROMPTS.has(value));
  const reasons = new Set(prompt.reasons);
  const stale = !reasons.has('no_session') && [...STALE_SESSION_REASONS].some((reason) => reasons.has(reason));
  return {
    prompt: [...new Set([...requested, ...(stale || reasons.has('login_prompt') ? ['login'] : [])])],
    loginHint: text(params.login_hint),
    uiLocales: text(params.ui_locales),
    display: text(params.display),
    acrValues: acrValues(params),
    maxAge: maxAge(params.max_age),
  };
}

/**
 * Why the person who signed in upstream cannot complete this authorization request, if they
 * cannot: another subject than the `id_token_hint` (OIDC Core §3.1.2.1: `login_required`) or the
 * `claims` parameter's `sub` value names, or no acr among the values of an essential `acr` claim
 * (§5.5.1.1: a failed authentication; `unmet_authentication_requirements`, OpenID Connect Unmet
 * Authentication Requirements 1.0). oidc-provider would otherwise ask for yet another login.
 */
export function unmetRequirement(
  interaction: Interaction,
  login: { accountId: string; acr?: string },
): SignInError | undefined {
  const { params } = interaction;
  const subject = hintedSubject(params) ?? requestedSubject(params);
  if (subject !== undefined && subject !== login.accountId)
    return new SignInError('login_required', 'the person who signed in is not the one this request is for');
  const acr = essentialAcr(params);
  if (acr && !(login.acr && acr.includes(login.acr)))
    return new SignInError(
      'unmet_authentication_requirements',
      'the identity provider did not authenticate the person at any of the essential acr values',
    );
  return undefined;
}

/** The `sub` of the id_token_hint (oidc-provider has verified it as one of Arbiter's own ID tokens). */
function hintedSubject(params: Parameters): string | undefined {
  const hint = text(params.id_token_hint);
  if (!hint) return undefined;
  try {
    return text(decodeJwt(hint).sub);
  } catch {
    return undefined;
  }
}

function requestedSubject(params: Parameters): string | undefined {
  return text(idTokenClaims(params)?.sub?.value);
}

/** The acr values an essential `acr` claim of the ID token asks for (`value` or `values`). */
function essentialAcr(params: Parameters): string[] | undefined {
  const acr = idTokenClaims(params)?.acr;
  if (acr?.essential !== true) return undefined;
  const values = [acr.value, ...(Array.isArray(acr.values) ? acr.values : [])].filter(
    (value): value is string => typeof value === 'string' && value !== '',
  );
  return values.length ? values : undefined;
}

interface ClaimRequest {
  essential?: unknown;
  value?: unknown;
  values?: unknown;
}

/** The `id_token` member of the `claims` parameter (oidc-provider has checked that it parses). */
function idTokenClaims(params: Parameters): Record<string, ClaimRequest | null | undefined> | undefined {
  if (typeof params.claims !== 'string') return undefined;
  try {
    const idToken = (JSON.parse(params.claims) as { id_token?: unknown }).id_token;
    return typeof idToken === 'object' && idToken !== null ? (idToken as Record<string, ClaimRequest>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The acr values asked of the upstream, in the client's order of preference: `acr_values`, then
 * those of an essential `acr` claim not among them. The upstream chooses; unmetRequirement checks
 * its choice against the essential ones.
 */
function acrValues(params: Parameters): string | undefined {
  const values = [...new Set([...words(params.acr_values), ...(essentialAcr(params) ?? [])])];
  return values.length ? values.join(' ') : undefined;
}

function maxAge(value: unknown): number | undefined {
  const seconds = typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : NaN;
  return Number.isSafeInteger(seconds) && seconds >= 0 ? seconds : undefined;
}

function words(value: unknown): string[] {
  return typeof value === 'string' ? value.split(' ').filter(Boolean) : [];
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}
