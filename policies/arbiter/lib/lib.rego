# Helpers shared by the decision packages of the default pack.
# Everything configurable comes from data.oauth (policies/oauth/data.json, layout in docs/policy.md).
package arbiter.lib

# --- policy data, with safe defaults when an entry is missing -----------------------------

default oauth := {}

oauth := data.oauth

resource_types := object.get(oauth, "resource_types", {})

rar_only_types := object.get(oauth, "rar_only_types", {})

trusted_issuers := object.get(oauth, "trusted_issuers", {})

public_client_policy := object.get(oauth, "public_client_policy", {"enabled": false})

oidc_scopes := {scope | some scope in object.get(oauth, "oidc_scopes", ["openid", "profile", "email"])}

# --- outcomes -----------------------------------------------------------------------------

deny(error, description) := {"allow": false, "error": error, "error_description": description}

# A value as text in a message: a string as it is, anything else as JSON. (Messages are built
# with concat, not sprintf: Arbiter evaluates Rego in process, where sprintf is not OPA's own.)
shown(value) := value if is_string(value)

shown(value) := json.marshal(value) if not is_string(value)

# An allow granting `scopes`, relaying the requested authorization details and the outputs
# (obligations, extensions, jit_single_use) that data gives the targeted resource type.
allow_with(scopes) := object.union(
	{"allow": true, "scopes": sort(scopes), "authorization_details": input.request.authorization_details},
	target_outputs,
)

target_outputs := {name: value |
	some name in ["obligations", "extensions", "jit_single_use"]
	value := resource_types[target_type][name]
}

# --- the parties --------------------------------------------------------------------------

# Negating a function call whose argument is undefined is itself undefined (not true), so
# the decision packages negate these argument-free rules instead.
has_client if is_string(input.client.client_id)

confidential_client if input.client.client_type == "confidential"

has_subject if is_string(input.subject.sub)

# The caller owns a UMA resource: the user of a user PAT, or the client of a client PAT.
owns(resource) if {
	has_subject
	resource.owner.sub == input.subject.sub
}

owns(resource) if {
	not has_subject
	is_string(input.client.client_id)
	resource.owner.client_id == input.client.client_id
}

trusted_issuer(iss, use) if {
	issuer := trusted_issuers[iss]
	use in object.get(issuer, "uses", ["token_exchange", "software_statement"])
}

# --- scopes -------------------------------------------------------------------------------

requested_scopes := {scope | some scope in input.request.scopes}

client_scopes := {scope | some scope in input.client.scopes}

# The resource type the request targets: the one the server resolved the resource indicator
# to, or a resource indicator that names a type itself (urn:as:introspect).
default target_type := null

target_type := type if {
	type := input.request.resolved_resource_type
	is_string(type)
} else := resource if {
	resource := input.request.resource
	resource_types[resource]
}

# Scopes the client's software statement (or CIMD policy) entitles it to for the target type.
entitled_scopes contains scope if {
	some granted in input.client.granted_resources
	granted.type == target_type
	some scope in granted.scopes
}

# What a client may hold for the target: its registered scopes plus its entitlements, kept
# within the target type's scope ceiling when the type declares one.
client_allowed_scopes := within_ceiling(client_scopes | entitled_scopes)

within_ceiling(scopes) := scopes & {scope | some scope in resource_types[target_type].scopes} if {
	is_array(resource_types[target_type].scopes)
} else := scopes

# Requested ∩ allowed; when nothing was requested, `fallback`.
scopes_granted(allowed, fallback) := requested_scopes & allowed if {
	count(requested_scopes) > 0
} else := fallback

# Scopes were asked for, none can be granted, and there are no authorization details to grant instead.
nothing_grantable(granted) if {
	count(requested_scopes) > 0
	count(granted) == 0
	count(input.request.authorization_details) == 0
}

no_scope_denial := deny("invalid_scope", "none of the requested scopes may be granted to this client")

# --- rich authorization requests ----------------------------------------------------------

known_type(type) if resource_types[type]

known_type(type) if rar_only_types[type]

unknown_detail_types contains detail.type if {
	some detail in input.request.authorization_details
	not known_type(detail.type)
}

has_unknown_details if count(unknown_detail_types) > 0

details_denial := deny(
	"invalid_authorization_details",
	concat("", ["authorization_details type not known to policy: ", concat(", ", sort(unknown_detail_types))]),
)
