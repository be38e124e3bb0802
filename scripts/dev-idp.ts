// `npm run dev-idp`: the development upstream identity provider on port 9100.
import { DEV_IDP_CLIENT, startDevIdp } from '../src/dev-idp/index.js';

const port = Number(process.env.PORT ?? 9100);
const redirectUris = (process.env.DEV_IDP_REDIRECT_URIS ?? 'http://localhost:9000/idp/callback/dev')
  .split(',')
  .map((uri) => uri.trim());

const idp = await startDevIdp({ port, redirectUris });
console.log(
  `Development IdP at http://localhost:${port} (client ${DEV_IDP_CLIENT.clientId} / ${DEV_IDP_CLIENT.clientSecret}; any login and password)`,
);
process.once('SIGINT', () => void idp.close().then(() => process.exit(0)));
process.once('SIGTERM', () => void idp.close().then(() => process.exit(0)));
