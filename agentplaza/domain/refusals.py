"""Every refusal the plaza gives, by its stable code, each with its kind.

A refusal (``base.Refusal``) is raised with a code and a message for a person; what *kind* of
no it is comes from this catalogue alone, so one code always means one thing. The domain knows
no HTTP: the API maps a kind to its status in one place (``api.errors.STATUS_OF``), the CLI
prints the code and the message, the harness and ``noded`` send the same
``{"error": {"code", "message"}}``. A new refusal is one line here; a test holds every code
raised in the source against this list.
"""

from __future__ import annotations

import enum


class Kind(enum.Enum):
    INVALID = "invalid"  # the request is understood but a value in it is wrong
    MALFORMED = "malformed"  # the request cannot be read at all (not JSON, a bad header)
    TOO_LARGE = "too_large"  # over a size limit
    UNAUTHENTICATED = "unauthenticated"  # no (valid) token or session
    FORBIDDEN = "forbidden"  # understood and known, but not allowed to this caller
    NOT_FOUND = "not_found"  # no such thing
    CONFLICT = "conflict"  # not in the state it must be in for this
    LOCKED = "locked"  # the vault or a thing it guards is locked
    PAYMENT_REQUIRED = "payment_required"  # not enough credits
    TOO_MANY = "too_many"  # too many requests or items right now
    UPSTREAM = "upstream"  # a provider or node behind the hub failed
    UNAVAILABLE = "unavailable"  # a part the answer needs is not running
    NOT_BUILT = "not_built"  # a feature this hub does not offer


_BY_KIND: dict[Kind, tuple[str, ...]] = {
    Kind.INVALID: (
        "bad_title", "bid_over_budget", "budget_too_small", "empty_message", "empty_value", "empty_why",
        "idempotency_key_reused", "invalid_actor", "invalid_amount", "invalid_anchor",
        "invalid_base_url", "invalid_binding", "invalid_blocklist_entry", "invalid_change",
        "invalid_checkpoint", "invalid_cid", "invalid_count", "invalid_detail", "invalid_effort",
        "invalid_kind", "invalid_label", "invalid_mode", "invalid_model", "invalid_name",
        "invalid_node", "invalid_outcome", "invalid_policy", "invalid_price", "invalid_proposal",
        "invalid_provider", "invalid_request", "invalid_role", "invalid_scope", "invalid_slot",
        "invalid_task", "invalid_template", "invalid_tier", "invalid_value", "jhrl_compile",
        "jhrl_invalid", "jhrl_syntax", "memo_required", "memo_too_long", "message_too_long",
        "mint_whole_units", "no_bid", "no_key_needed", "no_price", "passphrase_too_short",
        "reason_required", "reason_too_long", "rekey_needs_secret", "same_wallet", "unknown_role",
        "unstorable_event", "value_too_long", "worker_required",
        # decide, unfurl
        "invalid_options", "invalid_target",
        # the board and conversations
        "invalid_project", "invalid_file", "message_to_self", "invalid_format",
        # the society
        "invalid_rating",
        # hiring, discoveries, memory
        "hire_self", "invalid_link",
        # git
        "invalid_repo", "invalid_branch", "invalid_ref", "invalid_verdict", "same_branch", "body_too_long",
        "invalid_path", "too_many_refs",
        # hub mcp
        "unknown_tool",
        # e2b
        "e2b_field_not_served", "e2b_image_not_served", "e2b_step_not_served",
        # projects, the council, the courts
        "empty_document", "invalid_vote",
        # hosting and join codes
        "invalid_ttl", "invalid_public_key",
        # volumes
        "invalid_volume_name", "invalid_source", "invalid_volume_list", "too_many_volumes",
        "same_node",  # moves
    ),
    Kind.MALFORMED: (
        "bad_json", "invalid_idempotency_key",
    ),
    Kind.TOO_LARGE: (
        "body_too_large",
        # projects, the council, the courts
        "document_too_long", "too_many_documents",
        # git
        "push_too_large",
        # library
        "item_too_large",
    ),
    Kind.UNAUTHENTICATED: (
        "sign_in_link_used", "unauthorized",
        # hub mcp
        "token_expired", "token_revoked",
    ),
    Kind.FORBIDDEN: (
        "approval_denied", "approval_mismatch", "approval_pending", "approval_used",
        "model_not_allowed", "not_a_reviewer", "not_a_worker", "not_allowed", "not_your_review",
        "not_your_task", "own_work", "owner_only", "owner_token_required", "rekey_wrong_secret",
        "tool_suspended", "training_model_refused", "unseal_failed", "wrong_role",
        # git
        "protected_branch",
        # hiring
        "cannot_hire_orchestrator", "not_a_contact",
        # hub mcp
        "foreign_origin", "mcp_local_only", "remote_needs_https",
        # projects, the council, the courts
        "own_proposal", "not_a_seat", "courts_never_sit", "own_case",
        # hosting and join codes
        "join_code_invalid", "not_from_this_machine",
        "e2b_upload_refused",
        # the file store
        "not_shared_with_you",
        "node_revoked", "node_signature_refused", "not_your_cid",  # joined nodes
    ),
    Kind.NOT_FOUND: (
        "law_not_found", "no_account", "no_approval", "no_escrow", "no_gateway_token", "no_payment",
        "no_preset", "no_provider", "no_suspension", "no_task", "no_wallet", "no_worker",
        "rule_not_found", "secret_unavailable", "unknown_agent", "unknown_checkpoint", "unknown_node",
        "unknown_read_model", "unknown_secret", "unknown_slot", "unknown_template", "unknown_version",
        # the board and conversations
        "no_post", "no_conversation",
        # discoveries, memory
        "no_discovery", "no_note",
        # git
        "no_pull_request", "no_repo", "no_branch", "no_file", "not_found",
        # library
        "no_item", "item_missing",
        # hub mcp
        "no_orchestrator", "unknown_token",
        # editors over ACP
        "no_session",
        # e2b
        "e2b_key_not_found", "e2b_sandbox_not_found", "e2b_template_not_found", "e2b_build_not_found",
        # projects, the council, the courts
        "no_project", "no_motion", "no_case", "no_incident",
        # hosting and join codes
        "unknown_join_code",
        # the file store, the tool library
        "no_shared_file", "no_library_tool",
        # volumes
        "unknown_volume",
    ),
    Kind.CONFLICT: (
        "agent_asleep", "agent_awake", "agent_busy", "agent_offline", "agent_retired", "agent_stopped",
        "already_current", "already_delivered", "already_disabled", "already_enabled", "already_lifted",
        "already_named", "already_reported", "already_voided", "approval_decided", "budget_exhausted",
        "builtin_law", "chain_broken", "chain_margin_cap", "constitutional", "daily_limit",
        "event_readable", "fine_exceeds_wallet", "idempotency_answer_lost",
        "idempotency_answer_not_kept", "idempotency_key_in_flight", "insufficient_budget",
        "insufficient_funds", "key_file_exposed", "key_file_missing", "last_slot", "mode_unchanged",
        "no_budget", "no_change", "no_free_cid", "no_models", "no_node", "no_open_call", "no_such_slot",
        "not_a_call", "not_reported", "not_reviewing", "not_working", "not_working_on",
        "payment_decided", "plaza_held", "plaza_running", "provider_exists", "review_taken",
        "secret_exists", "secret_not_bound", "stale_draft", "suspension_over", "task_closed",
        "task_ended", "task_not_claimed", "task_not_open", "too_many_rules", "vault_unsealed",
        "wallet_exists", "weekly_fine_cap", "worker_busy", "worker_holds_task", "worker_offline",
        # decide
        "no_decision_model",
        # the society
        "nothing_to_rate",
        # memory
        "memory_full",
        # git
        "pull_request_exists", "pull_request_closed", "nothing_to_merge", "merge_conflict",
        "not_fast_forward", "repo_exists",
        # library
        "item_corrupt",
        # e2b
        "e2b_sandbox_paused", "e2b_sandbox_running", "e2b_sandbox_busy", "e2b_build_started",
        # projects, the council, the courts
        "wrong_stage", "project_ended", "needs_research", "needs_spec", "needs_critique", "critique_blocks",
        "plan_not_approved", "motion_decided", "motion_not_yours", "case_ruled",
        "needs_deliverable", "not_this_project", "spec_not_committed",
        # hosting and join codes
        "join_code_used", "join_code_closed",
        "outreach_off", "agent_not_idle", "not_idle_long_enough", "outreach_not_due",  # outreach
        # the tool library
        "too_many_versions",
        "node_draining", "node_not_draining", "node_offline",  # joined nodes
        # volumes
        "volume_exists", "volume_in_use", "volume_missing_on_target",
        "volume_missing",  # moves (the agent's volume is not on the target)
    ),
    Kind.LOCKED: (
        "vault_sealed", "vault_tampered",
    ),
    Kind.PAYMENT_REQUIRED: (
        "payer_empty",
    ),
    Kind.TOO_MANY: (
        "vault_locked",
        # hub mcp
        "rate_limited",
    ),
    Kind.UPSTREAM: (
        "node_error",
        # decide
        "decision_failed", "decision_unreadable",
        # git
        "git_failed",
        # e2b
        "sandbox_failed",
        # volumes
        "volume_build_failed",
        "move_failed",  # moves
    ),
    Kind.UNAVAILABLE: (
        "not_anchored", "vault_absent", "calls_not_settled",
        # cli (the first start)
        "node_cannot_boot",
        # e2b
        "node_unavailable",
        "e2b_guest_unresponsive",
    ),
    Kind.NOT_BUILT: (
        "not_available",
    ),
}

#: Every code, with its kind.
CATALOGUE: dict[str, Kind] = {code: kind for kind, codes in _BY_KIND.items() for code in codes}


def kind_of(code: str) -> Kind:
    """The kind of a refusal code; a code missing from the catalogue is a bug in the plaza."""
    try:
        return CATALOGUE[code]
    except KeyError:
        raise LookupError(f"refusal code {code!r} is not in domain/refusals.py") from None
