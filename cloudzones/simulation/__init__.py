"""``cloudzones simulate``: the whole pipeline on an emulated cloud and cluster, with a checklist of invariants."""
