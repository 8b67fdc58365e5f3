"""vaultgraph benchmarks: `make bench` (workloads against the bare-driver limit) and
`make bench-scale`.

Everything the run needs it starts itself (its own Neo4j, its own service process) and stops at the
end. Settings are `BENCH_*` environment variables, listed in `bench.config`.
"""
