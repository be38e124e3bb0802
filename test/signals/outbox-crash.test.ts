import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { clientWithToken, confidentialClient } from '../support/oauth.js';
import { startServerProcess } from '../support/server-process.js';
import { adminVia, freePort, requestAt, testEnvironment, type TestServer } from '../support/server.js';
import { eventOf, PushReceiver, SetVerifier } from '../support/ssf-receiver.js';

const TENANT = 'ssf-crash';
const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
const ACCOUNT_DISABLED = 'https://schemas.openid.net/secevent/risc/event-type/account-disabled';

/**
 * The outbox keeps what a change caused across a crash: a server process SIGKILLed after it
 * answered an Admin change, while the push receiver was down (so nothing was delivered), gets the
 * SETs out after it is started again on the same store.
 */
describe('Shared Signals outbox across a crash', function () {
  this.timeout(120_000);
  let dataDir: string;
  let child: ChildProcess | undefined;
  const receiver = new PushReceiver();

  before(function () {
    dataDir = mkdtempSync(join(tmpdir(), 'arbiter-ssf-crash-'));
  });
  after(async function () {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('delivers the SETs of a change answered before a SIGKILL once the server is back', async function () {
    const port = await freePort();
    const env = {
      ...testEnvironment(port, dataDir),
      WORKERS: '1',
      OUTBOX_POLL_MS: '200',
      OUTBOX_LEASE_SECONDS: '2',
      OUTBOX_RETRY_MAX_SECONDS: '1',
    };
    const url = `http://127.0.0.1:${port}`;
    const request = requestAt({ url, adminUrl: null });
    const server = { request, admin: adminVia(request, 'public') } as TestServer;
    const issuer = `${url}/t/${TENANT}`;
    const pushUrl = await receiver.start();
    receiver.verifier = new SetVerifier(`${issuer}/.well-known/jwks.json`, issuer, 'ssf-crash-receiver');

    child = await startServerProcess({ port, dataDir, env });
    const { token } = await clientWithToken(server, 'ssf-crash-receiver', ['ssf.manage'], {}, TENANT);
    await confidentialClient(server, 'ssf-crash-app', {}, TENANT);
    const created = await request(`/t/${TENANT}/ssf/streams`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      json: {
        delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: pushUrl },
        events_requested: [SESSION_REVOKED, ACCOUNT_DISABLED],
        default_subjects: 'ALL',
      },
    });
    expect(created.status).to.equal(201);

    // The receiver is down: the change is answered, its SETs are stored, none is delivered.
    receiver.refuse = true;
    const app = (await server.admin('GET', `/clients/ssf-crash-app?tenantId=${TENANT}`)).body;
    const disabled = await server.admin('PUT', `/clients/ssf-crash-app?tenantId=${TENANT}`, { ...app, enabled: false });
    expect(disabled.status).to.equal(200);
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
    expect(receiver.received).to.have.length(0);

    receiver.refuse = false;
    child = await startServerProcess({ port, dataDir, env });
    const sets = await receiver.setsReceived(2);
    expect(sets.map((set) => eventOf(set).type)).to.deep.equal([SESSION_REVOKED, ACCOUNT_DISABLED]);
    expect(sets[0]!.payload.sub_id).to.deep.equal({ format: 'opaque', id: 'ssf-crash-app' });
  });
});
