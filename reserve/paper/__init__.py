"""The paper's side of reserve: benchmark tables, eBird surrogates, UCI datasets, the simulation.

Nothing in the product stages (ingest, select, export) imports this package at import time;
the ``reserve benchmark`` command and the pipelines import it where they use it.

- :mod:`reserve.paper.benchmark`: the paper's Table 2 and Table 3, reproducible from one call.
- :mod:`reserve.paper.datasets`: the bundled UCI / LIBSVM benchmarks and their transductive split.
- :mod:`reserve.paper.surrogates`: real BCR 27 eBird surrogates for the paper's NY instances.
- :mod:`reserve.paper.simulate`: the virtual species and landscape of the default region.
"""
