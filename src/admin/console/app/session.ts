/**
 * What the console remembers. The Admin API key lives in sessionStorage only (this tab, gone
 * when it closes) and is sent as a header: never in a URL, a cookie or localStorage. An operator
 * signed in through the identity provider (/admin/sign-in) holds no key: the server's HttpOnly
 * session cookie is the credential, and the tab only remembers that it is signed in so.
 */

/** What `key()` holds for an operator signed in through the identity provider. */
export const SESSION_SIGN_IN = 'signed-in-with-session';

const KEY = 'arbiter.console.adminKey';
const CALLER = 'arbiter.console.caller';
const TENANT = 'arbiter.console.tenant';

/** Whom the key belongs to, as GET /admin/api/api-keys/current says (nothing secret). */
export interface Caller {
  id: number | null;
  name: string;
  role: string;
  permissions: string[];
}

export const session = {
  key: (): string | null => sessionStorage.getItem(KEY),
  signIn: (key: string) => {
    // A new sign-in may be someone else's: whose it is, the API says again.
    sessionStorage.removeItem(CALLER);
    sessionStorage.setItem(KEY, key);
  },
  signOut: () => {
    // A session signed in through the identity provider ends on the server too.
    if (sessionStorage.getItem(KEY) === SESSION_SIGN_IN)
      void fetch('/admin/sign-out', {
        method: 'POST',
        cache: 'no-store',
        headers: { 'X-Arbiter-Console': '1' },
      }).catch(() => undefined);
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(CALLER);
  },
  /** The signed-in key's name, role and permissions, once the API has said them. */
  caller(): Caller | null {
    try {
      return JSON.parse(sessionStorage.getItem(CALLER) ?? 'null') as Caller | null;
    } catch {
      return null;
    }
  },
  rememberCaller: (caller: Caller) => sessionStorage.setItem(CALLER, JSON.stringify(caller)),
  /** True when the key's role allows `permission` (read, operate, author-policy, manage-keys); unknown: true (the API decides). */
  may(permission: string): boolean {
    return this.caller()?.permissions.includes(permission) ?? true;
  },

  /** The tenant every call is about; '' is the default (shared) tenant. */
  tenant: (): string => sessionStorage.getItem(TENANT) ?? '',
  switchTenant: (tenant: string) => sessionStorage.setItem(TENANT, tenant),
};
