import { expect } from 'chai';
import { inFreshProcess } from '../../support/unit.js';

describe('unit: the command line loads only what a command needs (src/cli, src/collections.ts)', function () {
  this.timeout(30_000);

  it('opens a store with every collection prepared without loading oidc-provider, Koa or a policy engine', function () {
    const seen = inFreshProcess<Record<string, boolean>>(`
      const { openArbiterStore } = await import('./src/collections.ts');
      const store = await openArbiterStore('sqlite::memory:');
      await store.close();
      console.log(JSON.stringify({
        'oidc-provider': loaded('node_modules/oidc-provider/'),
        koa: loaded('node_modules/koa/'),
        cedar: loaded('node_modules/@cedar-policy/'),
        'src/oauth/provider': loaded('src/oauth/provider'),
        'src/policy/engine': loaded('src/policy/engine'),
      }));
    `);
    expect(seen).to.deep.equal({
      'oidc-provider': false,
      koa: false,
      cedar: false,
      'src/oauth/provider': false,
      'src/policy/engine': false,
    });
  });

  it('brings a store to its schema version (migrate, schema-version, backup, restore) without the policy engine or the OAuth side', function () {
    const seen = inFreshProcess<Record<string, boolean>>(`
      const { MIGRATIONS } = await import('./src/migrations.ts');
      const { openArbiterStore } = await import('./src/collections.ts');
      const { migrate } = await import('./src/store/index.ts');
      const store = await openArbiterStore('sqlite::memory:');
      await migrate(store, MIGRATIONS);
      await store.close();
      console.log(JSON.stringify({
        'oidc-provider': loaded('node_modules/oidc-provider/'),
        got: loaded('node_modules/got/'),
        'opa-wasm': loaded('node_modules/@open-policy-agent/'),
        'src/oauth/index': loaded('src/oauth/index'),
        'src/policy/engine': loaded('src/policy/engine'),
        'the policy pack reader': loaded('src/policy/seed'),
      }));
    `);
    expect(seen).to.deep.equal({
      'oidc-provider': false,
      got: false,
      'opa-wasm': false,
      'src/oauth/index': false,
      'src/policy/engine': false,
      // What the migrations do need: the proof that this process saw the modules it loaded.
      'the policy pack reader': true,
    });
  });
});
