"""skdpsco benchmark harness: ``python -m benchmarks quick`` / ``python -m benchmarks full``.

See ``benchmarks/README.md``. Modules: :mod:`.utility` (privacy-utility against peers),
:mod:`.speed` (fit time and memory against the non-private floor), :mod:`.rates` (excess risk
against n), :mod:`.dpsgd` (the DP-SGD baseline), :mod:`.machine` (what the numbers were measured on).
"""
