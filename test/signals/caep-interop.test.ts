import { expect } from 'chai';
import { importJWK, exportSPKI, type JWK } from 'jose';
import { createPublicKey } from 'node:crypto';
import { clientWithToken, confidentialClient, eventually } from '../support/oauth.js';
import { withServer, type TestServer } from '../support/server.js';
import { eventOf, pollSets, SetVerifier, type VerifiedSet } from '../support/ssf-receiver.js';

/**
 * The CAEP Interoperability Profile 1.0's transmitter requirements, one test each (section
 * names of the profile), walked against a path tenant's transmitter with a poller of the suite
 * that verifies every SET against the tenant's jwks_uri.
 */
const TENANT = 'ssf-caep-interop';
const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
const CREDENTIAL_CHANGE = 'https://schemas.openid.net/secevent/caep/event-type/credential-change';
const VERIFICATION = 'https://schemas.openid.net/secevent/ssf/event-type/verification';

describe('CAEP Interoperability Profile 1.0: transmitter requirements', function () {
  let server: TestServer;
  let issuer: string;
  let metadata: Record<string, any>;
  let token: string;
  let verifier: SetVerifier;
  const call = async (method: string, url: string, json?: unknown, bearer = token) => {
    const response = await fetch(url, {
      method,
      headers: {
        authorization: `Bearer ${bearer}`,
        ...(json === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(json === undefined ? {} : { body: JSON.stringify(json) }),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
  };
  /** A poll stream (all subjects unless told), and a way to wait for its next SETs (acknowledged as they come). */
  const pollStream = async (fields: Record<string, unknown> = {}) => {
    const created = await call('POST', metadata.configuration_endpoint, {
      delivery: { method: 'urn:ietf:rfc:8936' },
      ...fields,
    });
    expect(created.status).to.equal(201);
    const endpoint = created.body.delivery.endpoint_url as string;
    let ack: string[] = [];
    const next = async (count: number): Promise<VerifiedSet[]> => {
      const got: VerifiedSet[] = [];
      await eventually(
        async () => {
          const polled = await pollSets(endpoint, token, verifier, { ack });
          ack = [...polled.sets.keys()];
          got.push(...polled.sets.values());
          return got.length >= count;
        },
        15_000,
        50,
      );
      return got;
    };
    return { id: created.body.stream_id as string, configuration: created.body, next };
  };

  before(async function () {
    server = await withServer({ OUTBOX_POLL_MS: '200' });
    issuer = `${server.config.issuer}/t/${TENANT}`;
    ({ token } = await clientWithToken(server, 'caep-receiver', ['ssf.manage'], {}, TENANT));
    metadata = (await (await server.request(`/.well-known/ssf-configuration/t/${TENANT}`)).json()) as Record<
      string,
      any
    >;
    verifier = new SetVerifier(metadata.jwks_uri, issuer, 'caep-receiver');
  });
  // A receiver has at most 10 streams: each test's go with it.
  afterEach(async function () {
    const streams = (await call('GET', metadata.configuration_endpoint)).body as { stream_id: string }[];
    for (const { stream_id } of streams)
      await call('DELETE', `${metadata.configuration_endpoint}?stream_id=${stream_id}`);
  });

  it('2.3.1 Spec Version: spec_version is 1_0', function () {
    expect(metadata.spec_version).to.equal('1_0');
  });

  it('2.3.2 Delivery Method: delivery_methods_supported is present (push and poll)', function () {
    expect(metadata.delivery_methods_supported).to.have.members(['urn:ietf:rfc:8935', 'urn:ietf:rfc:8936']);
  });

  it('2.3.3 JWKS URI: jwks_uri provides the current signing key, the one SETs are signed with', async function () {
    const stream = await pollStream();
    await call('POST', metadata.verification_endpoint, { stream_id: stream.id });
    const set = (await stream.next(1))[0]!;
    const keys = ((await (await fetch(metadata.jwks_uri)).json()) as { keys: JWK[] }).keys;
    expect(keys.map((key) => key.kid)).to.include(set.header.kid);
  });

  it('2.3.4 Configuration Endpoint: configuration_endpoint accepts POST to create a stream', async function () {
    expect(metadata.configuration_endpoint).to.equal(`${issuer}/ssf/streams`);
    expect((await pollStream()).configuration.stream_id).to.be.a('string');
  });

  it('2.3.5 Verification Endpoint: a verification request sends a verification event', async function () {
    const stream = await pollStream();
    expect(
      (await call('POST', metadata.verification_endpoint, { stream_id: stream.id, state: 'interop' })).status,
    ).to.equal(204);
    const set = (await stream.next(1))[0]!;
    expect(eventOf(set)).to.deep.equal({ type: VERIFICATION, data: { state: 'interop' } });
  });

  it('2.3.6 Authorization Schemes: authorization_schemes includes urn:ietf:rfc:6749', function () {
    expect(metadata.authorization_schemes).to.deep.include({ spec_urn: 'urn:ietf:rfc:6749' });
  });

  it('2.3.7 Streams / Delivery: a stream is created with push or poll, and its configuration has delivery', async function () {
    const push = await call('POST', metadata.configuration_endpoint, {
      delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: 'http://127.0.0.1:9/events' },
    });
    expect(push.status).to.equal(201);
    expect(push.body.delivery).to.deep.equal({
      method: 'urn:ietf:rfc:8935',
      endpoint_url: 'http://127.0.0.1:9/events',
    });
    // Credentials belong in authorization_header: one in the URL would be refused by every push, and logged with it.
    const withCredentials = await call('POST', metadata.configuration_endpoint, {
      delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: 'http://user:url-password@127.0.0.1:9/events' },
    });
    expect(withCredentials.status, JSON.stringify(withCredentials.body)).to.equal(400);
    expect(withCredentials.body.error_description).to.match(/credentials/);
    expect(JSON.stringify(withCredentials.body)).not.to.contain('url-password');
    const poll = await pollStream();
    expect(poll.configuration.delivery.method).to.equal('urn:ietf:rfc:8936');
    await call('DELETE', `${metadata.configuration_endpoint}?stream_id=${push.body.stream_id}`);
  });

  it('2.3.7 Stream Control: a receiver reads its stream configuration', async function () {
    const stream = await pollStream({ description: 'read me' });
    const read = await call('GET', `${metadata.configuration_endpoint}?stream_id=${stream.id}`);
    expect(read.status).to.equal(200);
    expect(read.body).to.deep.equal(stream.configuration);
  });

  it('2.4.2 Implicitly Added Subjects (receivers assume all): a stream gets events of subjects it never added', async function () {
    await confidentialClient(server, 'caep-implicit-app', {}, TENANT);
    const stream = await pollStream({ events_requested: [SESSION_REVOKED] });
    expect((await server.admin('POST', `/clients/caep-implicit-app/revoke-tokens?tenantId=${TENANT}`)).status).to.equal(
      200,
    );
    const set = (await stream.next(1))[0]!;
    expect(set.payload.sub_id).to.deep.equal({ format: 'opaque', id: 'caep-implicit-app' });
  });

  it('2.5 Event Subjects: iss_sub for a user, email when the receiver added the email, opaque for verification', async function () {
    const subject = await server.admin('POST', '/subjects', {
      subjectId: 'caep-user-1',
      email: 'Carol@Example.COM',
      tenantId: TENANT,
    });
    expect(subject.status).to.equal(201);
    const all = await pollStream({ events_requested: [SESSION_REVOKED] });
    const byEmail = await pollStream({ events_requested: [SESSION_REVOKED], default_subjects: 'NONE' });
    const added = await call('POST', metadata.add_subject_endpoint, {
      stream_id: byEmail.id,
      subject: { format: 'email', email: 'Carol@example.com' },
    });
    expect(added.status).to.equal(200);
    expect(
      (await server.admin('POST', `/subjects/${subject.body.id}/revoke-tokens?tenantId=${TENANT}`)).status,
    ).to.equal(200);
    expect((await all.next(1))[0]!.payload.sub_id).to.deep.equal({
      format: 'iss_sub',
      iss: issuer,
      sub: 'caep-user-1',
    });
    expect((await byEmail.next(1))[0]!.payload.sub_id).to.deep.equal({ format: 'email', email: 'Carol@example.com' });
  });

  it('2.6 Event Signatures: RS256 with a key of at least 2048 bits', async function () {
    const stream = await pollStream();
    await call('POST', metadata.verification_endpoint, { stream_id: stream.id });
    const set = (await stream.next(1))[0]!;
    expect(set.header.alg).to.equal('RS256');
    const keys = ((await (await fetch(metadata.jwks_uri)).json()) as { keys: JWK[] }).keys;
    const key = keys.find((each) => each.kid === set.header.kid)!;
    const spki = await exportSPKI((await importJWK(key, 'RS256')) as Parameters<typeof exportSPKI>[0]);
    expect(createPublicKey(spki).asymmetricKeyDetails?.modulusLength).to.be.at.least(2048);
  });

  it('2.7 OAuth Scopes: management accepts ssf.manage, reads accept ssf.read, anything less is 403 insufficient_scope', async function () {
    const { token: reader } = await clientWithToken(server, 'caep-reader', ['ssf.read'], {}, TENANT);
    const { token: nothing } = await clientWithToken(server, 'caep-no-ssf', ['other.scope'], {}, TENANT);
    expect((await call('GET', metadata.configuration_endpoint, undefined, reader)).status).to.equal(200);
    const refused = await call(
      'POST',
      metadata.configuration_endpoint,
      { delivery: { method: 'urn:ietf:rfc:8936' } },
      reader,
    );
    expect(refused.status).to.equal(403);
    expect(refused.headers.get('www-authenticate')).to.match(/error="insufficient_scope"/);
    expect((await call('GET', metadata.configuration_endpoint, undefined, nothing)).status).to.equal(403);
  });

  it('2.7 Transmitter as a Resource Server: a token in the query is not accepted; an invalid one is 401', async function () {
    const inQuery = await fetch(`${metadata.configuration_endpoint}?access_token=${token}`);
    expect(inQuery.status).to.equal(401);
    expect((await call('GET', metadata.configuration_endpoint, undefined, 'invalid')).status).to.equal(401);
  });

  it('2.8 Security Event Token: the events claim holds exactly one event; typ secevent+jwt', async function () {
    const stream = await pollStream();
    await call('POST', metadata.verification_endpoint, { stream_id: stream.id });
    const set = (await stream.next(1))[0]!;
    expect(Object.keys(set.payload.events)).to.have.length(1);
    expect(set.header.typ).to.equal('secevent+jwt');
  });

  it('3.1 Session Revocation: session-revoked with a non-empty reason_admin', async function () {
    await confidentialClient(server, 'caep-revoked-app', {}, TENANT);
    const stream = await pollStream({ events_requested: [SESSION_REVOKED] });
    await server.admin('POST', `/clients/caep-revoked-app/revoke-tokens?tenantId=${TENANT}`);
    const { type, data } = eventOf((await stream.next(1))[0]!);
    expect(type).to.equal(SESSION_REVOKED);
    expect(Object.values(data.reason_admin as Record<string, string>)[0]).to.be.a('string').and.not.empty;
    expect(data.event_timestamp).to.be.a('number');
  });

  it('3.2 Credential Change: credential-change with change_type, credential_type and a non-empty reason_admin', async function () {
    await confidentialClient(server, 'caep-rotated-app', {}, TENANT);
    const stream = await pollStream({ events_requested: [CREDENTIAL_CHANGE] });
    await server.admin('POST', `/clients/caep-rotated-app/secret?tenantId=${TENANT}`);
    const { type, data } = eventOf((await stream.next(1))[0]!);
    expect(type).to.equal(CREDENTIAL_CHANGE);
    expect(data).to.include({ change_type: 'update', credential_type: 'client_secret' });
    expect(Object.values(data.reason_admin as Record<string, string>)[0]).to.be.a('string').and.not.empty;
  });
});
