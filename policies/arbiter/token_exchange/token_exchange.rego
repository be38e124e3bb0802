package arbiter.token_exchange

import data.arbiter.lib

access_token_type := "urn:ietf:params:oauth:token-type:access_token"

id_token_type := "urn:ietf:params:oauth:token-type:id_token"

# METADATA
# title: POST /token, token exchange (RFC 8693)
# description: |
#   grant_type urn:ietf:params:oauth:grant-type:token-exchange.
# scope: document
# entrypoint: true
default decision := {"allow": false, "error": "invalid_grant", "error_description": "token exchange is not allowed"}

decision := lib.deny("unauthorized_client", "token exchange requires a confidential client") if {
	not lib.is_confidential(input.client)
} else := token_refusal if {
	token_refusal
} else := actor_refusal if {
	actor_refusal
} else := lib.deny("invalid_grant", concat("", [
	"a delegation grants scopes on a resource, never authorization_details: ",
	"another client's token exchanged on its user's delegation carries none",
])) if {
	# Found 2026-11-29: the requested details were passed on whatever the delegation granted.
	rests_on_delegations
	count(input.request.authorization_details) > 0
} else := lib.deny("invalid_grant", "requested scope exceeds the subject token's scopes") if {
	input.subject_token.token_type == access_token_type
	count(requested - subject_scopes) > 0
} else := lib.details_denial(unknown_details) if {
	count(unknown_details) > 0
} else := target_denial if {
	target_unservable
} else := lib.no_scope_denial if {
	lib.nothing_grantable(requested, kept, input.request.authorization_details)
} else := lib.allow_with(kept, input.request, lib.resource_types) if {
	input.subject_token.token_type in {access_token_type, id_token_type}
}

# The first reason, in this order, why the tokens cannot be exchanged at all.
token_refusal := lib.deny("invalid_grant", concat("", [
	"untrusted_token_issuer: ",
	lib.shown(object.get(input.subject_token, "iss", null)),
	" is not a trusted issuer",
])) if {
	# Before `active`: an untrusted issuer's token is never verified, so it is never active.
	input.subject_token.token_type == id_token_type
	not issuer_trusted
} else := lib.deny("invalid_grant", "the subject token is not active") if {
	not input.subject_token.active
} else := lib.deny("invalid_grant", "the actor token is not active") if {
	is_object(input.actor_token)
	not input.actor_token.active
} else := lib.deny("invalid_grant", concat("", [
	"the subject token was issued to another client: a client exchanges its own tokens, ",
	"or another client's when the token's may_act names it or its subject delegated to it",
])) if {
	input.subject_token.token_type == access_token_type
	not subject_token_exchangeable
}

# Why the actor may not act: not the requesting client's token, or not the one may_act names.
actor_refusal := lib.deny(
	"invalid_grant",
	"the actor token was issued to another client: a client acts with its own token",
) if {
	is_object(input.actor_token)
	input.actor_token.token_type == access_token_type
	input.actor_token.client_id != input.client.client_id
} else := lib.deny(
	"invalid_grant",
	"the actor may not act for the subject (the subject token's may_act names another party)",
) if {
	is_object(input.actor_token)
	is_object(object.get(input.subject_token, "may_act", null))
	not may_act_allows
}

issuer_trusted if lib.trusted_issuer(input.subject_token.iss, "token_exchange", lib.trusted_issuers)

requested := {scope | some scope in input.request.scopes}

unknown_details := lib.unknown_detail_types(input.request.authorization_details, lib.resource_types, lib.rar_only_types)

target := lib.target_type(input.request, lib.resource_types)

subject_scopes := {scope | some scope in input.subject_token.scopes}

# The subject token's scopes the exchange may carry on. The client's own token leaves out what its
# entitlements for another resource type gave it, unless the client may hold that scope at the
# target too (registered, entitled for the target's type, OpenID Connect's, delegated to it there).
# Found 2026-11-30: re-aimed at another resource server whose type shares a scope name, it kept
# them. Scopes it holds otherwise (a token exchanged on may_act, say) pass; a delegation narrows
# another client's token in `kept`.
carried := subject_scopes - (other_types_entitlements - holdable) if {
	input.subject_token.client_id == input.client.client_id
} else := subject_scopes

other_types_entitlements := {scope |
	some granted in object.get(input.client, "granted_resources", [])
	granted.type != target
	some scope in granted.scopes
}

holdable := (lib.oidc_scopes | allowed) | delegated_scopes

# The carried scopes that were asked for (all of them when none was).
passed_on := lib.scopes_granted(requested, carried, carried)

# An access token passes on (a subset of) its own scopes; an external ID token carries none,
# so the client's own allowance applies. A token that stands for no user never gets `openid`.
granted := lib.scopes_for_subject(grantable, object.get(input, "subject", null))

grantable := lib.within_ceiling(passed_on, target, lib.resource_types) if {
	input.subject_token.token_type == access_token_type
} else := lib.scopes_granted(requested, allowed, allowed)

allowed := lib.client_allowed_scopes(input.client, target, lib.resource_types)

# RFC 8693 §2.2.2: a resource or audience (the protocol code has made an audience the
# resource) that the token cannot serve is invalid_target, never a token with the subject's
# scopes: none of the scopes the exchange would carry lies within the target type's ceiling.
target_denial := lib.deny("invalid_target", concat("", [
	"none of the requested or held scopes is for the requested resource or audience ",
	lib.shown(input.request.resource),
]))

target_unservable if {
	is_string(input.request.resource)
	count(input.request.authorization_details) == 0
	ceiling := {scope | some scope in lib.resource_types[target].scopes}
	count(wanted & ceiling) == 0
}

# What the exchange would carry before the target's ceiling: what was asked for, else what the
# subject access token may carry (`carried`), else (an ID token) what the client may have for the target.
wanted := requested if {
	count(requested) > 0
} else := carried if {
	input.subject_token.token_type == access_token_type
} else := {scope | some scope in input.client.scopes} | lib.entitled_scopes(input.client, target)

# What policy data withholds from the client (oauth.clients) is not passed on either, nor, when
# only a delegation makes the token exchangeable, what no delegation of its user to the client grants.
kept := within_delegations(granted - lib.withheld_scopes(input.client, lib.clients))

within_delegations(scopes) := scopes & delegated_scopes if {
	rests_on_delegations
} else := scopes

# Another client's access token, whose may_act does not name this client: exchangeable by delegation alone.
rests_on_delegations if {
	input.subject_token.token_type == access_token_type
	input.subject_token.client_id != input.client.client_id
	not may_act_names_client
}

may_act_names_client if input.subject_token.may_act.client_id == input.client.client_id

delegated_scopes := {scope |
	some grant in object.get(input, "delegations", [])
	delegation_of_subject_to_client(grant)
	some scope in grant.scopes
}

# RFC 8693 §4.4: a subject token's may_act names who may act for its subject (by sub or client_id).
actor_identities := {identity |
	some identity in [object.get(input.actor_token, "sub", null), object.get(input.actor_token, "client_id", null)]
	is_string(identity)
}

may_act_allows if input.subject_token.may_act.sub in actor_identities

may_act_allows if input.subject_token.may_act.client_id in actor_identities

# RFC 8693 §1, RFC 9449: an access token is exchanged by the client it was issued to. Another
# client (a resource server that received it, say) may exchange it only when the token's may_act
# names that client, or the token's user delegated to that client (an active delegation).
subject_token_exchangeable if input.subject_token.client_id == input.client.client_id

subject_token_exchangeable if input.subject_token.may_act.client_id == input.client.client_id

subject_token_exchangeable if {
	some grant in object.get(input, "delegations", [])
	delegation_of_subject_to_client(grant)
}

delegation_of_subject_to_client(grant) if {
	is_string(input.subject_token.sub)
	grant.grantee_client_id == input.client.client_id
	grant.owner.sub == input.subject_token.sub
}
