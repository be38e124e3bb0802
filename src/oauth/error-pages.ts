import type { ErrorOut, KoaContextWithOIDC } from 'oidc-provider';
import type { ConfigurationSlice } from './context.js';

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
      ctx.body = errorPage(out);
    } else {
      ctx.type = 'json';
      ctx.body = out;
    }
  },
});

/** The page a browser sees: the error and its description, escaped; nothing loaded from elsewhere. */
function errorPage(out: ErrorOut): string {
  const fields = Object.entries(out)
    .filter(([, value]) => value !== undefined)
    .map(([name, value]) => `<pre><strong>${escapeHtml(name)}</strong>: ${escapeHtml(String(value))}</pre>`)
    .join('');
  return `<!DOCTYPE html>
<html>
<head>
  <meta charset="utf-8">
  <title>oops! something went wrong</title>
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <style>body{font-family:sans-serif;margin:25px auto;max-width:40em}h1{font-weight:100;text-align:center}pre{white-space:pre-wrap;word-wrap:break-word}</style>
</head>
<body>
  <h1>oops! something went wrong</h1>
  ${fields}
</body>
</html>`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"'/]/g, (char) => `&#${char.charCodeAt(0)};`);
}
