"""The simulated cluster: cluster (arrivals, router, prefill), replica, KV, draws, kernels, records, workload."""
