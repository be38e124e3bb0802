import type { ArbiterMiddleware } from '../state.js';
import { routes } from '../routes.js';
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
  return { register: [registerClient], clientConfiguration: [manageClient] };
}
