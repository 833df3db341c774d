"""Workload spread on top of the placement core: Loki zone-aware replication, FoundationDB coordinators,
Longhorn data locality, and the zone-outage what-if (pure: manifests in, dataclasses out).

Modules: `replication` (Loki), `zoneinject` (pod-template pieces that hand a pod its zone),
`fdblocality` and `coordinators` (FoundationDB), `locality` (Longhorn), `outage`, and `findings`
(the shared error / warning / info type).
"""

from __future__ import annotations
