"""ARM calls to resolve 5,000 VMSS nodes (plus standalone VMs) vs one GET per node.

Goal: calls <= scale sets + standalone VMs per cache TTL. Served by `responses` with spec-shaped
payloads, so it measures our call pattern, not Azure's latency.

    python bench/arm_calls.py [--nodes 5000] [--scale-sets 10] [--vms 50]
"""

from __future__ import annotations

import argparse
import copy
import pathlib
import sys
import time

import responses

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from providers.azure import AzureConfig, AzureProvider
from providers.azure.arm import ArmSettings
from tests.conftest import FakeClock, FakeCredential, fixture_body

SUB = "00000000-0000-0000-0000-00000000beef"
ARM = f"https://management.azure.com/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--scale-sets", type=int, default=10)
    parser.add_argument("--vms", type=int, default=50)
    args = parser.parse_args()
    template = fixture_body("arm/compute/derived_VirtualMachineScaleSetVMs_Get_WithZone_InstanceView.json")
    vm_body = fixture_body("arm/compute/VirtualMachines_CreateOrUpdate_WithPlacementZones_2025-04-01.json")
    per_set = args.nodes // args.scale_sets
    clock = FakeClock()
    config = AzureConfig.from_mapping({"subscriptionId": SUB, "resourceGroup": "rg"}, environ={})
    provider = AzureProvider(config, credential=FakeCredential(), clock=clock, sleep=clock.sleep,
                             arm_settings=ArmSettings(backoff_factor=0.0))
    with responses.RequestsMock() as mock:
        for s in range(args.scale_sets):
            items = []
            for i in range(per_set):
                item = copy.deepcopy(template)
                item.update(name=f"ss{s}_{i}", instanceId=str(i), zones=[str(i % 3 + 1)])
                items.append(item)
            mock.get(f"{ARM}/virtualMachineScaleSets/ss{s}/virtualMachines", json={"value": items})
        for v in range(args.vms):
            mock.get(f"{ARM}/virtualMachines/vm{v}", json=vm_body | {"name": f"vm{v}"})
        start = time.perf_counter()
        for s in range(args.scale_sets):
            for i in range(per_set):
                provider.topology_by_provider_id(
                    f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/"
                    f"virtualMachineScaleSets/ss{s}/virtualMachines/{i}")
        for v in range(args.vms):
            provider.topology_by_provider_id(
                f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm{v}")
        elapsed = time.perf_counter() - start
        # A second pass within the TTL must cost nothing.
        before = provider.arm_calls.total
        for s in range(args.scale_sets):
            provider.topology_by_provider_id(
                f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/"
                f"virtualMachineScaleSets/ss{s}/virtualMachines/0")
        repeat = provider.arm_calls.total - before
    nodes = per_set * args.scale_sets + args.vms
    calls = provider.arm_calls.total
    budget = args.scale_sets + args.vms
    print(f"nodes resolved:            {nodes} ({per_set * args.scale_sets} VMSS instances in {args.scale_sets} "
          f"scale sets, {args.vms} standalone VMs)")
    print(f"ARM calls (cloudzones):    {calls}   budget {budget}   {'OK' if calls <= budget else 'OVER BUDGET'}")
    print(f"ARM calls (GET per node):  {nodes}   ratio {nodes / calls:.0f}x fewer")
    print(f"ARM calls on a 2nd pass within the TTL: {repeat}")
    print(f"resolve time (mocked transport): {elapsed:.2f}s, {elapsed / nodes * 1e6:.0f} us/node")


if __name__ == "__main__":
    main()
