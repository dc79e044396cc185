"""Which /v1 routes change state, and the audit actions each records; and the routes that record none, with why.

`tests/api/test_audit_routes.py` walks the app's routes: every /v1 route other than GET must be in one of these two
tables, so a new route that changes something cannot be added without deciding what its audit row says.
"""

from __future__ import annotations

AUDITED: dict[tuple[str, str], tuple[str, ...]] = {
    ("POST", "/v1/keys"): ("key.created",),
    ("DELETE", "/v1/keys/{key_id}"): ("key.revoked",),
    ("PATCH", "/v1/keys/{key_id}"): ("key.rate_limit_changed",),
    ("PUT", "/v1/organisation/dataset-uri-prefixes"): ("organisation.uri_prefixes_changed",),
    ("POST", "/v1/operator/organisations"): ("organisation.created",),
    ("PUT", "/v1/operator/organisations/{organisation}/quotas"): ("organisation.quotas_changed",),
    ("POST", "/v1/members"): ("member.added",),
    ("PATCH", "/v1/members/{member_id}"): ("member.role_changed",),
    ("POST", "/v1/datasets"): ("dataset.uploaded",),
    ("POST", "/v1/datasets/register"): ("dataset.registered",),
    ("POST", "/v1/datasets/{dataset_id}/filter"): ("dataset.filtered",),
    ("DELETE", "/v1/datasets/{dataset_id}"): ("dataset.deleted",),
    ("POST", "/v1/jobs"): ("job.submitted",),
    ("PATCH", "/v1/jobs/{job_id}"): ("job.labelled",),
    ("POST", "/v1/jobs/{job_id}/cancel"): ("job.cancelled",),
    ("DELETE", "/v1/jobs/{job_id}"): ("job.deleted",),
    ("POST", "/v1/sweeps"): ("sweep.created",),
    ("POST", "/v1/sweeps/{sweep_id}/cancel"): ("sweep.cancelled",),
    ("POST", "/v1/pipelines"): ("pipeline.created",),
    ("POST", "/v1/pipelines/{pipeline_id}/cancel"): ("pipeline.cancelled",),
    ("POST", "/v1/pipelines/{pipeline_id}/retry"): ("pipeline.retried",),
    ("DELETE", "/v1/pipelines/{pipeline_id}"): ("pipeline.deleted",),
    ("POST", "/v1/models/import"): ("model.imported", "model.import_requested"),
    ("PATCH", "/v1/models/{model_id}"): ("model.registered", "model.unregistered", "model.updated"),
    ("DELETE", "/v1/models/{model_id}"): ("model.deleted",),
    ("DELETE", "/v1/models/names/{name}"): ("name.deleted",),
    ("PUT", "/v1/models/{name}/aliases/{alias}"): ("alias.moved",),
    ("DELETE", "/v1/models/{name}/aliases/{alias}"): ("alias.removed",),
    ("POST", "/v1/models/{model_id}/evaluations"): ("evaluation.requested",),
    ("POST", "/v1/models/{model_id}/translations"): ("translation.requested",),
    ("POST", "/v1/models/{model_id}/dataset-translations"): ("dataset_translation.requested",),
    ("DELETE", "/v1/models/{model_id}/dataset-translations/{dataset_translation_id}"): ("dataset_translation.deleted",),
    ("POST", "/v1/models/{model_id}/corrections"): ("correction.added",),
    ("DELETE", "/v1/models/{model_id}/corrections/{correction_id}"): ("correction.deleted",),
    ("POST", "/v1/models/{model_id}/adaptations"): ("adaptation.requested",),
    ("POST", "/v1/glossaries"): ("glossary.created",),
    ("DELETE", "/v1/glossaries/{glossary_id}"): ("glossary.deleted",),
    ("POST", "/v1/webhooks"): ("webhook.created",),
    ("PATCH", "/v1/webhooks/{webhook_id}"): ("webhook.updated",),
    ("DELETE", "/v1/webhooks/{webhook_id}"): ("webhook.deleted",),
    ("POST", "/v1/webhooks/{webhook_id}/rotate-secret"): ("webhook.secret_rotated",),
    ("POST", "/v1/webhooks/{webhook_id}/test"): ("webhook.tested",),
    ("POST", "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver"): ("webhook.redelivered",),
}

EXEMPT: dict[tuple[str, str], str] = {
    ("POST", "/v1/pings"): "a round trip through the broker and a worker, to check the service works; changes nothing "
    "the organisation owns",
    ("POST", "/v1/estimate"): "a computation (a job's memory and time) that stores nothing",
    ("POST", "/v1/models/{model_id}/translate"): "inference: an answer, nothing stored",
    ("POST", "/v1/models/{model_id}/fill-mask"): "inference: an answer, nothing stored",
    ("POST", "/v1/models/{model_id}/attention"): "inference: an answer, nothing stored",
}

ACTIONS: tuple[str, ...] = tuple(sorted({action for actions in AUDITED.values() for action in actions}))
KINDS: tuple[str, ...] = tuple(sorted({action.split(".")[0] for action in ACTIONS}))
