import { callerOfKey } from '../api.js';
import { detached, h, replace, say, statusLine } from '../dom.js';
import { session } from '../session.js';

/** The Admin API key, checked with one harmless call before it is kept (in sessionStorage only). */
export function signInPage(root: HTMLElement, signedIn: () => void, notice?: string): void {
  const status = statusLine();
  const key = h('input', {
    id: 'admin-key',
    name: 'adminKey',
    type: 'password',
    autocomplete: 'off',
    required: true,
    'aria-describedby': 'admin-key-hint',
  });
  const form = h(
    'form',
    { novalidate: true, 'aria-labelledby': 'sign-in-title' },
    h('h2', { id: 'sign-in-title' }, 'Sign in'),
    h(
      'div',
      { class: 'field' },
      h('label', { for: key.id }, 'Admin API key'),
      key,
      h(
        'p',
        { class: 'hint', id: 'admin-key-hint' },
        'Your named Admin API key, or SERVICE_ADMIN_API_KEY. Kept in this tab only, until you sign out or close it.',
      ),
    ),
    status,
    h('div', { class: 'buttons' }, h('button', { type: 'submit' }, 'Sign in')),
    h(
      'p',
      { class: 'hint' },
      h('a', { href: '/admin/sign-in' }, 'Sign in with your identity provider'),
      ' (where the server is set up for it: ADMIN_SIGN_IN_IDP).',
    ),
  );
  const signIn = async (event: SubmitEvent) => {
    event.preventDefault();
    if (!key.value) return say(status, 'Enter the Admin API key.', 'error');
    session.signIn(key.value);
    try {
      const caller = await callerOfKey();
      if (caller) {
        session.rememberCaller(caller);
        return signedIn();
      }
      say(status, 'That key is not valid.', 'error');
    } catch (error) {
      say(status, (error as Error).message, 'error');
    }
    session.signOut();
    key.focus();
  };
  form.addEventListener('submit', detached(signIn));
  replace(
    root,
    h('header', { class: 'banner' }, h('h1', {}, 'Arbiter console')),
    h('main', { id: 'main', class: 'sign-in' }, form),
  );
  if (notice) say(status, notice, 'error');
  key.focus();
}
