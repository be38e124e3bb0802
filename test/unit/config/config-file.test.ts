import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ConfigError, ENVIRONMENT, loadConfig, projectPath } from '../../../src/config/index.js';

describe('CONFIG_FILE', function () {
  let dir: string;
  const file = (name: string, text: string) => {
    writeFileSync(join(dir, name), text);
    return join(dir, name);
  };
  before(() => (dir = mkdtempSync(join(tmpdir(), 'arbiter-config-'))));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('puts its values over the defaults, a lifetime at a time, and the environment over it', function () {
    const CONFIG_FILE = file('a.json', JSON.stringify({ port: 9100, ttl: { accessTokenSeconds: 60 } }));
    const config = loadConfig({ CONFIG_FILE });
    expect(config.port).to.equal(9100);
    expect(config.ttl.accessTokenSeconds).to.equal(60);
    expect(config.ttl.refreshTokenSeconds, 'the other lifetimes keep their defaults').to.equal(1209600);
    expect(loadConfig({ CONFIG_FILE, PORT: '9200' }).port).to.equal(9200);
  });

  it('has an environment variable for every setting of config/default.json', function () {
    const defaults = JSON.parse(readFileSync(projectPath('config', 'default.json'), 'utf8')) as Record<string, unknown>;
    const settings = [
      ...Object.keys(defaults).filter((key) => key !== 'ttl'),
      ...Object.keys(defaults.ttl as object).map((key) => `ttl.${key}`),
    ];
    const variables = new Set(Object.values(ENVIRONMENT));
    expect(settings.filter((setting) => !variables.has(setting))).to.deep.equal([]);
  });

  it('takes every lifetime from the environment too', function () {
    const config = loadConfig({ SESSION_TTL_SECONDS: '3600', INTERACTION_TTL_SECONDS: '120' });
    expect(config.ttl).to.include({ sessionSeconds: 3600, interactionSeconds: 120 });
  });

  // Found 2026-11-30: the parser's message quotes the text around the fault, which printed the
  // start of a secret in the fatal start-up line.
  it('says where a file that is not JSON goes wrong without quoting any of it', function () {
    const CONFIG_FILE = file(
      'secret.json',
      '{\n  "storeUrl": "sqlite::memory:",\n  "adminApiKey": s3cr3t-admin-key-0123456789\n}',
    );
    const refusal = (() => {
      try {
        loadConfig({ CONFIG_FILE });
      } catch (error) {
        return error as Error;
      }
      return null;
    })();
    expect(refusal).to.be.instanceOf(ConfigError);
    expect(refusal!.message).to.not.match(/s3cr3t|3cr|admin-key/);
    expect(refusal!.message).to.match(/is not JSON$/);
    // Where the parser gives a position, the line and column are told.
    const missingComma = file('comma.json', '{"adminApiKey": "s3cr3t-admin-key-0123456789"\n "port": 9100}');
    expect(() => loadConfig({ CONFIG_FILE: missingComma }))
      .to.throw(ConfigError, /is not JSON \(at line 2, column 2\)$/)
      .with.property('message')
      .that.does.not.match(/s3cr3t/);
  });

  it('refuses a missing file, a file that is not JSON or not an object, and a value its schema refuses', function () {
    expect(() => loadConfig({ CONFIG_FILE: join(dir, 'missing.json') })).to.throw(ConfigError, /cannot be read/);
    expect(() => loadConfig({ CONFIG_FILE: file('b.json', '{port: 1') })).to.throw(ConfigError, /is not JSON/);
    expect(() => loadConfig({ CONFIG_FILE: file('c.json', '[1]') })).to.throw(ConfigError, /a JSON object/);
    expect(() => loadConfig({ CONFIG_FILE: file('d.json', '{"port": "x"}') })).to.throw(ConfigError, /PORT/);
    expect(() => loadConfig({ CONFIG_FILE: file('e.json', '{"noSuchSetting": 1}') })).to.throw(ConfigError);
  });
});
