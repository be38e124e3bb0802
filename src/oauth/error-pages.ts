import { createHash } from 'node:crypto';
import type { ErrorOut, KoaContextWithOIDC } from 'oidc-provider';
import type { ConfigurationSlice } from './context.js';
import { withTenantHint } from './shared/tenant-hint.js';

/** oidc-provider routes a person's browser visits: their errors may be an HTML page. */
const BROWSER_ROUTES = new Set([
  'authorization',
  'resume',
  'end_session',
  'end_session_confirm',
  'end_session_success',
  'code_verification',
  'device_resume',
]);

/**
 * oidc-provider renders any error as an HTML page when the request's Accept header prefers
 * HTML, the token, introspection, registration and UserInfo endpoints included. Those answer
 * programs, and the spec makes their errors JSON (`error`, `error_description`) whatever the
 * caller accepts: only the browser routes answer with a page.
 */
export const errorPages: ConfigurationSlice = () => ({
  renderError(ctx: KoaContextWithOIDC, out: ErrorOut) {
    if (BROWSER_ROUTES.has(ctx.oidc?.route ?? '')) {
      ctx.type = 'html';
      ctx.body = errorPage(ctx, out);
    } else {
      ctx.type = 'json';
      ctx.body = out;
    }
  },
});

/** The page's only style, allowed by its hash: nothing else may load or run on it (the form pages build on it: form-pages.ts). */
export const PAGE_STYLE = [
  'body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2937;background:#f3f4f6}',
  'main{box-sizing:border-box;max-width:38rem;margin:3rem auto;padding:2rem;background:#fff;border-radius:8px;',
  'box-shadow:0 1px 3px rgba(0,0,0,.12)}',
  '.brand{margin:0 0 1rem;font-weight:700;letter-spacing:.04em;color:#3730a3}',
  'h1{margin:0 0 .75rem;font-size:1.4rem;line-height:1.3}',
  'dl{display:grid;grid-template-columns:max-content 1fr;gap:.35rem 1rem;margin:1.25rem 0}',
  'dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}',
  'code{font:.9em ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f3f4f6;padding:.1em .3em;border-radius:4px}',
  '.hint{color:#4b5563;font-size:.9rem}',
  '@media (max-width:40rem){main{margin:0;border-radius:0;box-shadow:none;padding:1.25rem}',
  'dl{grid-template-columns:1fr}dt{margin-top:.5rem}}',
].join('');
/** The policy of one of Arbiter's pages: it loads nothing, runs nothing and is never framed; `style` is allowed by its hash, forms post to `formAction`. */
export function pagePolicy(style: string, formAction: "'none'" | "'self'"): string {
  const styleHash = `'sha256-${createHash('sha256').update(style).digest('base64')}'`;
  return `default-src 'none'; style-src ${styleHash}; base-uri 'none'; form-action ${formAction}; frame-ancestors 'none'`;
}

/** The error page posts nowhere. */
const PAGE_CSP = pagePolicy(PAGE_STYLE, "'none'");

/**
 * The page a browser sees: Arbiter's own, with the error, its description and the request id
 * (X-Request-ID, also in the log and the audit entry), all escaped; nothing loaded from elsewhere.
 * A browser only gets a page when it cannot be sent back to the client (an unregistered
 * redirect_uri, an unknown client), so it says what a person can do about it.
 */
function errorPage(ctx: KoaContextWithOIDC, out: ErrorOut): string {
  ctx.set('Content-Security-Policy', PAGE_CSP);
  const requestId = ctx.response.get('X-Request-ID') || undefined;
  const description =
    out.error === 'invalid_client' && out.error_description
      ? withTenantHint(ctx, out.error_description)
      : out.error_description;
  // Codes and ids in monospace; the description is prose.
  const rows: [string, string | undefined, boolean][] = [
    ['Error', out.error, true],
    ['Details', description, false],
    ['Request id', requestId, true],
  ];
  const listed = rows
    .filter((row): row is [string, string, boolean] => typeof row[1] === 'string' && row[1] !== '')
    .map(([name, value, code]) => {
      const shown = escapeHtml(value);
      return `<dt>${name}</dt><dd>${code ? `<code>${shown}</code>` : shown}</dd>`;
    })
    .join('');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>Arbiter: this request cannot continue</title>
<style>${PAGE_STYLE}</style>
</head>
<body>
<main>
<p class="brand">Arbiter</p>
<h1>This request cannot continue</h1>
<p>The application that sent you here made a request this server cannot accept, so you were not sent back to it. Close this page and start again from the application; if it happens again, tell the people who run it.</p>
<dl>${listed}</dl>
${requestId ? '<p class="hint">The request id lets the operators of this server find the request in their logs.</p>' : ''}
</main>
</body>
</html>`;
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'/]/g, (char) => `&#${char.charCodeAt(0)};`);
}
