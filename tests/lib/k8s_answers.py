"""Answers of a Kubernetes API server as the kubernetes client raises them, for unit tests without a server."""
import json

from kubernetes.client.rest import ApiException


def budget_refusal(budget="llm"):
    """The 429 an eviction gets while the PodDisruptionBudget ``budget`` allows no disruption."""
    exc = ApiException(status=429, reason="Too Many Requests")
    exc.body = json.dumps({"kind": "Status", "code": 429,
                           "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                           "details": {"causes": [{"reason": "DisruptionBudget", "message":
                                                   "The disruption budget %s needs 1 healthy pods and has 1 currently"
                                                   % budget}]}})
    return exc
