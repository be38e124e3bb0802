import { serverHealth, type Health } from './api.js';
import { h, replace } from './dom.js';

/**
 * Above every page, while GET /healthz says the policy in force cannot decide a point (or OPA
 * lags behind the store): which point, the engine's own error (OPA's message and the rule's
 * file:line) and what to do. Empty while the server is healthy.
 */
export function healthNotice(): HTMLElement {
  const region = h('section', { class: 'health', 'aria-label': 'Server health', 'aria-live': 'polite' });
  void serverHealth()
    .then((health) => {
      replace(region, noticeOf(health));
      region.dataset.checked = 'true';
    })
    .catch(() => undefined);
  return region;
}

function noticeOf(health: Health): HTMLElement | null {
  const faults = health.policyFaults ?? [];
  if (health.status === 'ok' && faults.length === 0) return null;
  const failing = faults.filter((fault) => fault.failing);
  const heading =
    failing.length > 0
      ? `The policy in force cannot decide ${failing.map((fault) => fault.point).join(', ')}: those requests are refused (503).`
      : faults.length > 0
        ? 'Some policy decisions failed for the policy’s own error.'
        : `The server is ${health.status}: ${health.policy ?? 'see GET /healthz'}.`;
  return h(
    'div',
    { class: 'notice problem' },
    h('p', {}, h('strong', {}, heading)),
    faults.length
      ? h(
          'ul',
          {},
          faults.map((fault) =>
            h(
              'li',
              {},
              h('code', {}, fault.point),
              ': ',
              h('span', { class: 'code' }, fault.error),
              fault.failed !== null
                ? ` (${fault.failed} of ${fault.decisions} decisions failed, last at ${fault.at})`
                : '',
            ),
          ),
        )
      : null,
    faults.length
      ? h('p', { class: 'hint' }, 'Fix the rule the error names, or roll it back: Policy rules › History › Roll back.')
      : null,
  );
}
