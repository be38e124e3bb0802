import type { Context } from 'koa';
import { escapeHtml, PAGE_STYLE, pagePolicy } from './error-pages.js';

/** The error page's style, with a code field and buttons: the device and logout pages look like Arbiter's other pages. */
const FORM_PAGE_STYLE = [
  PAGE_STYLE,
  'form{margin:1.25rem 0 0}label{display:block;font-weight:600;margin-bottom:.35rem}',
  'input[name=user_code]{box-sizing:border-box;width:100%;padding:.6rem .75rem;font:1.4rem ui-monospace,Menlo,monospace;',
  'letter-spacing:.15em;text-transform:uppercase;border:1px solid #9ca3af;border-radius:6px}',
  'button{margin:.75rem .5rem 0 0;padding:.55rem 1.1rem;font:inherit;font-weight:600;border-radius:6px;',
  'border:1px solid #3730a3;background:#3730a3;color:#fff;cursor:pointer}',
  'button.secondary{background:#fff;color:#3730a3}',
  '.error{color:#b91c1c;font-weight:600}.code{font-size:1.3rem}',
].join('');
/** Their forms post to this server only. */
const FORM_PAGE_CSP = pagePolicy(FORM_PAGE_STYLE, "'self'");

/**
 * One of Arbiter's pages with a form a person fills in (the device pages, the logout confirmation):
 * `content` is HTML its caller built with every value escaped; nothing is loaded from elsewhere.
 */
export function renderFormPage(ctx: Context, title: string, content: string): void {
  ctx.set('Content-Security-Policy', FORM_PAGE_CSP);
  ctx.type = 'html';
  ctx.body = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>Arbiter: ${escapeHtml(title)}</title>
<style>${FORM_PAGE_STYLE}</style>
</head>
<body>
<main>
<p class="brand">Arbiter</p>
<h1>${escapeHtml(title)}</h1>
${content}
</main>
</body>
</html>`;
}
