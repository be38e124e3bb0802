import type { InputParties } from '../../policy/index.js';
import type { Store } from '../../store/index.js';
import { clientInput } from '../clients/input.js';
import { subjectInput } from './subject-input.js';

/** `input.client` and `input.subject` from this folder's records, for the routers outside it (UMA, delegation). */
export function inputParties(store: Store): InputParties {
  return {
    client: (tenant, clientId, authenticatedWith) => clientInput(store, tenant, clientId, authenticatedWith),
    subject: (tenant, sub) => subjectInput(store, tenant, sub),
  };
}
