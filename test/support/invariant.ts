import { createHash } from 'node:crypto';

/**
 * The "exact grants" invariant test's policy: Rego rules for the `authorize` and `token` decision
 * points that grant a random-looking but deterministic subset of what a request asks for, and the
 * same function in TypeScript, so that a test knows what every decision granted without asking.
 *
 * An item (a scope, or an authorization detail's type) is granted iff the first hex digit of
 * sha256("<seed>|<item>") is even. `openid` and `introspection` are always granted when asked for
 * (OpenID Connect flows need openid; the test's introspection caller needs introspection).
 * - authorize: seed = "authorize|<state parameter>"
 * - token:     seed = "token|<client_id>|<grant_type>|<resource_types parameter>"
 *   (resource_types is a parameter every policy-gated grant accepts and relays to the input, so
 *   a test chooses a fresh seed for every token request.)
 * Every decision also carries obligations {"seen": sha256(seed)[0..8]} and extensions
 * {"mark": sha256(seed)[8..16]}, which introspection relays for tokens.
 */

export const ALWAYS_GRANTED = new Set(['openid', 'introspection']);

const EVEN = new Set('02468ace');

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

export const authorizeSeed = (state: string): string => `authorize|${state}`;
export const tokenSeed = (clientId: string, grantType: string, marker: string): string =>
  `token|${clientId}|${grantType}|${marker}`;

export function picked(seed: string, item: string): boolean {
  return EVEN.has(sha256(`${seed}|${item}`)[0]!);
}

export interface Detail {
  type: string;
  [field: string]: unknown;
}

export interface Decided {
  scopes: string[];
  authorization_details: Detail[];
  obligations: { seen: string };
  extensions: { mark: string };
}

/** What the rules below decide for `requested` scopes and `details` under `seed`. */
export function decide(seed: string, requested: string[], details: Detail[]): Decided {
  const hash = sha256(seed);
  return {
    scopes: [...new Set(requested)]
      .filter((scope) => ALWAYS_GRANTED.has(scope) || picked(seed, `scope:${scope}`))
      .sort(),
    authorization_details: details.filter((detail) => picked(seed, `type:${detail.type}`)),
    obligations: { seen: hash.slice(0, 8) },
    extensions: { mark: hash.slice(8, 16) },
  };
}

const COMMON = `
even := {"0", "2", "4", "6", "8", "a", "c", "e"}

always := {"openid", "introspection"}

picked(item) if substring(crypto.sha256(sprintf("%s|%s", [seed, item])), 0, 1) in even

granted_scope(scope) if scope in always

granted_scope(scope) if picked(sprintf("scope:%s", [scope]))

scopes := sort({scope | some scope in input.request.scopes; granted_scope(scope)})

details := [detail | some detail in input.request.authorization_details; picked(sprintf("type:%s", [detail.type]))]

decision := {
	"allow": true,
	"scopes": scopes,
	"authorization_details": details,
	"obligations": {"seen": substring(crypto.sha256(seed), 0, 8)},
	"extensions": {"mark": substring(crypto.sha256(seed), 8, 8)},
}
`;

/** Replaces the default pack's arbiter/authorize/authorize.rego (upsert by path). */
export const AUTHORIZE_REGO = `# Test policy (exact-grants invariant): a deterministic pseudo-random subset of what is asked.
package arbiter.authorize

seed := sprintf("authorize|%s", [object.get(input.request.parameters, "state", "")])
${COMMON}`;

/** Replaces the default pack's arbiter/token/token.rego (upsert by path). */
export const TOKEN_REGO = `# Test policy (exact-grants invariant): a deterministic pseudo-random subset of what is asked.
package arbiter.token

seed := sprintf("token|%s|%s|%s", [input.client.client_id, input.request.grant_type, object.get(input.request.parameters, "resource_types", "")])
${COMMON}`;
