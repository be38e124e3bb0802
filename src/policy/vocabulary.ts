import { createHash } from 'node:crypto';
import type { PolicySnapshot } from './bundle/build.js';
import { isObject, valueAt } from './bundle/data-tree.js';

/**
 * What the protocol layer is built from that policy data defines, derived once per policy
 * revision: oidc-provider's instances are constructed with it (src/oauth/providers.ts rebuilds a
 * tenant's provider when its digest changes), so that no request pays for the size of the
 * policy data (10,000 resource types cost a request nothing).
 */
export interface PolicyVocabulary {
  /** The bundle revision it was derived from. */
  revision: string;
  /**
   * What it says, whatever the revision: providers are built again only when this changes, not at
   * every policy change (found 2026-11-29: any rule or data write rebuilt every tenant's provider,
   * halving the requests a second of the next pass over 300 tenants).
   */
  digest: string;
  /** RFC 9396 types: the keys of `oauth.resource_types` and `oauth.rar_only_types`, sorted, without repeats. */
  authorizationDetailsTypes: readonly string[];
  /** The scope names policy data defines: `oauth.oidc_scopes` and every resource type's `scopes`. */
  scopes: readonly string[];
}

/**
 * The vocabulary of the current revision, derived at most once per revision: one is kept, since
 * revisions only move forward and every request asks for the current one.
 */
export class PolicyVocabularies {
  private derived: PolicyVocabulary | null = null;

  of(snapshot: PolicySnapshot): PolicyVocabulary {
    if (this.derived?.revision !== snapshot.revision) this.derived = derive(snapshot);
    return this.derived;
  }
}

function derive({ revision, mergedData }: PolicySnapshot): PolicyVocabulary {
  const keysOf = (dataKey: string) => {
    const value = valueAt(mergedData, dataKey);
    return isObject(value) ? Object.keys(value) : [];
  };
  const types = [...new Set([...keysOf('oauth.resource_types'), ...keysOf('oauth.rar_only_types')])].sort();
  const resourceTypes = valueAt(mergedData, 'oauth.resource_types');
  const named = [
    valueAt(mergedData, 'oauth.oidc_scopes'),
    ...Object.values(isObject(resourceTypes) ? resourceTypes : {}).map((type) =>
      isObject(type) ? type.scopes : undefined,
    ),
  ];
  const scopes = new Set(
    named.flatMap((list) => (Array.isArray(list) ? list.filter((scope) => typeof scope === 'string') : [])),
  );
  const said = { types, scopes: [...scopes].sort() };
  return Object.freeze({
    revision,
    digest: createHash('sha256').update(JSON.stringify(said)).digest('base64url'),
    authorizationDetailsTypes: Object.freeze(types),
    scopes: Object.freeze([...scopes] as string[]),
  });
}
