"""A real kube-apiserver and etcd on loopback, built from Go modules, for tests
and local runs (the counterpart of controller-runtime's envtest)."""
