import { expect } from 'chai';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  registerPublicClient,
  withSignInServer,
  withWorkersSignInServer,
  type SignInServer,
  type TestClient,
} from '../support/dev-idp.js';
import { FORM, postForm } from '../support/oauth.js';
import { spreadOverWorkers } from '../support/server-process.js';
import type { TestServer } from '../support/server.js';

/**
 * Single use under concurrency (spec: states table): of several simultaneous redemptions of one
 * code, or refreshes with one (rotating) refresh token, exactly one succeeds. The store's
 * conditional update decides, and the oidc-provider adapter acts on its result. Run against one
 * process, and against WORKERS=2, where the racing requests (each on a connection of its own) are
 * spread over two processes writing one SQLite file: nothing held in a process's memory can
 * decide there.
 */
describeSingleUse('one process', withSignInServer);
// Ten rounds across processes: one race can come out right by luck (test/operations/multi-node.test.ts), ten rarely do.
describeSingleUse('WORKERS=2, the racing requests spread over two worker processes', withWorkersSignInServer, {
  spread: true,
  rounds: 10,
});

function describeSingleUse(
  where: string,
  signInServer: () => Promise<SignInServer>,
  { spread = false, rounds = 3 } = {},
): void {
  describe(`single-use codes and refresh tokens under concurrent use (${where})`, function () {
    let server: TestServer;
    let spa: TestClient;
    let workers: Awaited<ReturnType<typeof spreadOverWorkers>> | undefined;

    before(async function () {
      this.timeout(120_000);
      ({ server } = await signInServer());
      spa = await registerPublicClient(server, 'http://127.0.0.1:1/single-use/cb');
      // Connections to each worker, used in turn: every race has requests in both processes.
      if (spread) workers = await spreadOverWorkers(server.url);
    });

    after(function () {
      workers?.close();
    });

    /** POST /token, through the workers' connections in turn when the server has several. */
    const postToken = (form: Record<string, string>): Promise<{ status: number; body: any }> =>
      workers
        ? workers.request('/token', { method: 'POST', headers: FORM, body: new URLSearchParams(form).toString() })
        : postForm(server, '/token', form);

    async function freshCode(): Promise<{ code: string; codeVerifier: string }> {
      const request = await authorizationRequest(server, spa);
      const agent = new FetchUserAgent();
      const login = await agent.navigate(request.url, arrivingAt(spa.redirectUri));
      const code = (await passDevIdpForms(agent, login, 'alice', arrivingAt(spa.redirectUri))).url.searchParams.get(
        'code',
      )!;
      return { code, codeVerifier: request.codeVerifier };
    }

    const redeem = (code: string, codeVerifier: string) =>
      postToken({
        grant_type: 'authorization_code',
        code,
        code_verifier: codeVerifier,
        redirect_uri: spa.redirectUri,
        client_id: spa.clientId,
      });

    it('redeems a code once when five requests race for it', async function () {
      for (let round = 0; round < rounds; round += 1) {
        const { code, codeVerifier } = await freshCode();
        const answers = await Promise.all(Array.from({ length: 5 }, () => redeem(code, codeVerifier)));
        expect(
          answers.filter((answer) => answer.status === 200),
          `round ${round}: ${JSON.stringify(answers.map((answer) => answer.status))}`,
        ).to.have.length(1);
        for (const refused of answers.filter((answer) => answer.status !== 200))
          expect(refused.body.error).to.equal('invalid_grant');
        // A second use ends the grant (RFC 6749 §4.1.2), raced or not: the winner's tokens go with it.
        await expectGrantEnded(answers.find((answer) => answer.status === 200)!.body, `round ${round}`);
      }
    });

    /** The grant of `issued` was revoked: its refresh token is refused (found 2026-11-30: a raced reuse left it). */
    async function expectGrantEnded(issued: { refresh_token?: string }, when: string): Promise<void> {
      expect(issued.refresh_token, when).to.be.a('string');
      const refreshed = await postToken({
        grant_type: 'refresh_token',
        refresh_token: issued.refresh_token!,
        client_id: spa.clientId,
      });
      expect(refreshed.status, `${when}: ${JSON.stringify(refreshed.body)}`).to.equal(400);
      expect(refreshed.body.error).to.equal('invalid_grant');
    }

    it("rotates a public client's refresh token once when five refreshes race with it", async function () {
      const { code, codeVerifier } = await freshCode();
      const { body } = await redeem(code, codeVerifier);
      expect(body.refresh_token).to.be.a('string');
      const answers = await Promise.all(
        Array.from({ length: 5 }, () =>
          postToken({
            grant_type: 'refresh_token',
            refresh_token: body.refresh_token,
            client_id: spa.clientId,
          }),
        ),
      );
      expect(
        answers.filter((answer) => answer.status === 200),
        JSON.stringify(answers.map((answer) => answer.status)),
      ).to.have.length(1);
      for (const refused of answers.filter((answer) => answer.status !== 200))
        expect(refused.body.error).to.equal('invalid_grant');
      await expectGrantEnded(answers.find((answer) => answer.status === 200)!.body, 'the refresh race');
    });
  });
}
