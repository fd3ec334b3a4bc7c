"""The instruments as the check takes them: ``--instruments gpu_tests.kv_proof.instruments:INSTRUMENTS``;
``UNPOISONED``, the same without the poison, is a control (``runner/jobs.py``) that tells the poison's part in
a fault the instrumented case met."""

from __future__ import annotations

from dataclasses import replace

from gpu_tests.offload_check.case import Instruments, MutationSpec

from . import POISON_RPC, SERVER_ARGS
from .catalogue import MUTATIONS, applicable, target_group

INSTRUMENTS = Instruments(
    server_args=SERVER_ARGS,
    poison_rpc=POISON_RPC,
    reference_digests=True,
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

UNPOISONED = replace(INSTRUMENTS, poison_rpc="")
