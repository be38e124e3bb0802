import type { KoaContextWithOIDC } from 'oidc-provider';
import type { ConfigurationSlice } from '../context.js';
import { escapeHtml } from '../error-pages.js';
import { renderFormPage } from '../form-pages.js';

/**
 * RP-Initiated Logout 1.0's pages, Arbiter's own in place of oidc-provider's development ones
 * (which loaded a web font from a third party, so every logout told it the user's address): the
 * confirmation around oidc-provider's form (its CSRF token; the buttons name it by id) and the page
 * after a logout without a post_logout_redirect_uri. They name the client as it named itself,
 * escaped, and never the request's host.
 */
export const logoutPages: ConfigurationSlice = () => ({
  features: {
    rpInitiatedLogout: {
      logoutSource(ctx: KoaContextWithOIDC, form: string) {
        renderFormPage(
          ctx,
          'Sign out',
          `<p>Do you want to sign out${of(ctx)}?</p>
${form}
<button autofocus type="submit" form="op.logoutForm" name="logout" value="yes">Yes, sign me out</button>
<button class="secondary" type="submit" form="op.logoutForm">No, stay signed in</button>`,
        );
      },
      postLogoutSuccessSource(ctx: KoaContextWithOIDC) {
        renderFormPage(ctx, 'Signed out', `<p>You are signed out${of(ctx)}. You can close this page.</p>`);
      },
    },
  },
});

/** " of <the client>" when the logout named one. */
function of(ctx: KoaContextWithOIDC): string {
  const client = ctx.oidc.client;
  const name = client?.clientName || client?.clientId;
  return name ? ` of ${escapeHtml(name)}` : '';
}
