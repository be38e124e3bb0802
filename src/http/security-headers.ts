import helmet from 'koa-helmet';

/**
 * Headers every response carries (helmet): no MIME sniffing, no referrer, never framed
 * (Content-Security-Policy frame-ancestors 'none' and X-Frame-Options DENY), and a page loads
 * nothing and runs no script but its own: Arbiter's pages set a policy of their own (their style's
 * hash), and the one page oidc-provider still makes, form_post's auto-submitting form, gets its
 * inline script's hash added to `script-src` by oidc-provider itself. Cross-origin resource and
 * opener policies stay off, so that browser clients of other origins can read discovery and JWKS
 * and sign-in popups keep their opener.
 */
export const securityHeaders = helmet({
  contentSecurityPolicy: {
    useDefaults: false,
    directives: {
      defaultSrc: ["'none'"],
      scriptSrc: ["'self'"],
      baseUri: ["'none'"],
      frameAncestors: ["'none'"],
    },
  },
  xFrameOptions: { action: 'deny' },
  referrerPolicy: { policy: 'no-referrer' },
  xContentTypeOptions: true,
  crossOriginResourcePolicy: false,
  crossOriginOpenerPolicy: false,
});
