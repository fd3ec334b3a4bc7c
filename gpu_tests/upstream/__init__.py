"""vLLM's own offload test, as data: the values of its matrix parsed from the file (``parse.py``) into
``test_gsm8k_offloading.json``, with the file's address and digest. The profiles are checked against this
record, not against ``offload_check/upstream.py``, from which they are built."""
