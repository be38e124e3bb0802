package arbiter.access_evaluation

# METADATA
# title: POST /access/v1/evaluation (AuthZEN)
# description: |
#   Default pack: the owner of a resource may do anything with it (resource.properties.owner
#   equals the subject id). Cedar rules can forbid more; to let Cedar permit as well, disable
#   this rule (see docs/policy.md).
# scope: document
# entrypoint: true
default decision := {"allow": false, "error": "access_denied", "error_description": "no policy permits this action"}

decision := {"allow": true} if {
	owner := input.evaluation.resource.properties.owner
	owner == input.evaluation.subject.id
}
