"""The instruments as the check takes them: ``--instruments gpu_tests.kv_proof.instruments:INSTRUMENTS``."""

from __future__ import annotations

from vllm_devclient.offload_check.case import Instruments, MutationSpec

from . import OFFLOADING_EXTRA, SCHEDULER_ARGS
from .catalogue import MUTATIONS, applicable, target_group

INSTRUMENTS = Instruments(
    scheduler_args=SCHEDULER_ARGS,
    offloading_extra=OFFLOADING_EXTRA,
    mutations={
        m.name: MutationSpec(
            name=m.name,
            caught_by=m.caught_by,
            not_applicable=lambda layout, m=m: applicable(m, layout),  # type: ignore[misc]
            target_group=target_group,
        )
        for m in MUTATIONS.values()
    },
)
