import { DECISION_POINTS } from '../../../../policy/contract/types.js';
import { ApiError, api } from '../api.js';
import { h, replace, say, statusLine } from '../dom.js';
import { explainDecision, type DecisionAnswer } from '../explain.js';
import { session } from '../session.js';
// A starting input the token point accepts; "Why?" in the audit log opens real ones here.
import { CLIENT_CREDENTIALS_TOKEN_INPUT } from '../../../../policy/contract/examples.js';

/** An input handed over by another page ("try this audited input"), shown once by the next playground. */
let draft: { point: string; input: unknown } | undefined;

export function openInPlayground(point: string, input: unknown): void {
  draft = { point, input };
  location.hash = '#/playground';
}

/** Asks the policy engines for a decision on any input (POST /admin/api/decisions) and shows why. */
export function playgroundPage(main: HTMLElement): void {
  const given = draft;
  draft = undefined;
  const status = statusLine();
  const answer = h('section', { class: 'answer', 'aria-label': 'Decision' });
  const point = h(
    'select',
    { id: 'playground-point', name: 'point' },
    DECISION_POINTS.map((name) => h('option', { value: name, selected: name === (given?.point ?? 'token') }, name)),
  );
  const input = h('textarea', {
    id: 'playground-input',
    name: 'input',
    rows: 16,
    class: 'code',
    spellcheck: 'false',
    'aria-describedby': 'playground-input-error',
    value: JSON.stringify(given?.input ?? CLIENT_CREDENTIALS_TOKEN_INPUT, null, 2),
  });
  const inputError = h('p', { class: 'field-error', id: 'playground-input-error', hidden: true });

  async function decide(): Promise<void> {
    inputError.hidden = true;
    input.removeAttribute('aria-invalid');
    let parsed: unknown;
    try {
      parsed = JSON.parse(input.value);
    } catch (error) {
      return showInputError(`Input is not valid JSON: ${(error as Error).message}`);
    }
    say(status, 'Asking the engines…');
    try {
      const decided = await api<DecisionAnswer>('POST', '/decisions', {
        point: point.value,
        input: parsed,
        ...(session.tenant() ? { tenantId: session.tenant() } : {}),
      });
      say(status, 'Decided.', 'ok');
      replace(answer, explainDecision(decided));
    } catch (error) {
      if (error instanceof ApiError && error.field?.startsWith('input')) return showInputError(error.message);
      say(status, (error as Error).message, 'error');
    }
  }

  function showInputError(message: string): void {
    inputError.textContent = message;
    inputError.hidden = false;
    input.setAttribute('aria-invalid', 'true');
    input.focus();
    say(status, '');
  }

  const form = h(
    'form',
    { novalidate: true, 'aria-label': 'Decision request' },
    h('div', { class: 'field' }, h('label', { for: point.id }, 'Decision point'), point),
    h('div', { class: 'field' }, h('label', { for: input.id }, 'Input (JSON)'), input, inputError),
    h('div', { class: 'buttons' }, h('button', { type: 'submit' }, 'Decide')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void decide();
  });
  replace(main, h('h2', { tabindex: -1 }, 'Decision playground'), form, status, answer);
}
