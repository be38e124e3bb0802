import { policyRevisions } from './api.js';
import { say } from './dom.js';

const POLL_MS = 500;

/**
 * After a policy write: polls /healthz until OPA serves the bundle revision the store holds,
 * then says which one. OPA long-polls the bundle, so this normally takes about a second.
 */
export async function showServedRevision(line: HTMLElement, timeoutMs = 30_000): Promise<void> {
  say(line, 'Saved. Waiting for OPA to load the new policy bundle…');
  const deadline = Date.now() + timeoutMs;
  let last = await policyRevisions().catch(() => undefined);
  while (!(last?.opa && last.opa === last.store) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    last = await policyRevisions().catch(() => undefined);
  }
  if (last?.opa && last.opa === last.store) say(line, `Saved. OPA now serves bundle revision ${last.opa}.`, 'ok');
  else
    say(
      line,
      `Saved, but OPA still serves revision ${last?.opa ?? '(none)'} while the store holds ${last?.store ?? '(unknown)'}: see GET /healthz and the server log.`,
      'error',
    );
}
