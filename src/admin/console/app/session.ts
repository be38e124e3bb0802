/**
 * What the console remembers. The Admin API key lives in sessionStorage only (this tab, gone
 * when it closes) and is sent as a header: never in a URL, a cookie or localStorage.
 */

const KEY = 'arbiter.console.adminKey';
const TENANT = 'arbiter.console.tenant';
const KNOWN_TENANTS = 'arbiter.console.tenants';

export const session = {
  key: (): string | null => sessionStorage.getItem(KEY),
  signIn: (key: string) => sessionStorage.setItem(KEY, key),
  signOut: () => sessionStorage.removeItem(KEY),

  /** The tenant every call is about; '' is the default (shared) tenant. */
  tenant: (): string => sessionStorage.getItem(TENANT) ?? '',
  switchTenant(tenant: string): void {
    sessionStorage.setItem(TENANT, tenant);
    if (tenant && !this.knownTenants().includes(tenant))
      localStorage.setItem(KNOWN_TENANTS, JSON.stringify([...this.knownTenants(), tenant].slice(-20)));
  },
  /** Tenant ids switched to before (not secret), offered as suggestions. */
  knownTenants(): string[] {
    try {
      const known = JSON.parse(localStorage.getItem(KNOWN_TENANTS) ?? '[]');
      return Array.isArray(known) ? known.filter((tenant): tenant is string => typeof tenant === 'string') : [];
    } catch {
      return [];
    }
  },
};
