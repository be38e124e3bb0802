import type { Context } from 'koa';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { escapeHtml } from '../error-pages.js';
import { renderFormPage } from '../form-pages.js';

/** The message over the code field, by what oidc-provider's verification step says about the last code entered. */
const INPUT_MESSAGES: Record<string, string> = {
  NoCodeError: 'Enter the code your device shows.',
  NotFoundError: 'That code is not valid. Check it on your device and enter it again.',
  ExpiredError: 'That code has expired. Start again on your device to get a new one.',
  AlreadyUsedError: 'That code has already been used. Start again on your device to get a new one.',
  AbortedError: 'You refused the request. Your device has been told; you can close this page.',
};

/**
 * RFC 8628 §3.3 pages, through oidc-provider's deviceFlow hooks: the user code field, the
 * confirmation naming the client and the scopes it asks for, and the end. oidc-provider checks
 * each form's CSRF token (`xsrf`, tied to its session cookie) and the user code; its sign-in
 * then runs through Arbiter's upstream sign-in as /authorize's does (interactions/).
 */
export function userCodeInputSource(ctx: KoaContextWithOIDC, form: string, out?: ErrorFields, err?: Error): void {
  if (err?.name === 'NotFoundError') rejectedUserCodes.add(ctx);
  const message = err ? inputMessage(ctx, err, out) : 'Enter the code your device shows to let it act for you.';
  const refusedByUser = err?.name === 'AbortedError' && !err.cause;
  const entered = (err as { userCode?: string } | undefined)?.userCode ?? '';
  renderFormPage(
    ctx,
    'Connect a device',
    `<p${err && !refusedByUser ? ' class="error"' : ''}>${escapeHtml(message)}</p>
<form method="post" action="${escapeHtml(ctx.oidc.urlFor('code_verification'))}">
<input type="hidden" name="xsrf" value="${escapeHtml(xsrfOf(form))}">
<label for="user_code">Code</label>
<input id="user_code" name="user_code" value="${escapeHtml(entered)}" autocomplete="off" autocapitalize="characters" spellcheck="false" required autofocus>
<button type="submit">Continue</button>
</form>`,
  );
}

/**
 * What the page says after `err`: the user code's fate; a sign-in that failed (the return from the
 * upstream identity provider, whose error the device is also answered with); else the form itself
 * was refused (its CSRF token).
 */
function inputMessage(ctx: KoaContextWithOIDC, err: Error, out?: ErrorFields): string {
  // oidc-provider reports a sign-in refused upstream (access_denied) as an abort caused by it.
  const signIn = ctx.oidc.route === 'device_resume' ? ((err.cause as ErrorFields | undefined) ?? out) : undefined;
  if (signIn && (err.cause || !INPUT_MESSAGES[err.name]))
    return `The sign-in did not complete (${signIn.error_description ?? signIn.error ?? 'an error'}). Your device has been told; start again on it.`;
  return INPUT_MESSAGES[err.name] ?? 'This form has expired. Enter the code again.';
}

interface ErrorFields {
  error?: string;
  error_description?: string;
}

export function userCodeConfirmSource(
  ctx: KoaContextWithOIDC,
  form: string,
  client: { clientId: string; clientName?: string | undefined },
  _deviceInfo: unknown,
  userCode: string,
): void {
  const scopes = String(ctx.oidc.deviceCode?.params?.scope ?? '')
    .split(' ')
    .filter(Boolean);
  const action = escapeHtml(ctx.oidc.urlFor('code_verification'));
  const hidden = `<input type="hidden" name="xsrf" value="${escapeHtml(xsrfOf(form))}">
<input type="hidden" name="user_code" value="${escapeHtml(userCode)}">`;
  renderFormPage(
    ctx,
    'Allow this device?',
    `<p>A device asks to act for you. Allow it only if it shows this code and you started this on it.</p>
<dl>
<dt>Application</dt><dd>${escapeHtml(client.clientName ?? client.clientId)}</dd>
<dt>Client id</dt><dd><code>${escapeHtml(client.clientId)}</code></dd>
<dt>Code</dt><dd><code class="code">${escapeHtml(userCode)}</code></dd>
<dt>Asks for</dt><dd>${scopes.length ? scopes.map((scope) => `<code>${escapeHtml(scope)}</code>`).join(' ') : 'no scopes'}</dd>
</dl>
<p class="hint">You sign in next; the server's policy decides what the device is finally granted.</p>
<form method="post" action="${action}">
${hidden}
<input type="hidden" name="confirm" value="yes">
<button type="submit">Sign in and allow</button>
</form>
<form method="post" action="${action}">
${hidden}
<input type="hidden" name="abort" value="yes">
<button type="submit" class="secondary">Refuse</button>
</form>`,
  );
}

export function successSource(ctx: KoaContextWithOIDC): void {
  renderFormPage(ctx, 'Device connected', '<p>You are signed in on your device. You can close this page.</p>');
}

/** RFC 8628 §5.1: an address that entered too many unknown codes waits (guesses.ts). */
export function tooManyGuessesPage(ctx: Context, retryAfterSeconds: number): void {
  ctx.status = 429;
  ctx.set('Retry-After', String(retryAfterSeconds));
  renderFormPage(
    ctx,
    'Too many codes tried',
    `<p class="error">Too many codes entered here were not valid. Wait ${retryAfterSeconds} seconds, then enter the code your device shows.</p>`,
  );
}

/** A code page form that no live browser session of ours sent (its CSRF token cannot be checked): start again. */
export function expiredFormPage(ctx: Context, codePage: string = ctx.path): void {
  ctx.status = 400;
  renderFormPage(
    ctx,
    'Connect a device',
    `<p class="error">This form has expired.</p><p><a href="${escapeHtml(codePage)}">Open the page again</a> and enter the code your device shows.</p>`,
  );
}

/** The requests whose user code was unknown: counted against the address by userCodeGuessLimit (guesses.ts). */
export const rejectedUserCodes = new WeakSet<object>();

/** The CSRF token oidc-provider put in the form it made (the pages make their own forms around it). */
function xsrfOf(form: string): string {
  return /name="xsrf" value="([^"]*)"/.exec(form)?.[1] ?? '';
}
