import { expect } from 'chai';
import { clientCredentials, confidentialClient } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

/** A rule that conflicts with the pack's token decision for one client only. */
const conflictFor = (clientId: string) =>
  `package arbiter.token\n\ndecision := {"allow": false} if input.client.client_id == "${clientId}"\n`;

/**
 * Trials and impact that see every client (issue 37, point 3): a rule that conflicted only for a
 * low-volume client was accepted (201) and that client then got 503, because the trial took its
 * inputs from the newest entries only; impact analysis replayed mostly one chatty client. Both now
 * take the latest decision of every (client, point) first, then the newest.
 */
describe('Stratified trials and impact analysis', function () {
  let server: TestServer;

  before(async function () {
    // Its own server, trying one newest input per point: the chatty client's crowds the batch job out.
    server = await readyServer({ POLICY_CHECK_RECORDED_INPUTS: '1' });
    const batch = await confidentialClient(server, 'weekly-batch', { scopes: ['read'] });
    const chatty = await confidentialClient(server, 'chatty-app', { scopes: ['read'] });
    expect((await clientCredentials(server, 'weekly-batch', batch, { scope: 'read' })).status).to.equal(200);
    for (let index = 0; index < 3; index += 1)
      expect((await clientCredentials(server, 'chatty-app', chatty, { scope: 'read' })).status).to.equal(200);
  });
  after(async function () {
    await server?.close();
  });

  it("refuses a rule that cannot decide for the low-volume client, trying that client's latest input", async function () {
    const written = await server.admin('POST', '/policy-rules', {
      version: null,
      kind: 'rego',
      path: 'arbiter/weekly.rego',
      content: conflictFor('weekly-batch'),
    });
    expect(written.status, JSON.stringify(written.body)).to.equal(400);
    expect(written.body.error_description)
      .to.contain('the policy bundle could not decide with this change')
      .and.contain('(the latest of client weekly-batch at token)');
  });

  it('replays the latest decision of every client first, and says how many clients and points it covered', async function () {
    const answer = await server.admin('POST', '/policy-impact', {
      changes: [
        {
          collection: 'policy-data',
          op: 'create',
          record: {
            dataKey: 'oauth.clients',
            payload: JSON.stringify({ 'weekly-batch': { withheld_scopes: ['read'] } }),
          },
        },
      ],
      filter: { point: 'token' },
      limit: 2,
    });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    expect(answer.body.replayed).to.equal(2);
    expect(answer.body.coverage).to.deep.equal({ clients: 2, points: 1 });
    expect(Object.keys(answer.body.summary.byClient).sort()).to.deep.equal(['chatty-app', 'weekly-batch']);
    expect(answer.body.changed.map((change: { clientId: string }) => change.clientId)).to.deep.equal(['weekly-batch']);
  });
});
