/**
 * The cost curve's policy-size dimension (bench/curve.ts): client_credentials with 10 resource
 * types in `data.oauth.resource_types` against CURVE_RESOURCE_TYPES (10,000), each type with a
 * scope of its own. Seeded through the store code: the default pack's `oauth` data entry
 * rewritten before the server starts (its first bundle has them), and one machine client.
 */
import { policyDataRecords } from '../src/catalog/index.js';
import { clientsCollection } from '../src/oauth/clients/records.js';
import { DEFAULT_TENANT, type Store } from '../src/store/index.js';
import type { CurveDimension, CurveSide, Size } from './curve.js';
import { FORM, machineClient, seededServer } from './curve-server.js';

const RESOURCE_TYPES = { small: 10, large: Number(process.env.CURVE_RESOURCE_TYPES ?? 10_000) };

async function addResourceTypes(store: Store, count: number): Promise<void> {
  const entries = policyDataRecords(store, DEFAULT_TENANT);
  const oauth = await entries.findOne({ dataKey: 'oauth', tenantId: null });
  if (!oauth) throw new Error('the default policy pack has no oauth data entry');
  const data = JSON.parse(oauth.payload) as { resource_types: Record<string, unknown> };
  for (let index = 0; index < count; index += 1)
    data.resource_types[`urn:curve:type:${index}`] = { scopes: ['read', `curve-${index}`] };
  await entries.update(oauth.id, { payload: JSON.stringify(data) });
}

async function policySide(size: Size): Promise<CurveSide> {
  const count = RESOURCE_TYPES[size];
  let body = '';
  const server = await seededServer(`policy ${size}`, async (store, sealer) => {
    await addResourceTypes(store, count);
    const client = machineClient(1, 'curve-machine', null, sealer);
    await clientsCollection(store, DEFAULT_TENANT).insert(client.record);
    body = client.body;
  });
  return {
    label: `${count.toLocaleString('en')} resource types`,
    job: { url: `${server.url}/token`, method: 'POST', headers: FORM, body },
    start: server.start,
    close: server.close,
  };
}

export const policySize: CurveDimension = {
  name: 'policy',
  kind: 'throughput',
  goals: [{ figure: 'req/s', of: 'ratio', atLeast: 0.8 }],
  seed: policySide,
};
