import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { errors } from 'oidc-provider';
import { recordDecision } from '../../../../audit/index.js';
import { activeDelegations } from '../../../../delegation/index.js';
import { requestInput, type PointInputs, type SubjectInput } from '../../../../policy/index.js';
import {
  decidePermissions,
  findTicket,
  grantedScopes,
  redeemTicket,
  type PermissionAnswer,
} from '../../../../uma/index.js';
import { clientInput } from '../../../clients/input.js';
import { refusalOf } from '../../../shared/enforce.js';
import type { GateDeps } from '../gate.js';
import { oidcParams } from '../../../shared/oidc-params.js';
import type { GrantHandler } from '../handler.js';
import { issueAccessToken } from '../issue.js';
import {
  assertKeyHeld,
  assertProofWhereObliged,
  heldKeys,
  issuedBinding,
  type HeldKeys,
  type SenderDeps,
} from '../sender-binding.js';
import { resolveAccessToken } from '../token-exchange/access-token.js';
import { ACCESS_TOKEN_CLAIMS, UMA_TICKET, UMA_TICKET_PARAMETERS } from './parameters.js';
import type { RptPermission } from '../../../state.js';
import { mergedPermissions, upgradedPermissions } from './permissions.js';
import { definedOnly } from '../token-input.js';

export { UMA_TICKET } from './parameters.js';

/**
 * UMA 2.0 Grant §3.3: a client redeems a permission ticket for a requesting party token (RPT).
 * The requesting party is the user of the claim token (or nobody: the client alone). Each
 * permission of the ticket is put to the `uma_permission` decision (operation `rpt`) with the
 * resource, its owner and the active delegations to the party or the client; the RPT carries
 * what was granted, plus, when `rpt` upgrades one, its permissions still in force. A ticket is
 * redeemed once; a refusal (need_info, request_denied) leaves it usable.
 */
export function umaTicketGrant(provider: Provider, deps: GateDeps & SenderDeps): GrantHandler {
  return {
    grantType: UMA_TICKET,
    parameters: UMA_TICKET_PARAMETERS,
    async handle(ctx: KoaContextWithOIDC): Promise<void> {
      const params = oidcParams(ctx);
      if (!params.ticket) throw new errors.InvalidRequest("missing required parameter 'ticket'");
      const ticket = await findTicket(deps.store, deps.tenant, params.ticket);
      if (!ticket)
        throw new errors.CustomOIDCProviderError(
          'invalid_grant',
          'the permission ticket is unknown, expired or already redeemed',
        );
      const client = ctx.oidc.client!;
      const held = await heldKeys(provider, ctx, deps);
      const party = await requestingParty(provider, deps, params, client.clientId, held);
      const kept = params.rpt
        ? await upgradedPermissions(provider, params.rpt, client.clientId, party?.sub ?? null, held)
        : [];
      const answers = await decidePermissions(
        deps.store,
        deps.policy,
        {
          operation: 'rpt',
          tenant: deps.tenant,
          client: await clientInput(deps.store, deps.tenant, client.clientId, client.clientAuthMethod),
          subject: party,
          request: requestInput({
            endpoint: ctx.path,
            method: ctx.method,
            parameters: definedOnly(params),
            grant_type: UMA_TICKET,
          }),
          delegations: (resourceId) =>
            activeDelegations(deps.store, deps.tenant, { sub: party?.sub, clientId: client.clientId, resourceId }),
        },
        ticket.permissions,
      );
      recordDecision(ctx.state, ...answers.map((answer) => answer.outcome));
      const grantedAnswers = answers.filter((answer) => grantedScopes(answer).length > 0);
      const granted: RptPermission[] = grantedAnswers.map((answer) => ({
        resource_id: answer.permission.resource_id,
        resource_scopes: grantedScopes(answer),
        ...restingOn(answer, party?.sub ?? null, client.clientId),
      }));
      if (granted.length === 0) return refuse(ctx, answers, params.ticket);
      // An obligation of any permission granted holds the whole RPT.
      assertProofWhereObliged(
        grantedAnswers.map((answer) => answer.outcome.decision),
        held,
      );
      const binding = issuedBinding(ctx, held);
      if (!(await redeemTicket(deps.store, deps.tenant, ticket)))
        throw new errors.CustomOIDCProviderError(
          'invalid_grant',
          'the permission ticket is unknown, expired or already redeemed',
        );
      ctx.state.umaPermissions = mergedPermissions(granted, kept);
      const issued = await issueAccessToken(provider, ctx, {
        gty: UMA_TICKET,
        sub: party?.sub ?? null,
        scopes: [],
        resource: null,
        binding,
      });
      ctx.body = {
        access_token: issued.value,
        token_type: issued.tokenType,
        expires_in: issued.expiresIn,
        ...(params.rpt ? { upgraded: true } : {}),
      };
    },
  };
}

/**
 * The delegations a granted permission rests on, when the party (or the client alone) does not
 * own the resource: the RPT's permission then ends when the last of them is revoked or expires.
 */
function restingOn(answer: PermissionAnswer, sub: string | null, clientId: string): { delegation_ids?: string[] } {
  const { delegations = [], permission } = answer.outcome.input as PointInputs['uma_permission'];
  const owner = permission.resource?.owner;
  const owns =
    owner !== undefined && (sub !== null ? owner.sub === sub : owner.sub === null && owner.client_id === clientId);
  return owns || delegations.length === 0 ? {} : { delegation_ids: delegations.map((each) => each.delegation_id) };
}

/**
 * The requesting party: the user of the claim token, or null when the client asks on its own.
 * A claim token is checked as a token-exchange subject token is: it must be a token this very
 * client holds (issued to it, and, when bound, presented with a proof of its key). A resource
 * server that merely received a user's token must not become that user (UMA 2.0 Grant §3.3.1).
 */
async function requestingParty(
  provider: Provider,
  deps: GateDeps,
  params: Record<string, string | undefined>,
  clientId: string,
  held: HeldKeys,
): Promise<SubjectInput | null> {
  if (!params.claim_token) {
    if (params.claim_token_format) throw new errors.InvalidRequest('claim_token_format was given without claim_token');
    return null;
  }
  if (params.claim_token_format !== ACCESS_TOKEN_CLAIMS) {
    throw new errors.InvalidRequest(
      `claim_token_format must be ${ACCESS_TOKEN_CLAIMS} (an access token of this server that stands for the requesting party)`,
    );
  }
  const resolved = await resolveAccessToken(provider, deps.store, deps.tenant, params.claim_token, 'claim');
  if (resolved.token.client_id !== clientId)
    throw new errors.CustomOIDCProviderError('invalid_grant', 'the claim token was not issued to this client');
  assertKeyHeld(resolved.binding, held, 'claim');
  // Issued on the user's delegations to this client: it stands for what they delegate, and the
  // user would be the owner of every resource of theirs (found 2026-11-29: an RPT for all of them).
  if (resolved.delegations)
    throw new errors.CustomOIDCProviderError(
      'invalid_grant',
      "the claim token was issued on a delegation to this client: it does not stand for the delegation's owner",
    );
  if (!resolved.subject)
    throw new errors.CustomOIDCProviderError('invalid_grant', 'the claim token does not stand for a user');
  return resolved.subject;
}

/**
 * UMA 2.0 Grant §3.3.6: nothing was granted. need_info (403, with the ticket and the claims the
 * policy asks for), request_denied (403), an engine failure (503), or the policy's own error (400).
 */
function refuse(ctx: KoaContextWithOIDC, answers: PermissionAnswer[], ticket: string): void {
  const failed = answers.find((answer) => answer.outcome.engineError);
  if (failed) {
    const { status, ...body } = refusalOf(failed.outcome)!;
    ctx.status = status;
    ctx.body = body;
    return;
  }
  const needInfo = answers.find((answer) => answer.outcome.decision.error === 'need_info');
  const { decision } = needInfo?.outcome ?? answers[0]!.outcome; // one answer per permission, and a ticket has some
  const error = decision.allow ? 'request_denied' : (decision.error ?? 'request_denied');
  ctx.status = error === 'need_info' || error === 'request_denied' ? 403 : 400;
  ctx.body = {
    error,
    error_description: decision.allow
      ? 'the policy grants none of the requested scopes'
      : (decision.error_description ?? 'denied by policy'),
    ...(error === 'need_info' ? { ticket, required_claims: decision.extensions?.required_claims ?? [] } : {}),
  };
}
