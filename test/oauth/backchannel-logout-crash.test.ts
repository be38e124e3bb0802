import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  redeemCode,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
} from '../support/dev-idp.js';
import { LogoutReceiver } from '../support/logout-receiver.js';
import { startProcessServer, startServerProcess, type ProcessServer } from '../support/server-process.js';
import { testEnvironment } from '../support/server.js';

const OUTBOX_ENV = { WORKERS: '1', OUTBOX_POLL_MS: '200', OUTBOX_LEASE_SECONDS: '2', OUTBOX_RETRY_MAX_SECONDS: '1' };

/**
 * A logout token kept in the outbox outlives the process: a server SIGKILLed after it answered an
 * operator's revocation while the relying party was down posts the logout once it is started
 * again on the same store and the relying party is back.
 */
describe('Back-Channel Logout retries across a crash', function () {
  this.timeout(120_000);
  let server: ProcessServer;
  let idp: RegisteredDevIdp | undefined;
  let restarted: ChildProcess | undefined;
  const receiver = new LogoutReceiver();

  before(async function () {
    server = await startProcessServer(OUTBOX_ENV);
  });
  after(async function () {
    if (restarted && restarted.exitCode === null && restarted.signalCode === null) {
      const exited = once(restarted, 'exit');
      restarted.kill('SIGKILL');
      await exited;
    }
    await receiver.close();
    await idp?.close();
    await server?.close();
  });

  it('posts the logout token of a revocation answered before a SIGKILL once the server is back', async function () {
    idp = await startRegisteredDevIdp(server);
    const rp = { clientId: 'bclr-crash-rp', redirectUri: 'http://127.0.0.1:1/bclr-crash/cb' };
    const created = await server.admin('POST', '/clients', {
      clientId: rp.clientId,
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
      redirectUris: [rp.redirectUri],
      scopes: ['openid', 'profile'],
      backchannelLogoutUri: await receiver.start(),
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const request = await authorizationRequest(server, rp);
    const agent = new FetchUserAgent();
    const page = await agent.navigate(request.url, arrivingAt(rp.redirectUri));
    const landed = await passDevIdpForms(agent, page, 'bclr-crash-kim', arrivingAt(rp.redirectUri));
    const code = landed.url.searchParams.get('code')!;
    expect((await redeemCode(server, rp, code, request.codeVerifier)).status).to.equal(200);

    // The relying party is down: the revocation is answered, its logout token kept, none delivered.
    receiver.refuseNext = Infinity;
    const subjects = (await server.admin('GET', '/subjects')).body as { id: number; subjectId: string }[];
    const subject = subjects.find((each) => each.subjectId === 'bclr-crash-kim')!;
    const revoked = await server.admin('POST', `/subjects/${subject.id}/revoke-tokens`);
    expect(revoked.body.logoutTokens).to.deep.equal({ delivered: 0, failed: 1, kept: 1 });
    expect(await server.stop('SIGKILL')).to.include({ signal: 'SIGKILL' });
    expect(receiver.tokens).to.have.length(0);

    receiver.refuseNext = 0;
    const port = Number(new URL(server.url).port);
    restarted = await startServerProcess({
      port,
      dataDir: server.dataDir,
      env: { ...testEnvironment(port, server.dataDir), ...OUTBOX_ENV },
    });
    const token = (await receiver.tokensReceived(1))[0]!;
    expect(decodeJwt(token)).to.include({ sub: 'bclr-crash-kim', aud: rp.clientId });
  });
});
