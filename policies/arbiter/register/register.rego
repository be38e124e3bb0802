package arbiter.register

import data.arbiter.lib

# METADATA
# title: POST /register (RFC 7591)
# description: |
#   When data.oauth.public_client_policy.dcr.require_initial_access_token is true, a
#   registration must present an initial access token (issued through the Admin API). Without a
#   software statement: open registration, allowed when public_client_policy.enabled is true or an
#   initial access token was presented. With one: the statement's issuer must be trusted and its
#   software_id not on the denylist; the statement decides the entitlements. An update of a
#   registered client (RFC 7592 PUT, authenticated by its registration access token) needs neither
#   an initial access token nor open registration; the rest is decided again, never widening the
#   client as it stands (input.client).
# scope: document
# entrypoint: true
default decision := {
	"allow": false,
	"error": "invalid_client_metadata",
	"error_description": "registration is not allowed",
}

decision := lib.deny("invalid_token", "an initial access token is required to register") if {
	object.get(lib.public_client_policy, ["dcr", "require_initial_access_token"], false) == true
	not has_initial_access_token
	not is_update
} else := open_registration if {
	is_null(input.registration.software_statement)
} else := statement_registration

has_initial_access_token if is_object(input.registration.initial_access_token)

# RFC 7592 §2.2: the client's own registration access token authenticated the request.
is_update if input.request.method == "PUT"

# An update never widens the client as it stands (input.client): its scopes, grant types and
# entitlements stay within those it has, so what an operator narrowed through the Admin API
# stays narrowed. Widening a registered client is the operator's to do.
within_client(granted) := granted if not is_update

within_client(granted) := object.union(granted, {
	"scopes": sort({scope | some scope in granted.scopes} & {scope | some scope in current.scopes}),
	"extensions": object.union(granted.extensions, {
		"grant_types": [grant | some grant in granted.extensions.grant_types; grant in current.grant_types],
		"granted_resources": [{"type": resource.type, "scopes": sort(scopes)} |
			some resource in object.get(granted.extensions, "granted_resources", [])
			some held in current.granted_resources
			held.type == resource.type
			scopes := {scope | some scope in resource.scopes} & {scope | some scope in held.scopes}
		],
	}),
}) if is_update

# The client being updated; one without a field (an Admin API client has no grant types of its
# own until set) keeps nothing of it.
current := object.union({"scopes": [], "grant_types": [], "granted_resources": []}, input.client) if {
	is_object(input.client)
} else := {"scopes": [], "grant_types": [], "granted_resources": []}

requested_scopes := {scope |
	some scope in split(object.get(input.registration.metadata, "scope", ""), " ")
	scope != ""
}

open_registration := lib.deny(
	"invalid_client_metadata",
	"open registration is disabled (public_client_policy.enabled is false)",
) if {
	not lib.public_client_policy.enabled == true
	not has_initial_access_token
	not is_update
} else := lib.deny(
	"invalid_client_metadata",
	concat("", ["grant types not allowed: ", concat(", ", sort(disallowed_grant_types))]),
) if {
	count(disallowed_grant_types) > 0
} else := within_client({
	"allow": true,
	"scopes": sort(requested_scopes & lib.oidc_scopes),
	"extensions": {"grant_types": input.registration.grant_types},
})

allowed_grant_types := {grant | some grant in object.get(lib.public_client_policy, ["dcr", "allowed_grant_types"], [])}

disallowed_grant_types := {grant | some grant in input.registration.grant_types} - allowed_grant_types

claims := input.registration.software_statement.claims

statement_issuer_trusted if lib.trusted_issuer(claims.iss, "software_statement", lib.trusted_issuers)

denylist := object.get(lib.oauth, ["software_statements", "denylist"], [])

# A software_id of the denylist, in any letter case (found 2026-11-30: a UUID in capitals got past
# an entry in small letters, and the server then stored it in small letters).
denied_software(id) if id in denylist

denied_software(id) if {
	is_string(id)
	lower(id) in {lower(entry) | some entry in denylist; is_string(entry)}
}

statement_registration := lib.deny("invalid_software_statement", concat("", [
	"the software statement's issuer is not trusted: ",
	lib.shown(object.get(claims, "iss", null)),
])) if {
	not statement_issuer_trusted
} else := lib.deny("invalid_software_statement", "the software statement's signature was not verified") if {
	# RFC 7591 §2.3: a statement is a signed JWS; unverified claims never confer entitlements.
	not input.registration.software_statement.verified == true
} else := lib.deny("unapproved_software_statement", "this software is not approved") if {
	denied_software(claims.software_id)
} else := within_client({
	"allow": true,
	"scopes": sort({scope | some resource in granted_resources; some scope in resource.scopes}),
	"extensions": {"grant_types": statement_grant_types, "granted_resources": granted_resources},
})

# Entitlements from the statement, limited to known resource types and their scope ceilings.
granted_resources := [{"type": resource.type, "scopes": sort(scopes)} |
	some resource in object.get(claims, "granted_resources", [])
	lib.resource_types[resource.type]
	ceiling := {scope | some scope in object.get(lib.resource_types[resource.type], "scopes", resource.scopes)}
	scopes := {scope | some scope in resource.scopes} & ceiling
]

# The grant types asked for, limited to those the statement lists (when it lists any).
statement_grant_types := [grant |
	some grant in input.registration.grant_types
	grant in object.get(claims, "grant_types", input.registration.grant_types)
]
