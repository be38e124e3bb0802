import { expect } from 'chai';
import fc from 'fast-check';
import { ADMIN_PREFIX, isAdminPath } from '../../../src/http/admin-path.js';

describe('unit: which paths name the Admin API (admin/gate isAdminPath)', function () {
  it('recognises the prefix itself and everything below it', function () {
    for (const path of ['/admin/api', '/admin/api/', '/admin/api/clients', '/admin/api/clients/abc/secret'])
      expect(isAdminPath(path), path).to.equal(true);
  });

  it('recognises every other spelling of it: case, doubled slashes, backslashes, dot segments, (double) percent-encoding', function () {
    for (const path of [
      '/Admin/API/clients',
      '//admin//api/clients',
      '/admin\\api/clients',
      '/x/../admin/api/clients',
      '/admin/./api/clients',
      '/admin/api/clients/../policy-rules',
      '/%61dmin/api/clients',
      '/admin%2Fapi/clients',
      '/%2561dmin/api/clients',
    ]) {
      expect(isAdminPath(path), path).to.equal(true);
    }
  });

  it('does not take neighbours of the prefix for it', function () {
    for (const path of [
      '/',
      '/admin',
      '/admin/',
      '/admin/apis',
      '/admin/api-docs',
      '/adminapi',
      '/token',
      '/admin/api/../../token',
      '/api/admin',
    ])
      expect(isAdminPath(path), path).to.equal(false);
  });

  it('keeps a malformed percent-escape as it is instead of throwing', function () {
    expect(isAdminPath('/admin/api/%E0%A4%A')).to.equal(true);
    expect(isAdminPath('/%zz/admin')).to.equal(false);
  });

  it('property: any spelling made by upper-casing, doubling slashes or percent-encoding a letter of an Admin path is an Admin path', function () {
    const segment = fc.stringMatching(/^[a-z0-9-]{1,12}$/);
    fc.assert(
      fc.property(
        fc.array(segment, { maxLength: 3 }),
        fc.nat(),
        fc.boolean(),
        fc.boolean(),
        (segments, at, upper, doubled) => {
          let path = [ADMIN_PREFIX, ...segments].join('/');
          const index = 1 + (at % (path.length - 1));
          if (path[index] !== '/')
            path = `${path.slice(0, index)}%${path.charCodeAt(index).toString(16)}${path.slice(index + 1)}`;
          if (upper) path = path.toUpperCase();
          if (doubled) path = path.replace(/\//g, '//');
          expect(isAdminPath(path), path).to.equal(true);
        },
      ),
    );
  });
});
