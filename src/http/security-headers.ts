import { contentSecurityPolicy } from 'helmet';
import helmet from 'koa-helmet';

/**
 * Headers every response carries (helmet): no MIME sniffing, no referrer, never framed
 * (Content-Security-Policy frame-ancestors 'none' and X-Frame-Options DENY). The policy is
 * limited to framing because oidc-provider's own HTML pages (errors, form_post) carry inline
 * styles and scripts; cross-origin resource and opener policies stay off, so that browser
 * clients of other origins can read discovery and JWKS and sign-in popups keep their opener.
 */
export const securityHeaders = helmet({
  contentSecurityPolicy: {
    useDefaults: false,
    directives: { defaultSrc: contentSecurityPolicy.dangerouslyDisableDefaultSrc, frameAncestors: ["'none'"] },
  },
  xFrameOptions: { action: 'deny' },
  referrerPolicy: { policy: 'no-referrer' },
  xContentTypeOptions: true,
  crossOriginResourcePolicy: false,
  crossOriginOpenerPolicy: false,
});
