"""Which webhook process decides hierarchical quotas: one at a time, the holder of a Lease.

The quota webhook's ledger of admitted-but-unseen usage lives in one process's memory, so two
replicas deciding at once could each admit the last free unit (docs/hierarchical-quotas.md,
Only one process decides). With leader election on, the webhook processes campaign for a Lease
of their own (``<leader-election-id>-quota``, apart from the controller's, so that a reconcile
pass never holds up a review); the holder labels its pod, and the quota webhook's Service
selects that label, so kube-apiserver sends the reviews to it. Any other replica that is asked
anyway (Endpoints lag after a failover) refuses to decide. The Lease's rule (a holder stops
acting renew-deadline after its last renewal, a successor acquires no sooner than
lease-duration after the last renewal it saw) keeps two decision windows apart. Without leader
election there is one replica, and it always decides.
"""

from __future__ import annotations

import logging
import threading

from controller.leader import LeaderElector
from libaccurate.network.kube import Kube, KubeError, resource_path

LABEL_AUTHORITY = "accurate.cybozu.com/quota-authority"
# How often the pod label is brought in line with the Lease.
WATCH_PERIOD = 0.2

log = logging.getLogger(__name__)


class QuotaAuthority:
    """``deciding`` says whether this process may decide now; ``run`` campaigns and keeps the
    pod label (``pod`` as namespace and name, when the pod is known) in line."""

    def __init__(
        self, elector: LeaderElector | None, kube: Kube, pod: tuple[str, str] | None
    ) -> None:
        self._elector = elector
        self._kube = kube
        self._pod = pod
        self._labelled: bool | None = None

    @property
    def deciding(self) -> bool:
        return self._elector is None or self._elector.is_leader

    def start(self, stop: threading.Event) -> None:
        if self._elector is None:
            return
        threading.Thread(
            target=self._elector.run, args=(stop,), name="quota-lease", daemon=True
        ).start()
        threading.Thread(target=self._label, args=(stop,), name="quota-label", daemon=True).start()

    def release(self) -> None:
        """Give the Lease up (shutdown) and take the label off, so the next holder need not
        wait for the Lease to expire."""
        if self._elector is not None:
            self._elector.release()
            self._set_label(False)

    def _label(self, stop: threading.Event) -> None:
        while not stop.wait(WATCH_PERIOD):
            deciding = self.deciding
            if deciding != self._labelled:
                self._set_label(deciding)

    def _set_label(self, on: bool) -> None:
        """Label the pod as the authority, or take the label off; a failure is logged and tried
        again (a pod without the label gets no reviews, one with it that does not decide
        refuses them: neither lets a write through unchecked)."""
        if self._pod is None:
            self._labelled = on
            return
        namespace, name = self._pod
        body = {"metadata": {"labels": {LABEL_AUTHORITY: "true" if on else None}}}
        try:
            self._kube.patch(resource_path("", "v1", "pods", namespace, name), body)
        except KubeError as error:
            log.warning(
                "cannot label the pod as the hierarchical quota authority",
                extra={"pod": f"{namespace}/{name}", "authority": on, "error": str(error)},
            )
            return
        self._labelled = on
        log.info("hierarchical quota authority", extra={"pod": f"{namespace}/{name}", "on": on})
