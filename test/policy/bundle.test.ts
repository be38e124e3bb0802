import { gunzipSync } from 'node:zlib';
import { expect } from 'chai';
import { extract } from 'tar-stream';
import { bundleMiddleware } from '../../src/policy/bundle/route.js';
import { POLICY_DATA, readPolicyPack, seedDefaultPolicies } from '../../src/policy/index.js';
import { PolicySnapshots } from '../../src/policy/bundle/snapshots.js';
import { openArbiterStore as openStore } from '../../src/collections.js';
import type { Store } from '../../src/store/index.js';
import { eventually } from '../support/oauth.js';
import { BUNDLE_TOKEN, log, putData, putRule, ruleAt, startBundleServer, type BundleServer } from './support.js';

async function untar(gzipped: Buffer): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  const reader = extract();
  const done = (async () => {
    for await (const entry of reader) {
      const chunks: Buffer[] = [];
      for await (const chunk of entry) chunks.push(Buffer.from(chunk as Uint8Array));
      files.set(entry.header.name, Buffer.concat(chunks).toString('utf8'));
    }
  })();
  reader.end(gunzipSync(gzipped));
  await done;
  return files;
}

describe('policy bundle endpoint', function () {
  let store: Store;
  let server: BundleServer;
  /** How often the endpoint has read the policy set from the store (a held long poll rereads it). */
  let storeReads = 0;

  const get = (headers: Record<string, string> = { authorization: `Bearer ${BUNDLE_TOKEN}` }) =>
    fetch(server.bundleUrl, { headers });
  const currentEtag = async () => (await get()).headers.get('etag') as string;
  const currentFiles = async () => untar(Buffer.from(await (await get()).arrayBuffer()));

  before(async function () {
    store = await openStore('sqlite::memory:');
    await seedDefaultPolicies(store, log);
    server = await startBundleServer();
    const snapshots = new PolicySnapshots(store, log);
    const current = snapshots.current.bind(snapshots);
    snapshots.current = (maxAgeMs) => {
      storeReads += 1;
      return current(maxAgeMs);
    };
    server.use(bundleMiddleware(snapshots, BUNDLE_TOKEN, log));
  });

  after(async function () {
    await server.close();
    await store.close();
  });

  it('requires the bundle token', async function () {
    const attempts: Record<string, string>[] = [
      {},
      { authorization: 'Bearer wrong-token' },
      { authorization: `Basic ${BUNDLE_TOKEN}` },
    ];
    for (const headers of attempts) {
      const response = await get(headers);
      expect(response.status).to.equal(401);
      expect(response.headers.get('www-authenticate')).to.equal('Bearer');
      expect(await response.json()).to.include({ error: 'invalid_token' });
    }
  });

  it('is served at its own path only', async function () {
    const response = await fetch(`${server.url}/elsewhere`);
    expect(response.status).to.equal(404);
  });

  it('serves a gzipped bundle with manifest, rules at their paths and data under their keys', async function () {
    const response = await get();
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.equal('application/gzip');
    const files = await untar(Buffer.from(await response.arrayBuffer()));
    const manifest = JSON.parse(files.get('.manifest') as string) as { revision: string; roots: string[] };
    expect(response.headers.get('etag')).to.equal(`"${manifest.revision}"`);
    expect(manifest.roots).to.deep.equal(['arbiter', 'oauth']);
    const pack = await readPolicyPack();
    for (const rule of pack.rules) expect(files.get(rule.path)).to.equal(rule.content);
    expect(files.has('tests/token_test.rego'), 'test files are not seeded').to.equal(false);
    expect(JSON.parse(files.get('oauth/data.json') as string)).to.have.nested.property(
      'public_client_policy.enabled',
      false,
    );
  });

  describe('HTTP long polling (Prefer: wait=…)', function () {
    const longPoll = (etag: string, wait: number) =>
      get({ authorization: `Bearer ${BUNDLE_TOKEN}`, 'if-none-match': etag, prefer: `modes=snapshot;wait=${wait}` });

    it('holds an unchanged bundle until it changes, then answers 200 in the long-poll media type', async function () {
      const etag = await currentEtag();
      const readsBefore = storeReads;
      const held = longPoll(etag, 20);
      let answered = false;
      void held.then(() => (answered = true));
      // Nothing changed: still held while the store is read a few times over.
      await eventually(() => storeReads >= readsBefore + 4, 10_000, 20);
      expect(answered).to.equal(false);
      await putData(store, 'long.poll', { changed: Date.now() });
      const response = await held;
      expect(response.status).to.equal(200);
      expect(response.headers.get('content-type')).to.equal('application/vnd.openpolicyagent.bundles');
      expect(response.headers.get('etag')).to.not.equal(etag);
    });

    it('answers 304, still in the long-poll media type, when nothing changes in time', async function () {
      const etag = await currentEtag();
      const response = await longPoll(etag, 2);
      expect(response.status).to.equal(304);
      expect(response.headers.get('content-type')).to.equal('application/vnd.openpolicyagent.bundles');
      expect(response.headers.get('etag')).to.equal(etag);
    });

    it('answers a stale ETag at once', async function () {
      const response = await longPoll('"stale"', 20);
      expect(response.status).to.equal(200);
      expect(response.headers.get('content-type')).to.equal('application/vnd.openpolicyagent.bundles');
    });
  });

  it('answers 304 to a matching If-None-Match and 200 to a stale one', async function () {
    const etag = await currentEtag();
    expect((await get({ authorization: `Bearer ${BUNDLE_TOKEN}`, 'if-none-match': etag })).status).to.equal(304);
    expect((await get({ authorization: `Bearer ${BUNDLE_TOKEN}`, 'if-none-match': `W/${etag}` })).status).to.equal(304);
    expect((await get({ authorization: `Bearer ${BUNDLE_TOKEN}`, 'if-none-match': '"stale"' })).status).to.equal(200);
  });

  it('keeps revision and ETag while only unbundled entries change', async function () {
    const etag = await currentEtag();
    const hidden = 'package arbiter.hidden\n\ndecision := {"allow": true}\n';
    await putRule(store, { path: 'arbiter/versioned.rego', content: hidden, version: 'v2' });
    await putRule(store, { path: 'arbiter/tenant.rego', content: hidden, tenantId: 'acme' });
    await putRule(store, { path: 'arbiter/disabled.rego', content: hidden, enabled: false });
    await putData(store, 'versioned', { a: 1 }, { version: 'draft' });
    await putData(store, 'tenanted', { a: 1 }, { tenantId: 'acme' });
    expect(await currentEtag()).to.equal(etag);
    const files = await currentFiles();
    for (const path of [
      'arbiter/versioned.rego',
      'arbiter/tenant.rego',
      'arbiter/disabled.rego',
      'versioned/data.json',
      'tenanted/data.json',
    ]) {
      expect(files.has(path), path).to.equal(false);
    }
  });

  it('changes revision and ETag exactly when a bundled rule or data entry changes', async function () {
    const first = await currentEtag();
    const rule = await ruleAt(store, 'arbiter/introspect/introspect.rego');
    const edited = await putRule(store, { ...rule, content: `${rule.content}\n# edited\n` });
    const second = await currentEtag();
    expect(second).to.not.equal(first);
    const extra = await putData(store, 'extra', { flag: true });
    const third = await currentEtag();
    expect(third).to.not.equal(second);
    await putRule(store, { ...edited, enabled: false });
    expect(await currentEtag()).to.not.equal(third);
    expect((await currentFiles()).has('arbiter/introspect/introspect.rego')).to.equal(false);
    await putRule(store, { ...edited, enabled: true });
    expect(await currentEtag(), 'same content, same revision').to.equal(third);
    await putRule(store, rule);
    await store.collection(POLICY_DATA).delete(extra.id);
    expect(await currentEtag(), 'original content, original revision').to.equal(first);
  });

  it('writes nested data keys without conflicting leaves, the deeper key winning', async function () {
    await putData(store, 'nested', { a: 1, types: { x: 'from parent', y: 'kept' } });
    await putData(store, 'nested.types', { x: 'from child' });
    await putData(store, 'nested.flag', false);
    const files = await currentFiles();
    expect(JSON.parse(files.get('nested/data.json') as string)).to.deep.equal({ a: 1 });
    expect(JSON.parse(files.get('nested/types/data.json') as string)).to.deep.equal({ x: 'from child', y: 'kept' });
    expect(JSON.parse(files.get('nested/flag/data.json') as string)).to.equal(false);
    const manifest = JSON.parse(files.get('.manifest') as string) as { roots: string[] };
    expect(manifest.roots).to.deep.equal(['arbiter', 'nested', 'oauth']);
  });
});
