"""The instruments as the check takes them: ``--instruments gpu_tests.kv_proof.instruments:INSTRUMENTS``."""

from __future__ import annotations

from gpu_tests.offload_check.case import Instruments, MutationSpec

from . import POISON_RPC, SERVER_ARGS
from .catalogue import MUTATIONS, applicable, target_group

INSTRUMENTS = Instruments(
    server_args=SERVER_ARGS,
    poison_rpc=POISON_RPC,
    mutations={
        m.name: MutationSpec(
            name=m.name,
            caught_by=m.caught_by,
            not_applicable=lambda layout, connector, m=m: applicable(m, layout, connector),  # type: ignore[misc]
            target_group=target_group,
        )
        for m in MUTATIONS.values()
    },
)
