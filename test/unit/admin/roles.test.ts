import { expect } from 'chai';
import { ADMIN_ROLES, permissionFor, roleMay, rolesWith } from '../../../src/admin/roles.js';
import { isAdminSurfacePath } from '../../../src/http/admin-path.js';

describe('unit: what each Admin API key role may call (admin/roles)', function () {
  it('reads every GET and HEAD, and the calls that store nothing and run no submitted policy, as reads', function () {
    for (const [method, route] of [
      ['GET', '/clients'],
      ['HEAD', '/clients/:clientId'],
      ['GET', '/api-keys'],
      ['GET', '/api-keys/current'],
      ['GET', '/policy-rules/:key'],
      ['POST', '/clients/validate'],
      ['POST', '/decisions'],
      ['GET', '/policy-shadow/differences'],
      ['POST', '/audit-logs/:id/replay'],
      ['POST', '/audit-logs/{id}/replay'],
    ] as const)
      expect(permissionFor(method, route), `${method} ${route}`).to.equal('read');
  });

  it('needs operate for other writes, author-policy for policy writes, manage-keys for keys (routes added later included)', function () {
    for (const [method, route, needed] of [
      ['POST', '/clients', 'operate'],
      ['PUT', '/clients/:clientId', 'operate'],
      ['PUT', '/clients/validate', 'operate'],
      ['DELETE', '/subjects/{id}', 'operate'],
      ['POST', '/clients/:clientId/revoke-tokens', 'operate'],
      ['POST', '/decisions/something-new', 'operate'],
      ['PATCH', '/clients/:clientId', 'operate'],
      ['POST', '/policy-rules', 'author-policy'],
      ['PUT', '/policy-rules/by-path', 'author-policy'],
      ['DELETE', '/policy-data/:key', 'author-policy'],
      ['POST', '/policy-rules/:key/rollback', 'author-policy'],
      ['POST', '/policy-shadow/promote', 'author-policy'],
      ['POST', '/policy-shadow/discard', 'author-policy'],
      ['POST', '/policy-rules/validate', 'author-policy'],
      ['POST', '/policy-data/validate', 'author-policy'],
      ['POST', '/policy-impact', 'author-policy'],
      ['POST', '/policy-impact/something-new', 'operate'],
      ['POST', '/api-keys', 'manage-keys'],
      ['DELETE', '/api-keys/:id', 'manage-keys'],
      ['POST', '/api-keys/validate', 'manage-keys'],
    ] as const)
      expect(permissionFor(method, route), `${method} ${route}`).to.equal(needed);
  });

  it('grants read to every role, and each other permission to its role and admin only', function () {
    expect(rolesWith('read')).to.deep.equal([...ADMIN_ROLES]);
    expect(rolesWith('operate')).to.deep.equal(['operator', 'admin']);
    expect(rolesWith('author-policy')).to.deep.equal(['policy-author', 'admin']);
    expect(rolesWith('manage-keys')).to.deep.equal(['admin']);
    expect(roleMay('read-only', 'operate')).to.equal(false);
  });
});

describe('unit: which paths are the admin surface a public listener refuses (http/admin-path)', function () {
  it('takes every spelling of /admin and below', function () {
    for (const path of [
      '/admin',
      '/admin/',
      '/Admin',
      '//admin/assets/console.js',
      '/%61dmin',
      '/x/../admin/api/clients',
    ])
      expect(isAdminSurfacePath(path), path).to.equal(true);
  });

  it('leaves its neighbours alone', function () {
    // A tenant named admin keeps its AuthZEN paths.
    for (const path of [
      '/',
      '/administrator',
      '/admins/x',
      '/token',
      '/adm',
      '/x/admin',
      '/admin/access/v1/evaluation',
    ])
      expect(isAdminSurfacePath(path), path).to.equal(false);
  });
});
