# METADATA
# title: Helpers of the default pack
# description: |
#   Shared by the decision packages. The functions work only on their arguments (the decision
#   packages pass the parts of `input` and of the policy data they need), so each can be tested
#   alone and reused by a custom rule. Policy data is read here once, under the rules below.
package arbiter.lib

# --- policy data (data.oauth: policies/oauth/data.json, layout in docs/policy.md) ----------
# Safe defaults when an entry is missing.

default oauth := {}

oauth := data.oauth

resource_types := object.get(oauth, "resource_types", {})

rar_only_types := object.get(oauth, "rar_only_types", {})

trusted_issuers := object.get(oauth, "trusted_issuers", {})

public_client_policy := object.get(oauth, "public_client_policy", {"enabled": false})

oidc_scopes := {scope | some scope in object.get(oauth, "oidc_scopes", ["openid", "profile", "email"])}

# Per-client settings by client_id: {"<client_id>": {"withheld_scopes": [...]}}.
clients := object.get(oauth, "clients", {})

# --- outcomes -----------------------------------------------------------------------------

deny(error, description) := {"allow": false, "error": error, "error_description": description}

no_scope_denial := deny("invalid_scope", "none of the requested scopes may be granted to this client")

# A value as text in a message: a string as it is, anything else as JSON. (Messages are built
# with concat, not sprintf: Arbiter evaluates Rego in process, where sprintf is not OPA's own.)
shown(value) := value if is_string(value)

shown(value) := json.marshal(value) if not is_string(value)

# An allow granting `scopes`, relaying the request's authorization details and the outputs
# (obligations, extensions, jit_single_use) that `types` gives the targeted resource type.
allow_with(scopes, request, types) := object.union(
	{"allow": true, "scopes": sort(scopes), "authorization_details": request.authorization_details},
	target_outputs(target_type(request, types), types),
)

target_outputs(type, types) := {name: value |
	some name in ["obligations", "extensions", "jit_single_use"]
	value := types[type][name]
}

# --- the parties --------------------------------------------------------------------------
# A caller negates these with an argument that is always defined (`input.client`, or the
# subject through object.get): negating a call whose argument is undefined is itself
# undefined, not true.

is_confidential(client) if client.client_type == "confidential"

is_user(subject) if is_string(subject.sub)

# OpenID Connect Core §3.1.2.1: `openid` asks for the identity of a signed-in user. A token that
# stands for no user (client_credentials, an exchanged client token) never carries it.
user_only_scopes := {"openid"}

scopes_for_subject(scopes, subject) := scopes if is_user(subject)

scopes_for_subject(scopes, subject) := scopes - user_only_scopes if not is_user(subject)

# The caller owns a UMA resource: the user of a user PAT, or the client of a client PAT.
owns(resource, subject, _) if {
	is_user(subject)
	resource.owner.sub == subject.sub
}

owns(resource, subject, client) if {
	not is_user(subject)
	is_string(client.client_id)
	resource.owner.client_id == client.client_id
}

trusted_issuer(iss, use, issuers) if {
	issuer := issuers[iss]
	use in object.get(issuer, "uses", ["token_exchange", "software_statement"])
}

# --- scopes -------------------------------------------------------------------------------

# The resource type a request targets: a resource indicator that names a type of `types` itself
# (urn:as:introspect), else the one the server resolved the resource indicator to; else null. The
# resolved type may be the caller's `resource_type` hint: it never replaces the type a resource
# names, whose scope ceiling and obligations would otherwise be the caller's to drop (found 2026-11-30).
default target_type(_, _) := null

target_type(request, types) := resource if {
	resource := request.resource
	types[resource]
} else := type if {
	type := request.resolved_resource_type
	is_string(type)
}

# Scopes the client's software statement (or CIMD policy) entitles it to for resource type `type`.
entitled_scopes(client, type) := {scope |
	some granted in client.granted_resources
	granted.type == type
	some scope in granted.scopes
}

# What a client may hold for a resource type: its registered scopes plus its entitlements, kept
# within the type's scope ceiling when the type declares one.
client_allowed_scopes(client, type, types) := within_ceiling(
	{scope | some scope in client.scopes} | entitled_scopes(client, type),
	type,
	types,
)

# Scopes `clients` (policy data oauth.clients) withholds from this client, whatever else would grant
# them: the way to narrow one client without editing a rule.
withheld_scopes(client, clients) := {scope |
	some scope in object.get(object.get(clients, client.client_id, {}), "withheld_scopes", [])
}

within_ceiling(scopes, type, types) := scopes & {scope | some scope in types[type].scopes} if {
	is_array(types[type].scopes)
} else := scopes

# Requested ∩ allowed; when nothing was requested, `fallback`.
scopes_granted(requested, allowed, fallback) := requested & allowed if {
	count(requested) > 0
} else := fallback

# Scopes were asked for, none can be granted, and there are no authorization details to grant instead.
nothing_grantable(requested, granted, details) if {
	count(requested) > 0
	count(granted) == 0
	count(details) == 0
}

# --- rich authorization requests ----------------------------------------------------------

known_type(type, types, _) if types[type]

known_type(type, _, rar_only) if rar_only[type]

# The `type`s of authorization details that neither `types` nor `rar_only` knows.
unknown_detail_types(details, types, rar_only) := {detail.type |
	some detail in details
	not known_type(detail.type, types, rar_only)
}

details_denial(unknown) := deny(
	"invalid_authorization_details",
	concat("", ["authorization_details type not known to policy: ", concat(", ", sort(unknown))]),
)
