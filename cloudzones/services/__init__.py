"""What runs (the runtime layer): the services that wire the Kubernetes machinery and the cloud adapters to the core.

- `controller`: the node labeller (one Deployment, leader-elected, ARM lookups);
- `nodeagent`: the per-node agent (DaemonSet, this machine's instance metadata only);
- `annotator`: the pod annotator (copies each pod's node zone into pod annotations);
- `webhook`: the PV-label admission webhook (a pure review and a TLS-only server);
- `health` and `logs`: the metrics/health server and the log setup they all share.

Each service module reads top to bottom: settings, metrics, reconcile, run loop. The command line
(`cloudzones.cli`) builds them from flags.
"""
