import { decodeJwt, decodeProtectedHeader, errors as joseErrors } from 'jose';
import { HttpError } from '../../http/errors.js';
import { MAX_JSON_DEPTH, nestingExceeds } from '../../http/body.js';
import type { Outbound } from '../../http/outbound.js';
import { JwksUnavailableError, RemoteKeySets } from '../../http/remote-jwks.js';
import type { PolicyEngine } from '../../policy/index.js';
import { ISSUER_SIGNING_ALGORITHMS, trustedIssuersFor, type TrustedIssuer } from '../shared/trusted-issuers.js';

/** What the `register` decision sees of a software statement. */
export interface SoftwareStatement {
  verified: boolean;
  claims: Record<string, unknown>;
}

const invalid = (description: string) =>
  new HttpError(400, 'invalid_software_statement', description, { field: 'software_statement' });

/**
 * Software statements (RFC 7591 §2.3): decoded always; verified against the issuer's JWKS
 * (its `jwks_uri` in `data.oauth.trusted_issuers`, fetched through the outbound guard and
 * cached) whenever policy data trusts any issuer for statements, or SERVICE_SOFTWARE_STATEMENT_VERIFY
 * is on. Whether the issuer and the software
 * are acceptable stays the policy's decision.
 */
export class SoftwareStatements {
  private readonly keySets: RemoteKeySets;

  constructor(
    private readonly verify: boolean,
    private readonly policy: PolicyEngine,
    outbound: Outbound,
  ) {
    this.keySets = new RemoteKeySets(() => outbound);
  }

  /** `presented`: sent with this request (one stored by an earlier release is read as it was then). */
  async read(statement: unknown, presented = true): Promise<SoftwareStatement> {
    const claims = decodeStatement(statement);
    // RFC 7591 §2.3: wherever an issuer is trusted for statements, every statement is verified,
    // whatever SERVICE_SOFTWARE_STATEMENT_VERIFY says: unverified claims must never reach a policy
    // that would honour their entitlements.
    const trusted = await trustedIssuersFor(this.policy, 'software_statement');
    if (!this.verify && trusted.size === 0) return { verified: false, claims };
    const issuer = claims.iss;
    if (typeof issuer !== 'string' || issuer === '') throw invalid('the software statement has no issuer (iss)');
    await this.verifySignature(statement as string, issuer, jwksUriOf(trusted.get(issuer), issuer));
    // A statement describes software (RFC 7591 §2.3). Found 2026-11-29: any JWT the issuer signs
    // passed, so a user holding an ID token of an issuer trusted for statements registered clients.
    if (presented && (typeof claims.software_id !== 'string' || claims.software_id === ''))
      throw invalid(
        'the software statement names no software (software_id): another JWT of its issuer is no statement',
      );
    return { verified: true, claims };
  }

  private async verifySignature(statement: string, issuer: string, jwksUri: string): Promise<void> {
    try {
      // Asymmetric only: `none` and HMAC (a secret nobody shares with the issuer) are never accepted.
      await this.keySets.verify(statement, jwksUri, { issuer, algorithms: ISSUER_SIGNING_ALGORITHMS });
    } catch (error) {
      throw this.verificationError(error);
    }
  }

  private verificationError(error: unknown): HttpError {
    if (error instanceof HttpError) return error;
    if (error instanceof JwksUnavailableError)
      return invalid("the software statement issuer's JWKS could not be fetched");
    if (error instanceof joseErrors.JWTExpired) return invalid('the software statement has expired');
    if (error instanceof joseErrors.JOSEError) return invalid('the software statement signature could not be verified');
    return invalid("the software statement issuer's JWKS could not be fetched");
  }
}

/** The issuer's JWKS URL, when policy data trusts it for software statements. */
function jwksUriOf(entry: TrustedIssuer | undefined, issuer: string): string {
  if (!entry) throw invalid(`the software statement's issuer is not trusted: ${issuer.slice(0, 200)}`);
  if (typeof entry.jwks_uri !== 'string') throw invalid('the software statement issuer has no jwks_uri in policy data');
  return entry.jwks_uri;
}

/** The statement's claims, unverified; a malformed JWT is `invalid_software_statement`. */
function decodeStatement(statement: unknown): Record<string, unknown> {
  let claims: Record<string, unknown>;
  try {
    if (typeof statement !== 'string') throw new Error('not a string');
    decodeProtectedHeader(statement);
    claims = decodeJwt(statement) as Record<string, unknown>;
  } catch {
    throw invalid('software_statement must be a signed JWT');
  }
  // The claims become policy input and part of the audit entry: as shallow as a JSON body must be.
  if (nestingExceeds(Buffer.from(statement.split('.')[1]!, 'base64url').toString('utf8'), MAX_JSON_DEPTH)) {
    throw invalid(`the software_statement's claims nest deeper than ${MAX_JSON_DEPTH} levels`);
  }
  return claims;
}
