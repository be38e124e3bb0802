import type { ArbiterMiddleware } from '../state.js';
import { routes } from '../routes.js';
import { addressBudget } from '../shared/address-budget.js';
import { registrationHandlers, type RegistrationDeps } from './gate.js';

export const REGISTER_PATH = routes.registration;

/**
 * /register (RFC 7591) and the registration client URIs below it, /register/{client_id}
 * (RFC 7592): answered by Arbiter itself (gate.ts), never by oidc-provider. Client ID metadata
 * documents, the other way a client comes to exist, are in cimd/.
 */
export function registrationMiddleware(deps: RegistrationDeps): {
  register: ArbiterMiddleware[];
  clientConfiguration: ArbiterMiddleware[];
} {
  const { registerClient, manageClient } = registrationHandlers(deps);
  const { openRegistrationsPerAddress: perAddress, openRegistrationsWindowSeconds: windowSeconds } = deps.config;
  // A client registered without an initial access token is kept for good: found 2026-11-29, with
  // open registration on, one address registered 300 in a second, each of 4 KB, without end.
  const anonymous = addressBudget(
    { perAddress, windowSeconds },
    'client registrations without an initial access token',
    {
      applies: (ctx) => ctx.method === 'POST' && !ctx.get('authorization'),
      made: (ctx) => ctx.status === 201,
    },
  );
  return { register: [anonymous, registerClient], clientConfiguration: [manageClient] };
}
