"""A test bed for Accurate: an in-memory kube-apiserver, and the helpers the tests, the demo and
the benchmarks share to run the controller against it (processes, certificates, manifests,
waiting). Nothing here imports pytest or the tests; see README.md for what the server does
faithfully and how each behaviour was checked."""
